r"""Legendre–Gauss–Radau collocation on $[0, 1]$ (Anonymous 2025, §3.1, App. D–E).

The state on a subinterval $[a, a+h]$ is the degree-$K$ polynomial through its values at
the support $\tau_0 = 0 < \tau_1 < \dots < \tau_K = 1$, where $\tau_1, \dots, \tau_K$ are
the flipped LGR points (the Radau IIA nodes: $\tau_K = 1$, the others the zeros of the
Jacobi polynomial $P^{(1,0)}_{K-1}$ mapped to $[0, 1]$). With the Lagrange basis
$l_0, \dots, l_K$ of the support,

$$x(a + h\tau) = V(\tau) X,\qquad \dot x(a + h\tau) = \tfrac1h D(\tau) X,$$

and the collocation constraints $x(a) = X_0$, $D(\tau_j) X = h f(X_j, \Theta)$
($j = 1..K$) are $D_K X = (X_0, hF)$ with $D_K$ the differentiation matrix whose first
row is $e_0$. Its inverse is

$$D_K^{-1} = \begin{pmatrix} 1 & 0 \\ \mathbf 1 & A \end{pmatrix},\qquad
A_{ij} = \int_0^{\tau_i} \ell_j(s)\,ds,$$

$\ell_j$ the Lagrange basis of $\tau_1..\tau_K$: $A$ is the Radau IIA Butcher matrix
(order $2K - 1$; its last row holds the Radau quadrature weights). Everything is built
once in NumPy float64 with barycentric formulas, which stay accurate for $K \ge 30$.
"""

import equinox as eqx
import jax.numpy as jnp
import numpy as np
import scipy.special
from jaxtyping import Array, Float

from .._typing import ArrayLike


def lgr_nodes(order: int) -> np.ndarray:
    r"""Support $\tau_0 = 0, \tau_1, \dots, \tau_K = 1$ of LGR collocation of order $K$
    (the flipped LGR points with 0 prepended), float64."""
    if not isinstance(order, (int, np.integer)) or order < 1:
        raise ValueError(f"order must be a positive integer (the number K of collocation points), got {order!r}.")
    interior = scipy.special.roots_jacobi(order - 1, 1.0, 0.0)[0] if order > 1 else np.zeros(0)
    return np.concatenate([[0.0], (np.sort(interior) + 1.0) / 2.0, [1.0]])


def _barycentric_weights(nodes: np.ndarray) -> np.ndarray:
    diff = nodes[:, None] - nodes[None, :]
    np.fill_diagonal(diff, 1.0)
    # product of ~K factors in (0, 1): rescale by 4 per factor (the capacity of [0, 1])
    w = 1.0 / np.prod(4.0 * diff, axis=1)
    return w / np.max(np.abs(w))


def _lagrange(nodes, weights, tau, derivative: bool, xp=np):
    """Lagrange basis (or its derivative) of `nodes` at `tau`, shape (len(tau), len(nodes)),
    by the barycentric formula; `xp` is NumPy (float64 construction) or jax.numpy (in jit)."""
    tau = xp.atleast_1d(xp.asarray(tau))
    diff = tau[:, None] - nodes[None, :]
    on_node = diff == 0.0
    hit = on_node.any(axis=1, keepdims=True)
    safe = xp.where(on_node, 1.0, diff)
    ratio = weights / safe
    basis = xp.where(hit, on_node.astype(tau.dtype), ratio / ratio.sum(axis=1, keepdims=True))
    if not derivative:
        return basis
    # l_j'(τ) = l_j(τ) (Σ_k 1/(τ - τ_k) - 1/(τ - τ_j)) off the nodes (log-derivative of
    # l_j = w_j ℓ(τ)/(τ - τ_j)); at a node, the row of the differentiation matrix
    off = basis * ((1.0 / safe).sum(axis=1, keepdims=True) - 1.0 / safe)
    return xp.where(hit, _differentiation_matrix(nodes, weights, xp)[xp.argmax(on_node, axis=1)], off)


def _differentiation_matrix(nodes, weights, xp=np):
    r"""$D_{ij} = l_j'(\tau_i)$: $\frac{w_j / w_i}{\tau_i - \tau_j}$ off the diagonal, minus the
    row sum on it (negative-sum trick: exact derivative of constants)."""
    eye = xp.eye(nodes.shape[0], dtype=bool)
    D = xp.where(eye, 0.0, (weights[None, :] / weights[:, None]) / xp.where(eye, 1.0, nodes[:, None] - nodes[None, :]))
    return D - xp.diag(D.sum(axis=1))


def _integration_matrix(nodes: np.ndarray) -> np.ndarray:
    r"""$A_{ij} = \int_0^{\tau_i} \ell_j(s) ds$ for the Lagrange basis $\ell_j$ of
    $\tau_1..\tau_K$, by $K$-point Gauss–Legendre on each $[0, \tau_i]$ (exact: degree $K-1$)."""
    colloc = nodes[1:]
    k = colloc.size
    x, w = np.polynomial.legendre.leggauss(k)
    s = (x[None, :] + 1.0) / 2.0 * colloc[:, None]  # (K, K) quadrature points on [0, τ_i]
    basis = _lagrange(colloc, _barycentric_weights(colloc), s.reshape(-1), False).reshape(k, k, k)
    return np.einsum("iq,iqj->ij", w[None, :] * colloc[:, None] / 2.0, basis)


class LGR(eqx.Module):
    r"""LGR collocation of order $K$ on $[0, 1]$ (Anonymous 2025, App. D–E).

    - `nodes`: $(K+1,)$ support $\tau_0 = 0, \dots, \tau_K = 1$.
    - `D`: $(K+1, K+1)$ differentiation matrix $D_{ij} = l_j'(\tau_i)$.
    - `D_K`: `D` with its first row replaced by $e_0$ (the initial-value row).
    - `D_K_inv`: its inverse $\begin{pmatrix}1 & 0\\ \mathbf 1 & A\end{pmatrix}$.
    - `A`: the $K \times K$ block of `D_K_inv` (Radau IIA matrix): $X_{1:K} = X_0 + h A F$.
    """

    order: int = eqx.field(static=True)
    nodes: Float[Array, " K1"]
    weights: Float[Array, " K1"]
    D: Float[Array, "K1 K1"]
    D_K: Float[Array, "K1 K1"]
    D_K_inv: Float[Array, "K1 K1"]

    def __init__(self, order: int = 30):
        nodes = lgr_nodes(order)
        weights = _barycentric_weights(nodes)
        D = _differentiation_matrix(nodes, weights)
        D_K = D.copy()
        D_K[0] = 0.0
        D_K[0, 0] = 1.0
        inv = np.zeros_like(D)
        inv[:, 0] = 1.0
        inv[1:, 1:] = _integration_matrix(nodes)
        self.order = int(order)
        self.nodes, self.weights = jnp.asarray(nodes), jnp.asarray(weights)
        self.D, self.D_K, self.D_K_inv = jnp.asarray(D), jnp.asarray(D_K), jnp.asarray(inv)

    @property
    def A(self) -> Float[Array, "K K"]:
        r"""The $K\times K$ block $\tilde D^{-1}$ of $D_K^{-1}$ (Anonymous 2025, eq. 5: $X_{1:K} = X_0 + hAF$)."""
        return self.D_K_inv[1:, 1:]

    def basis(self, tau: ArrayLike) -> Float[Array, "m K1"]:
        r"""$V(\tau)$: the Lagrange basis $l_j(\tau)$ at each `tau`, shape (len(tau), K+1)."""
        return _lagrange(self.nodes, self.weights, jnp.asarray(tau, self.nodes.dtype), False, jnp)

    def basis_derivative(self, tau: ArrayLike) -> Float[Array, "m K1"]:
        r"""$D(\tau)$: the derivatives $l_j'(\tau)$ at each `tau`, shape (len(tau), K+1)."""
        return _lagrange(self.nodes, self.weights, jnp.asarray(tau, self.nodes.dtype), True, jnp)

r"""A Data2LD problem: the basis at the data, the penalty's Gram blocks and the data
(Carey & Ramsay 2021, §3.1), as arrays that jit and vmap.

With $L_\theta x = D^{p_v}x_v - \sum\beta D^r x_w - \sum\alpha u$ and $x_v = \phi^T c_v$,
every piece of $L_\theta$ is an *atom* $\kappa_a(\theta)\,\eta_a(t)\,D^{r_a}\phi(t)^T c_{w_a}$
with $\kappa_a$ affine in $\theta$ (the leading $D^p$ atom has $\kappa = 1$), and the
forcing pieces are $\lambda_f(\theta)\,\zeta_f(t)$. Then (Carey & Ramsay 2021, eq. 9)

$$\int (L_\theta x)^2 = c^TR(\theta)c + 2c^TS(\theta) + \textstyle\int(\sum\lambda\zeta)^2,\quad
R = \sum_{ab}\kappa_a\kappa_b G_{ab},\ S = \sum_{af}\kappa_a\lambda_f F_{af},$$

with the Gram blocks $G_{ab} = \int V_a V_b^T$, $F_{af} = \int V_a\zeta_f$ (same equation
only) computed once by breakpoint-aligned Gauss–Legendre quadrature — the memoised tensors
of the Data2LD code. Memory grows as (atoms · variables · K)².
"""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from .._typing import ArrayLike
from ._bspline import BSplineBasis, breakpoint_quadrature
from ._model import LinearODE, TimeVarying


class Data2LDProblem(eqx.Module):
    """Everything a Data2LD fit needs, as arrays: the sample times `t`, `phi` $\\phi(t_i)$ `(n, K)`, data `y`
    `(n, D)` (0 where missing) and `mask`, the Gram blocks `gram` `(A, A, DK, DK)`,
    `cross` `(A, F, DK)`, `forcing_gram` `(F, F)`, the affine coefficient maps
    $\\kappa = \\kappa_0 + E_\\kappa\\theta$, $\\lambda = \\lambda_0 + E_\\lambda\\theta$, and
    `span` $t_N - t_1$ of the basis."""

    t: Float[Array, " n"]
    phi: Float[Array, "n K"]
    y: Float[Array, "n D"]
    mask: Float[Array, "n D"]
    gram: Float[Array, "A A DK DK"]
    cross: Float[Array, "A F DK"]
    forcing_gram: Float[Array, "F F"]
    kappa0: Float[Array, " A"]
    kappa_theta: Float[Array, "A J"]
    lam0: Float[Array, " F"]
    lam_theta: Float[Array, "F J"]
    span: Float[Array, ""]

    @property
    def num_obs(self):
        """Number of observed data values N."""
        return jnp.sum(self.mask)

    def with_data(self, y: Float[Array, "n D"], mask: Float[Array, "n D"] | None = None) -> "Data2LDProblem":
        """The same problem with other data (same times): for vmapped replicates."""
        mask = self.mask if mask is None else mask
        return eqx.tree_at(lambda p: (p.y, p.mask), self, (jnp.where(mask > 0, y, 0.0), mask))


def check_basis(model: LinearODE, basis: BSplineBasis) -> None:
    """Refuse a basis whose order or break multiplicities cannot carry $D^p x$."""
    if not isinstance(basis, BSplineBasis):
        raise TypeError(f"basis must be a BSplineBasis, got {type(basis).__name__}.")
    p = model.max_order
    if basis.order <= p:
        raise ValueError(
            f"basis: order {basis.order} is too low for an ODE of order {p}: D^{p} of the "
            f"splines vanishes, so the penalty cannot see the equation. Use order >= {p + 1} "
            f"(Carey & Ramsay 2021 recommends order > p + 3 = {p + 3})."
        )
    worst = max(basis.multiplicity().values(), default=1)
    if worst > basis.order - p:
        raise ValueError(
            f"basis: a break repeated {worst} times leaves D^{p - 1} x discontinuous for order "
            f"{basis.order}, so the penalty integral of (D^{p} x)^2 is infinite; repeat breaks at "
            f"most {basis.order - p} times."
        )


def _atoms(model: LinearODE, basis: BSplineBasis, nodes: np.ndarray):
    """Node values of every atom `(A, Q, DK)`, of every forcing piece `(F, Q)`, the
    equation of each, and the affine coefficient maps."""
    D, K = len(model.variables), basis.num_basis
    block = {v: i for i, v in enumerate(model.variables)}
    dphi = [np.asarray(basis(nodes, r)) for r in range(model.max_order + 1)]
    V, eq, k0, kE, Z, feq, l0, lE = [], [], [], [], [], [], [], []

    def add_atom(equation, variable, r, eta, fixed, E, sign):
        values = np.zeros((nodes.size, D, K))
        values[:, block[variable]] = np.asarray(eta(nodes))[:, None] * dphi[r]
        V.append(values.reshape(nodes.size, D * K))
        eq.append(block[equation])
        k0.append(sign * fixed)
        kE.append(sign * E)

    J = model.n_params
    for v, p in model.orders.items():
        add_atom(v, v, p, lambda t: np.ones_like(t), 1.0, np.zeros(J), 1.0)
    for term in model.terms:
        etas, fixed, E = model.coefficient_atoms(term.coefficient)
        for m, eta in enumerate(etas):
            add_atom(term.equation, term.variable, term.derivative, eta, fixed[m], E[m], -1.0)
    for inp in model.inputs:
        etas, fixed, E = model.coefficient_atoms(inp.coefficient)
        u = np.asarray(inp.function(jnp.asarray(nodes)))
        for m, eta in enumerate(etas):
            Z.append(np.asarray(eta(nodes)) * u)
            feq.append(block[inp.equation])
            l0.append(-fixed[m])
            lE.append(-E[m])
    F = len(Z)
    return (
        np.stack(V),
        np.array(eq),
        np.array(k0),
        np.stack(kE),
        np.stack(Z) if F else np.zeros((0, nodes.size)),
        np.array(feq, int),
        np.array(l0),
        np.stack(lE) if F else np.zeros((0, J)),
    )


def data2ld_problem(
    model: LinearODE,
    basis: BSplineBasis,
    t: ArrayLike,
    y: ArrayLike,
    num_quad: int | None = None,
) -> Data2LDProblem:
    r"""Assemble the Data2LD problem for data `y` (`(n,)` for one variable, else `(n, D)`
    with columns in `model.variables` order; NaN = not observed) at times `t`, the spline
    `basis` of every $x_v$ and `num_quad` Gauss–Legendre points per break interval
    (default: exact for the Gram integrands of constant or B-spline coefficients)."""
    if not isinstance(model, LinearODE):
        raise TypeError(f"model must be a LinearODE, got {type(model).__name__}.")
    check_basis(model, basis)
    t = np.asarray(t, dtype=float)
    if t.ndim != 1 or t.size < 2:
        raise ValueError(f"t must be a 1-D array of at least two sample times, got shape {t.shape}.")
    if not np.all(np.isfinite(t)):
        raise ValueError("t contains NaN or inf.")
    t = basis.check_points(t, "t")
    D = len(model.variables)
    y = np.asarray(y, dtype=float)
    if y.ndim == 1 and D == 1:
        y = y[:, None]
    if y.shape != (t.size, D):
        raise ValueError(
            f"y must have shape ({t.size}, {D}) (one column per variable {', '.join(model.variables)}), got {y.shape}."
        )
    if np.any(np.isinf(y)):
        raise ValueError("y contains inf (use NaN for a missing value).")
    mask = np.isfinite(y)
    if mask.sum() <= model.n_params:
        raise ValueError(f"y has {mask.sum()} observed values, not more than the {model.n_params} parameters.")
    if num_quad is None:
        coef_orders: list[int] = [
            getattr(c.basis, "order", 4) for c in model._coefficients() if isinstance(c, TimeVarying)
        ]
        num_quad = basis.order + max(coef_orders, default=1) - 1
    a, b = basis.domain
    inner = model.breaks()
    nodes, weights = breakpoint_quadrature(np.concatenate([basis.breaks, inner[(inner > a) & (inner < b)]]), num_quad)
    V, eq, k0, kE, Z, feq, l0, lE = _atoms(model, basis, nodes)
    same = (eq[:, None] == eq[None, :]).astype(float)
    gram = np.einsum("q,aqk,bql->abkl", weights, V, V) * same[:, :, None, None]
    cross = np.einsum("q,aqk,fq->afk", weights, V, Z) * (eq[:, None] == feq[None, :])[:, :, None]
    fgram = np.einsum("q,fq,gq->fg", weights, Z, Z) * (feq[:, None] == feq[None, :])
    return Data2LDProblem(
        t=jnp.asarray(t),
        phi=jnp.asarray(basis(t)),
        y=jnp.asarray(np.where(mask, y, 0.0)),
        mask=jnp.asarray(mask, float),
        gram=jnp.asarray(gram),
        cross=jnp.asarray(cross),
        forcing_gram=jnp.asarray(fgram),
        kappa0=jnp.asarray(k0),
        kappa_theta=jnp.asarray(kE),
        lam0=jnp.asarray(l0),
        lam_theta=jnp.asarray(lE),
        span=jnp.asarray(b - a),
    )


def stack_problems(problems: list[Data2LDProblem]) -> Data2LDProblem:
    """Problems of the same shapes stacked along a leading axis (for `vmap`)."""
    shapes = {jax.tree.map(jnp.shape, p).y for p in problems}
    if len(shapes) != 1:
        raise ValueError(
            f"batched Data2LD problems need the same number of samples and variables, got data of "
            f"shapes {sorted(shapes)}."
        )
    return jax.tree.map(lambda *leaves: jnp.stack(leaves), *problems)


def penalty_matrices(problem: Data2LDProblem, theta: Float[Array, " J"]):
    r"""$R(\theta)$ `(DK, DK)`, $S(\theta)$ `(DK,)` and $\int(\sum\lambda_f\zeta_f)^2$ of
    Carey & Ramsay 2021, eq. (9) from the Gram blocks."""
    kappa = problem.kappa0 + problem.kappa_theta @ theta
    lam = problem.lam0 + problem.lam_theta @ theta
    R = jnp.einsum("a,b,abkl->kl", kappa, kappa, problem.gram)
    S = jnp.einsum("a,f,afk->k", kappa, lam, problem.cross)
    return R, S, lam @ problem.forcing_gram @ lam


def _data_gram(problem: Data2LDProblem) -> Float[Array, "DK DK"]:
    """$\\Phi^T\\Phi$ over the observed entries, block diagonal in the variables."""
    D, K = problem.y.shape[1], problem.phi.shape[1]
    blocks = jnp.einsum("nd,nk,nl->dkl", problem.mask, problem.phi, problem.phi)
    return jnp.einsum("dkl,de->dkel", blocks, jnp.eye(D, dtype=blocks.dtype)).reshape(D * K, D * K)


def smooth(problem: Data2LDProblem, theta: Float[Array, " J"], rho, y: Float[Array, "n D"] | None = None):
    r"""$\hat c(\theta, \rho)$ of Carey & Ramsay 2021, eq. (11), flattened variable by variable `(D·K,)`, and the
    Cholesky factor of $A$ (NaN when $A$ is not positive definite)."""
    y = problem.y if y is None else y
    N, T = problem.num_obs, problem.span
    R, S, _ = penalty_matrices(problem, theta)
    A = (1 - rho) / N * _data_gram(problem) + rho / T * R
    b = (1 - rho) / N * jnp.einsum("nd,nk->dk", problem.mask * y, problem.phi).reshape(-1) - rho / T * S
    chol = jnp.linalg.cholesky(A)
    return jax.scipy.linalg.cho_solve((chol, True), b), chol


def fitted(problem: Data2LDProblem, coef: Float[Array, " DK"], phi: Float[Array, "n K"] | None = None):
    """$\\hat x_v(t_i) = \\phi(t_i)^T\\hat c_v$, shape `(n, D)`."""
    phi = problem.phi if phi is None else phi
    return phi @ coef.reshape(problem.y.shape[1], -1).T

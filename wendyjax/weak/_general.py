r"""ℓ, ∇ℓ and ∇²ℓ for models not linear in the parameters (Rummel et al. 2025, eqs. 6–8).

$S(p)$ depends on $p$ only through per-sample weights $W(p) = (w^1, w^2)$, functions of
the state Jacobian $J = \partial_u f$ ([`covariance_weights`][]), and linearly:
$S = \mathcal A(W) + \mathrm{diag}(\sigma^2)\otimes\dot\Phi\dot\Phi^T$. With $w = S^{-1}r$,
the adjoint $C = \mathcal A^*\big(\tfrac12(1-\alpha)(S^{-1} - ww^T)\big)$ and
$\omega = \Phi^T\,\mathrm{mat}(w)$, every term of ℓ's derivatives that needs second
derivatives of $S$ or $g$ is a derivative of the cheap per-sample function
$$\psi(p) = \langle C, W(p)\rangle + \langle \omega, F(p)\rangle, \qquad
\nabla\ell = \nabla\psi,$$
$$\nabla^2\ell = \nabla^2\psi - \tfrac12\,\mathrm{tr}(M_iM_j) + a_i^TS^{-1}a_j,\quad
M_i = S^{-1}\partial_iS,\quad a_i = \partial_ig - \partial_iS\,w .$$
So a Hessian costs one $\partial_iS = (1-\alpha)\mathcal A(\partial_iW)$ and one product
$S^{-1}\partial_iS$ per parameter, where forward-over-reverse autodiff differentiates the
assembly, its transpose and the inverse for every direction (four assemblies and two
products). Only the structurally non-zero Grams of the $\partial_iS$ are formed, all in
one product: a parameter that does not enter $J$ (Goodwin-3D's degradation rates) has
$\partial_iS = 0$, and one that enters row $d$ of $J$ touches block row and column $d$.
"""

import functools

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from .._compile import cpu_safe_jit
from ._covariance import blocks_to_matrix, covariance_weights, weighted_blocks, weighted_grams
from ._problem import log_space_rhs, sample_chunks

_ZERO_TOL = 1e-12  # |p_i ∂J/∂p_i| below this times |J| at every probe: a structural zero


class SensitivityStructure(eqx.Module):
    r"""Where $\partial_{p_i}J$ is not identically zero, as the Grams of $\partial_iS$ to form.

    - `active`: parameters entering $J$ (the others have $\partial_iS = 0$).
    - `grams1`: $(a, d, d')$, $d \le d'$: $\Phi\,\mathrm{diag}(\partial_i w^1_{dd'})\Phi^T$
      for active parameter number $a$ (placed in blocks $(d, d')$ and $(d', d)$).
    - `grams2`: $(a, d, d')$: $\dot\Phi\,\mathrm{diag}(\partial_i w^2_{dd'})\Phi^T$ (in
      block $(d, d')$, its transpose in $(d', d)$).
    """

    active: tuple[int, ...] = eqx.field(static=True)
    grams1: tuple[tuple[int, int, int], ...] = eqx.field(static=True)
    grams2: tuple[tuple[int, int, int], ...] = eqx.field(static=True)

    @classmethod
    def from_pattern(cls, pattern: np.ndarray) -> "SensitivityStructure":
        """From `pattern[i, d, e]`: whether $\\partial_{p_i}J_{de}$ is not identically zero."""
        n_params, d, _ = pattern.shape
        active = tuple(int(i) for i in np.flatnonzero(pattern.any(axis=(1, 2))))
        rows = np.any(pattern, axis=2)  # (j, d): p_i enters row d of J
        grams1 = tuple(
            (a, e, f) for a, i in enumerate(active) for e in range(d) for f in range(e, d) if rows[i, e] or rows[i, f]
        )
        grams2 = tuple(
            (a, e, f) for a, i in enumerate(active) for e in range(d) for f in range(d) if pattern[i, f, e]
        )  # w²_{ef} = σ_e² J_{fe}
        return cls(active, grams1, grams2)

    @classmethod
    def dense(cls, n_states: int, n_params: int) -> "SensitivityStructure":
        """Every parameter entering every entry of J (no structure used)."""
        return cls.from_pattern(np.ones((n_params, n_states, n_states), bool))


def _sensitivities(rhs, u, p, t):
    """J and ∂J/∂p at each sample: `(n, D, D)`, `(n, D, D, J)`."""
    jac = jax.jacfwd(rhs, argnums=0)
    return jax.vmap(lambda u, t: (jac(u, p, t), jax.jacfwd(jac, argnums=1)(u, p, t)))(u, t)


def _extremes(jac, djac, p):
    r"""$\max_m |p_i\,\partial_iJ_{de}|$ `(J, D, D)` and $\max_m |J_{de}|$ over finite
    entries `(D, D)` of the samples `m` (NaN propagates into the first). An entry $(i, d, e)$
    whose first is at most $10^{-12}$ times the second is a structural zero: the log-space rhs
    $f(e^x)/e^x$ leaves rounding-level dependences on parameters that cancel analytically."""
    big = jnp.max(jnp.where(jnp.isfinite(jac), jnp.abs(jac), 0.0), axis=0)
    return jnp.max(jnp.abs(jnp.moveaxis(djac * p, -1, 0)), axis=1), big


def _random_params(rng, n_params: int, n: int) -> np.ndarray:
    return rng.normal(size=(n, n_params)) + 0.5


@functools.lru_cache(maxsize=64)
def sensitivity_pattern(rhs, log_space: bool, n_states: int, n_params: int) -> np.ndarray:
    r"""Which $\partial_{p_i}J_{de}$ of a model's rhs (in log space for log-normal noise) are
    not identically zero: `(J, D, D)` booleans from five random states, times and
    parameter vectors; cached."""
    f = log_space_rhs(rhs) if log_space else rhs
    # one compiled probe (evaluated op by op, each operation of the rhs and its derivatives
    # would be compiled on its own)
    probe = cpu_safe_jit(lambda u, p, t: _extremes(*_sensitivities(f, u, p, t), p))
    rng = np.random.default_rng(0)
    zero = []
    for p in _random_params(rng, n_params, 5):
        u = jnp.asarray(rng.normal(size=(1, n_states)) + 0.5)
        t = jnp.asarray(rng.uniform(0.5, 1.5, size=1))
        dmax, big = probe(u, jnp.asarray(p), t)
        zero.append(np.asarray(dmax <= _ZERO_TOL * big))
    return ~np.all(zero, axis=0)


@cpu_safe_jit
def _data_zero_pattern(model, log_space, u, t, p):
    """The structural zeros of [`_extremes`][] over every sample `u` `(..., D)` at times
    `t` `(...)`, a chunk of samples at a time."""
    f = log_space_rhs(model.rhs) if log_space else model.rhs
    dmax, big = jax.lax.map(lambda rows: _extremes(*_sensitivities(f, rows[0], p, rows[1]), p), sample_chunks(u, t))
    return jnp.max(dmax, axis=0) <= _ZERO_TOL * jnp.max(big, axis=0)


def sensitivity_structure(model, u, t, log_space: bool) -> SensitivityStructure:
    """The [`SensitivityStructure`][] of `model`'s rhs, from random probes, if it holds at
    every sample `u` `(..., D)` (times `t`) of the data too for two random parameter vectors
    (a rate switched on at t = 20 that the probes missed would otherwise drop its Grams from
    every ∂_iS); otherwise the dense one."""
    pattern = sensitivity_pattern(model.rhs, log_space, model.n_states, model.n_params)
    for p in _random_params(np.random.default_rng(1), model.n_params, 2):
        zero = np.asarray(_data_zero_pattern(model, log_space, u, t, jnp.asarray(p)))
        if np.any(~pattern & ~zero):
            return SensitivityStructure.dense(model.n_states, model.n_params)
    return SensitivityStructure.from_pattern(pattern)


def _derivative_matrices(structure: SensitivityStructure, phi, dphi, dw1, dw2) -> Float[Array, "a dk dk"]:
    r"""$\mathcal A(\partial_iW)$ for the active parameters from their non-zero Grams, as
    one product per Gram family and one scatter."""
    k = phi.shape[0]
    d = dw1.shape[1]
    g1 = np.array(structure.grams1, dtype=int).reshape(-1, 3)
    g2 = np.array(structure.grams2, dtype=int).reshape(-1, 3)
    active = np.array(structure.active, dtype=int)
    grams1 = weighted_grams(phi, phi, dw1[:, g1[:, 1], g1[:, 2], active[g1[:, 0]]])
    grams2 = weighted_grams(dphi, phi, dw2[:, g2[:, 1], g2[:, 2], active[g2[:, 0]]])
    off = g1[:, 1] != g1[:, 2]
    index = np.concatenate([g1, g1[off][:, [0, 2, 1]], g2, g2[:, [0, 2, 1]]])
    values = jnp.concatenate([grams1, grams1[off], grams2, jnp.swapaxes(grams2, 1, 2)])
    blocks = jnp.zeros((len(active), d, d, k, k), phi.dtype).at[index[:, 0], index[:, 1], index[:, 2]].add(values)
    return jax.vmap(blocks_to_matrix)(blocks)


def _trajectory(rhs, structure, diag_reg, p, phi, dphi, dphi_gram, u, t, var, b, reg_diag):
    """ℓ (without the 2π constant), ∇ℓ and ∇²ℓ of one trajectory."""
    k = phi.shape[0]
    d = u.shape[1]
    scale = 1.0 - diag_reg
    vec = lambda x: x.T.reshape(-1)  # noqa: E731  (K, D) → state-major D·K
    states = lambda q: jax.vmap(rhs, in_axes=(0, None, 0))(u, q, t)  # noqa: E731
    weights = lambda q: covariance_weights(jax.vmap(jax.jacfwd(rhs), in_axes=(0, None, 0))(u, q, t), var)  # noqa: E731

    S_w, adjoint = jax.vjp(lambda w: blocks_to_matrix(weighted_blocks(phi, dphi, *w)), weights(p))
    constant = blocks_to_matrix(jnp.eye(d)[:, :, None, None] * var[:, None, None, None] * dphi_gram)
    S = scale * (S_w + constant) + jnp.diag(reg_diag)
    r = vec(phi @ states(p)) - b
    chol = jnp.linalg.cholesky(S)
    S_inv = jax.scipy.linalg.cho_solve((chol, True), jnp.eye(d * k, dtype=S.dtype))
    w = S_inv @ r
    value = jnp.sum(jnp.log(jnp.diagonal(chol))) + 0.5 * jnp.dot(w, r)

    (C,) = adjoint(0.5 * scale * (S_inv - jnp.outer(w, w)))
    omega = phi.T @ w.reshape(d, k).T  # wᵀ vec(Φ F) = ⟨Φᵀ mat(w), F⟩

    def psi_grad(q):
        grad = jax.grad(lambda q: sum(jnp.sum(c * x) for c, x in zip(C, weights(q))) + jnp.sum(omega * states(q)))(q)
        return grad, grad

    hess, grad = jax.jacfwd(psi_grad, has_aux=True)(p)
    dg = jnp.einsum("kn,ndj->dkj", phi, jax.jacfwd(states)(p)).reshape(d * k, -1)  # ∂_i g
    if structure.active:
        active = np.array(structure.active)
        dS = scale * _derivative_matrices(structure, phi, dphi, *jax.jacfwd(weights)(p))
        M = jnp.einsum("kl,alm->akm", S_inv, dS)
        hess = hess.at[np.ix_(active, active)].add(-0.5 * jnp.einsum("akl,blk->ab", M, M))
        dg = dg.at[:, active].add(-(dS @ w).T)  # a_i = ∂_i g − ∂_i S w
    return value, grad, hess + dg.T @ S_inv @ dg


def general_derivatives(rhs, structure: SensitivityStructure, problem, p, diag_reg, reg_diag):
    """ℓ (without the 2π constant), ∇ℓ and ∇²ℓ summed over the trajectories of `problem`;
    `reg_diag` `(R, DK)` is the diagonal added by the regularisation."""
    single = functools.partial(_trajectory, rhs, structure, diag_reg, p)
    value, grad, hess = jax.vmap(single)(
        problem.phi, problem.dphi, problem.dphi_gram, problem.u, problem.t, problem.sigma**2, problem.b, reg_diag
    )
    return jnp.sum(value), jnp.sum(grad, axis=0), jnp.sum(hess, axis=0)

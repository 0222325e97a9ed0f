r"""Weak residual, its covariance and the weak negative log-likelihood (Rummel et al. 2025, §2.3–2.6).

$$\ell(p) = \tfrac12\big(\log\det S(p) + r(p)^T S(p)^{-1} r(p) + n\log 2\pi\big),
\qquad r(p) = \mathrm{vec}(\Phi F(p; U, t)) - b,$$

summed over trajectories, with $S$ regularised as $(1-\alpha)S + \alpha I$ (WENDy.jl's
`diagReg`). The gradient comes from reverse-mode autodiff (with the closed form of
Rummel et al. 2025, eq. 7 for the factorisation). For models linear in the parameters, $g = G p + g_0$
and the Gram matrices of $S(p)$, a quadratic polynomial in $p$, are precomputed once
(Rummel et al. 2025, App. B; see `_linear.py`); for the others the Hessian (Rummel et al. 2025, eq. 8) is formed from
the structurally non-zero $\partial_i S$ and second derivatives of a per-sample
function (see `_general.py`).
"""

import math
from collections.abc import Callable, Sequence
from functools import partial

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from .._compile import cpu_safe_jit
from .._notes import Notes
from .._typing import ArrayLike
from ..model import ODEModel
from ._covariance import blocks_to_matrix, covariance_blocks
from ._general import SensitivityStructure, general_derivatives
from ._linear import LinearBlocks
from ._problem import WeakProblem, log_space_rhs


def _vmap_rhs(rhs: Callable, u, p, t):
    return jax.vmap(rhs, in_axes=(0, None, 0))(u, p, t)


def _vec(x: Float[Array, "k d"]) -> Float[Array, " dk"]:
    return x.T.reshape(-1)


def _state_jacobian(rhs: Callable, u, p, t) -> Float[Array, "n d d"]:
    return jax.vmap(jax.jacfwd(rhs, argnums=0), in_axes=(0, None, 0))(u, p, t)


class WeakLikelihood(eqx.Module):
    r"""The weak negative log-likelihood $\ell(p)$ of a model on a dataset.

    Build it with [`weak_likelihood`][wendyjax.weak_likelihood]. Methods are jit-compiled
    with the likelihood passed as an argument (data are never closed over); the pure
    functions `nll`, `nll_grad`, `nll_hessian`, `residual`, `covariance` take
    `(likelihood, p)` and can be vmapped over either.
    """

    model: ODEModel
    problem: WeakProblem
    linear: LinearBlocks | None
    diag_reg: float = eqx.field(static=True, default=1e-10)
    sensitivity: SensitivityStructure | None = None
    noiseless: bool = eqx.field(static=True, default=False)
    notes: Notes = eqx.field(static=True, default_factory=Notes)

    @property
    def test_functions(self) -> tuple:
        """How the test functions of every trajectory were chosen
        ([`TestFunctionInfo`][wendyjax.weak.TestFunctionInfo], `None` where they were given)."""
        return self.notes.value

    @property
    def rhs(self) -> Callable:
        """The right-hand side the residual uses: f, or f̃(x) = f(eˣ)/eˣ in log space (Rummel et al. 2025, §2.6)."""
        return log_space_rhs(self.model.rhs) if self.problem.log_space else self.model.rhs

    def __call__(self, p: ArrayLike) -> Float[Array, ""]:
        """ℓ(p) (Rummel et al. 2025, eq. 6)."""
        return nll(self, jnp.asarray(p, dtype=float))

    def grad(self, p: ArrayLike) -> Float[Array, " j"]:
        """∇ℓ(p) (Rummel et al. 2025, eq. 7; see [`nll_grad`][wendyjax.weak.nll_grad])."""
        return nll_grad(self, jnp.asarray(p, dtype=float))

    def hessian(self, p: ArrayLike) -> Float[Array, "j j"]:
        """∇²ℓ(p) (Rummel et al. 2025, eq. 8; see [`nll_hessian`][wendyjax.weak.nll_hessian])."""
        return nll_hessian(self, jnp.asarray(p, dtype=float))


def _check_shape(lik: WeakLikelihood, p):
    if jnp.shape(p) != (lik.model.n_params,):
        raise ValueError(
            f"p must have shape ({lik.model.n_params},) for model '{lik.model.name}' "
            f"(parameters {', '.join(lik.model.param_names)}), got shape {jnp.shape(p)}."
        )


def _g_and_S(lik: WeakLikelihood, p) -> tuple[Float[Array, "r dk"], Float[Array, "r dk dk"]]:
    """g(p) and the unregularised S(p) for every trajectory."""
    _check_shape(lik, p)
    prob = lik.problem
    var = prob.sigma**2
    if lik.linear is not None:
        lin = lik.linear
        g = jnp.einsum("rij,j->ri", lin.G, p) + lin.g0
        return g, lin.assemble(lin.term_coefficients(p))
    rhs = lik.rhs

    def single(phi, dphi, gram, u, t, var):
        g = _vec(phi @ _vmap_rhs(rhs, u, p, t))
        jac = _state_jacobian(rhs, u, p, t)
        return g, blocks_to_matrix(covariance_blocks(phi, dphi, gram, jac, var))

    return jax.vmap(single)(prob.phi, prob.dphi, prob.dphi_gram, prob.u, prob.t, var)


def _regularisation_diagonal(lik: WeakLikelihood) -> Float[Array, "r dk"]:
    """The diagonal of (1-α)S + αI that is not (1-α)S: α on real rows, 1 on padded rows."""
    mask = jnp.tile(lik.problem.kmask, (1, lik.problem.n_states))  # (r, dk), state-major
    return lik.diag_reg * mask + (1.0 - mask)


def _regularise(lik: WeakLikelihood, S):
    """(1-α)S + αI on real rows; padded rows become identity rows."""
    return (1.0 - lik.diag_reg) * S + jax.vmap(jnp.diag)(_regularisation_diagonal(lik))


@cpu_safe_jit
def residual(lik: WeakLikelihood, p: Float[Array, " j"]) -> Float[Array, "r dk"]:
    """Weak residual $r(p) = g(p) - b$ per trajectory (Rummel et al. 2025, eq. 5); zero on padded rows."""
    g, _ = _g_and_S(lik, p)
    return g - lik.problem.b


@cpu_safe_jit
def covariance(lik: WeakLikelihood, p: Float[Array, " j"]) -> Float[Array, "r dk dk"]:
    """Regularised residual covariance $S(p)$ per trajectory (Rummel et al. 2025, Prop. 2)."""
    _, S = _g_and_S(lik, p)
    return _regularise(lik, S)


@cpu_safe_jit
def whitened_residual(lik: WeakLikelihood, p: Float[Array, " j"]) -> Float[Array, "r dk"]:
    r"""$C^{-1} r(p)$ with $S = C C^T$: standard normal at $p^*$ (Bortz et al. 2023, §2.4); 0 on padding."""
    g, S = _g_and_S(lik, p)
    chol = jnp.linalg.cholesky(_regularise(lik, S))
    solve = partial(jax.scipy.linalg.solve_triangular, lower=True)
    return jax.vmap(solve)(chol, g - lik.problem.b)


@jax.custom_jvp
def spd_inverse(S: Float[Array, "n n"]) -> Float[Array, "n n"]:
    r"""$S^{-1}$ of a symmetric positive-definite matrix by Cholesky, with the derivative
    rule $d(S^{-1}) = -S^{-1}\,dS\,S^{-1}$ (two matrix products per direction, where
    differentiating through the factorisation costs several triangular solves)."""
    c = jnp.linalg.cholesky(S)
    return jax.scipy.linalg.cho_solve((c, True), jnp.eye(S.shape[-1], dtype=S.dtype))


@spd_inverse.defjvp
def _spd_inverse_jvp(primals, tangents):
    (S,), (dS,) = primals, tangents
    S_inv = spd_inverse(S)
    return S_inv, -S_inv @ dS @ S_inv


@jax.custom_jvp
def gaussian_nll_terms(S: Float[Array, "n n"], r: Float[Array, " n"]) -> Float[Array, ""]:
    r"""$\tfrac12(\log\det S + r^T S^{-1} r)$ by Cholesky.

    Its derivative is the closed form of Rummel et al. 2025, eq. (7),
    $d\ell = \tfrac12\langle S^{-1} - w w^T, dS\rangle + w^T dr$ with $w = S^{-1} r$, so
    reverse mode never transposes the factorisation, and forward-over-reverse Hessians
    differentiate `spd_inverse` through its own cheap rule."""
    c = jnp.linalg.cholesky(S)
    z = jax.scipy.linalg.solve_triangular(c, r, lower=True)
    return jnp.sum(jnp.log(jnp.diagonal(c))) + 0.5 * jnp.dot(z, z)


@gaussian_nll_terms.defjvp
def _gaussian_nll_terms_jvp(primals, tangents):
    (S, r), (dS, dr) = primals, tangents
    S_inv = spd_inverse(S)
    w = S_inv @ r
    value = gaussian_nll_terms(S, r)
    return value, 0.5 * jnp.sum((S_inv - jnp.outer(w, w)) * dS) + jnp.dot(w, dr)


def _nll(lik: WeakLikelihood, p):
    g, S = _g_and_S(lik, p)
    terms = jax.vmap(gaussian_nll_terms)(_regularise(lik, S), g - lik.problem.b)
    n = lik.problem.n_residuals
    return jnp.sum(terms) + 0.5 * n * math.log(2 * math.pi)


@cpu_safe_jit
def nll(lik: WeakLikelihood, p: Float[Array, " j"]) -> Float[Array, ""]:
    """Weak negative log-likelihood ℓ(p) (Rummel et al. 2025, eq. 6), summed over trajectories."""
    return _nll(lik, p)


@cpu_safe_jit
def nll_grad(lik: WeakLikelihood, p: Float[Array, " j"]) -> Float[Array, " j"]:
    """∇ℓ(p) (Rummel et al. 2025, eq. 7): from the precomputed blocks for models linear in the parameters,
    otherwise by reverse-mode autodiff."""
    if lik.linear is not None:
        return _linear_first_order(lik, p)[1]
    return jax.grad(_nll, argnums=1)(lik, p)


def _linear_first_order(lik: WeakLikelihood, p):
    r"""ℓ and ∇ℓ for a model affine in $p$ from the precomputed blocks (Rummel et al. 2025, eqs. 6–7, App. B):
    with $S = \sum_t c_t(p)\hat S_t$ (the Gram terms of [`LinearBlocks`][], $c_t$ quadratic
    in $p$), $w = S^{-1} r$ and $\tau_t = \langle S^{-1} - w w^T, \hat S_t\rangle$,
    $\partial_i\ell = \tfrac12\sum_t \partial_i c_t\,\tau_t + w^T\partial_i g$. One Cholesky
    factorisation, $S^{-1}$ and one contraction with the Grams (cheaper than reverse mode
    through the assembly). Also returns what the Hessian reuses."""
    _check_shape(lik, p)
    lin = lik.linear
    assert lin is not None  # a model affine in p
    scale = 1.0 - lik.diag_reg  # (1-α)S + αI: every derivative of S carries 1-α
    dc = scale * jnp.moveaxis(jax.jacfwd(lin.term_coefficients)(p), 2, 0)  # (j, r, t)
    S = lin.assemble(lin.term_coefficients(p))  # (r, n, n)
    n = S.shape[-1]
    r = jnp.einsum("rij,j->ri", lin.G, p) + lin.g0 - lik.problem.b
    chol = jnp.linalg.cholesky(_regularise(lik, S))
    S_inv = jax.vmap(lambda c: jax.scipy.linalg.cho_solve((c, True), jnp.eye(n, dtype=c.dtype)))(chol)
    w = jnp.einsum("rkl,rl->rk", S_inv, r)
    log_det = 2.0 * jnp.sum(jnp.log(jnp.diagonal(chol, axis1=1, axis2=2)))
    value = 0.5 * (log_det + jnp.sum(w * r) + lik.problem.n_residuals * math.log(2 * math.pi))
    t = lin.contract(S_inv - jnp.einsum("rk,rl->rkl", w, w))  # (r, t)
    grad = 0.5 * jnp.einsum("jrt,rt->j", dc, t) + jnp.einsum("rkj,rk->j", lin.G, w)
    return value, grad, (dc, S_inv, w, t)


def _linear_derivatives(lik: WeakLikelihood, p):
    r"""ℓ, ∇ℓ and ∇²ℓ for a model affine in $p$ (Rummel et al. 2025, eqs. 6–8, App. B): with the notation of
    [`_linear_first_order`][], $M_i = S^{-1}\partial_i S$, $u_i = \partial_i S\,w$ and
    $a_i = \partial_i g - u_i$,
    $$H_{ij} = -\tfrac12\mathrm{tr}(M_i M_j) + \tfrac12\sum_t \partial_{ij} c_t\,\tau_t
      + a_i^T S^{-1} a_j ,$$
    so the cost is the $J$ products $S^{-1}\partial_i S$, where forward-over-reverse
    autodiff needs $2J$ (and its own factorisations). Only the structurally non-zero
    $K\times K$ blocks of $\partial_i S$ are formed and multiplied."""
    value, grad, (dc, S_inv, w, t) = _linear_first_order(lik, p)
    lin = lik.linear
    assert lin is not None  # a model affine in p
    n_params, d = p.shape[0], lin.n_states
    d2c = (1.0 - lik.diag_reg) * jax.hessian(lin.term_coefficients)(p)  # (r, t, j, j)
    pattern = lin.derivative_pattern()
    dS = lin.derivative_blocks(dc)  # (r, b, K, K): the non-zero blocks of every ∂_i S
    k = S_inv.shape[-1] // d
    rows = lambda x, e: x[..., e * k : (e + 1) * k]  # noqa: E731  block e of the last axis
    zero = jnp.zeros_like(S_inv[..., :k])
    M_cols = [[zero] * d for _ in range(n_params)]  # M_i[:, f] = Σ_e S⁻¹[:, e] ∂_i S[e, f]
    u = [[jnp.zeros_like(w[..., :k])] * d for _ in range(n_params)]  # (∂_i S w)[e]
    for b, (i, e, f) in enumerate(pattern):
        M_cols[i][f] = M_cols[i][f] + rows(S_inv, e) @ dS[:, b]
        u[i][e] = u[i][e] + jnp.einsum("rkl,rl->rk", dS[:, b], rows(w, f))
    M = jnp.stack([jnp.concatenate(cols, axis=-1) for cols in M_cols])  # (j, r, n, n)
    trace_mm = jnp.einsum("irkl,jrlk->ij", M, M)
    a = lin.G - jnp.stack([jnp.concatenate(ui, axis=-1) for ui in u], axis=-1)  # (r, n, j)
    hess = -0.5 * trace_mm + 0.5 * jnp.einsum("rtij,rt->ij", d2c, t) + jnp.einsum("rki,rkl,rlj->ij", a, S_inv, a)
    return value, grad, hess


def _general_derivatives(lik: WeakLikelihood, p):
    """ℓ, ∇ℓ, ∇²ℓ of a model not linear in the parameters (see `_general.py`)."""
    _check_shape(lik, p)
    structure = lik.sensitivity
    if structure is None:  # built by hand: no structure known
        structure = SensitivityStructure.dense(lik.model.n_states, lik.model.n_params)
    value, grad, hess = general_derivatives(
        lik.rhs, structure, lik.problem, p, lik.diag_reg, _regularisation_diagonal(lik)
    )
    return value + 0.5 * lik.problem.n_residuals * math.log(2 * math.pi), grad, hess


@cpu_safe_jit
def nll_hessian(lik: WeakLikelihood, p: Float[Array, " j"]) -> Float[Array, "j j"]:
    """∇²ℓ(p) (Rummel et al. 2025, eq. 8), from the precomputed blocks for models linear in the
    parameters, otherwise from the structurally non-zero ∂_iS (`_general.py`)."""
    if lik.linear is not None:
        return _linear_derivatives(lik, p)[2]
    return _general_derivatives(lik, p)[2]


@cpu_safe_jit
def nll_derivatives(
    lik: WeakLikelihood, p: Float[Array, " j"]
) -> tuple[Float[Array, ""], Float[Array, " j"], Float[Array, "j j"]]:
    """ℓ(p), ∇ℓ(p) and ∇²ℓ(p) in one pass (what a Newton-type solver needs)."""
    if lik.linear is not None:
        return _linear_derivatives(lik, p)
    return _general_derivatives(lik, p)


def pad_likelihood(lik: WeakLikelihood, k: int) -> WeakLikelihood:
    """The same likelihood with every trajectory padded to `k` test functions (masked zero
    rows; ℓ and its derivatives are unchanged)."""
    prob = lik.problem
    r, k0, _ = prob.phi.shape
    extra = k - k0
    if extra < 0:
        raise ValueError(f"cannot pad {k0} test functions down to k={k}.")
    if extra == 0:
        return lik
    d = prob.n_states

    def rows(x, axis):  # zero-pad the K axis of a state-major (..., D·K, ...) axis
        shape = x.shape[:axis] + (d, k0) + x.shape[axis + 1 :]
        widths = [(0, 0)] * (len(shape))
        widths[axis + 1] = (0, extra)
        return jnp.pad(x.reshape(shape), widths).reshape(x.shape[:axis] + (d * k,) + x.shape[axis + 1 :])

    pad_k = lambda x, axes: jnp.pad(x, [(0, extra) if i in axes else (0, 0) for i in range(x.ndim)])  # noqa: E731
    problem = eqx.tree_at(
        lambda p: (p.phi, p.dphi, p.dphi_gram, p.kmask, p.b),
        prob,
        (
            pad_k(prob.phi, {1}),
            pad_k(prob.dphi, {1}),
            pad_k(prob.dphi_gram, {1, 2}),
            pad_k(prob.kmask, {1}),
            rows(prob.b, 1),
        ),
    )
    linear = lik.linear
    if linear is not None:
        linear = eqx.tree_at(
            lambda b: (b.G, b.g0, b.grams), linear, (rows(linear.G, 1), rows(linear.g0, 1), pad_k(linear.grams, {2, 3}))
        )
    return WeakLikelihood(lik.model, problem, linear, lik.diag_reg, lik.sensitivity)


def stack_likelihoods(likelihoods: Sequence[WeakLikelihood]) -> WeakLikelihood:
    """Stack likelihoods of one model along a new leading axis, for `jax.vmap`.

    Trajectories are padded to the largest number of test functions; the data grids
    must have equal lengths.
    """
    likelihoods = list(likelihoods)
    if not likelihoods:
        raise ValueError("stack_likelihoods needs at least one likelihood.")
    k = max(lik.problem.n_test_functions for lik in likelihoods)
    likelihoods = [pad_likelihood(lik, k) for lik in likelihoods]
    first = likelihoods[0]
    structure = jax.tree_util.tree_structure(first)
    shapes = [jnp.shape(x) for x in jax.tree_util.tree_leaves(first)]
    for i, lik in enumerate(likelihoods[1:], 1):
        if jax.tree_util.tree_structure(lik) != structure:
            raise ValueError(
                f"likelihood {i} differs in structure from likelihood 0 (another model, "
                f"noise type or linear path?); only likelihoods of one model stack."
            )
        if [jnp.shape(x) for x in jax.tree_util.tree_leaves(lik)] != shapes:
            raise ValueError(
                f"likelihood {i} has (trajectories, K, samples) = {lik.problem.phi.shape} but "
                f"likelihood 0 has {first.problem.phi.shape}: stack data of equal grid lengths."
            )
    return jax.tree_util.tree_map(lambda *xs: jnp.stack(xs), *likelihoods)

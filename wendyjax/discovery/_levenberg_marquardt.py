r"""Meissner & Glasner 2024, Algorithm 2: Levenberg–Marquardt on the true Hessian of a scalar objective, in one
`lax.while_loop`. Each step solves $(H + \alpha\,\mathrm{diag}(H))\,d = -g$ and takes it when the
objective decreases ($\alpha \leftarrow \alpha/\tau_1$), else grows the damping
($\alpha \leftarrow \alpha\,\tau_2$).

The Hessian in the states is read off one vmapped Hessian–vector product per colour of
the star colouring (`HessianStructure`), the state–coefficient border and the coefficient
block off one product per coefficient (Meissner & Glasner 2024, §4.1); the solve is the block Cholesky of
`bordered_solve`; or (`linear_solver="sparse"`, for fields whose time levels are too large
for dense blocks) a sparse LU of the state block read off a distance-2 lattice colouring
(`sparse_bordered_solve`, scipy on the host); or (`linear_solver="cg"`, matrix-free: Meissner & Glasner 2024, §4
uses CG on its 2-D Allen–Cahn case) conjugate gradients on Hessian–vector products,
preconditioned by the damped diagonal (read off one product per colour of a lattice
colouring). Unstated in Meissner & Glasner 2024 and chosen here: $\tau_1 = 5$, $\tau_2 = 3$ (its authors' code
values), $\alpha_0 = 10^{-4}$ (their code uses 100, which on Kuramoto–Sivashinsky data takes
the first, heavily damped steps into a basin where all coefficients collapse to zero; from
$10^{-4}$ the fits of Meissner & Glasner 2024's ODE protocols end as well or better, in fewer steps),
$\alpha \ge 10^{-16}$, diagonal entries $\le 0$ scaled as $10^{-8}$; a step that is not
finite (a matrix that is not positive definite) is rejected. It stops on an accepted step
that lowers the objective by less than `rtol` relative, on a gradient below `gtol` (sup
norm), with status `stalled` when $\alpha > 10^{16}$, or after `max_steps`."""

from typing import Literal

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Bool, Float, Int

from .._results import RESULTS
from ._block_solve import bordered_solve
from ._problem import HESSIAN_KINDS, DiscoveryProblem, objective, smoothed_l0, weighted_residuals
from ._sparse_solve import sparse_bordered_solve


class LMSolution(eqx.Module):
    r"""One fit: the coefficients `params` (zero where masked) and `states`, the `objective`
    (eq. 12, penalty included) and its unpenalised part `loss_lambda` ($\mathcal L_\lambda$,
    eq. 10), the steps taken `num_steps` and the status `result`."""

    params: Float[Array, "F D"]
    states: Float[Array, "T *space D"]
    objective: Float[Array, ""]
    loss_lambda: Float[Array, ""]
    num_steps: Int[Array, ""]
    result: RESULTS

    @property
    def successful(self) -> Array:
        """Whether the fit converged (`result == RESULTS.successful`)."""
        return self.result == RESULTS.successful


class _Hessian(eqx.Module):
    diag: Array  # (T, S, S)
    sub: Array  # (T-1, S, S)
    border: Array  # (T, S, p)
    corner: Array  # (p, p)


class _SparseHessian(eqx.Module):
    values: Array  # (nnz,) at the structure's (dst_row, dst_col)
    diag: Array  # (n_u,)
    border: Array  # (n_u, p)
    corner: Array  # (p, p)


def _coloured_products(linearised, x: Array, problem: DiscoveryProblem, n_theta: int):
    """The gradient, the compressed state block $HD$ (one product per colour), the border
    and the coefficient block (one product per coefficient); `linearised(x)` gives the
    gradient and the Hessian–vector product (the exact Hessian's or the Gauss–Newton
    matrix's)."""
    st = problem.structure
    n_u = x.size - n_theta
    grad, hvp = linearised(x)
    colours = jnp.concatenate(
        [jax.nn.one_hot(st.colour, st.n_colours, dtype=x.dtype).T, jnp.zeros((st.n_colours, n_theta), x.dtype)], axis=1
    )
    coefficients = jnp.concatenate([jnp.zeros((n_theta, n_u), x.dtype), jnp.eye(n_theta, dtype=x.dtype)], axis=1)
    products = jax.vmap(hvp)(jnp.concatenate([colours, coefficients]))
    corner = products[st.n_colours :, n_u:]
    return grad, products[: st.n_colours, :n_u].T, products[st.n_colours :, :n_u].T, 0.5 * (corner + corner.T)


def _gradient_and_hessian(linearised, x: Array, problem: DiscoveryProblem, n_theta: int) -> tuple[Array, _Hessian]:
    """The gradient and the Hessian blocks at `x`."""
    st = problem.structure
    T = problem.state_shape[0]
    grad, compressed, border, corner = _coloured_products(linearised, x, problem, n_theta)
    S = compressed.shape[0] // T
    blocks = (
        jnp.zeros((2 * T - 1, S, S), x.dtype)
        .at[st.dst_block, st.dst_row, st.dst_col]
        .set(compressed[st.src_row, st.src_colour])
    )
    return grad, _Hessian(blocks[:T], blocks[T:], border.reshape(T, S, n_theta), corner)


def _gradient_and_sparse(linearised, x: Array, problem: DiscoveryProblem, n_theta: int) -> tuple[Array, _SparseHessian]:
    """The gradient and the Hessian's non-zeros at `x` (distance-2 colouring: direct reads)."""
    st = problem.structure
    grad, compressed, border, corner = _coloured_products(linearised, x, problem, n_theta)
    diag = compressed[jnp.arange(compressed.shape[0]), st.colour]
    return grad, _SparseHessian(compressed[st.src_row, st.src_colour], diag, border, corner)


def _gradient_and_diagonal(linearised, x: Array, problem: DiscoveryProblem, n_theta: int) -> tuple[Array, Array]:
    """The gradient and the Hessian's diagonal (states: one product per colour of a proper
    colouring; coefficients: one product each)."""
    st = problem.structure
    n_u = x.size - n_theta
    grad, hvp = linearised(x)
    colours = jnp.concatenate(
        [jax.nn.one_hot(st.colour, st.n_colours, dtype=x.dtype).T, jnp.zeros((st.n_colours, n_theta), x.dtype)], axis=1
    )
    products = jax.vmap(hvp)(colours)
    diag_u = products[st.colour, jnp.arange(n_u)]
    diag_theta = jax.vmap(lambda i: hvp(jnp.zeros_like(x).at[n_u + i].set(1.0))[n_u + i])(jnp.arange(n_theta))
    return grad, jnp.concatenate([diag_u, diag_theta])


class _State(eqx.Module):
    x: Array
    f: Array
    grad: Array
    hessian: "_Hessian | _SparseHessian | Array"  # by linear_solver: "cholesky", "sparse", "cg" (the diagonal)
    alpha: Array
    step: Array
    done: Array
    result: RESULTS


def _smoothed_l0_curvature(theta: Array, eps, penalty, size: int) -> Array:
    """The penalty's second derivative per coefficient, where it is positive (Gauss–Newton)."""
    g = jnp.exp(-(theta**2) / (2 * eps**2)) * (1 / eps**2 - theta**2 / eps**4)
    return jnp.maximum(penalty * g / size, 0.0)


def _linearisation(hessian: str, problem: DiscoveryProblem, shape, theta_shape, mask, lam, penalty, eps):
    """The objective of x = (u, Θ) flattened, and x ↦ (gradient, Hessian–vector product)."""
    n_u, n_theta = int(np.prod(shape)), int(np.prod(theta_shape))
    active = mask.ravel()

    def split(x):
        return x[:n_u].reshape(shape), x[n_u:].reshape(theta_shape)

    def fn(x):
        return objective(problem, *split(x), mask, lam, penalty, eps)

    def linearised(x):
        if hessian == "exact":
            return jax.linearize(jax.grad(fn), x)
        res, jvp = jax.linearize(lambda y: weighted_residuals(problem, *split(y), mask, lam), x)
        vjp = jax.linear_transpose(jvp, x)
        curvature = jnp.concatenate(
            [jnp.zeros(n_u, x.dtype), _smoothed_l0_curvature(x[n_u:] * active, eps, penalty, n_theta) * active]
        )
        grad = 2 * vjp(res)[0] + jax.grad(lambda y: penalty * smoothed_l0(y[n_u:] * active, eps) / n_theta)(x)
        return grad, lambda v: 2 * vjp(jvp(v))[0] + curvature * v

    return fn, linearised


class LevenbergMarquardt(eqx.Module):
    """Meissner & Glasner 2024, Algorithm 2 (settings above). `hessian="gauss_newton"` replaces the true Hessian by
    $2J^\top J$ of the weighted residuals plus the penalty's positive curvature (positive
    semi-definite, so every damped step is defined; not Meissner & Glasner 2024's choice)."""

    hessian: Literal["exact", "gauss_newton"] = eqx.field(static=True, default="exact")
    linear_solver: Literal["cholesky", "sparse", "cg"] = eqx.field(static=True, default="cholesky")
    max_steps: int = eqx.field(static=True, default=500)
    cg_max_steps: int = eqx.field(static=True, default=200)
    cg_rtol: float = 1e-6
    rtol: float = 1e-10
    gtol: float = 1e-12
    alpha0: float = 1e-4
    tau_accept: float = 5.0
    tau_reject: float = 3.0

    def __check_init__(self):
        if self.linear_solver not in HESSIAN_KINDS:
            raise ValueError(f"linear_solver must be one of {sorted(HESSIAN_KINDS)}, got {self.linear_solver!r}.")
        if self.hessian not in ("exact", "gauss_newton"):
            raise ValueError(f"hessian must be 'exact' or 'gauss_newton', got {self.hessian!r}.")

    def __call__(
        self,
        problem: DiscoveryProblem,
        u0: Float[Array, "T *space D"],
        theta0: Float[Array, "F D"],
        mask: Float[Array, "F D"] | Bool[Array, "F D"],
        lam: ArrayLike,
        penalty: ArrayLike,
        eps: ArrayLike,
    ) -> LMSolution:
        """Minimise eq. 12 over the states and the coefficients of the term `mask` from
        `(u0, theta0)`, with weights `lam` ($\\lambda$), `penalty` ($R$) and `eps`
        ($\varepsilon$)."""
        shape, n_theta = u0.shape, theta0.size
        T, n_u = shape[0], u0.size
        S = n_u // T
        active = mask.ravel().astype(u0.dtype)

        fn, linearised = _linearisation(self.hessian, problem, shape, theta0.shape, mask, lam, penalty, eps)
        if problem.structure.kind != HESSIAN_KINDS[self.linear_solver]:
            raise ValueError(
                f"linear_solver={self.linear_solver!r} needs a problem built with "
                f"hessian={HESSIAN_KINDS[self.linear_solver]!r}."
            )
        keep = jnp.concatenate([jnp.ones(n_u, u0.dtype), active])
        curvature = {"cg": _gradient_and_diagonal, "sparse": _gradient_and_sparse, "cholesky": _gradient_and_hessian}[
            self.linear_solver
        ]

        def cg_step(state: _State, h: Array) -> Array:
            """Matrix-free: Jacobi-preconditioned conjugate gradients on Hessian–vector products."""
            _, hvp = linearised(state.x)
            scale = state.alpha * jnp.where(h > 0, h, 1e-8) + (1.0 - keep)
            diag = jnp.where(h > 0, h, 0.0) + scale
            d, _ = jax.scipy.sparse.linalg.cg(
                lambda v: hvp(v * keep) * keep + scale * v,
                -state.grad * keep,
                tol=self.cg_rtol,
                maxiter=self.cg_max_steps,
                M=lambda v: v / diag,
            )
            return d * keep

        def damped_step(state: _State) -> Array:
            h, a = state.hessian, state.alpha
            if isinstance(h, Array):  # linear_solver "cg"
                return cg_step(state, h)
            d_corner = jnp.diagonal(h.corner)
            scale_t = a * jnp.where(d_corner > 0, d_corner, 1e-8) + (1.0 - active)  # masked: d = 0
            if isinstance(h, _SparseHessian):
                st = problem.structure
                scale_u = a * jnp.where(h.diag > 0, h.diag, 1e-8)
                d_u, d_t = sparse_bordered_solve(
                    st.dst_row,
                    st.dst_col,
                    h.values,
                    scale_u,
                    h.border,
                    h.corner + jnp.diag(scale_t),
                    -state.grad[:n_u],
                    -state.grad[n_u:],
                    levels=T,
                )
            else:
                d_blocks = jnp.diagonal(h.diag, axis1=1, axis2=2)
                scale_u = a * jnp.where(d_blocks > 0, d_blocks, 1e-8)
                d_u, d_t = bordered_solve(
                    h.diag + jax.vmap(jnp.diag)(scale_u),
                    h.sub,
                    h.border,
                    h.corner + jnp.diag(scale_t),
                    -state.grad[:n_u].reshape(T, S),
                    -state.grad[n_u:],
                )
            return jnp.concatenate([d_u.ravel(), d_t * active])

        def body(state: _State) -> _State:
            d = damped_step(state)
            trial = state.x + d
            f_trial = fn(trial)
            accept = jnp.all(jnp.isfinite(d)) & jnp.isfinite(f_trial) & (f_trial < state.f)
            x = jnp.where(accept, trial, state.x)
            grad, hessian = jax.lax.cond(
                accept, lambda: curvature(linearised, trial, problem, n_theta), lambda: (state.grad, state.hessian)
            )
            alpha = jnp.where(accept, jnp.maximum(state.alpha / self.tau_accept, 1e-16), state.alpha * self.tau_reject)
            converged = (accept & (state.f - f_trial <= self.rtol * jnp.abs(state.f))) | (
                jnp.max(jnp.abs(grad)) <= self.gtol
            )
            stalled = alpha > 1e16
            result = RESULTS.where(converged, RESULTS.successful, RESULTS.where(stalled, RESULTS.stalled, state.result))
            return _State(
                x,
                jnp.where(accept, f_trial, state.f),
                grad,
                hessian,
                alpha,
                state.step + 1,
                converged | stalled,
                result,
            )

        x0 = jnp.concatenate([u0.ravel(), (theta0 * mask).ravel()])
        f0 = fn(x0)
        g0, h0 = curvature(linearised, x0, problem, n_theta)
        ok0 = jnp.isfinite(f0) & jnp.all(jnp.isfinite(g0))
        init = _State(
            x0,
            f0,
            g0,
            h0,
            jnp.asarray(self.alpha0, x0.dtype),
            jnp.asarray(0),
            ~ok0,
            RESULTS.where(ok0, RESULTS.max_steps_reached, RESULTS.nonfinite),
        )
        final = jax.lax.while_loop(lambda s: ~s.done & (s.step < self.max_steps), body, init)
        u, theta = final.x[:n_u].reshape(shape), final.x[n_u:].reshape(theta0.shape) * mask
        return LMSolution(
            theta, u, final.f, objective(problem, u, theta, mask, lam, 0.0, eps), final.step, final.result
        )

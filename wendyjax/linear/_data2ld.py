r"""Data2LD (Carey & Ramsay 2021): parameter cascading for linear ODEs with a closed-form inner smooth and
a continuation in the smoothing weight $\rho$.

- inner: $\hat c(\theta,\rho) = A^{-1}b$, $A = \frac{1-\rho}{N}\Phi^T\Phi + \frac{\rho}{T}R(\theta)$,
  $b = \frac{1-\rho}{N}\Phi^Ty - \frac{\rho}{T}S(\theta)$ by Cholesky (eq. 11);
- outer: $H(\theta|\rho) = \|y - \Phi\hat c\|^2/N$ (eq. 12) by a Gauss–Newton trust region,
  its Jacobian by forward-mode autodiff through the solve (the implicit derivative of eq. 13);
- continuation over $\rho = \mathrm{logistic}(\gamma)$: the Data2LD code's fixed ladder with
  warm starts and its $\hat\rho$ rule, or the paper's adaptive rule (§3.2 steps 1–4);
- uncertainty (§3.3): $df = \mathrm{tr}(2Y - YY^T)$ with $Y = \frac{1-\rho}{N}\Phi A^{-1}\Phi^T$,
  $\hat\sigma^2 = SSE/(N - df)$, GCV, and the delta-method covariance of $\hat\theta$.
"""

import abc
from collections.abc import Callable
from typing import ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Bool, Float, Int

from .._checks import check_solver_options
from .._compile import cpu_safe_jit
from .._results import RESULTS
from ..data import Batch, Dataset, as_dataset
from ..estimators import AbstractEstimator, Solution, TrustRegion
from ._bspline import BSplineBasis
from ._model import LinearODE
from ._problem import Data2LDProblem, _data_gram, data2ld_problem, fitted, smooth, stack_problems
from ._result import Data2LDFit

#: The Data2LD code's ladder (`D2LD_ODE.m`): γ = −4…2 by 1, then 3…10 by ½ (ρ from 0.018 to 0.99995).
CODE_LADDER = tuple(float(g) for g in np.concatenate([np.arange(-4, 3), np.arange(3, 10.25, 0.5)]))
COVARIANCES = ("gauss_newton", "implicit")
#: Data2LD's default start, 0.01 for every parameter (Carey & Ramsay 2021, §3.2 step 1).
DEFAULT_START = 0.01


def rho_of(gamma):
    """$\\rho = e^\\gamma / (1 + e^\\gamma)$ (Carey & Ramsay 2021, §3.2 step 2)."""
    return jax.nn.sigmoid(gamma)


def _take(tree, i):
    """Entry `i` of every leaf (a stage of a stacked pytree, e.g. a `RESULTS` array)."""
    return jax.tree.map(lambda leaf: leaf[i], tree)


def _set(tree, i, value):
    """Set entry `i` of every leaf of a stacked pytree to the leaves of `value`."""
    return jax.tree.map(lambda leaf, v: leaf.at[i].set(v), tree, value)


def residuals(problem: Data2LDProblem, theta, rho, y=None) -> Float[Array, " nD"]:
    r"""$y - \Phi\hat c(\theta,\rho)$ on the observed entries (0 elsewhere), flattened."""
    y = problem.y if y is None else y
    coef, _ = smooth(problem, theta, rho, y)
    return (problem.mask * (y - fitted(problem, coef))).reshape(-1)


def residuals_and_jacobian(problem: Data2LDProblem, theta, rho):
    r"""The residuals and their Jacobian $-\Phi\,\partial\hat c/\partial\theta$ by implicit
    differentiation of eq. (11) with the same Cholesky factor (the derivative behind eq. 13):
    $\partial_j\hat c = -A^{-1}\frac{\rho}{T}(\partial_j R\,\hat c + \partial_j S)$, with
    $\partial_j R = \sum_{ab}(E_{aj}\kappa_b + \kappa_a E_{bj})G_{ab}$ and
    $\partial_j S = \sum_{af}(E_{aj}\lambda_f + \kappa_a E^\lambda_{fj})F_{af}$."""
    coef, chol = smooth(problem, theta, rho)
    kappa = problem.kappa0 + problem.kappa_theta @ theta
    lam = problem.lam0 + problem.lam_theta @ theta
    Gc = jnp.einsum("abkl,l->abk", problem.gram, coef)
    dRc = jnp.einsum("aj,b,abk->kj", problem.kappa_theta, kappa, Gc) + jnp.einsum(
        "a,bj,abk->kj", kappa, problem.kappa_theta, Gc
    )
    dS = jnp.einsum("aj,f,afk->kj", problem.kappa_theta, lam, problem.cross) + jnp.einsum(
        "a,fj,afk->kj", kappa, problem.lam_theta, problem.cross
    )
    dcoef = -rho / problem.span * jax.scipy.linalg.cho_solve((chol, True), dRc + dS)  # (DK, J)
    D = problem.y.shape[1]
    dx = jnp.einsum("nk,dkj->ndj", problem.phi, dcoef.reshape(D, -1, theta.size))
    r = (problem.mask * (problem.y - fitted(problem, coef))).reshape(-1)
    return r, -(problem.mask[..., None] * dx).reshape(-1, theta.size)


def criterion(problem: Data2LDProblem, theta, rho) -> Float[Array, ""]:
    """$H(\\theta|\\rho) = \\|y - \\Phi\\hat c\\|^2 / N$ (Carey & Ramsay 2021, eq. 12, per observation as
    in the code)."""
    r = residuals(problem, theta, rho)
    return r @ r / problem.num_obs


class Uncertainty(eqx.Module):
    """Diagnostics of a fit at $(\\hat\\theta, \\rho)$: `sse`, `df`, `dof` = N − df, `sigma2`
    = SSE/dof, `gcv`, and the `covariance` of $\\hat\\theta$."""

    sse: Float[Array, ""]
    df: Float[Array, ""]
    dof: Float[Array, ""]
    sigma2: Float[Array, ""]
    gcv: Float[Array, ""]
    covariance: Float[Array, "J J"]


@cpu_safe_jit
def dtheta_dy(problem: Data2LDProblem, theta, rho) -> Float[Array, "J nD"]:
    r"""$\partial\hat\theta/\partial y = -H_{\theta\theta}^{-1}H_{\theta y}$ at a minimiser of
    $H(\theta, y) = \frac12\|y - \Phi\hat c(\theta, \rho; y)\|^2$ (implicit function theorem,
    exact second derivatives; $\hat c$ depends on $y$ directly too). Zero columns where
    `y` is missing."""

    def half_sse(th, y):
        res = residuals(problem, th, rho, y)
        return 0.5 * res @ res

    H_tt = jax.hessian(half_sse)(theta, problem.y)
    H_ty = jax.jacfwd(jax.grad(half_sse), argnums=1)(theta, problem.y).reshape(theta.size, -1)
    return -jnp.linalg.solve(H_tt, H_ty * problem.mask.reshape(-1))


@cpu_safe_jit
def uncertainty(problem: Data2LDProblem, theta, rho, kind: str = "gauss_newton") -> Uncertainty:
    r"""Carey & Ramsay 2021, §3.2–3.3 at $(\theta, \rho)$: $df = \mathrm{tr}(2Y - YY^T)$ computed as
    $2\,\mathrm{tr}M - \mathrm{tr}M^2$ with $M = \frac{1-\rho}{N}A^{-1}\Phi^T\Phi$;
    $\hat\sigma^2 = SSE/(N-df)$; GCV $= (SSE/N)/((N-df)/N)^2$; covariance
    $\hat\sigma^2\,(\partial\hat\theta/\partial y)(\partial\hat\theta/\partial y)^T$ with
    `kind` "gauss_newton": $\partial\hat\theta/\partial y = (J^TJ)^{-1}J^T$ (the Data2LD code,
    ignoring $\hat c$'s direct dependence on $y$), or "implicit": $-H_{\theta\theta}^{-1}H_{\theta y}$
    from the exact second derivatives of $H(\theta, y)$ (implicit function theorem)."""
    N = problem.num_obs
    coef, chol = smooth(problem, theta, rho)
    r = (problem.mask * (problem.y - fitted(problem, coef))).reshape(-1)
    sse = r @ r
    M = (1 - rho) / N * jax.scipy.linalg.cho_solve((chol, True), _data_gram(problem))
    df = 2 * jnp.trace(M) - jnp.sum(M * M.T)
    dof = N - df
    sigma2 = sse / dof
    if kind == "gauss_newton":
        _, J = residuals_and_jacobian(problem, theta, rho)
        cov = sigma2 * jnp.linalg.inv(J.T @ J)
    elif kind == "implicit":
        sens = dtheta_dy(problem, theta, rho)
        cov = sigma2 * sens @ sens.T
    else:
        raise ValueError(f"covariance must be one of {COVARIANCES}, got {kind!r}.")
    return Uncertainty(sse, df, dof, sigma2, (sse / N) / (dof / N) ** 2, 0.5 * (cov + cov.T))


class Continuation(eqx.Module):
    r"""The stages of the $\rho$ continuation: `gamma`, `rho`, `theta`, `H` (eq. 12 at the
    stage minimum), `result` and `num_steps` per stage; `valid` marks the stages that ran
    (the adaptive rule fills a fixed-size buffer), `selected` the one reported and
    `stderr` the Gauss–Newton standard errors of $\hat\theta$ at every stage (Carey & Ramsay 2021, Fig. 3)."""

    gamma: Float[Array, " U"]
    rho: Float[Array, " U"]
    theta: Float[Array, "U J"]
    H: Float[Array, " U"]
    result: RESULTS
    num_steps: Int[Array, " U"]
    valid: Bool[Array, " U"]
    selected: Int[Array, ""]
    stderr: Float[Array, "U J"]


def _check_gammas(owner: str, gammas) -> None:
    g = np.asarray(gammas, float)
    if g.ndim != 1 or g.size < 1 or not np.all(np.isfinite(g)) or np.any(np.diff(g) <= 0):
        raise ValueError(f"{owner}: gammas must be a non-empty increasing sequence of finite values, got {gammas}.")


class AbstractContinuation(eqx.Module):
    """How Data2LD moves the smoothing weight $\\rho = \\mathrm{logistic}(\\gamma)$ towards 1:
    `run(stage, problem, p0)` returns the [`Continuation`][] path, `stage(problem, θ, γ)`
    being one minimisation of $H(\\theta|\\rho)$ that returns (θ̂, H, result, steps)."""

    @abc.abstractmethod
    def run(self, stage: Callable, problem: Data2LDProblem, p0: Float[Array, " J"]) -> Continuation:
        """The path from `p0`."""


class Ladder(AbstractContinuation):
    """The Data2LD code's continuation: warm-started stages at `gammas` (default
    `wendyjax.linear.CODE_LADDER`), then $\\hat\\rho$ by `select`: "min_change" (the code: among stages
    with $\\rho > 0.99$, the one after the smallest $\\sum_j|\\Delta\\hat\\theta_j|$ between
    consecutive stages) or "last"."""

    gammas: tuple[float, ...] = CODE_LADDER
    select: str = "min_change"

    def __check_init__(self):
        _check_gammas("Ladder", self.gammas)
        if self.select not in ("min_change", "last"):
            raise ValueError(f"Ladder: select must be 'min_change' or 'last', got {self.select!r}.")

    def run(self, stage, problem, p0) -> Continuation:
        gammas = jnp.asarray(self.gammas)

        def body(theta, gamma):
            th, H, result, steps = stage(problem, theta, gamma)
            ok = (result == RESULTS.successful) | (result == RESULTS.max_steps_reached)
            ok = ok & jnp.all(jnp.isfinite(th))
            return jnp.where(ok, th, theta), (th, H, result, steps)

        _, (thetas, H, result, steps) = jax.lax.scan(body, p0, gammas)
        U = gammas.size
        if self.select == "last":
            selected = jnp.array(U - 1)
        else:
            good = (result == RESULTS.successful) & (rho_of(gammas) > 0.99)
            change = jnp.sum(jnp.abs(jnp.diff(thetas, axis=0)), axis=1)
            change = jnp.where(good[1:] & good[:-1], change, jnp.inf)
            selected = jnp.where(jnp.isfinite(jnp.min(change)), jnp.argmin(change) + 1, U - 1)
        return Continuation(
            gammas, rho_of(gammas), thetas, H, result, steps, jnp.ones(U, bool), selected, jnp.zeros_like(thetas)
        )


class Adaptive(AbstractContinuation):
    r"""Carey & Ramsay 2021, §3.2 steps 1–4, with the readings of the digest: from
    $\gamma$ = `gamma_start` step $\gamma$ by 1; a stage whose relative change
    $|H_u - H_{u-1}|/H_{u-1}$ is not below `eps0` is retried from the previous $\hat\theta$
    with half the step (down to 1/64, then accepted); stop when
    $\|\hat\theta_u - \hat\theta_{u-1}\|_2$ < `eps1`, at `gamma_max` or after `max_stages`."""

    gamma_start: float = -4.0
    gamma_max: float = 14.0
    eps0: float = 0.2
    eps1: float = 1e-4
    max_stages: int = 64

    def __check_init__(self):
        if not (self.eps0 > 0 and self.eps1 > 0 and self.gamma_max > self.gamma_start and self.max_stages >= 2):
            raise ValueError(
                f"Adaptive: needs eps0 > 0, eps1 > 0, gamma_max > gamma_start and max_stages >= 2, got {self}."
            )

    def run(self, stage, problem, p0) -> Continuation:
        U, J = self.max_stages, p0.size
        th, H, result, steps = stage(problem, p0, jnp.asarray(self.gamma_start))
        empty = Continuation(
            jnp.zeros(U).at[0].set(self.gamma_start),
            jnp.zeros(U).at[0].set(rho_of(self.gamma_start)),
            jnp.zeros((U, J)).at[0].set(th),
            jnp.zeros(U).at[0].set(H),
            _set(jax.tree.map(lambda v: jnp.full(U, v), RESULTS.successful), 0, result),
            jnp.zeros(U, int).at[0].set(steps),
            jnp.arange(U) == 0,
            jnp.array(0),
            jnp.zeros((U, J)),
        )
        # carry: path, step δ, number of solves, done
        init = (empty, jnp.asarray(1.0), jnp.array(1), jnp.array(False))

        def cond(carry):
            path, _, solves, done = carry
            return ~done & (solves < 4 * U) & (path.selected < U - 1)

        def body(carry):
            path, delta, solves, _ = carry
            u = path.selected
            gamma = path.gamma[u] + delta
            th, H, result, steps = stage(problem, path.theta[u], gamma)
            ok = (result == RESULTS.successful) & jnp.isfinite(H)
            rel = jnp.abs(H - path.H[u]) / path.H[u]
            accept = ok & ((rel < self.eps0) | (delta <= 1 / 64))
            stop = accept & ((jnp.linalg.norm(th - path.theta[u]) < self.eps1) | (gamma >= self.gamma_max))
            v = u + 1
            grown = Continuation(
                path.gamma.at[v].set(gamma),
                path.rho.at[v].set(rho_of(gamma)),
                path.theta.at[v].set(th),
                path.H.at[v].set(H),
                _set(path.result, v, result),
                path.num_steps.at[v].set(steps),
                path.valid.at[v].set(True),
                v,
                path.stderr,
            )
            path = jax.tree.map(lambda a, b: jnp.where(accept, a, b), grown, path)
            delta = jnp.where(accept, 1.0, delta / 2)
            give_up = ~ok & (delta < 1 / 64)
            return path, delta, solves + 1, stop | give_up

        path, *_ = jax.lax.while_loop(cond, body, init)
        return path


class GCV(AbstractContinuation):
    """Parameter cascading with one smoothing level (Carey & Ramsay 2021, §2.3, PC): every
    $\\gamma$ in `gammas` solved from the start without warm starts, the one of least GCV
    reported."""

    gammas: tuple[float, ...] = CODE_LADDER

    def __check_init__(self):
        _check_gammas("GCV", self.gammas)

    def run(self, stage, problem, p0) -> Continuation:
        gammas = jnp.asarray(self.gammas)
        thetas, H, result, steps = jax.vmap(lambda g: stage(problem, p0, g))(gammas)
        gcv = jax.vmap(lambda th, g: uncertainty(problem, th, rho_of(g), "gauss_newton").gcv)(thetas, gammas)
        ok = (result == RESULTS.successful) & jnp.isfinite(gcv)
        selected = jnp.argmin(jnp.where(ok, gcv, jnp.inf))
        return Continuation(
            gammas,
            rho_of(gammas),
            thetas,
            H,
            result,
            steps,
            jnp.ones(gammas.size, bool),
            selected,
            jnp.zeros_like(thetas),
        )


class Data2LD(AbstractEstimator):
    r"""Data2LD estimator for a [`LinearODE`][] (Carey & Ramsay 2021).

    - `basis`: the [`BSplineBasis`][] of every $x_v$ (Carey & Ramsay 2021, §3.1: order > p + 3 recommended,
      breaks repeated at forcing jumps so $D^p x$ can jump there);
    - `continuation`: how $\rho$ climbs towards 1: [`Ladder`][] (default, the Data2LD
      code's), [`Adaptive`][] (Carey & Ramsay 2021, §3.2) or [`GCV`][] (one smoothing
      level chosen by GCV);
    - `solver`, `max_steps`: the [`TrustRegion`][wendyjax.estimators.TrustRegion] of the
      Gauss–Newton minimisation at every stage, and its step limit;
    - `num_quad`: Gauss–Legendre points per break interval (default exact).

    `fit(model, data, p0=None, ...)` takes one [`Trajectory`][wendyjax.Trajectory] (NaN or
    the mask marks a missing value; repeated times are replicates) with one column per
    `model.variables`; `p0` defaults to 0.01 for every parameter (Carey & Ramsay 2021, §3.2
    step 1); `bounds` bound the Gauss–Newton steps; `covariance="gauss_newton"` (the
    code's, default) or `"implicit"` (see [`uncertainty`][]). The result is a
    [`Data2LDFit`][].
    """

    basis: BSplineBasis
    continuation: AbstractContinuation = Ladder()
    solver: TrustRegion = TrustRegion(rtol=1e-10, atol=1e-12)
    max_steps: int = 200
    num_quad: int | None = None
    method: ClassVar[str] = "data2ld"
    covariances: ClassVar[tuple[str, ...]] = COVARIANCES
    fit_type: ClassVar[type] = Data2LDFit

    def __check_init__(self):
        if not isinstance(self.basis, BSplineBasis):
            raise TypeError(f"basis must be a BSplineBasis, got {type(self.basis).__name__}.")
        if not isinstance(self.continuation, AbstractContinuation):
            raise TypeError(
                f"continuation must be Ladder(), Adaptive() or GCV() of wendyjax.linear, got {self.continuation!r}."
            )
        check_solver_options(self, TrustRegion, "wendyjax.estimators.TrustRegion(rtol=1e-10, atol=1e-12)")

    def problem(self, model: LinearODE, data: Dataset, *, key=None) -> Data2LDProblem:
        """The [`Data2LDProblem`][] of `model` on `data` (one trajectory) with this
        estimator's basis."""
        if len(data) != 1:
            raise ValueError(
                f"Data2LD fits one trajectory; data holds {len(data)}. Pool replicate experiments "
                f"into one trajectory (repeated times are allowed)."
            )
        tr = data[0]
        y = np.asarray(tr.u, float)
        if tr.mask is not None:
            y = np.where(np.asarray(tr.mask), y, np.nan)
        return data2ld_problem(model, self.basis, tr.t, y, self.num_quad)

    def init(self, model: LinearODE, problem: Data2LDProblem, p0, lower, upper) -> Float[Array, " J"]:
        """`p0` (checked by `fit`), or 0.01 for every parameter (Carey & Ramsay 2021, §3.2 step 1)
        clipped into the bounds."""
        if p0 is None:
            return jnp.clip(jnp.full(model.n_params, DEFAULT_START), lower, upper)
        return jnp.asarray(p0, float)

    def stage(self, problem: Data2LDProblem, theta, gamma, lower, upper):
        """Minimise $H(\\theta|\\rho(\\gamma))$ from `theta` in the box: (θ̂, H, result, steps)."""
        rho = rho_of(gamma)
        N = problem.num_obs

        def fn(th, _):
            r, J = residuals_and_jacobian(problem, th, rho)
            return 0.5 * (r @ r) / N, J.T @ r / N, J.T @ J / N

        sol = self.solver.minimise(fn, theta, lower, upper, max_steps=self.max_steps)
        return sol.params, 2 * sol.objective, sol.result, sol.num_steps

    def solve(self, problem: Data2LDProblem, p0: Float[Array, " J"], lower=None, upper=None) -> Solution:
        """Run the continuation from `p0` within the box (±inf allowed; default unbounded)
        and report the selected stage. Pure: jit and vmap apply (over problems that differ in
        their data, [`Data2LDProblem.with_data`][]). `objective` is the mean squared
        residual SSE/N; `extras` holds `coef` (the spline coefficients of $\\hat x$), `rho`,
        `gamma`, the selected stage's `df`, `dof`, `sigma2`, `gcv` and the
        [`Continuation`][] `path`."""
        p0 = jnp.asarray(p0, float)
        lower = jnp.full_like(p0, -jnp.inf) if lower is None else lower
        upper = jnp.full_like(p0, jnp.inf) if upper is None else upper
        path = self.continuation.run(lambda pr, th, g: self.stage(pr, th, g, lower, upper), problem, p0)
        stage_cov = jax.vmap(lambda th, r: uncertainty(problem, th, r, "gauss_newton").covariance)(path.theta, path.rho)
        path = eqx.tree_at(lambda p: p.stderr, path, jnp.sqrt(jnp.diagonal(stage_cov, axis1=1, axis2=2)))
        u = path.selected
        theta, gamma = path.theta[u], path.gamma[u]
        rho = rho_of(gamma)
        coef, _ = smooth(problem, theta, rho)
        unc = uncertainty(problem, theta, rho, "gauss_newton")
        extras = {
            "coef": coef,
            "rho": rho,
            "gamma": gamma,
            "df": unc.df,
            "dof": unc.dof,
            "sigma2": unc.sigma2,
            "gcv": unc.gcv,
            "path": path,
        }
        return Solution(
            theta,
            unc.sse / problem.num_obs,
            jnp.sum(jnp.where(path.valid, path.num_steps, 0)),
            _take(path.result, u),
            extras,
        )

    def covariance(self, problem: Data2LDProblem, solution: Solution, kind: str | None = None) -> Float[Array, "J J"]:
        """The covariance of the estimate at the selected ρ by `kind` ("gauss_newton" or
        "implicit", see [`uncertainty`][])."""
        return uncertainty(problem, solution.params, solution.extras["rho"], kind or COVARIANCES[0]).covariance

    def batch_problems(self, model: LinearODE, datasets: "Batch | list", **options):
        """The problems of several datasets (the same sample times and missing pattern
        shapes), stacked for `vmap`."""
        return (
            lambda indices: stack_problems([self.problem(model, as_dataset(datasets[i]), **options) for i in indices]),
            [{} for _ in datasets],
        )

    def solve_many(
        self,
        problem: Data2LDProblem,
        ys: Float[Array | np.ndarray, "R n *D"],
        p0: Float[Array | np.ndarray, " J"],
        batch_size: int | None = None,
        covariance: str | None = None,
    ) -> tuple[Solution, Float[Array, "R J J"]]:
        """[`solve`][] and [`covariance`][] (of kind `covariance`, default "gauss_newton")
        for every dataset `ys[r]` (the times of `problem`, NaN = missing) in one compiled
        call (e.g. the replicates of a simulation study): `lax.map` over batches of
        `batch_size` vmapped fits. Default 1 on a CPU (a vmapped iterative solve runs until
        its slowest member stops), all at once on an accelerator."""
        kind = COVARIANCES[0] if covariance is None else covariance
        if kind not in COVARIANCES:
            raise ValueError(f"covariance must be one of {COVARIANCES}, got {covariance!r}.")
        if batch_size is None:
            batch_size = 1 if jax.default_backend() == "cpu" else len(ys)
        return _solve_many(self, problem, jnp.asarray(ys, float), jnp.asarray(p0, float), int(batch_size), kind)


@cpu_safe_jit
def _solve_many(estimator: Data2LD, problem: Data2LDProblem, ys, p0, batch_size: int, kind: str):
    def one(y):
        mask = jnp.isfinite(y).astype(y.dtype)
        replicate = problem.with_data(jnp.where(mask > 0, y, 0.0), mask)
        sol = estimator.solve(replicate, p0)
        return sol, estimator.covariance(replicate, sol, kind)

    return jax.lax.map(one, ys.reshape(ys.shape[:2] + problem.y.shape[1:]), batch_size=batch_size)

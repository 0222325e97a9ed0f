r"""WENDy estimators: weak least squares (WLS), IRLS and the weak MLE.

Each estimator is a thin `eqx.Module` of options implementing the estimator contract
([`AbstractEstimator`][wendyjax.estimators.AbstractEstimator]): its problem is the
[`WeakLikelihood`][wendyjax.WeakLikelihood] of the data, its `solve(lik, p0, lower,
upper)` a pure function of arrays (jit/vmap it over likelihoods built together with
[`build_batch`][wendyjax.weak.build_batch], or stacked with
[`stack_likelihoods`][wendyjax.weak.stack_likelihoods]).
"""

import warnings
from typing import ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import scipy.stats
from jaxtyping import Array, Bool, Float, PRNGKeyArray

from .._checks import check_solver_options, user_stacklevel
from .._compile import cpu_safe_jit
from .._results import RESULTS
from .._typing import Keys
from ..data import Batch, Dataset, as_batch
from ..inference import COVARIANCES, parameter_covariance
from ..noise import resolve_noise
from ..weak import (
    NOISELESS_RATIO,
    TestFunctionConfig,
    WeakLikelihood,
    build_batch,
    covariance,
    nll,
    nll_derivatives,
    residual,
    weak_likelihood,
)
from ._base import AbstractEstimator, check_start
from ._least_squares import weighted_least_squares
from ._result import WENDyFit
from ._solution import Solution
from ._trust_region import TrustRegion


def _cholesky_failed(lik: WeakLikelihood, p) -> Bool[Array, ""]:
    """S(p) is finite but its Cholesky factorisation is not (S not positive definite)."""
    S = covariance(lik, p)
    return jnp.all(jnp.isfinite(S)) & ~jnp.all(jnp.isfinite(jnp.linalg.cholesky(S)))


def _solution(lik, p, num_steps, result) -> Solution:
    return Solution(p, nll(lik, p), num_steps, result)


class AbstractWENDyEstimator(AbstractEstimator):
    """Base of the WENDy estimators: the weak likelihood as the problem, the WLS estimate
    as the default start for models linear in the parameters, and the sandwich
    (Bortz et al. 2023, eq. 15; Rummel et al. 2025, eq. 9) or inverse-Hessian covariance."""

    solver: eqx.AbstractVar[TrustRegion]
    max_steps: eqx.AbstractVar[int]
    covariances: ClassVar[tuple[str, ...]] = COVARIANCES
    fit_type: ClassVar[type] = WENDyFit

    def problem(
        self,
        model,
        data: Dataset,
        *,
        key: PRNGKeyArray | None = None,
        noise=None,
        sigma=None,
        test_functions=TestFunctionConfig(),
        k: int | None = None,
        diag_reg: float = 1e-10,
    ) -> WeakLikelihood:
        """The weak likelihood of `model` on `data` (as [`weak_likelihood`][wendyjax.weak_likelihood];
        `noise=None` takes the model's own, `model.noise`). Noiseless data
        (σ̂/max|U| < 1e-8) make S singular: WLS is then solved instead, with a warning."""
        lik = weak_likelihood(
            model, data, resolve_noise(model, noise), sigma=sigma, test_functions=test_functions, k=k, diag_reg=diag_reg
        )
        self._warn_noiseless(lik.noiseless)
        return lik

    def _warn_noiseless(self, noiseless: bool) -> None:
        if noiseless and not isinstance(self, WLS):
            warnings.warn(
                f"the data look noiseless (estimated noise / max|U| < {NOISELESS_RATIO:g}): the "
                f"residual covariance is singular, so WENDy-{self.method.upper()} is replaced by "
                f"WLS (weak least squares).",
                stacklevel=user_stacklevel(),
            )

    def start_required(self, model) -> str | None:
        """Models nonlinear in their parameters need `p0` (no closed-form start)."""
        if not model.linear_in_params:
            return (
                f"model '{model.name}' is nonlinear in its parameters ({', '.join(model.param_names)}), so "
                f"there is no closed-form start."
            )
        return None

    def init(self, model, problem: WeakLikelihood, p0, lower, upper) -> Float[Array, " j"]:
        """`p0` checked, or (models linear in the parameters only) the WLS estimate."""
        if p0 is not None:
            return jnp.asarray(check_start(model, p0, lower, upper), float)
        self.require_start(model, p0)
        return _wls_start(problem, jnp.asarray(lower), jnp.asarray(upper))

    def _wls(self) -> "WLS":
        """WLS with this estimator's solver and step limit (its start, or its fallback on
        noiseless data)."""
        return WLS(solver=self.solver, max_steps=self.max_steps)

    def objective(self, problem: WeakLikelihood, params) -> Float[Array, ""]:
        """ℓ(p), the weak negative log-likelihood every WENDy solve reports at its estimate."""
        return nll(problem, params)

    def covariance(self, problem: WeakLikelihood, solution: Solution, kind: str | None = None):
        """Covariance of the estimate: "sandwich" (default) or "hessian" (inverse Hessian of ℓ;
        from the solution's `extras["nll_hessian"]` where its solve kept it)."""
        hessian = solution.extras.get("nll_hessian")
        return parameter_covariance(problem, solution.params, kind or "sandwich", hessian=hessian)

    def batch_problems(
        self,
        model,
        datasets: "Batch | list",
        *,
        key: Keys | None = None,
        noise=None,
        sigma=None,
        test_functions=TestFunctionConfig(),
        k: int | None = None,
        diag_reg: float = 1e-10,
    ):
        """The likelihoods of a [`Batch`][wendyjax.Batch] of datasets on shared grids (or a list
        of such datasets), built together ([`build_batch`][wendyjax.weak.build_batch]): the
        radius search of all of them in one compiled call, the test functions once per
        selected radius, every likelihood padded to the largest K among them; `make(indices)`
        assembles a chunk's stacked likelihoods in one compiled call on the default device."""
        batch = build_batch(
            model,
            as_batch(datasets),
            resolve_noise(model, noise),
            sigma=sigma,
            test_functions=test_functions,
            k=k,
            diag_reg=diag_reg,
        )
        self._warn_noiseless(batch.noiseless)
        return batch.likelihoods, batch.notes()


def _check_solver(est) -> None:
    check_solver_options(est, TrustRegion, "wendyjax.estimators.TrustRegion(rtol=1e-8, atol=1e-8)")


@cpu_safe_jit
def _wls_start(lik, lower, upper):
    return WLS().solve(lik, jnp.zeros(lik.model.n_params), lower, upper).params


class WLS(AbstractWENDyEstimator):
    r"""Weak ordinary least squares $\min_p \tfrac12\|g(p) - b\|^2$ (Bortz et al. 2023, Alg. 1;
    Rummel et al. 2025, App. C).

    Closed form for models linear in the parameters (then `p0` is not used); a bounded
    Gauss–Newton trust region from `p0` otherwise. Ignores the residual covariance, so it is
    biased at high noise (Rummel et al. 2025, Table 4); it is the start of IRLS.
    """

    solver: TrustRegion = TrustRegion()
    max_steps: int = 500
    method: ClassVar[str] = "wls"

    def __check_init__(self):
        _check_solver(self)

    def solve(self, lik, p0, lower, upper) -> Solution:
        sol = weighted_least_squares(lik, None, p0, lower, upper, solver=self.solver, max_steps=self.max_steps)
        return _solution(lik, sol.params, sol.num_steps, sol.result)


class IRLS(AbstractWENDyEstimator):
    r"""Iteratively reweighted least squares (Bortz et al. 2023, Alg. 2, Rummel et al. 2025, App. C):
    $p^{(n+1)} = \arg\min_p (g(p) - b)^T S(p^{(n)})^{-1}(g(p) - b)$ from the WLS estimate.

    Stops when $\|p^{(n+1)} - p^{(n)}\| / \|p^{(n)}\|$ < `step_tol` (1e-6) or after
    `max_iters` (100) iterations. `shapiro_wilk=True` adds Bortz et al. 2023, §2.4's test: from
    iteration `sw_start` (10) on, stop when the Shapiro–Wilk p-value of the whitened
    residual $C^{(n)\,-1}(g(p^{(n+1)}) - b)$ falls below `sw_tol` (1e-4) and return
    $p^{(n)}$ (the test is scipy's, called from inside the compiled solve).
    """

    step_tol: float = 1e-6
    max_iters: int = 100
    shapiro_wilk: bool = False
    sw_tol: float = 1e-4
    sw_start: int = 10
    solver: TrustRegion = TrustRegion()
    max_steps: int = 500
    method: ClassVar[str] = "irls"

    def __check_init__(self):
        _check_solver(self)
        if not (isinstance(self.step_tol, (int, float)) and self.step_tol > 0 and np.isfinite(self.step_tol)):
            raise ValueError(f"IRLS: step_tol must be a positive number, got {self.step_tol!r}.")
        if isinstance(self.max_iters, bool) or not isinstance(self.max_iters, int) or self.max_iters < 1:
            raise ValueError(f"IRLS: max_iters must be a positive integer, got {self.max_iters!r}.")
        if not 0 < self.sw_tol < 1:
            raise ValueError(f"IRLS: sw_tol (the Shapiro–Wilk level) must lie in (0, 1), got {self.sw_tol!r}.")
        if isinstance(self.sw_start, bool) or not isinstance(self.sw_start, int) or self.sw_start < 0:
            raise ValueError(f"IRLS: sw_start must be a non-negative integer, got {self.sw_start!r}.")

    def step(self, lik, p, lower, upper):
        """One reweighting: $(p^{(n+1)}$, whitened residual, status$)$."""
        chol = jnp.linalg.cholesky(covariance(lik, p))
        ok = jnp.all(jnp.isfinite(chol))
        chol = jnp.where(ok, chol, jnp.eye(chol.shape[-1], dtype=chol.dtype))
        sol = weighted_least_squares(lik, chol, p, lower, upper, solver=self.solver, max_steps=self.max_steps)
        whitened = jax.vmap(lambda c, r: jax.scipy.linalg.solve_triangular(c, r, lower=True))(
            chol, residual(lik, sol.params)
        )
        result = RESULTS.where(ok, sol.result, RESULTS.cholesky_failed)
        # an inner solve that hit its step limit still gives a usable reweighted iterate
        result = RESULTS.where(result == RESULTS.max_steps_reached, RESULTS.successful, result)
        return sol.params, whitened, result

    def converged(self, p_new, p):
        """Relative step below `step_tol` (Bortz et al. 2023, Alg. 2's stopping rule)."""
        return jnp.linalg.norm(p_new - p) < self.step_tol * jnp.linalg.norm(p)

    def _shapiro_wilk_stop(self, lik, whitened, n):
        """Bortz et al. 2023, §2.4: from iteration `sw_start` on, the whitened residual fails the
        Shapiro-Wilk normality test at level `sw_tol`."""
        if not self.shapiro_wilk:
            return jnp.array(False)
        mask = jnp.tile(lik.problem.kmask, (1, lik.problem.n_states)) > 0
        pvalue = jax.pure_callback(
            _shapiro_pvalue, jax.ShapeDtypeStruct((), whitened.dtype), whitened, mask, vmap_method="sequential"
        )
        return (n > self.sw_start) & (pvalue < self.sw_tol)

    def solve(self, lik, p0, lower, upper) -> Solution:
        if lik.noiseless:
            return self._wls().solve(lik, p0, lower, upper)
        start = self._wls().solve(lik, p0, lower, upper)

        def cond(state):
            _, n, done, _ = state
            return ~done & (n < self.max_iters)

        def body(state):
            p, n, _, _ = state
            p_new, whitened, result = self.step(lik, p, lower, upper)
            failed = result != RESULTS.successful
            normality = ~failed & self._shapiro_wilk_stop(lik, whitened, n + 1)
            done = failed | normality | self.converged(p_new, p)
            result = RESULTS.where(normality, RESULTS.shapiro_wilk_stop, result)
            return jnp.where(failed | normality, p, p_new), n + 1, done, result

        init = (start.params, jnp.array(0), start.result != RESULTS.successful, start.result)
        p, n, done, result = jax.lax.while_loop(cond, body, init)
        result = RESULTS.where(done, result, RESULTS.max_steps_reached)
        return _solution(lik, p, n, result)


def _shapiro_pvalue(whitened, mask) -> np.ndarray:
    w, m = np.asarray(whitened), np.asarray(mask, bool)
    return np.asarray(scipy.stats.shapiro(w[m]).pvalue, dtype=w.dtype)


class MLE(AbstractWENDyEstimator):
    r"""Weak maximum likelihood (Rummel et al. 2025, §3.1, eq. 10): $\min_{l \le p \le u} \ell(p)$ by a
    bounded trust-region Newton method with the exact Hessian of $\ell$.

    `start` picks where the trust region starts:

    - `"p0"` (default): the given start, as in Rummel et al. 2025's experiments;
    - `"wls"`: the [`WLS`][] estimate (closed form for models linear in the parameters, a
      Gauss–Newton solve from `p0` otherwise; `p0` if that fails);
    - `"best"`: whichever of the two has the lower ℓ;
    - `"both"`: a solve from each, keeping the successful one with the lower ℓ (the cost
      of both).

    At high noise the WLS estimate is shrunk towards 0 and can lead to a worse local
    minimum; `"both"` is the safe choice (measurements: the docs' Rummel et al. 2025 page).
    `solver`: the [`TrustRegion`][wendyjax.estimators.TrustRegion] and its tolerances; at
    most `max_steps` steps. Defaults as WENDy.jl: tolerances 1e-8, at most 500 steps.
    """

    solver: TrustRegion = TrustRegion()
    max_steps: int = 500
    start: str = "p0"
    method: ClassVar[str] = "mle"
    starts: ClassVar[tuple[str, ...]] = ("p0", "wls", "best", "both")

    def __check_init__(self):
        _check_solver(self)
        if self.start not in self.starts:
            raise ValueError(f"start must be one of {', '.join(map(repr, self.starts))}, got {self.start!r}.")

    def _wls_start(self, lik: WeakLikelihood, p0, lower, upper, compare: bool) -> Float[Array, " j"]:
        """The WLS estimate, or `p0` (clipped) when that solve fails or, with `compare`, when
        ℓ(p0) is not higher."""
        p0 = jnp.clip(p0, lower, upper)
        wls = self._wls().solve(lik, p0, lower, upper)
        usable = wls.successful & jnp.isfinite(wls.objective)
        if compare:
            # not `wls.objective < ℓ(p0)`: a non-finite ℓ(p0) must lose
            usable = usable & ~(nll(lik, p0) <= wls.objective)
        return jnp.where(usable, wls.params, p0)

    def _solve_from(self, lik, x0, lower, upper) -> Solution:
        x0 = jnp.clip(x0, lower, upper)
        sol = self.solver.minimise(
            lambda p, lik: nll_derivatives(lik, p), x0, lower, upper, lik, max_steps=self.max_steps
        )
        result = RESULTS.where(
            (sol.result == RESULTS.nonfinite) & _cholesky_failed(lik, x0),
            RESULTS.cholesky_failed,
            sol.result,
        )
        # the trust region's last Hessian is ∇²ℓ at the estimate: the "hessian" covariance's
        return Solution(sol.params, sol.objective, sol.num_steps, result, {"nll_hessian": sol.hess})

    def solve(self, lik, p0, lower, upper) -> Solution:
        if lik.noiseless:
            return self._wls().solve(lik, p0, lower, upper)
        if self.start == "p0":
            return self._solve_from(lik, p0, lower, upper)
        wls = self._solve_from(lik, self._wls_start(lik, p0, lower, upper, self.start == "best"), lower, upper)
        if self.start != "both":
            return wls
        given = self._solve_from(lik, p0, lower, upper)
        take_wls = wls.successful & ~(given.successful & (given.objective <= wls.objective))
        best = jax.tree.map(lambda a, b: jnp.where(take_wls, b, a), given, wls)
        return eqx.tree_at(lambda s: s.num_steps, best, given.num_steps + wls.num_steps)

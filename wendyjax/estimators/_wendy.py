r"""WENDy estimators: weak least squares (WLS), IRLS and the weak MLE.

Each estimator is a thin `eqx.Module` of options. Its `solve(lik, p0, lower, upper)` is a
pure function of arrays (jit/vmap it over likelihoods built with
[`stack_likelihoods`][wendyjax.weak.stack_likelihoods]); `fit(model, data, ...)` is the
user-facing call that validates input, solves and returns a [`WENDyFit`][wendyjax.WENDyFit].
"""

import abc
from typing import ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Bool, Float, Int

from ..inference import COVARIANCES, parameter_covariance
from ..weak import WeakLikelihood, covariance, nll, nll_derivatives, residual
from ._least_squares import weighted_least_squares
from ._results import RESULTS
from ._trust_region import bounded_trust_region


class Solution(eqx.Module):
    """Output of `solve`: estimate, ℓ there, number of (outer) steps and the status.

    Batched along a leading axis when `solve` is vmapped.
    """

    params: Float[Array, " j"]
    nll: Float[Array, ""]
    num_steps: Int[Array, ""]
    result: RESULTS

    @property
    def objective(self) -> Float[Array, ""]:
        """ℓ at the estimate (the objective minimised)."""
        return self.nll

    @property
    def successful(self) -> Bool[Array, "..."]:
        """Whether the solve converged (`result == RESULTS.successful`)."""
        return self.result == RESULTS.successful


def _cholesky_failed(lik: WeakLikelihood, p) -> Bool[Array, ""]:
    """S(p) is finite but its Cholesky factorisation is not (S not positive definite)."""
    S = covariance(lik, p)
    return jnp.all(jnp.isfinite(S)) & ~jnp.all(jnp.isfinite(jnp.linalg.cholesky(S)))


def _solution(lik, p, num_steps, result) -> Solution:
    return Solution(p, nll(lik, p), num_steps, result)


class AbstractWENDyEstimator(eqx.Module):
    """Base of the WENDy estimators: `solve` (pure, vmappable) and `fit` (user-facing)."""

    method: ClassVar[str]
    covariances: ClassVar[tuple[str, ...]] = COVARIANCES

    @abc.abstractmethod
    def solve(
        self,
        lik: WeakLikelihood,
        p0: Float[Array, " j"],
        lower: Float[Array, " j"],
        upper: Float[Array, " j"],
    ) -> Solution:
        """Estimate the parameters from `p0` within `lower ≤ p ≤ upper` (±inf allowed)."""

    def covariance(self, lik: WeakLikelihood, sol: Solution, kind: str = "sandwich") -> Float[Array, "j j"]:
        """Covariance of the estimate: "sandwich" (000 eq. 9) or "hessian"."""
        return parameter_covariance(lik, sol.params, kind)

    def fit(self, model, data, p0=None, **kwargs):
        """Fit `model` to `data` from `p0` and return a [`WENDyFit`][wendyjax.WENDyFit].

        Keywords: `noise` ("gaussian", "lognormal" or a noise model), `bounds` ("model",
        `None` or `(lower, upper)`), `sigma` (noise level per state; estimated when `None`),
        `test_functions`, `k` and `diag_reg` (as in [`weak_likelihood`][wendyjax.weak_likelihood]),
        `covariance` ("sandwich" or "hessian"), `throw` (raise when the solve fails, else
        report it in `status`). `p0` may be left out for models linear in the parameters
        (the WLS estimate is the start)."""
        from ._fit import fit

        return fit(model, data, p0, method=self, **kwargs)


class WLS(AbstractWENDyEstimator):
    r"""Weak ordinary least squares $\min_p \tfrac12\|g(p) - b\|^2$ (001 Alg. 1, 000 App. C).

    Closed form for models linear in the parameters (then `p0` is not used); a bounded
    Gauss–Newton trust region from `p0` otherwise. Ignores the residual covariance, so it is
    biased at high noise (000 Table 4); it is the start of IRLS.
    """

    rtol: float = 1e-8
    atol: float = 1e-8
    max_steps: int = 500
    method: ClassVar[str] = "wls"

    def solve(self, lik, p0, lower, upper) -> Solution:
        sol = weighted_least_squares(lik, None, p0, lower, upper, rtol=self.rtol,
                                     atol=self.atol, max_steps=self.max_steps)
        return _solution(lik, sol.x, sol.num_steps, sol.result)


class IRLS(AbstractWENDyEstimator):
    r"""Iteratively reweighted least squares (001 Alg. 2, 000 App. C):
    $p^{(n+1)} = \arg\min_p (g(p) - b)^T S(p^{(n)})^{-1}(g(p) - b)$ from the WLS estimate.

    Stops when $\|p^{(n+1)} - p^{(n)}\| / \|p^{(n)}\|$ < `step_tol` (1e-6) or after
    `max_iters` (100) iterations. `shapiro_wilk=True` adds 001 §2.4's test: from
    iteration `sw_start` (10) on, stop when the Shapiro–Wilk p-value of the whitened
    residual $C^{(n)\,-1}(g(p^{(n+1)}) - b)$ falls below `sw_tol` (1e-4) and return
    $p^{(n)}$; it runs outside jit (scipy), so only through `fit`.
    """

    step_tol: float = 1e-6
    max_iters: int = 100
    shapiro_wilk: bool = False
    sw_tol: float = 1e-4
    sw_start: int = 10
    rtol: float = 1e-8
    atol: float = 1e-8
    max_steps: int = 500
    method: ClassVar[str] = "irls"

    def _start(self, lik, p0, lower, upper):
        return WLS(self.rtol, self.atol, self.max_steps).solve(lik, p0, lower, upper)

    def step(self, lik, p, lower, upper):
        """One reweighting: $(p^{(n+1)}$, whitened residual, status$)$."""
        chol = jnp.linalg.cholesky(covariance(lik, p))
        ok = jnp.all(jnp.isfinite(chol))
        chol = jnp.where(ok, chol, jnp.eye(chol.shape[-1], dtype=chol.dtype))
        sol = weighted_least_squares(lik, chol, p, lower, upper, rtol=self.rtol,
                                     atol=self.atol, max_steps=self.max_steps)
        whitened = jax.vmap(lambda c, r: jax.scipy.linalg.solve_triangular(c, r, lower=True))(
            chol, residual(lik, sol.x))
        result = RESULTS.where(ok, sol.result, RESULTS.cholesky_failed)
        # an inner solve that hit its step limit still gives a usable reweighted iterate
        result = RESULTS.where(result == RESULTS.max_steps_reached, RESULTS.successful, result)
        return sol.x, whitened, result

    def converged(self, p_new, p):
        """Relative step below `step_tol` (001 Alg. 2's stopping rule)."""
        return jnp.linalg.norm(p_new - p) < self.step_tol * jnp.linalg.norm(p)

    def solve(self, lik, p0, lower, upper) -> Solution:
        if self.shapiro_wilk:
            raise ValueError(
                "IRLS(shapiro_wilk=True) runs the Shapiro-Wilk test outside jit; use "
                "IRLS(...).fit(model, data, ...) or set shapiro_wilk=False for solve/vmap."
            )
        start = self._start(lik, p0, lower, upper)

        def cond(state):
            _, n, done, _ = state
            return ~done & (n < self.max_iters)

        def body(state):
            p, n, _, _ = state
            p_new, _, result = self.step(lik, p, lower, upper)
            failed = result != RESULTS.successful
            done = failed | self.converged(p_new, p)
            return jnp.where(failed, p, p_new), n + 1, done, result

        init = (start.params, jnp.array(0), start.result != RESULTS.successful, start.result)
        p, n, done, result = jax.lax.while_loop(cond, body, init)
        result = RESULTS.where(done, result, RESULTS.max_steps_reached)
        return _solution(lik, p, n, result)


class MLE(AbstractWENDyEstimator):
    r"""Weak maximum likelihood (000 §3.1, eq. 10): $\min_{l \le p \le u} \ell(p)$ by a
    bounded trust-region Newton method with the exact Hessian of $\ell$.

    `start` picks where the trust region starts:

    - `"p0"` (default): the given start, as in 000's experiments;
    - `"wls"`: the [`WLS`][] estimate (closed form for models linear in the parameters, a
      Gauss–Newton solve from `p0` otherwise; `p0` if that fails);
    - `"best"`: whichever of the two has the lower ℓ;
    - `"both"`: a solve from each, keeping the successful one with the lower ℓ (the cost
      of both).

    Measured (2-core CPU, 2026-11-25): on Lorenz (M = 1024, 5–10 % noise, starts uniform in
    000's box) `"wls"`/`"best"` reach the same optimum in 3–4 steps instead of 7–16; on
    SIR-TDI (1 % noise, M = 256) 3 of 20 box starts end at a wrong local minimum that
    `"best"` avoids; on Hindmarsh–Rose at 20 % noise the WLS estimate, shrunk towards 0,
    leads 7 of 20 fits to a local minimum near p = 0 with ℓ higher by 90–450 than from the
    box start. `"both"` keeps the better of the two in every case (`benchmarks/mle_starts.py`).
    Defaults as WENDy.jl otherwise: tolerances 1e-8, at most 500 steps.
    """

    rtol: float = 1e-8
    atol: float = 1e-8
    max_steps: int = 500
    start: str = "p0"
    method: ClassVar[str] = "mle"
    starts: ClassVar[tuple[str, ...]] = ("p0", "wls", "best", "both")

    def __check_init__(self):
        if self.start not in self.starts:
            raise ValueError(f"start must be one of {', '.join(map(repr, self.starts))}, got {self.start!r}.")

    def _wls_start(self, lik: WeakLikelihood, p0, lower, upper, compare: bool) -> Float[Array, " j"]:
        """The WLS estimate, or `p0` (clipped) when that solve fails or, with `compare`, when
        ℓ(p0) is not higher."""
        p0 = jnp.clip(p0, lower, upper)
        wls = WLS(self.rtol, self.atol, self.max_steps).solve(lik, p0, lower, upper)
        usable = wls.successful & jnp.isfinite(wls.nll)
        if compare:
            # not `wls.nll < ℓ(p0)`: a non-finite ℓ(p0) must lose
            usable = usable & ~(nll(lik, p0) <= wls.nll)
        return jnp.where(usable, wls.params, p0)

    def _solve_from(self, lik, x0, lower, upper) -> Solution:
        x0 = jnp.clip(x0, lower, upper)
        sol = bounded_trust_region(lambda p, lik: nll_derivatives(lik, p), x0, lower, upper,
                                   lik, rtol=self.rtol, atol=self.atol, max_steps=self.max_steps)
        result = RESULTS.where(
            (sol.result == RESULTS.nonfinite) & _cholesky_failed(lik, x0),
            RESULTS.cholesky_failed, sol.result,
        )
        return Solution(sol.x, sol.value, sol.num_steps, result)

    def solve(self, lik, p0, lower, upper) -> Solution:
        if self.start == "p0":
            return self._solve_from(lik, p0, lower, upper)
        wls = self._solve_from(lik, self._wls_start(lik, p0, lower, upper, self.start == "best"), lower, upper)
        if self.start != "both":
            return wls
        given = self._solve_from(lik, p0, lower, upper)
        take_wls = wls.successful & ~(given.successful & (given.nll <= wls.nll))
        best = jax.tree.map(lambda a, b: jnp.where(take_wls, b, a), given, wls)
        return eqx.tree_at(lambda s: s.num_steps, best, given.num_steps + wls.num_steps)

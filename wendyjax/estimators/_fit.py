"""The user-facing `fit`: validate, build the likelihood, solve, add uncertainty."""

import warnings

import equinox as eqx
import jax.numpy as jnp
import numpy as np
import scipy.stats
from jaxtyping import ArrayLike

from ..inference import COVARIANCES, parameter_covariance
from ..model import ODEModel
from ..weak import TestFunctionConfig, nll
from ..weak._likelihood import build_likelihood
from ._output_error import Hybrid, OutputError, output_error_problem
from ._result import OutputErrorFit, WENDyFit
from ._results import RESULTS
from ._wendy import IRLS, MLE, WLS, AbstractWENDyEstimator, Solution

_METHODS = {"wls": WLS, "irls": IRLS, "mle": MLE}
# WENDy.jl's noiseless test: min σ̂ / max|U| below this means no measurable noise
NOISELESS_RATIO = 1e-8


def _estimator(method) -> AbstractWENDyEstimator:
    if isinstance(method, AbstractWENDyEstimator):
        return method
    if isinstance(method, str) and method.lower() in _METHODS:
        return _METHODS[method.lower()]()
    raise ValueError(f"method must be one of {tuple(_METHODS)} or a WENDy estimator, got {method!r}.")


def _bounds(model: ODEModel, bounds) -> tuple[np.ndarray, np.ndarray]:
    j = model.n_params
    if isinstance(bounds, str) and bounds == "model":
        if model.bounds is None:
            return np.full(j, -np.inf), np.full(j, np.inf)
        return np.asarray(model.bounds[0], float), np.asarray(model.bounds[1], float)
    if bounds is None:
        return np.full(j, -np.inf), np.full(j, np.inf)
    if len(bounds) != 2:
        raise ValueError("bounds must be 'model', None or a pair (lower, upper).")
    lo, hi = (np.broadcast_to(np.asarray(b, float), (j,)) if np.ndim(b) == 0 else np.asarray(b, float)
              for b in bounds)
    if lo.shape != (j,) or hi.shape != (j,):
        raise ValueError(
            f"bounds must be two arrays of shape ({j},) for model '{model.name}' "
            f"(parameters {', '.join(model.param_names)}), got {lo.shape} and {hi.shape}."
        )
    if np.any(np.isnan(lo)) or np.any(np.isnan(hi)) or np.any(lo > hi):
        raise ValueError("bounds: lower and upper must be non-NaN with lower <= upper.")
    return lo, hi


def _check_p0(model: ODEModel, p0, lo, hi) -> np.ndarray:
    p0 = np.asarray(model.check_params(p0, "p0"))
    outside = [f"{n} = {v:g} not in [{a:g}, {b:g}]"
               for n, v, a, b in zip(model.param_names, p0, lo, hi) if not a <= v <= b]
    if outside:
        raise ValueError("p0 lies outside the bounds: " + "; ".join(outside) + ".")
    return p0


def _noiseless(lik) -> bool:
    p = lik.problem
    scale = np.max(np.abs(np.asarray(p.u)), axis=1)  # (r, d)
    ratio = np.asarray(p.sigma) / np.where(scale > 0, scale, 1.0)
    return bool(np.min(ratio) < NOISELESS_RATIO)


_solve = eqx.filter_jit(lambda est, lik, p0, lo, hi: est.solve(lik, p0, lo, hi))


def _irls_shapiro_wilk(est: IRLS, lik, p0, lo, hi) -> Solution:
    """IRLS with 001 §2.4's Shapiro–Wilk stopping test (a Python loop over jitted steps)."""
    start = eqx.filter_jit(est._start)(lik, p0, lo, hi)
    if start.result != RESULTS.successful:
        return start
    step = eqx.filter_jit(est.step)
    mask = np.tile(np.asarray(lik.problem.kmask), (1, lik.problem.n_states)).astype(bool)
    p, status, n = start.params, RESULTS.max_steps_reached, 0
    while n < est.max_iters:
        p_new, whitened, result = step(lik, p, lo, hi)
        n += 1
        if result != RESULTS.successful:
            status = result
            break
        if n > est.sw_start and scipy.stats.shapiro(np.asarray(whitened)[mask]).pvalue < est.sw_tol:
            status = RESULTS.shapiro_wilk_stop
            break
        converged = bool(est.converged(p_new, p))
        p = p_new
        if converged:
            status = RESULTS.successful
            break
    return Solution(p, nll(lik, p), jnp.array(n), status)


def fit(
    model: ODEModel,
    data,
    p0: ArrayLike | None = None,
    *,
    method: "str | AbstractWENDyEstimator" = "mle",
    noise="gaussian",
    bounds="model",
    sigma: ArrayLike | None = None,
    test_functions=TestFunctionConfig(),
    k: int | None = None,
    covariance: str | None = None,
    diag_reg: float = 1e-10,
    throw: bool = True,
):
    """Fit `model` to `data` with WENDy and return a [`WENDyFit`][wendyjax.WENDyFit].

    - `p0`: starting parameters; required for models nonlinear in the parameters, else
      the WLS estimate is used.
    - `method`: "mle" (default), "irls", "wls", or a configured estimator.
    - `noise`: "gaussian", "lognormal" or a noise model; `sigma`: noise level per state
      (estimated from the data when `None`).
    - `bounds`: "model" (the model's box when it has one), `None` (unbounded) or
      `(lower, upper)`.
    - `test_functions`, `k`, `diag_reg`: as in [`weak_likelihood`][wendyjax.weak_likelihood].
    - `covariance`: "sandwich" (000 eq. 9 / 001 eq. 15, default) or "hessian" (inverse
      Hessian of ℓ).
    - `throw`: raise `RuntimeError` when the solve fails (non-finite ℓ, S not positive
      definite); a fit that stops at its step limit or stalls only warns. With `throw=False`
      failures are reported in `status`.

    Noiseless data (σ̂/max|U| < 1e-8) make S singular: the fit then switches to WLS and
    warns.
    """
    est = _estimator(method)
    if not isinstance(model, ODEModel):
        raise TypeError(f"model must be an ODEModel, got {type(model).__name__}.")
    lo, hi = _bounds(model, bounds)
    if p0 is None:
        if not model.linear_in_params:
            raise ValueError(
                f"p0 is required: model '{model.name}' is nonlinear in its parameters "
                f"({', '.join(model.param_names)}), so there is no closed-form start."
            )
    else:
        p0 = _check_p0(model, p0, lo, hi)
    covariance = "sandwich" if covariance is None else covariance
    if covariance not in COVARIANCES:
        raise ValueError(f"covariance must be one of {COVARIANCES}, got {covariance!r}.")
    lik, tfs = build_likelihood(model, data, noise, sigma=sigma, test_functions=test_functions,
                                k=k, linear=None, diag_reg=diag_reg)
    if _noiseless(lik) and not isinstance(est, WLS):
        warnings.warn(
            f"the data look noiseless (estimated noise / max|U| < {NOISELESS_RATIO:g}): the "
            f"residual covariance is singular, so WENDy-{est.method.upper()} is replaced by "
            f"WLS (weak least squares).",
            stacklevel=2,
        )
        est = WLS(est.rtol, est.atol, est.max_steps)
    lo_j, hi_j = jnp.asarray(lo), jnp.asarray(hi)
    if p0 is None:
        start = _solve(WLS(), lik, jnp.zeros(model.n_params), lo_j, hi_j).params
        p0 = np.asarray(start)
    p0_j = jnp.asarray(p0, dtype=float)
    if isinstance(est, IRLS) and est.shapiro_wilk:
        sol = _irls_shapiro_wilk(est, lik, p0_j, lo_j, hi_j)
    else:
        sol = _solve(est, lik, p0_j, lo_j, hi_j)
    status = sol.result
    if status in (RESULTS.nonfinite, RESULTS.cholesky_failed):
        text = (f"WENDy-{est.method.upper()} failed on model '{model.name}' from "
                f"p0 = {np.asarray(p0).tolist()}: {RESULTS[status]}")
        if throw:
            raise RuntimeError(text)
        warnings.warn(text, RuntimeWarning, stacklevel=2)
    elif status == RESULTS.max_steps_reached:
        warnings.warn(
            f"WENDy-{est.method.upper()} stopped at its step limit without converging on "
            f"model '{model.name}'; the estimate may be inaccurate.", RuntimeWarning, stacklevel=2)
    elif status == RESULTS.stalled:
        warnings.warn(
            f"WENDy-{est.method.upper()} stalled on model '{model.name}' away from a stationary "
            f"point; the estimate may be inaccurate. {RESULTS[status]}", RuntimeWarning, stacklevel=2)
    cov = np.asarray(parameter_covariance(lik, sol.params, covariance))
    if not np.all(np.isfinite(cov)):
        warnings.warn(
            f"the {covariance} parameter covariance is not finite at the estimate (the "
            f"Hessian or ∇g is singular there): standard errors are NaN.",
            RuntimeWarning, stacklevel=2)
    return WENDyFit(
        model=model, params=np.asarray(sol.params), covariance=cov, covariance_method=covariance,
        p0=np.asarray(p0, float), nll=float(sol.nll), num_steps=int(sol.num_steps), status=status,
        method=est.method, test_functions=tuple(tf.info for tf in tfs), likelihood=lik,
    )


def _check_u0(model: ODEModel, u0, n_traj: int, log_space: bool) -> np.ndarray:
    u0 = np.asarray(u0, dtype=float)
    u0 = np.broadcast_to(u0, (n_traj, model.n_states)) if u0.shape == (model.n_states,) else u0
    if u0.shape != (n_traj, model.n_states):
        raise ValueError(f"u0 must have shape ({model.n_states},) or ({n_traj}, {model.n_states}) for "
                         f"{n_traj} trajectories of model '{model.name}', got {np.shape(u0)}.")
    if not np.all(np.isfinite(u0)):
        raise ValueError("u0 must be finite.")
    if log_space and np.any(u0 <= 0):
        raise ValueError("u0 must be positive under log-normal noise (the fit runs on log states).")
    return np.log(u0) if log_space else u0


_solve_oe = eqx.filter_jit(lambda est, prob, p0, lo, hi, x0: est.solve(prob, p0, lo, hi, x0))


def fit_output_error(
    estimator: "OutputError | Hybrid",
    model: ODEModel,
    data,
    p0: ArrayLike,
    *,
    u0: ArrayLike | None = None,
    noise="gaussian",
    bounds="model",
    sigma: ArrayLike | None = None,
    weighted: bool = True,
    test_functions=TestFunctionConfig(),
    throw: bool = True,
) -> OutputErrorFit:
    """Fit by output error (or a WENDy → output-error hybrid); see [`OutputError.fit`][]."""
    if not isinstance(model, ODEModel):
        raise TypeError(f"model must be an ODEModel, got {type(model).__name__}.")
    lo, hi = _bounds(model, bounds)
    p0 = _check_p0(model, p0, lo, hi)
    problem = output_error_problem(model, data, noise, sigma=sigma, weighted=weighted)
    x0 = None if u0 is None else jnp.asarray(_check_u0(model, u0, problem.t.shape[0], problem.log_space))
    if x0 is not None and isinstance(estimator, Hybrid):
        raise ValueError("u0 is not used by Hybrid (output error starts from the data); leave it None.")
    args = (jnp.asarray(p0, float), jnp.asarray(lo), jnp.asarray(hi))
    wendy = None
    if isinstance(estimator, Hybrid):
        wendy = fit(model, data, p0, method=estimator.wendy, noise=noise, bounds=(lo, hi), sigma=sigma,
                    test_functions=test_functions, throw=False)
        start = wendy.params if wendy.successful else p0
        args = (jnp.asarray(start, float),) + args[1:]
        estimator = estimator.output_error
    sol = _solve_oe(estimator, problem, *args, x0)
    status = sol.result
    name = "output error" if wendy is None else "the output-error refinement of the hybrid fit"
    if status in (RESULTS.nonfinite, RESULTS.forward_failed):
        text = f"{name} failed on model '{model.name}' from p0 = {np.asarray(args[0]).tolist()}: {RESULTS[status]}"
        if throw:
            raise RuntimeError(text)
        warnings.warn(text, RuntimeWarning, stacklevel=3)
    elif status == RESULTS.max_steps_reached:
        warnings.warn(f"{name} stopped at its step limit without converging on model '{model.name}'; the "
                      f"estimate may be inaccurate.", RuntimeWarning, stacklevel=3)
    cov = np.asarray(eqx.filter_jit(estimator.covariance)(problem, sol))
    return OutputErrorFit(
        model=model, params=np.asarray(sol.params), covariance=cov, covariance_method="gauss_newton",
        p0=np.asarray(p0, float), num_steps=int(sol.num_steps), status=status,
        method="hybrid" if wendy is not None else "output_error", u0=np.asarray(sol.u0),
        loss=float(sol.loss), scale=np.asarray(problem.scale), wendy=wendy,
    )

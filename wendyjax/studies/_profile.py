"""Profile likelihood of a fit: constrained refits over a grid of one parameter, in one
batched, compiled call per parameter."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import scipy.stats

from .._checks import as_count
from .._compile import cpu_safe_jit
from .._results import status_names
from ..data import as_dataset
from ..estimators import AbstractEstimator, AbstractFit, AbstractWENDyEstimator, Hybrid, OutputError
from ..model import ODEModel

#: the profile is "flat" where it never rises above this fraction of the threshold
FLAT = 1e-3


@dataclasses.dataclass(frozen=True)
class Profile:
    """The profile of one parameter ([`profile`][wendyjax.studies.profile]).

    - `grid`: the values of the parameter; `statistic`: the likelihood-ratio statistic
      $2(\\ell_{prof}(v) - \\ell(\\hat p))$ at each (NaN where the constrained refit failed);
      `params`: the refitted parameter vectors.
    - `threshold`: the χ²₁ quantile of `level`; `interval`: where the statistic crosses it on
      either side (NaN on a side where it does not within the grid).
    - `verdict`: "identifiable" (crosses on both sides), "practically non-identifiable"
      (stays below on one side within the grid), "structurally non-identifiable" (flat).
    """

    name: str
    estimate: float
    grid: np.ndarray
    statistic: np.ndarray
    params: np.ndarray
    status: np.ndarray
    level: float
    threshold: float
    interval: tuple[float, float]
    verdict: str


def _grid(fit: AbstractFit, j: int, n: int, width: float) -> np.ndarray:
    """`n` values around p̂_j: ± `width` standard errors (± 100 % of |p̂_j| without one), clipped
    to the box."""
    p, se = float(fit.params[j]), float(fit.stderr[j])
    half = width * se if np.isfinite(se) and se > 0 else max(abs(p), 1e-3)
    lo, hi = p - half, p + half
    if fit.lower is not None:
        lo, hi = max(lo, float(fit.lower[j])), min(hi, float(fit.upper[j]))
    return np.unique(np.r_[np.linspace(lo, hi, n), p])


@cpu_safe_jit
def _refits(estimator, problem, starts, lower, upper):
    """Every row of `starts` refitted with its own box (one parameter held by lower = upper)."""
    return jax.vmap(lambda p0, lo, hi: estimator.solve(problem, p0, lo, hi))(starts, lower, upper)


def profile(
    estimator: AbstractEstimator,
    fit: AbstractFit,
    data,
    params=None,
    *,
    grid: dict | None = None,
    n_points: int = 21,
    width: float = 4.0,
    level: float = 0.95,
    **options,
) -> dict[str, Profile]:
    """Profile likelihood of `fit` (`estimator`'s fit of an `ODEModel` to `data`): for each
    parameter in `params` (names; default all), the other parameters refitted with it held
    at each of `n_points` values (± `width` standard errors around the estimate, clipped to
    the box; or `grid[name]`), all values of one parameter in one batched, compiled call
    started from the estimate. The likelihood-ratio statistic is compared with the χ²₁
    quantile of `level`. The weak negative log-likelihood (WENDy) is treated as a
    log-likelihood of the weak residuals as it stands; output error's objective, half the
    sum of squared whitened residuals, is divided by its residual variance per degree of
    freedom. Returns `{name: Profile}`.
    """
    if not isinstance(estimator, (AbstractWENDyEstimator, OutputError, Hybrid)):
        raise TypeError(f"profiles are for the weak likelihood (WLS, IRLS, MLE) and output error (OutputError, "
                        f"Hybrid), got {estimator!r}.")
    if not isinstance(fit, AbstractFit) or not isinstance(fit.model, ODEModel):
        raise TypeError("fit must be the result of estimator.fit(...) for an ODEModel.")
    if not fit.successful:
        raise ValueError(f"the fit did not succeed ({fit.status_name}): there is no optimum to profile.")
    if not 0 < level < 1:
        raise ValueError(f"level must lie strictly between 0 and 1, got {level}.")
    n_points = as_count("n_points", n_points, 3)
    names = list(fit.model.param_names)
    chosen = names if params is None else [params] if isinstance(params, str) else list(params)
    unknown = [c for c in chosen if c not in names]
    if unknown:
        raise ValueError(f"unknown parameter(s) {unknown} of model '{fit.model.name}' ({', '.join(names)}).")
    grids = {}
    for c in chosen:
        j = names.index(c)
        g = np.asarray(grid[c], float) if grid is not None and c in grid else _grid(fit, j, n_points, width)
        if g.ndim != 1 or g.size < 2 or not np.all(np.isfinite(g)):
            raise ValueError(f"grid[{c!r}] must be at least two finite values, got {g}.")
        if fit.lower is not None and (np.any(g < fit.lower[j]) or np.any(g > fit.upper[j])):
            raise ValueError(f"grid[{c!r}] leaves the box the fit was held to, [{fit.lower[j]:g}, {fit.upper[j]:g}]: "
                             f"widen bounds= in the fit, or choose a grid inside.")
        grids[c] = g
    options = {**({"noise": fit.noise} if "noise" in estimator.options() else {}), **options}
    if "u0" in estimator.options() and "u0" not in options and getattr(fit, "u0", None) is not None:
        options["u0"] = fit.u0
    problem = estimator.problem(fit.model, as_dataset(data), **options)
    p = np.asarray(fit.params, float)
    lower = np.full(p.shape, -np.inf) if fit.lower is None else np.asarray(fit.lower, float)
    upper = np.full(p.shape, np.inf) if fit.upper is None else np.asarray(fit.upper, float)
    if isinstance(estimator, (OutputError, Hybrid)):
        oe = problem.output_error if isinstance(estimator, Hybrid) else problem
        fits_u0 = (estimator.output_error if isinstance(estimator, Hybrid) else estimator).fit_u0
        unknowns = p.size + (fit.u0.size if fits_u0 else 0)
        n_obs = int(oe.n_observed)
        s2 = 2.0 * fit.objective / max(n_obs - unknowns, 1)
        factor = 2.0 / s2
    else:
        factor = 2.0
    threshold = float(scipy.stats.chi2.ppf(level, 1))
    out = {}
    for c, g in grids.items():
        j = names.index(c)
        starts = np.repeat(p[None], g.size, axis=0)
        starts[:, j] = g
        lo, hi = np.repeat(lower[None], g.size, axis=0), np.repeat(upper[None], g.size, axis=0)
        lo[:, j] = hi[:, j] = g
        sols = jax.device_get(_refits(estimator, problem, jnp.asarray(starts), jnp.asarray(lo), jnp.asarray(hi)))
        status = np.asarray(status_names(sols.result))
        ok = np.isin(status, ("successful", "max_steps_reached"))
        stat = np.where(ok, factor * (np.asarray(sols.objective) - fit.objective), np.nan)
        stat = np.maximum(stat, 0.0)  # a refit below the optimum: the fit stopped short of it
        out[c] = Profile(name=c, estimate=float(p[j]), grid=g, statistic=stat, params=np.asarray(sols.params),
                         status=status, level=level, threshold=threshold,
                         interval=_crossings(g, stat, float(p[j]), threshold), verdict=_verdict(g, stat, float(p[j]),
                                                                                              threshold))
    return out


def _crossings(g, stat, p, threshold) -> tuple[float, float]:
    """Where the statistic first exceeds `threshold` below and above p; NaN on a side where
    it does not. Its square root (the signed root of the likelihood ratio, about linear in
    the parameter near the optimum) is interpolated linearly between grid points, so that a
    coarse grid does not pull the ends in."""
    ends = []
    for side in (g < p, g > p):
        idx = np.flatnonzero(side)
        order = idx[np.argsort(np.abs(g[idx] - p))]  # outwards from the estimate
        prev_v, prev_s, end = p, 0.0, np.nan
        for i in order:
            if np.isnan(stat[i]):
                break
            if stat[i] >= threshold:
                root, prev_root = np.sqrt(stat[i]), np.sqrt(prev_s)
                w = (np.sqrt(threshold) - prev_root) / (root - prev_root) if root > prev_root else 1.0
                end = prev_v + w * (g[i] - prev_v)
                break
            prev_v, prev_s = g[i], stat[i]
        ends.append(float(end))
    return ends[0], ends[1]


def _verdict(g, stat, p, threshold) -> str:
    lo, hi = _crossings(g, stat, p, threshold)
    if np.nanmax(stat, initial=0.0) < FLAT * threshold:
        return "structurally non-identifiable"
    if np.isnan(lo) or np.isnan(hi):
        return "practically non-identifiable"
    return "identifiable"

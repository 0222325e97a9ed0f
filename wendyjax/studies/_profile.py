"""Profile likelihood of a fit: constrained refits over a grid of one parameter, in one
batched, compiled call per parameter."""

import dataclasses
import warnings
from collections.abc import Callable, Mapping

import jax
import jax.numpy as jnp
import numpy as np
import scipy.stats

from .._checks import as_count, as_level, as_ratio, user_stacklevel
from .._compile import cpu_safe_jit
from .._derived import derived_values
from .._results import RESULTS, status_names
from ..estimators import IRLS, MLE, WLS, AbstractEstimator, AbstractFit, Hybrid, OutputError, OutputErrorFit
from ..model import ODEModel
from ..noise import NegativeBinomial
from ._fitcheck import check_data, check_fit, fit_options, fit_problem

#: the profile is "flat" where it stays below this fraction of the threshold
FLAT = 1e-3


@dataclasses.dataclass(frozen=True)
class Profile:
    r"""The profile of one parameter ([`profile`][wendyjax.studies.profile]).

    - `grid`: the values of the parameter; `statistic`: the likelihood-ratio statistic
      $2(\ell_{prof}(v) - \ell(\hat p))$ at each (NaN where the constrained refit failed);
      `params`: the refitted parameter vectors.
    - `threshold`: the χ²₁ quantile of `level`; `interval`: where the statistic crosses it on
      either side; ±inf on a side where it stays below to the end of the grid (open), NaN
      where a refit failed before it crossed (unknown).
    - `verdict`: "identifiable" (crosses on both sides), "practically non-identifiable"
      (stays below on one side within the grid), "structurally non-identifiable" (flat over
      at least half the grid), "on a bound" (the estimate is on the box's bound, so one side
      has no grid), or "refits failed" (a side is unknown).
    - `bounds`: the parameter's box in the fit (±inf without one).
    - `centre`: where the profile is lowest: the estimate, unless refits went below the
      fit's objective (the fit stopped short of its optimum: a warning), when the statistic
      is measured from the lowest refit instead and the interval is built around it.
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
    bounds: tuple[float, float]
    centre: float


def check_profiled(estimator: AbstractEstimator) -> None:
    """Profiles need an estimate that minimises the objective the refits report: WENDy-MLE's ℓ,
    output error's (and the hybrid's) residual sum of squares."""
    if isinstance(estimator, (WLS, IRLS)):
        raise TypeError(
            f"profiles compare refits' ℓ with ℓ(p̂), which needs p̂ to minimise ℓ; the "
            f"{type(estimator).__name__} estimate does not (it minimises a weighted residual norm), so "
            f"refits would fall below it. Profile an MLE fit (wj.MLE()) instead."
        )
    if not isinstance(estimator, (MLE, OutputError, Hybrid)):
        raise TypeError(
            f"profiles are for the weak maximum-likelihood estimate (MLE) and output error "
            f"(OutputError, Hybrid), got {estimator!r}."
        )


def _grid(fit: AbstractFit, j: int, n: int, width: float) -> np.ndarray:
    """`n` values: p̂_j and, on either side, half of the others evenly up to ± `width` standard
    errors (± 100 % of |p̂_j| without one), clipped to the box. Equal counts on both sides, not
    equal spacing: an estimate near a bound still has points between it and the bound (a side
    with a single point would be interpolated across)."""
    p, se = float(fit.params[j]), float(fit.stderr[j])
    half = width * se if np.isfinite(se) and se > 0 else max(abs(p), 1e-3)
    lo, hi = p - half, p + half
    if fit.lower is not None and fit.upper is not None:
        lo, hi = max(lo, float(fit.lower[j])), min(hi, float(fit.upper[j]))
    tiny = 1e-9 * max(hi - lo, abs(p), 1e-300)
    n_lo = 0 if p - lo <= tiny else (n - 1) // 2 if hi - p > tiny else n - 1
    below = np.linspace(lo, p, n_lo + 1)[:-1]
    above = np.linspace(p, hi, n - n_lo)[1:] if hi - p > tiny else np.empty(0)
    return np.r_[below, p, above]


#: Newton steps solving a derived quantity's constraint for the parameter it is profiled through
NEWTON_STEPS = 30


@dataclasses.dataclass(frozen=True)
class _Through:
    """The parameters `p` of a model reparametrised by a derived quantity `fn(p) = c`: the
    others `q` and `c` are given (`theta = (q, c)`), and `p[k]` solves `fn(p) = c` by Newton
    steps from `start` (exact for quantities linear in `p[k]`, such as β/γ in β; derivatives
    follow the converged iterate)."""

    fn: Callable
    k: int
    start: float

    def __call__(self, theta):
        q, c = theta[:-1], theta[-1]
        full = lambda x: jnp.concatenate([q[: self.k], x[None], q[self.k :]])  # noqa: E731
        g = lambda x: jnp.reshape(self.fn(full(x)), ()) - c  # noqa: E731

        def newton(_, x):
            return x - g(x) / jax.grad(g)(x)

        return full(jax.lax.fori_loop(0, NEWTON_STEPS, newton, jnp.asarray(self.start, theta.dtype)))


@dataclasses.dataclass(frozen=True)
class _ThroughRhs:
    rhs: Callable
    params: _Through

    def __call__(self, u, theta, t):
        return self.rhs(u, self.params(theta), t)


def _reparametrised(fit: AbstractFit, name: str, fn: Callable, options: dict) -> AbstractFit:
    """The fit as one of the model reparametrised by `name` = `fn(p)`: the quantity replaces
    the parameter it moves most (|∂fn/∂p_k| times its standard error; not a fitted noise
    dispersion), solved for from the others; its covariance by the delta method. The
    options that are functions of the parameters (`u0`, `observe`) are composed with it."""
    model, p = fit.model, np.asarray(fit.params, float)
    value, jac = derived_values(fn, p)
    if value.size != 1:
        raise ValueError(f"derived[{name!r}] must return one number, got {value.size}.")
    noise = options.get("noise")
    dispersions = {
        n.dispersion
        for n in (noise if isinstance(noise, (list, tuple)) else [noise])
        if isinstance(n, NegativeBinomial) and isinstance(n.dispersion, str)
    }
    usable = (jac[0] != 0) & ~np.isin(model.param_names, list(dispersions))
    se = np.where(np.isfinite(fit.stderr), fit.stderr, 0.0)
    moves = np.where(usable, np.abs(jac[0]) * np.maximum(se, 1e-300), -1.0)
    if moves.max() < 0:
        raise ValueError(
            f"derived[{name!r}] does not depend on the fitted parameters at the estimate: there is nothing to profile."
        )
    k = int(np.argmax(moves))
    through = _Through(fn, k, float(p[k]))
    keep = [i for i in range(p.size) if i != k]
    names = [model.param_names[i] for i in keep] + [name]
    if name in model.param_names[:k] + model.param_names[k + 1 :]:
        raise ValueError(f"derived: {name!r} is already a parameter of model '{model.name}'; name it otherwise.")
    box = lambda b, fill: np.r_[np.asarray(b, float)[keep], fill]  # noqa: E731 - c is unbounded
    bounds = None if model.bounds is None else (box(model.bounds[0], -np.inf), box(model.bounds[1], np.inf))
    reparam = ODEModel(
        _ThroughRhs(model.rhs, through),
        model.state_names,
        names,
        bounds=bounds,
        name=model.name,
        jump_ts=model.jump_ts,
        check_indexing=False,
        noise=model.noise,
    )
    change = np.vstack([np.eye(p.size)[keep], jac])  # d(q, c)/dp
    own = dict(options)
    if callable(own.get("u0")):
        u0 = own["u0"]
        own["u0"] = lambda theta: u0(through(theta))
    if own.get("observe") is not None:
        observe = own["observe"]
        own["observe"] = lambda u, theta, t: observe(u, through(theta), t)
    return dataclasses.replace(
        fit,
        model=reparam,
        params=np.r_[p[keep], value],
        options=own,
        covariance=None if fit.covariance is None else change @ fit.covariance @ change.T,
        lower=box(fit.lower, -np.inf),
        upper=box(fit.upper, np.inf),
    )


@cpu_safe_jit
def _path(estimator, problem, p_hat, j, values, restart, lower, upper):
    """The constrained refits along one parameter's grid, outwards from the estimate: each
    started from the previous value's solution (warm starts follow the ridge of the others'
    optimum, so each refit takes a few steps), from `p_hat` where `restart` (the first value
    on either side) or where the previous refit failed."""

    def step(prev, args):
        v, fresh = args
        start = jnp.where(fresh, p_hat, prev).at[j].set(v)
        sol = estimator.solve(problem, start, lower.at[j].set(v), upper.at[j].set(v))
        ok = sol.successful | (sol.result == RESULTS.max_steps_reached)
        return jnp.where(ok, sol.params, p_hat), sol.on_host()

    return jax.lax.scan(step, p_hat, (values, restart))[1]


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
    derived: "Mapping[str, Callable] | None" = None,
    **options,
) -> dict[str, Profile]:
    """Profile likelihood of `fit` (`estimator`'s fit of an `ODEModel` to `data`): for each
    parameter in `params` (names; default all), the other parameters refitted with it held
    at each of `n_points` values (± `width` standard errors around the estimate, clipped to
    the box; or `grid[name]`, with values on both sides of the estimate), all values of one
    parameter in one compiled call, outwards from the estimate, each refit warm-started from
    its neighbour's solution. The likelihood-ratio
    statistic is compared with the χ²₁ quantile of `level`. The weak negative log-likelihood
    (WENDy) is treated as a log-likelihood of the weak residuals as it stands; output
    error's objective, half the sum of squared whitened residuals, is divided by its
    residual variance per degree of freedom. Returns `{name: Profile}`.

    `derived` profiles quantities derived from the parameters, `{name: fn}` with `fn(p)` a
    number (e.g. `{"R0": lambda p: p[0] / p[1]}`), by reparametrised refits: the quantity
    replaces the parameter it moves most, which is solved for from the others at each
    value (so that parameter's box no longer applies); without `params`, only they are
    profiled.
    """
    check_profiled(estimator)
    check_fit(estimator, fit, "a profile")
    check_data(fit, data, "a profile")
    options = fit_options(estimator, fit, options, "a profile")
    if derived is not None:
        if not isinstance(derived, Mapping) or not all(isinstance(n, str) and callable(f) for n, f in derived.items()):
            raise TypeError(
                f"derived must be a dict {{name: fn}} of functions fn(p) of the parameters, got {derived!r}."
            )
        out = (
            {}
            if params is None
            else profile(
                estimator, fit, data, params, grid=grid, n_points=n_points, width=width, level=level, **options
            )
        )
        for name, fn in derived.items():
            out[name] = profile(
                estimator,
                _reparametrised(fit, name, fn, options),
                data,
                name,
                n_points=n_points,
                width=width,
                level=level,
            )[name]
        return out
    level = as_level(level)
    n_points = as_count("n_points", n_points, 3)
    width = as_ratio("width", width)
    names = list(fit.model.param_names)
    if params is None:
        chosen = names
    elif isinstance(params, str):
        chosen = [params]
    elif isinstance(params, (list, tuple)) and all(isinstance(c, str) for c in params):
        chosen = list(params)
    else:
        raise TypeError(f"params must be a parameter name or a list of names ({', '.join(names)}), got {params!r}.")
    unknown = [c for c in chosen if c not in names]
    if unknown:
        raise ValueError(f"unknown parameter(s) {unknown} of model '{fit.model.name}' ({', '.join(names)}).")
    if grid is not None and (not isinstance(grid, dict) or set(grid) - set(chosen)):
        raise ValueError(
            f"grid must be a dict from the profiled parameters ({', '.join(chosen)}) to their values, "
            f"got keys {list(grid) if isinstance(grid, dict) else type(grid).__name__}."
        )
    p = np.asarray(fit.params, float)
    lower = np.full(p.shape, -np.inf) if fit.lower is None else np.asarray(fit.lower, float)
    upper = np.full(p.shape, np.inf) if fit.upper is None else np.asarray(fit.upper, float)
    grids = {}
    for c in chosen:
        j = names.index(c)
        g = np.asarray(grid[c], float) if grid is not None and c in grid else _grid(fit, j, n_points, width)
        if g.ndim != 1 or g.size < 2 or not np.all(np.isfinite(g)):
            raise ValueError(f"grid[{c!r}] must be at least two finite values, got {g}.")
        if np.any(g < lower[j]) or np.any(g > upper[j]):
            raise ValueError(
                f"grid[{c!r}] leaves the box the fit was held to, [{lower[j]:g}, {upper[j]:g}]: "
                f"widen bounds= in the fit, or choose a grid inside."
            )
        for side, has, bound in (("below", np.any(g < p[j]), lower[j]), ("above", np.any(g > p[j]), upper[j])):
            if not has and p[j] != bound:
                raise ValueError(
                    f"grid[{c!r}] has no value {side} the estimate {p[j]:.6g}: a profile needs both "
                    f"sides to give an interval."
                )
        grids[c] = g
    problem = fit_problem(estimator, fit, data, options, "the profile")  # checked before any refit
    if isinstance(estimator, (OutputError, Hybrid)):
        assert isinstance(fit, OutputErrorFit)  # check_fit: made by the estimator
        oe = problem.output_error if isinstance(estimator, Hybrid) else problem
        fits_u0 = (estimator.output_error if isinstance(estimator, Hybrid) else estimator).fits_u0(oe)
        unknowns = p.size + (fit.u0.size if fits_u0 else 0)
        n_obs = int(oe.n_observed)
        s2 = 2.0 * fit.objective / max(n_obs - unknowns, 1)
        factor = 2.0 if oe.counts else 2.0 / s2  # with counts: a likelihood, not least squares
    else:
        factor = 2.0
    threshold = float(scipy.stats.chi2.ppf(level, 1))
    out = {}
    for c, g in grids.items():
        j = names.index(c)
        below, above = np.flatnonzero(g < p[j])[::-1], np.flatnonzero(g >= p[j])  # outwards from p̂
        order = np.r_[below, above]
        restart = np.zeros(order.size, bool)
        restart[[0, below.size % order.size]] = True
        path = jax.device_get(
            _path(
                estimator,
                problem,
                jnp.asarray(p),
                jnp.asarray(j),
                jnp.asarray(g[order]),
                jnp.asarray(restart),
                jnp.asarray(lower),
                jnp.asarray(upper),
            )
        )
        back = np.argsort(order)
        sols = jax.tree_util.tree_map(lambda x, back=back: np.asarray(x)[back], path)
        status = np.asarray(status_names(sols.result))
        ok = np.isin(status, ("successful", "max_steps_reached"))
        stat = np.where(ok, factor * (np.asarray(sols.objective) - fit.objective), np.nan)
        centre = float(p[j])
        if np.nanmin(stat, initial=0.0) < -FLAT * threshold:  # refits below the fit: it stopped short of its optimum
            low = int(np.nanargmin(stat))
            warnings.warn(
                f"the profile of {c} goes below the fit's objective (statistic {stat[low]:.3g} at {c} = "
                f"{g[low]:.6g}): the fit stopped short of its optimum. The profile is re-centred on its "
                f"lowest point; refit from there (or with tighter tolerances) for a consistent estimate.",
                RuntimeWarning,
                stacklevel=user_stacklevel(),
            )
            centre, stat = float(g[low]), stat - stat[low]
        stat = np.maximum(stat, 0.0)  # refits a rounding error below the optimum
        ends = _crossings(g, stat, centre, threshold)
        on_bound = centre in (lower[j], upper[j])
        out[c] = Profile(
            name=c,
            estimate=float(p[j]),
            grid=g,
            statistic=stat,
            params=np.asarray(sols.params),
            status=status,
            level=level,
            threshold=threshold,
            interval=ends,
            verdict=_verdict(g, stat, centre, threshold, ends, on_bound),
            bounds=(float(lower[j]), float(upper[j])),
            centre=centre,
        )
    return out


def _crossings(g, stat, p, threshold) -> tuple[float, float]:
    """Where the statistic first exceeds `threshold` below and above p; ±inf on a side where
    it stays below to the end of the grid, NaN where a failed refit comes first. Its square
    root (the signed root of the likelihood ratio, about linear in the parameter near the
    optimum) is interpolated linearly between grid points, so that a coarse grid does not
    pull the ends in."""
    ends = []
    for side, open_end in ((g < p, -np.inf), (g > p, np.inf)):
        idx = np.flatnonzero(side)
        order = idx[np.argsort(np.abs(g[idx] - p))]  # outwards from the estimate
        prev_v, prev_s, end = p, 0.0, open_end
        for i in order:
            if np.isnan(stat[i]):
                end = np.nan
                break
            if stat[i] >= threshold:
                root, prev_root = np.sqrt(stat[i]), np.sqrt(prev_s)
                w = (np.sqrt(threshold) - prev_root) / (root - prev_root) if root > prev_root else 1.0
                end = prev_v + w * (g[i] - prev_v)
                break
            prev_v, prev_s = g[i], stat[i]
        ends.append(float(end))
    return ends[0], ends[1]


def _verdict(g, stat, p, threshold, ends, on_bound: bool) -> str:
    others = (g != p) & ~np.isnan(stat)
    if others.any() and np.mean(stat[others] < FLAT * threshold) >= 0.5:
        return "structurally non-identifiable"
    if np.isnan(ends).any():
        return "refits failed"
    if np.isinf(ends).any():
        return "on a bound" if on_bound and not (np.any(g < p) and np.any(g > p)) else "practically non-identifiable"
    return "identifiable"

"""Parametric bootstrap of a fit: datasets simulated from the fitted model with the fitted
noise model, refitted as compiled, sharded batches by the study engine."""

import dataclasses
import time
import warnings
from collections.abc import Callable, Sequence

import diffrax
import jax
import jax.numpy as jnp
import numpy as np
import scipy.stats
from jaxtyping import ArrayLike, PRNGKeyArray

from .._checks import as_count, as_key, as_level, as_ode_solver, as_sigma, user_stacklevel
from .._compile import cpu_safe_jit, resolve_vectorize
from .._derived import derived_names, derived_values
from .._progress import progress_bar
from .._results import status_names
from .._table import fixed_width
from ..data import Batch, Dataset, Trajectory, as_dataset
from ..estimators import AbstractEstimator, AbstractFit, Hybrid, OutputError, stack_problems
from ..noise import (
    NOISE_WIDTH,
    AbstractCountNoise,
    estimate_noise_std,
    noise_name,
    observable_noises,
    resolve_noise,
)
from ..simulate import integrate, solve
from ._engine import check_host_memory, check_processes, chunk_size, chunking, fit_batches
from ._fitcheck import check_data, check_fit, fit_options, fit_problem, fitted_u0, has_objective
from ._timings import timings_text

BLOCK_VALUES = 2**25  # data values (float64) of the refits drawn and built at once: 256 MB a copy


@dataclasses.dataclass(frozen=True)
class Bootstrap:
    """A parametric bootstrap of a fit ([`bootstrap`][wendyjax.studies.bootstrap]): the
    refitted estimates, the bias estimate and standard errors, and basic, bias-corrected
    normal, percentile and bias-corrected percentile intervals (Efron & Tibshirani 1993). Where the
    estimator is biased against its spread (the weak form at high noise or few samples) only
    the basic intervals, which subtract the bias, keep their level.

    - `estimate`: the fit's estimate $\\hat p$; `draws`: the `(B, j)` refitted estimates
      $p^*_b$, NaN where a refit did not succeed (`status`, one name per refit).
    - `u0`, `sigma`: the initial states `(R, D)` and the noise standard deviations `(D,)`
      (of the logarithm under log-normal noise) the datasets were simulated with; NaN for a
      state the data never observe, and for counts (their likelihood sets their variance).
    - `undetermined`: the parameters the fit's covariance does not determine (NaN standard
      errors) or determines only weakly together with others (a weak direction of
      `fit.identifiability()` combining two or more parameters: a ridge, e.g. parameters
      that enter only as a product): their refits only wander along the ridge from
      $\\hat p$, so their intervals are NaN rather than falsely tight (the profile follows
      the ridge: [`BootstrapOrProfile`][wendyjax.studies.BootstrapOrProfile] takes its
      interval there). A parameter weak on its own (e.g. an estimate near 0) keeps its
      interval: its refits are not on a ridge. A parameter with fewer than two successful
      refits also gets NaN.
    - `lower`, `upper`: the box the fit and the refits were held to (None: unbounded). The
      basic and normal intervals, which reflect or shift the draws, end at its bounds, as
      the profile's do; the percentile ones lie inside it already.
    - `seconds`, `timings`: the seconds in all and by stage: `initial_states_s` (the
      initial states the data are simulated from), `simulate_s` (the noiseless solutions
      and the noise draws), `build_s` (the refits' problems), `fit_s` (the refits),
      compilation included.
    """

    names: tuple[str, ...]
    estimate: np.ndarray
    draws: np.ndarray
    status: np.ndarray
    u0: np.ndarray
    sigma: np.ndarray
    noise: str
    seconds: float
    undetermined: tuple[str, ...] = ()
    lower: np.ndarray | None = None
    upper: np.ndarray | None = None
    timings: dict = dataclasses.field(default_factory=dict)

    @property
    def n_failed(self) -> int:
        """Refits that did not succeed (left out of every statistic)."""
        return int(np.sum(self.status != "successful"))

    @property
    def _usable(self) -> np.ndarray:
        """Per parameter: at least two successful refits and determined by the fit."""
        return (np.sum(~np.isnan(self.draws), axis=0) >= 2) & ~np.isin(self.names, self.undetermined)

    def _masked(self, x: ArrayLike) -> np.ndarray:
        return np.where(self._usable, x, np.nan)

    def _box(self) -> tuple[np.ndarray, np.ndarray]:
        shape = np.shape(self.estimate)
        return (
            np.full(shape, -np.inf) if self.lower is None else np.asarray(self.lower, float),
            np.full(shape, np.inf) if self.upper is None else np.asarray(self.upper, float),
        )

    def _in_box(self, lo: np.ndarray, hi: np.ndarray, level: float) -> tuple[np.ndarray, np.ndarray]:
        """Reflected or shifted intervals cut to the box (NaN stays NaN). At an estimate on a
        bound they would shrink onto it (the refits cannot cross it): there the interval is
        open to the bound and reaches at least the percentile interval's far end."""
        box_lo, box_hi = self._box()
        lo, hi = np.clip(lo, box_lo, box_hi), np.clip(hi, box_lo, box_hi)
        near = lambda b: np.isfinite(b) & (np.abs(self.estimate - b) <= 1e-6 * np.maximum(1.0, np.abs(b)))  # noqa: E731
        at_lo, at_hi = near(box_lo), near(box_hi)
        if at_lo.any() or at_hi.any():
            p_lo, p_hi = self._quantiles(level, None)
            lo = np.where(at_lo, box_lo, np.where(at_hi, np.fmin(lo, p_lo), lo))
            hi = np.where(at_hi, box_hi, np.where(at_lo, np.fmax(hi, p_hi), hi))
        return lo, hi

    def _quantiles(self, level: float, kind: str | None) -> tuple[np.ndarray, np.ndarray]:
        """The (1 ∓ level)/2 quantiles of p*, NaN (with a warning naming `kind`, if given)
        for parameters with too few successful refits to hold one draw beyond each."""
        a = _alpha(level)
        lo, hi = _nan_reduce(lambda x, axis: np.nanquantile(x, [a, 1 - a], axis=axis), self.draws)
        n = np.sum(~np.isnan(self.draws), axis=0)
        few = n < min_refits(level)
        if kind is not None and np.any(few & self._usable):
            warnings.warn(
                f"bootstrap {kind} intervals at level {level:g} need at least {min_refits(level)} "
                f"successful refits (one beyond each quantile); {', '.join(np.asarray(self.names)[few])} "
                f"have {int(n[few].max())} or fewer: NaN. Use normal() (Student's t, any B >= 2) or more "
                f"refits.",
                RuntimeWarning,
                stacklevel=user_stacklevel(),
            )
        return self._masked(np.where(few, np.nan, lo)), self._masked(np.where(few, np.nan, hi))

    @property
    def bias(self) -> np.ndarray:
        """The bootstrap bias estimate mean(p*) − p̂."""
        return self._masked(_nan_reduce(np.nanmean, self.draws) - self.estimate)

    @property
    def stderr(self) -> np.ndarray:
        """The standard deviation of the refitted estimates."""
        return self._masked(_nan_reduce(lambda x, axis: np.nanstd(x, axis=axis, ddof=1), self.draws))

    def derived(self, fn: Callable, names: "str | Sequence[str] | None" = None) -> "Bootstrap":
        """The bootstrap of quantities derived from the parameters, `fn(p)` → a number or a
        vector (a JAX function of the parameter vector, as for
        [`fit.derived`][wendyjax.estimators.AbstractFit.derived]): `fn` of the estimate and
        of every refit, with this bootstrap's interval methods (unbounded; a quantity that
        depends on an undetermined parameter is undetermined too)."""
        value, jac = derived_values(fn, self.estimate)
        names = derived_names(names, value.size)
        ok = ~np.isnan(self.draws).any(axis=1)
        draws = np.full((len(self.draws), value.size), np.nan)
        if ok.any():
            flat = jax.vmap(lambda q: jnp.atleast_1d(jnp.asarray(fn(q), float)))
            draws[ok] = np.asarray(flat(jnp.asarray(self.draws[ok])))
        draws[~np.isfinite(draws)] = np.nan
        weak = np.isin(self.names, self.undetermined)
        undetermined = tuple(n for n, row in zip(names, jac) if np.any(row[weak] != 0))
        return dataclasses.replace(
            self, names=names, estimate=value, draws=draws, undetermined=undetermined, lower=None, upper=None
        )

    def percentile(self, level: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
        """Percentile intervals: the (1 − level)/2 and (1 + level)/2 quantiles of p* (NaN,
        with a warning, with fewer than [`min_refits`][wendyjax.studies.min_refits]`(level)`
        successful refits: the quantiles of fewer draws cannot reach the level)."""
        return self._quantiles(level, "percentile")

    def basic(self, level: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
        r"""Basic (reverse percentile) intervals $[2\hat p - q_{(1+c)/2},\ 2\hat p - q_{(1-c)/2}]$,
        $q$ the quantiles of p*: they remove the estimator's bias to first order, which the
        percentile intervals inherit (the weak form's bias at high noise or few samples)."""
        lo, hi = self._quantiles(level, "basic")
        return self._in_box(2 * self.estimate - hi, 2 * self.estimate - lo, level)

    def normal(self, level: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
        r"""Bias-corrected normal intervals $\hat p - b \pm t_{B-1,(1+c)/2}\sqrt{1 + 1/B}\, s$,
        $b$ the bias estimate and $s$ the standard error of the $B$ successful refits p*:
        steadier than the quantile-based ones when B is small (the extreme quantiles of few
        draws lie inside the distribution's). Exact when the estimator is normal with a
        constant bias: the centre carries the Monte Carlo error of $b$ (variance $s^2/B$)
        and $s$ comes from $B$ draws, hence Student's $t$ and $\sqrt{1 + 1/B}$ rather
        than $z_{(1+c)/2}$, which would cover 0.936 at B = 30 and 0.948 at B = 200."""
        n = np.maximum(np.sum(~np.isnan(self.draws), axis=0), 2)
        half = scipy.stats.t.ppf(1 - _alpha(level), n - 1) * np.sqrt(1 + 1 / n) * self.stderr
        centre = self.estimate - self.bias
        return self._in_box(centre - half, centre + half, level)

    def bias_corrected(self, level: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
        """Bias-corrected percentile intervals (Efron 1982): the quantiles
        $\\Phi(2z_0 \\pm z_{(1+c)/2})$ of p*, $z_0 = \\Phi^{-1}(\\#\\{p^* < \\hat p\\}/B)$."""
        a = _alpha(level)
        ok = ~np.isnan(self.draws)
        n = np.maximum(ok.sum(axis=0), 1)
        usable = ~np.isnan(self._quantiles(level, "bias-corrected")[0])
        frac = np.clip(np.sum((self.draws < self.estimate) & ok, axis=0) / n, 0.5 / n, 1 - 0.5 / n)
        z0, z = scipy.stats.norm.ppf(frac), scipy.stats.norm.ppf(1 - a)
        lo_q, hi_q = scipy.stats.norm.cdf(2 * z0 - z), scipy.stats.norm.cdf(2 * z0 + z)
        lo = np.array([np.nanquantile(self.draws[:, j], lo_q[j]) if usable[j] else np.nan for j in range(len(n))])
        hi = np.array([np.nanquantile(self.draws[:, j], hi_q[j]) if usable[j] else np.nan for j in range(len(n))])
        return lo, hi

    def table(self, level: float = 0.95) -> str:
        """Estimate, bootstrap bias and standard error, basic and percentile intervals."""
        level = as_level(level)
        pct = f"{100 * level:g}%"
        (blo, bhi), (plo, phi) = self.basic(level), self.percentile(level)
        header = ["param", "estimate", "bias", "std err", f"{pct} basic lower", "upper", f"{pct} pct lower", "upper"]
        rows = [
            [n, *(f"{v: .6g}" for v in vals)]
            for n, *vals in zip(self.names, self.estimate, self.bias, self.stderr, blo, bhi, plo, phi)
        ]
        lines = fixed_width(header, rows)
        kinds = self.noise.split(", ")  # one per observable where they differ
        kinds = kinds if len(kinds) == len(self.sigma) else kinds * len(self.sigma)
        gauss = [k in ("gaussian", "lognormal") for k in kinds]
        shown = [
            ("not observed" if np.isnan(s) else f"{s:.3g}") if g else k for s, g, k in zip(self.sigma, gauss, kinds)
        ]
        sigma = f"σ = ({', '.join(shown)}), " if any(gauss) else ""
        head = (
            f"parametric bootstrap: {len(self.draws)} refits, {self.n_failed} failed, {self.noise} noise, "
            f"{sigma}{self.seconds:.1f} s"
        )
        if self.timings:
            head += "\n" + timings_text(self.timings)
        if self.undetermined:
            lines.append(
                f"note: the fit does not determine {', '.join(self.undetermined)} (no standard error, or only "
                f"weakly together): their refits only move along a flat direction from the estimate, so they "
                f"get no interval."
            )
        return "\n".join([head, *lines])

    def __str__(self) -> str:
        return self.table()


def _alpha(level: float) -> float:
    return (1 - as_level(level)) / 2


def min_refits(level: float) -> int:
    """The fewest successful refits whose quantile-based intervals (percentile, basic,
    bias-corrected) can have `level`: one draw beyond each (1 ∓ level)/2 quantile, 2/(1 − level)
    (40 at 95 %). Normal intervals (Student's t) need two."""
    return int(np.ceil(1 / _alpha(level) - 1e-9))


def _nan_reduce(reduce, draws: np.ndarray):
    """`reduce(draws, axis=0)` without numpy's warnings for columns with no successful refit
    (their result is NaN, which the callers mask)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return reduce(draws, axis=0)


@cpu_safe_jit
def _draws(keys, clean: tuple, sigma, logs, counts: tuple, p) -> tuple:
    """One noisy copy `(len(keys), n, K)` of every trajectory's noiseless observables `clean`
    per refit key: Gaussian noise of standard deviation `sigma`, multiplicative log-normal
    in the columns `logs`, and counts drawn by the likelihood `counts[k]` (at `p`) where it
    is not `None`. Trajectory r of the refit with key k uses `fold_in(k, r)`, so a refit's
    data do not depend on which other refits are drawn with it."""

    def one(c, r):
        def draw(key):
            key = jax.random.fold_in(key, r)
            z = jax.random.normal(key, c.shape, dtype=c.dtype)
            x = jnp.where(logs, c * jnp.exp(sigma * z), c + sigma * z)
            for k, n in enumerate(counts):
                if n is not None:
                    x = x.at[:, k].set(n.draw(c[:, k], p, jax.random.fold_in(key, k + 1)))
            return x

        return jax.vmap(draw)(keys)

    return tuple(one(c, r) for r, c in enumerate(clean))


def _blocks(n_boot: int, values: int) -> list[np.ndarray]:
    """The refits' indices in blocks whose data (`values` numbers per refit) take at most
    `BLOCK_VALUES` numbers: drawn, built and fitted one block at a time, so that memory
    does not grow with `n_boot`."""
    per_block = max(BLOCK_VALUES // max(values, 1), 1)
    return [np.arange(i, min(i + per_block, n_boot)) for i in range(0, n_boot, per_block)]


# a held fit's objective within this factor of the one the noise alone gives ends the search
# over starts: its initial states are at the noise level (the objective's relative spread
# there is √(2/n), under 0.07 from 400 observations)
NOISE_LEVEL_FIT = 1.25


def _initial_states(fit, data: Dataset, u0, ode_solver) -> np.ndarray:
    """`u0` given (one row per trajectory, or one for all), the fit's own (output error),
    or fitted by output error with the parameters held at the estimate: from the stages of
    `_starts` in turn, the best that succeeds, stopping at the first stage whose best fit
    is at the noise level (`_noise_objective`)."""
    d = fit.model.n_states
    if u0 is not None:
        u0 = np.asarray(u0, float)
        if u0.shape not in ((d,), (len(data), d)) or not np.all(np.isfinite(u0)):
            raise ValueError(f"u0 must have shape ({d},) or ({len(data)}, {d}) and be finite, got {u0.tolist()}.")
        return np.broadcast_to(u0, (len(data), d))
    if getattr(fit, "u0", None) is not None:
        return np.asarray(fit.u0, float)
    p = jnp.asarray(fit.params, float)
    oe = OutputError(ode_solver=ode_solver)
    level = _noise_objective(fit, data)
    stages = _starts(fit, data, ode_solver)
    if level == 0:  # no stage can end the search: every start in one call
        stages = [[s for stage in stages for s in stage]]
    best, best_u0 = np.inf, None
    for stage in stages:
        starts = [s for s in stage if fit.noise != "lognormal" or np.all(s > 0)]  # a fit on log states
        if not starts:
            continue
        problems = stack_problems([oe.problem(fit.model, data, noise=fit.noise, weighted=False, u0=s) for s in starts])
        sols = jax.device_get(_held_fits(oe, problems, p))
        objective = np.where(np.asarray(sols.successful), np.asarray(sols.objective), np.inf)
        if np.min(objective) < best:
            best, best_u0 = float(np.min(objective)), np.asarray(sols.extras["u0"][int(np.argmin(objective))], float)
        if best <= NOISE_LEVEL_FIT * level:
            break
    if best_u0 is not None:
        return best_u0
    raise ValueError(
        "the initial states could not be fitted with the parameters held at the estimate (output "
        "error from the first observations and from states solved back from later ones failed); "
        "pass u0=..."
    )


def _noise_objective(fit, data: Dataset) -> float:
    """The held fit's objective (half the sum of squared residuals) that the noise alone
    gives, from each state's noise estimate; 0 (no stage is at the noise level) unless
    the noise is Gaussian and every trajectory fully observed with enough samples for
    the estimate."""
    noise = fit.noise
    gaussian = not isinstance(noise, (list, tuple)) and noise_name(resolve_noise(fit.model, noise)) == "gaussian"
    if not gaussian or any(tr.mask is not None or len(tr.t) < NOISE_WIDTH for tr in data):
        return 0.0
    return sum(0.5 * len(tr.t) * float(np.sum(np.asarray(_noise_std(jnp.asarray(tr.u))) ** 2)) for tr in data)


_noise_std = cpu_safe_jit(estimate_noise_std)


@cpu_safe_jit
def _held_fits(estimator, problems, p):
    """Output-error fits of the initial states alone (the parameters held at `p`, a box of one
    point), one per stacked problem (each its own start), in one compiled call."""

    def one(problem):
        return estimator.solve(problem, p, p, p)

    return jax.vmap(one)(problems) if jax.default_backend() != "cpu" else jax.lax.map(one, problems)


def _starts(fit, data: Dataset, ode_solver):
    """Stages of starts for the initial states, cheapest first: the first observation; then
    the mean of the first three (a noisy first sample may lie where the model blows up,
    e.g. below 0) and the fitted model solved back to the first time from the observations
    an eighth and a quarter of the way along each trajectory (solved only when the first
    stage is not at the noise level: chaotic solves blow up backwards)."""
    first = [_first_observed(data, n) for n in (1, 3)]
    yield [s for s in first[:1] if s is not None]
    yield [s for s in first[1:] if s is not None] + [
        s for frac in (0.125, 0.25) if (s := _solved_back(fit, data, ode_solver, frac)) is not None
    ]


def _first_observed(data: Dataset, n: int):
    """The mean of every trajectory's first `n` observations of each state; None where a
    state is unobserved among them."""
    start = np.stack([np.nanmean(np.where(_observed(tr), tr.u, np.nan)[:n], axis=0) for tr in data])
    return start if np.all(np.isfinite(start)) else None


def _solved_back(fit, data: Dataset, ode_solver, frac: float):
    """The fitted model solved back to the first time from the observation `frac` of the
    way along each trajectory's fully observed samples; None where that fails."""
    rows = []
    for tr in data:
        t, full = np.asarray(tr.t), np.flatnonzero(_observed(tr).all(axis=1))
        if full.size == 0 or (k := full[int(frac * (full.size - 1))]) == 0:
            return None
        # backwards in time with the model's own right-hand side, so the compiled solve
        # is reused across calls
        ys = integrate(
            fit.model.rhs,
            jnp.asarray(fit.params, float),
            np.asarray(tr.u)[k],
            t[[k, 0]],
            solver=ode_solver,
            rtol=1e-8,
            atol=1e-8,
            max_steps=10_000,
        )
        if not np.all(np.isfinite(ys)):  # the backward solve blew up
            return None
        rows.append(ys[-1])
    return np.stack(rows)


def _ridges(fit: AbstractFit) -> tuple[tuple[str, ...], dict[str, list[str]]]:
    """The parameters a bootstrap cannot give intervals for: those without a standard error
    and those in a weak direction of two or more parameters (a ridge), with the others on
    each one's ridge."""
    if fit.covariance is None:
        return (), {}
    report = fit.identifiability()
    ridges: dict[str, list[str]] = {}
    for _, weights in report.weak:
        if len(weights) >= 2:
            for n in weights:
                others = ridges.setdefault(n, [])
                others += [m for m in weights if m != n and m not in others]
    names = [n for n in fit.model.param_names if n in report.undetermined or n in ridges]
    return tuple(names), {n: v for n, v in ridges.items() if n not in report.undetermined}


def _observed(tr: Trajectory) -> np.ndarray:
    return np.ones(tr.u.shape, bool) if tr.mask is None else np.asarray(tr.mask)


def _own_ode_solver(estimator: AbstractEstimator) -> diffrax.AbstractSolver:
    """The ODE solver `estimator` fits with (output error's, the hybrid's output-error
    stage's), else Tsit5."""
    if isinstance(estimator, Hybrid):
        estimator = estimator.output_error
    return estimator.ode_solver if isinstance(estimator, OutputError) else diffrax.Tsit5()


def bootstrap(
    estimator: AbstractEstimator,
    fit: AbstractFit,
    data,
    n_boot: int = 200,
    *,
    key: PRNGKeyArray | int,
    u0=None,
    ode_solver: diffrax.AbstractSolver | None = None,
    batch_size: "int | str" = "auto",
    devices=None,
    vectorize: bool | str = "auto",
    progress: bool = True,
    **options,
) -> Bootstrap:
    """Parametric bootstrap of `fit` (`estimator`'s fit of an `ODEModel` to `data`).

    The fitted model is solved forward at $\\hat p$ from the initial states — `u0` if
    given, else the fit's own (output error and the hybrid fit them), else those that
    output error fits with the parameters held at $\\hat p$ (started from the mean of the
    first three observations, and where that fit is not at the noise level also from the
    first observation and from states solved back from later ones) — on the data's time grid,
    by `ode_solver` (default: the estimator's own, as output error and the hybrid have one,
    else Tsit5; a stiff model needs an implicit one, e.g. `diffrax.Kvaerno5()`). The
    noise standard deviation per state is the fit's `sigma` where it was given (a known noise
    level), else the root mean square of the data's residuals from that solution (of their
    logarithms under log-normal noise). `n_boot` datasets are
    drawn from that noise model, with the data's missing entries left missing, and refitted
    by `estimator` from $\\hat p$ (with `options`, e.g. `test_functions`; the fit's noise
    model; output error's initial states from those the data were simulated from), in
    compiled chunks of `batch_size` sharded over `devices` like a study
    ([`monte_carlo`][wendyjax.studies.monte_carlo]). The data are drawn and built in blocks
    of refits (each refit from its own key), so memory does not grow with `n_boot`. Failed
    refits are counted in the result's `status` and left out of its statistics.
    """
    check_fit(estimator, fit, "the bootstrap")
    n_boot = as_count("n_boot", n_boot, 2)
    if ode_solver is None:
        ode_solver = _own_ode_solver(estimator)
    as_ode_solver("ode_solver", ode_solver)
    if not (isinstance(batch_size, str) and batch_size == "auto"):
        batch_size = as_count("batch_size", batch_size, 1)
    options = fit_options(estimator, fit, options, "the bootstrap")
    key = as_key(key)
    data = as_dataset(data)
    model, p = fit.model, np.asarray(fit.params, float)
    observe = options.get("observe")
    if observe is None and data.n_states != model.n_states:
        raise ValueError(f"data have {data.n_states} states but model '{model.name}' has {model.n_states}.")
    check_data(fit, data, "the bootstrap")
    # the refits' data are drawn block by block (`BLOCK_VALUES`); what every refit keeps is its
    # key, its solution (parameters, status, steps, the solver's extras) and its draw
    check_host_memory(
        n_boot,
        4 * p.size + 16,
        f"a bootstrap of {n_boot} refits",
        "use fewer refits (the Monte Carlo error of a quantile falls as 1/√B: B = 200 to 2,000 is "
        "plenty for intervals).",
    )
    if (fit.options is None or fit.data_fingerprint is None) and has_objective(estimator):
        fit_problem(estimator, fit, data, options, "the bootstrap")  # nothing recorded to check the data against
    devices = list(jax.devices() if devices is None else devices)
    check_processes(devices)
    vectorize = resolve_vectorize(vectorize, devices)
    timings = {"initial_states_s": 0.0, "simulate_s": 0.0, "build_s": 0.0, "fit_s": 0.0}
    clock = time.perf_counter()
    # each observable's noise model, as the fit had them (objects for counts)
    noises = observable_noises(model, options.get("noise", fit.noise), data.n_states)
    logs = np.array([n == "lognormal" for n in noises])
    counts = tuple(n if isinstance(n, AbstractCountNoise) else None for n in noises)
    counting = np.array([n is not None for n in counts])
    u0s = _initial_states(fit, data, u0, ode_solver)
    timings["initial_states_s"] = time.perf_counter() - clock
    start = time.perf_counter()
    clean, masks = [], []
    for r, (tr, x0) in enumerate(zip(data, u0s)):
        try:
            c = np.asarray(solve(model, p, x0, tr.t, solver=ode_solver))
        except RuntimeError as error:
            raise RuntimeError(
                f"the bootstrap cannot simulate data from the fit with ode_solver={type(ode_solver).__name__}(): "
                f"{error} (The bootstrap's argument is ode_solver=, e.g. ode_solver=diffrax.Kvaerno5().)"
            ) from None
        if observe is not None:  # what the data's columns measure
            c = np.asarray(jax.vmap(observe, in_axes=(0, None, 0))(jnp.asarray(c), jnp.asarray(p), jnp.asarray(tr.t)))
        m = _observed(tr)
        if not np.all(np.isfinite(c[m])) or np.any(((c <= 0) & logs | (c < 0) & counting) & m):
            raise ValueError(
                f"the fitted model solved forward from u0 = {x0} is not finite"
                f"{' and positive' * bool(logs.any() or counting.any())} on trajectory {r}'s grid: it "
                f"cannot generate bootstrap data."
            )
        clean.append(c)
        masks.append(m)
    count = np.sum([m.sum(axis=0) for m in masks], axis=0)
    resid = [
        np.where(
            m, np.where(logs, np.log(np.where(m & logs, tr.u, 1.0)) - np.log(np.where(m & logs, c, 1.0)), tr.u - c), 0.0
        )
        for tr, c, m in zip(data, clean, masks)
    ]
    squares = sum(np.sum(r**2, axis=0) for r in resid)
    sigma = np.sqrt(np.divide(squares, count, out=np.full(count.shape, np.nan), where=count > 0))  # NaN: unobserved
    if options.get("sigma") is not None and options.get("weighted", True):  # a known noise level: the fit's own
        sigma = as_sigma(options["sigma"], sigma.size, zero_ok=False)
    sigma = np.where(counting, np.nan, sigma)  # counts: their likelihood's own variance
    clean = tuple(jnp.asarray(c) for c in clean)
    timings["simulate_s"] = time.perf_counter() - start
    own = {"noise": options.get("noise", fit.noise)}  # the fit's noise; output error starts from the true u0
    if fitted_u0(estimator, fit, options) is not None:
        own["u0"] = u0s
    options = {**options, **{k: v for k, v in own.items() if k in estimator.options()}}
    lower = np.full(p.shape, -np.inf) if fit.lower is None else np.asarray(fit.lower, float)
    upper = np.full(p.shape, np.inf) if fit.upper is None else np.asarray(fit.upper, float)
    keys = jax.random.split(key, n_boot)  # one per refit: its data do not depend on the blocks
    blocks, size, bar, sols = _blocks(n_boot, sum(tr.u.size for tr in data)), None, None, []
    for block in blocks:
        start = time.perf_counter()
        noisy = jax.device_get(
            _draws(keys[block], clean, jnp.asarray(sigma), jnp.asarray(logs), counts, jnp.asarray(p))
        )
        # the block's data: the draws (b, n, D) per trajectory, the data's missing entries left missing
        batch = Batch(
            tuple(np.asarray(tr.t) for tr in data),
            tuple(np.where(m, x, np.nan) for x, m in zip(noisy, masks)),
            tuple(None if tr.mask is None else m for tr, m in zip(data, masks)),
        )
        built = time.perf_counter()
        timings["simulate_s"] += built - start
        make, _ = estimator.batch_problems(model, batch, **options)
        timings["build_s"] += time.perf_counter() - built
        if size is None:
            size = chunk_size(batch_size, make, n_boot, devices)
            bar = progress_bar(
                total=sum(chunking(len(b), size, len(devices))[0] for b in blocks),
                desc=f"{model.name} bootstrap",
                unit="chunk",
                disable=not progress or jax.process_index() != 0,
            )
        sol, _, _, _ = fit_batches(
            estimator,
            model,
            make,
            np.broadcast_to(p, (len(block), p.size)),
            (lower, upper),
            batch_size=chunking(len(block), size, len(devices))[1],
            devices=devices,
            vectorize=vectorize,
            bar=bar,
            timings=timings,
        )
        sols.append(sol)
    assert bar is not None  # made with the first block
    bar.close()
    sols = jax.tree_util.tree_map(lambda *x: np.concatenate(x), *sols)
    status = status_names(sols.result)
    draws = np.where((status == "successful")[:, None], np.asarray(sols.params, float), np.nan)
    undetermined, ridges = _ridges(fit)
    timings["total_s"] = time.perf_counter() - clock
    result = Bootstrap(
        names=tuple(model.param_names),
        estimate=p,
        draws=draws,
        status=np.asarray(status),
        u0=u0s,
        sigma=sigma,
        noise=fit.noise or "gaussian",
        seconds=timings["total_s"],
        undetermined=undetermined,
        lower=lower,
        upper=upper,
        timings=timings,
    )
    stack = user_stacklevel()
    if undetermined:
        why = ", ".join(
            f"{n} ({'only weakly, with ' + ', '.join(ridges[n]) if n in ridges else 'no standard error'})"
            for n in undetermined
        )
        warnings.warn(
            f"bootstrap of {fit.title}: the fit does not determine {why}; their refits stay near the "
            f"estimate along a flat direction, so they get NaN intervals, not falsely tight ones (their "
            f"profiles, or BootstrapOrProfile, follow the flat direction).",
            RuntimeWarning,
            stacklevel=stack,
        )
    if result.n_failed > 0.1 * n_boot:
        warnings.warn(
            f"bootstrap of {fit.title}: {result.n_failed} of {n_boot} refits failed; the intervals come from "
            f"the others only and may be too narrow (the failures are often the far draws).",
            RuntimeWarning,
            stacklevel=stack,
        )
    return result

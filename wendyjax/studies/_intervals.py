"""Interval methods: what a study computes per run, and what a user calls on one fit."""

import abc
import time
import warnings

import diffrax
import equinox as eqx
import numpy as np
from jaxtyping import PRNGKeyArray

from .._checks import as_count, as_level, as_ode_solver, as_ratio
from ..estimators import AbstractEstimator, AbstractFit
from ._bootstrap import Bootstrap, bootstrap, min_refits
from ._fitcheck import fit_options
from ._profile import Profile, check_profiled, profile


class AbstractIntervals(eqx.Module):
    """A way of turning a fit into confidence intervals: [`Wald`][], [`BootstrapIntervals`][],
    [`ProfileIntervals`][] or [`BootstrapOrProfile`][] (the recommended one). Pass several to a study
    ([`monte_carlo`][wendyjax.studies.monte_carlo]`(..., intervals=...)`) to measure each
    one's coverage and width, or call one on a fit:
    `lower, upper = method(estimator, fit, data, level=0.95, key=0)`."""

    @property
    @abc.abstractmethod
    def name(self) -> str:
        """The method's name in a study's rows and table (e.g. "hessian", "bootstrap_basic")."""

    def check(self, estimator: AbstractEstimator) -> None:
        """Raise a clear error (before a study's work) if the method cannot serve `estimator`."""

    def check_level(self, level: float) -> None:
        """Raise a clear error (before any work) if the method cannot give intervals of `level`."""

    def share(self) -> tuple:
        """Methods with the same `share()` compute the same thing first (e.g. one bootstrap
        of B refits gives basic and normal intervals): a study computes it once per run."""
        return (self,)

    def parts(self) -> tuple["AbstractIntervals", ...]:
        """The methods whose computations `ends` reads (each shared with the study's other
        methods); `()` where the method computes its own."""
        return ()

    def simulating_with(self, ode_solver: diffrax.AbstractSolver) -> "AbstractIntervals":
        """The method with `ode_solver` for data it simulates where it was left to the caller
        (a study passes its benchmark's solver)."""
        return self

    @abc.abstractmethod
    def compute(
        self, estimator: AbstractEstimator, fit: AbstractFit, data, level: float, key: PRNGKeyArray | int, **options
    ):
        """What the intervals are read from (a bootstrap, the profiles), with the fit's
        problem `options` (the fit's own when left out)."""

    @abc.abstractmethod
    def ends(self, computed, level: float) -> tuple[np.ndarray, np.ndarray]:
        """(lower, upper) per parameter from `compute`'s result; ±inf on a side left open."""

    def __call__(
        self,
        estimator: AbstractEstimator,
        fit: AbstractFit,
        data,
        *,
        level: float = 0.95,
        key: PRNGKeyArray | int = 0,
        **options,
    ) -> tuple[np.ndarray, np.ndarray]:
        """(lower, upper) per parameter at `level`; ±inf on a side the method leaves open.
        `options` are the estimator's problem options (e.g. `sigma`, `u0`): a fit made by
        `estimator.fit` reuses its own, which they may repeat but not change."""
        level = as_level(level)
        self.check(estimator)
        self.check_level(level)
        return self.ends(self.compute(estimator, fit, data, level, key, **options), level)


class Wald(AbstractIntervals):
    r"""Normal intervals $\hat p \pm z\,\mathrm{se}$ from one of the estimator's covariances:
    "sandwich" or "hessian" (WENDy), "gauss_newton" (output error, hybrid); `None` is the
    fit's own (in a study: the study's `covariance`)."""

    covariance: str | None = None

    def __check_init__(self):
        if not (self.covariance is None or isinstance(self.covariance, str)):
            raise TypeError(
                f"covariance must be the name of a covariance (e.g. 'hessian') or None, got {self.covariance!r}."
            )

    @property
    def name(self) -> str:
        return self.covariance or "wald"

    def kind(self, estimator: AbstractEstimator, default: str | None = None) -> str:
        """The covariance this method uses with `estimator` (checked); `default` for `None`
        (else the estimator's default)."""
        if not estimator.covariances:
            raise ValueError(
                f"{type(estimator).__name__} has no covariance: Wald intervals need one; use BootstrapIntervals."
            )
        kind = self.covariance or default or estimator.covariances[0]
        if kind not in estimator.covariances:
            raise ValueError(
                f"Wald(covariance={kind!r}) is not one of {type(estimator).__name__}'s covariances "
                f"{estimator.covariances}."
            )
        return kind

    def check(self, estimator):
        self.kind(estimator)

    def compute(self, estimator, fit, data, level, key, **options):
        fit_options(estimator, fit, options, "Wald intervals")  # they read the fit: options can only repeat its own
        kind = self.kind(estimator, fit.covariance_method)
        if not fit.successful:
            raise ValueError(f"the fit did not succeed ({fit.status_name}): its covariance gives no interval.")
        if fit.covariance_method != kind:
            raise ValueError(
                f"the fit's covariance is {fit.covariance_method!r}; refit with covariance={kind!r} for "
                f"Wald({kind!r}) intervals."
            )
        return fit

    def ends(self, computed, level):
        return computed.ci(level)


_KINDS = ("basic", "normal", "percentile", "bias_corrected")


class BootstrapIntervals(AbstractIntervals):
    """Parametric-bootstrap intervals ([`bootstrap`][wendyjax.studies.bootstrap]) of `n_boot`
    refits: `kind` "basic" (the default: it subtracts the bootstrap's bias estimate),
    "normal" (bias-corrected, with the bootstrap's standard error), "percentile" or
    "bias_corrected" (the methods of [`Bootstrap`][wendyjax.studies.Bootstrap]). `ode_solver`
    simulates the data (`None`: the estimator's own, else Tsit5; in a study the benchmark's
    solver)."""

    n_boot: int = 200
    kind: str = "basic"
    batch_size: int = 64
    ode_solver: diffrax.AbstractSolver | None = None

    def __check_init__(self):
        as_count("n_boot", self.n_boot, 2)
        as_count("batch_size", self.batch_size, 1)
        if self.ode_solver is not None:
            as_ode_solver("ode_solver", self.ode_solver)
        if self.kind not in _KINDS:
            raise ValueError(f"kind must be one of {', '.join(map(repr, _KINDS))}, got {self.kind!r}.")

    @property
    def name(self) -> str:
        return f"bootstrap_{self.kind}"

    def check_level(self, level):
        if self.kind != "normal" and self.n_boot < min_refits(level):
            raise ValueError(
                f"BootstrapIntervals(n_boot={self.n_boot}, kind={self.kind!r}) cannot give {level:g} "
                f"intervals: its quantiles need n_boot >= {min_refits(level)} (one refit beyond each); "
                f"use kind='normal' (Student's t, any n_boot >= 2) or more refits."
            )

    def share(self):
        return ("bootstrap", self.n_boot, self.batch_size, self.ode_solver)

    def simulating_with(self, ode_solver):
        return (
            self
            if self.ode_solver is not None
            else eqx.tree_at(lambda m: m.ode_solver, self, ode_solver, is_leaf=lambda x: x is None)
        )

    def compute(self, estimator, fit, data, level, key, **options):
        return bootstrap(
            estimator,
            fit,
            data,
            self.n_boot,
            key=key,
            batch_size=self.batch_size,
            progress=False,
            ode_solver=self.ode_solver,
            **options,
        )

    def ends(self, computed, level):
        return getattr(computed, self.kind)(level)


class ProfileIntervals(AbstractIntervals):
    """Profile-likelihood intervals ([`profile`][wendyjax.studies.profile]) on `n_points`
    values ± `width` standard errors around the estimate. A side where the profile stays
    below the threshold to the end of the grid is open: it ends at the box's bound (the
    confidence set within the parameters the fit allows), ±inf without one."""

    n_points: int = 21
    width: float = 4.0

    def __check_init__(self):
        as_count("n_points", self.n_points, 3)
        as_ratio("width", self.width)

    def check(self, estimator):
        check_profiled(estimator)

    @property
    def name(self) -> str:
        return "profile"

    def compute(self, estimator, fit, data, level, key, **options):
        return profile(estimator, fit, data, n_points=self.n_points, width=self.width, level=level, **options)

    def ends(self, computed, level):
        lo = np.array([p.interval[0] for p in computed.values()])
        hi = np.array([p.interval[1] for p in computed.values()])
        box_lo = np.array([p.bounds[0] for p in computed.values()])
        box_hi = np.array([p.bounds[1] for p in computed.values()])
        return (np.where(np.isnan(lo) | np.isinf(lo), box_lo, lo), np.where(np.isnan(hi) | np.isinf(hi), box_hi, hi))


#: the profile verdicts under which `BootstrapOrProfile` takes the profile's interval
_NOT_LOCAL = ("practically non-identifiable", "structurally non-identifiable", "on a bound")


class BootstrapOrProfile(AbstractIntervals):
    """The recommended intervals: per parameter, `bootstrap`'s interval (by default the
    bias-corrected normal one of 200 refits) where the profile likelihood says the data
    determine the parameter, and `profile`'s where they do not (its verdict "practically"
    or "structurally non-identifiable", or the estimate "on a bound").

    The bootstrap's interval removes the weak form's bias, which the profile's and the
    Wald intervals keep; but it is local: where the likelihood stays flat to the box's
    bound on one side, or the estimate sits on it, refits from near the estimate cannot
    reach the truth's side, and the profile's interval, open to the bound, is the honest
    one. Also the profile's where the bootstrap gives none (a parameter the fit's
    covariance does not determine).

    `method(estimator, fit, data, key=0)` computes both; `method.ends((boot, profiles), level)`
    combines a [`bootstrap`][wendyjax.studies.bootstrap] of `n_boot` refits and the
    [`profile`][wendyjax.studies.profile]s at `level` of one fit, already made, without refitting."""

    bootstrap: BootstrapIntervals = BootstrapIntervals(200, kind="normal")
    profile: ProfileIntervals = ProfileIntervals()

    def __check_init__(self):
        if not isinstance(self.bootstrap, BootstrapIntervals) or not isinstance(self.profile, ProfileIntervals):
            raise TypeError(
                f"BootstrapOrProfile(bootstrap=BootstrapIntervals(...), profile=ProfileIntervals(...)), "
                f"got {self.bootstrap!r}, {self.profile!r}."
            )

    @property
    def name(self) -> str:
        return "bootstrap_or_profile"

    def check(self, estimator):
        self.bootstrap.check(estimator)
        self.profile.check(estimator)

    def check_level(self, level):
        self.bootstrap.check_level(level)

    def parts(self):
        return (self.bootstrap, self.profile)

    def simulating_with(self, ode_solver):
        return eqx.tree_at(lambda m: m.bootstrap, self, self.bootstrap.simulating_with(ode_solver))

    def compute(self, estimator, fit, data, level, key, **options) -> tuple[Bootstrap, dict[str, Profile]]:
        return (
            self.bootstrap.compute(estimator, fit, data, level, key, **options),
            self.profile.compute(estimator, fit, data, level, key, **options),
        )

    def ends(self, computed, level):
        boot, prof = self._parts_of_one_fit(computed, level)
        b_lo, b_hi = self.bootstrap.ends(boot, level)
        p_lo, p_hi = self.profile.ends(prof, level)
        use = np.array([p.verdict in _NOT_LOCAL for p in prof.values()]) | np.isnan(b_lo) | np.isnan(b_hi)
        return np.where(use, p_lo, b_lo), np.where(use, p_hi, b_hi)

    def _parts_of_one_fit(self, computed, level) -> tuple[Bootstrap, dict[str, Profile]]:
        """`computed` checked: a bootstrap of `n_boot` refits and a profile at `level` of each of
        its parameters, of the same estimate; the profiles in the bootstrap's order."""
        usage = "BootstrapOrProfile().ends((wj.studies.bootstrap(...), wj.studies.profile(...)), level)"
        if not (isinstance(computed, tuple) and len(computed) == 2 and isinstance(computed[0], Bootstrap)):
            raise TypeError(f"{usage}: got {type(computed).__name__} where a (Bootstrap, profiles) pair belongs.")
        boot, prof = computed
        if not isinstance(prof, dict) or not all(isinstance(p, Profile) for p in prof.values()):
            raise TypeError(f"{usage}: the second is not profile's {{name: Profile}}, got {type(prof).__name__}.")
        missing = [n for n in boot.names if n not in prof]
        if missing:
            raise ValueError(f"BootstrapOrProfile: no profile of {missing}; profile every parameter of the fit.")
        prof = {n: prof[n] for n in boot.names}
        estimate = np.array([p.estimate for p in prof.values()])
        if not np.allclose(estimate, boot.estimate, rtol=1e-12, atol=0):
            raise ValueError(
                f"BootstrapOrProfile: the bootstrap's estimate {boot.estimate} is not the profiles' {estimate}: "
                f"they are of different fits."
            )
        levels = sorted({p.level for p in prof.values()})
        if levels != [level]:
            raise ValueError(
                f"BootstrapOrProfile: the profiles' intervals are at level {levels}, not {level}: profile with "
                f"level={level}, or ask for the profiles' level."
            )
        if len(boot.draws) != self.bootstrap.n_boot:
            raise ValueError(
                f"BootstrapOrProfile: the bootstrap has {len(boot.draws)} refits and this method "
                f"{self.bootstrap.n_boot}: use BootstrapOrProfile(bootstrap=BootstrapIntervals({len(boot.draws)}, "
                f"kind={self.bootstrap.kind!r}))."
            )
        return boot, prof


def as_interval_methods(
    intervals, estimator: AbstractEstimator, covariance: str | None, level: float
) -> tuple[AbstractIntervals, ...]:
    """`intervals` checked: a sequence of interval methods with distinct names that
    `estimator` supports at `level` (`Wald()` named by the study's `covariance`)."""
    example = "wj.studies.Wald('hessian'), wj.studies.BootstrapIntervals(200), wj.studies.ProfileIntervals()"
    if isinstance(intervals, AbstractIntervals) or not isinstance(intervals, (list, tuple)):
        raise TypeError(f"intervals must be a list or tuple of interval methods (e.g. ({example})), got {intervals!r}.")
    methods = []
    for m in intervals:
        if not isinstance(m, AbstractIntervals):
            raise TypeError(f"intervals must be interval methods ({example}), got {m!r}.")
        m.check(estimator)
        m.check_level(level)
        methods.append(Wald(m.kind(estimator, covariance)) if isinstance(m, Wald) else m)
    names = [m.name for m in methods]
    if len(set(names)) < len(names):
        raise ValueError(
            f"intervals has two methods of the same name: {names} (one study compares one bootstrap "
            f"size: run a study per size)."
        )
    return tuple(methods)


def run_intervals(methods, estimator, fit, data, level, key) -> tuple[dict, dict, dict]:
    """`methods` on one run of a study, each shared computation done once: `({name: (lower,
    upper)}, {name: seconds}, {name: why})`, NaN intervals where they cannot be computed (a
    failed refit of the run, a bootstrap whose data cannot be generated: `why` says so), so
    that the study goes on. A method's seconds are those of the computations it reads, as if
    it ran alone."""
    j = np.size(fit.params)
    ends, seconds, done, errors = {}, {}, {}, {}

    def computed(m):  # (result or the error it raised, seconds), once per share()
        if m.share() not in done:
            clock = time.perf_counter()
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    out = m.compute(estimator, fit, data, level, key)
            except (ValueError, RuntimeError) as e:
                out = e
            done[m.share()] = (out, time.perf_counter() - clock)
        return done[m.share()]

    for m in methods:
        lo = hi = np.full(j, np.nan)
        seconds[m.name] = 0.0
        if not fit.successful:
            errors[m.name] = f"the refit of the run's data from its estimate did not succeed ({fit.status_name})"
        else:
            results, spent = zip(*map(computed, m.parts() or (m,)))
            seconds[m.name] = sum(spent)
            failed = [r for r in results if isinstance(r, Exception)]
            if failed:
                errors[m.name] = str(failed[0])
            else:
                lo, hi = m.ends(results if m.parts() else results[0], level)
        ends[m.name] = np.stack([np.asarray(lo, float), np.asarray(hi, float)])
    return ends, seconds, errors

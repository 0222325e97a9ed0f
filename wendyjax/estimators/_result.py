"""Results of fits: estimate, uncertainty, diagnostics, and a readable summary."""

import abc
import dataclasses
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

import diffrax
import numpy as np

from .._derived import derived_names
from .._results import RESULTS, status_names
from .._table import fixed_width
from ..inference import (
    Derived,
    confidence_intervals,
    delta_method,
    forward_simulation_error,
    weak_directions,
)
from ..noise import noise_name
from ..simulate import solve
from ..weak import TestFunctionInfo, WeakLikelihood


class StatusMixin:
    """`successful` and `message` of a result with a `status` (a `RESULTS` item)."""

    status: RESULTS

    @property
    def successful(self) -> bool:
        return bool(self.status == RESULTS.successful)

    @property
    def message(self) -> str:
        return RESULTS[self.status]

    @property
    def status_name(self) -> str:
        """The status's name ("successful", "max_steps_reached", …)."""
        return str(status_names(self.status))


#: what a fit's Wald intervals assume, by covariance (for the summary of fits that have
#: profiles and a bootstrap: WENDy, output error, hybrid)
_WALD_CAVEAT = {
    "sandwich": "the sandwich covariance (Rummel et al. 2025, eq. 9): conservative, wider than the estimates' spread",
    "hessian": "the inverse Hessian: local, they keep the weak form's bias at high noise",
    "gauss_newton": "the Gauss–Newton covariance: local, linearised at the estimate",
}


@dataclasses.dataclass(frozen=True)
class Identifiability:
    """A fit's identifiability from its local curvature ([`AbstractFit.identifiability`][]):
    `correlation` of the estimates (NaN rows for `undetermined` parameters), `undetermined`
    the parameters without a standard error (structurally non-identifiable from these data:
    the Jacobian or Hessian is singular along them), `weak` the combinations whose 95 %
    interval contains 0 as `(relative standard error, {name: weight})` (practically
    non-identifiable), `at_bound` the estimates on a bound of the box."""

    names: tuple[str, ...]
    correlation: np.ndarray
    undetermined: tuple[str, ...]
    weak: tuple[tuple[float, dict[str, float]], ...]
    at_bound: tuple[str, ...]

    @property
    def ok(self) -> bool:
        """Nothing undetermined, weak or on a bound."""
        return not (self.undetermined or self.weak or self.at_bound)

    def __str__(self) -> str:
        width = max(len(n) for n in self.names)
        lines = ["correlation of the estimates:", " " * width + "".join(f"{n:>9s}" for n in self.names)]
        lines += [f"{n:<{width}s}" + "".join(f"{v:9.3f}" for v in row) for n, row in zip(self.names, self.correlation)]
        lines.append(f"undetermined (no standard error): {', '.join(self.undetermined) or 'none'}")
        lines.append(
            "weakly determined (95 % interval contains 0): "
            + (
                "; ".join(
                    f"{' '.join(f'{w:+.2f}·{n}' for n, w in ws.items())} (relative standard error {rel:.3g})"
                    for rel, ws in self.weak
                )
                or "none"
            )
        )
        lines.append(f"on a bound of the box: {', '.join(self.at_bound) or 'none'}")
        return "\n".join(lines)


@dataclasses.dataclass(frozen=True, repr=False)
class AbstractFit(StatusMixin, abc.ABC):
    """What every fit result has (plain NumPy arrays): `params`, their `covariance`
    (`covariance_method`), the start `p0`, `num_steps`, `status` (a `RESULTS` item,
    `message` its text, `successful`), `method`, the `objective` at the estimate, the
    `noise` model fitted, the wall-clock `seconds` of the solve (compilation included),
    the box `lower`, `upper` the fit was held to (`None` without a parameter vector), and
    what `fit` was given: the estimator's `options` (e.g. `sigma`, `test_functions`) and
    the `data_fingerprint` (a digest of the data's times, values and missing entries), so
    that a bootstrap or profile of the fit rebuilds the same problem (`None` for a fit not
    made by `estimator.fit`)."""

    model: Any  # an ODEModel; a library or a neural field (integral matching, discovery), a LinearODE (Data2LD)
    params: np.ndarray
    covariance: np.ndarray | None
    covariance_method: str | None
    p0: np.ndarray
    num_steps: int
    status: RESULTS
    method: str
    objective: float
    noise: str | None
    seconds: float
    lower: np.ndarray | None = dataclasses.field(default=None, kw_only=True)
    upper: np.ndarray | None = dataclasses.field(default=None, kw_only=True)
    options: dict | None = dataclasses.field(default=None, kw_only=True, compare=False)
    data_fingerprint: str | None = dataclasses.field(default=None, kw_only=True, compare=False)
    #: the summary points at `wj.studies.BootstrapOrProfile` (fits that have profiles and a bootstrap)
    _calibrated_elsewhere: ClassVar[bool] = False

    @classmethod
    @abc.abstractmethod
    def from_solution(cls, estimator, model, problem, p0, solution, covariance, kind: str, seconds: float):
        """The result of `estimator.solve(problem, p0, ...)` and its covariance."""

    @classmethod
    def _common(cls, estimator, model, p0, solution, covariance, kind, seconds, noise) -> dict:
        return dict(
            model=model,
            params=np.asarray(solution.params),
            covariance=covariance,
            covariance_method=kind,
            p0=np.asarray(p0, float),
            num_steps=int(solution.num_steps),
            status=solution.result,
            method=estimator.method,
            objective=float(solution.objective),
            noise=noise,
            seconds=seconds,
        )

    @property
    @abc.abstractmethod
    def title(self) -> str:
        """What was fitted, e.g. "WENDy-MLE" (for messages)."""

    @property
    def model_name(self) -> str:
        """The fitted model's name."""
        return self.model.name

    @property
    def start_text(self) -> str:
        """The start `p0` as text (for messages)."""
        return str(np.asarray(self.p0).tolist())

    def stuck_hint(self) -> str:
        """What else to check when a fit fails without leaving its start ("" if nothing)."""
        return ""

    @property
    def stderr(self) -> np.ndarray:
        """Standard errors √diag(covariance); NaN for a method without a covariance."""
        if self.covariance is None:
            return np.full(np.shape(self.params), np.nan)
        return np.sqrt(np.diagonal(self.covariance))

    def ci(self, level: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
        """(lower, upper) normal confidence intervals at `level` (Bortz et al. 2023, eq. 16)."""
        if self.covariance is None:
            confidence_intervals(0.0, np.zeros((1, 1)), level)  # checks `level`
            return self.stderr, self.stderr
        return confidence_intervals(self.params, self.covariance, level)

    def derived(self, fn: Callable, names: "str | Sequence[str] | None" = None) -> Derived:
        """Quantities derived from the parameters, `fn(p)` → a number or a vector (a JAX
        function of the parameter vector in the model's order, e.g. `lambda p: p[0] / p[1]`
        for R0 = β/γ), with standard errors and intervals by the delta method from the fit's
        covariance. For intervals that follow a nonlinear `fn`, derive from a bootstrap:
        `wj.studies.bootstrap(...).derived(fn)`."""
        if self.covariance is None or self.covariance_method is None:
            raise ValueError(
                f"{self.title} has no covariance, so the delta method has nothing to propagate; derive "
                f"from a bootstrap instead (wj.studies.bootstrap(...).derived(fn))."
            )
        value, cov = delta_method(fn, self.params, self.covariance)
        return Derived(derived_names(names, value.size), value, cov, self.covariance_method)

    def simulate(self, u0, t, solver: diffrax.AbstractSolver | None = None) -> np.ndarray:
        """The fitted model solved from `u0` on `t` (diffrax)."""
        return np.asarray(solve(self.model, self.params, u0, t, solver=solver))

    def forward_error(self, u0, t, reference, solver: diffrax.AbstractSolver = diffrax.Tsit5()) -> float:
        """Relative forward-simulation error of the fit (Rummel et al. 2025, eq. 13) against `reference`
        (the noiseless states when known, else the data); inf if the solve fails."""
        err, _ = forward_simulation_error(
            self.model, self.params, np.asarray(u0, float), np.asarray(t, float), np.asarray(reference, float), solver
        )
        return float(err)

    def _trajectory_error(self, states: np.ndarray, reference) -> float:
        """‖states − reference‖_F / ‖reference‖_F (Rummel et al. 2025, eq. 13); inf when the
        solve failed (NaN rows)."""
        reference = np.asarray(reference, float)
        if not np.all(np.isfinite(states)):
            return float("inf")
        return float(np.linalg.norm(states - reference) / np.linalg.norm(reference))

    def to_dict(self) -> dict:
        """Plain Python/NumPy view: estimates, errors and intervals by parameter name."""
        lo, hi = self.ci(0.95)
        names = self.model.param_names
        return {
            "model": self.model.name,
            "method": self.method,
            "status": self.message or "successful",
            "noise": self.noise,
            "objective": self.objective,
            "params": dict(zip(names, self.params.tolist())),
            "stderr": dict(zip(names, self.stderr.tolist())),
            "ci95": {n: (a, b) for n, a, b in zip(names, lo.tolist(), hi.tolist())},
            "covariance": None if self.covariance is None else self.covariance.copy(),
            "covariance_method": self.covariance_method,
            "num_steps": self.num_steps,
            **self._extra_dict(),
        }

    def _extra_dict(self) -> dict:
        return {}

    @abc.abstractmethod
    def _head(self) -> list[str]:
        """The lines above the parameter table."""

    def table(self, level: float = 0.95, truth=None) -> str:
        """The summary table as text; `truth` adds a column of true values. Notes name the
        parameters on a bound, weakly determined or with an interval that leaves the model's
        box; where something is undetermined, weak or on a bound the
        [`identifiability`][] report follows."""
        lo, hi = self.ci(level)
        pct = f"{100 * level:g}%"
        header = ["param", "estimate", "std err", f"{pct} lower", f"{pct} upper"]
        rows = [[n, p, s, a, b] for n, p, s, a, b in zip(self.model.param_names, self.params, self.stderr, lo, hi)]
        if truth is not None:
            header.append("truth")
            for row, v in zip(rows, np.asarray(truth, float)):
                row.append(v)
        lines = fixed_width(header, [[r[0]] + [f"{v: .6g}" for v in r[1:]] for r in rows])
        if held := getattr(self.model, "fixed", None):
            lines.append(f"held, not fitted: {', '.join(f'{n} = {v:g}' for n, v in held.items())}")
        on_bound = self.at_bound
        if on_bound:
            lines.append(
                f"note: the estimate of {', '.join(on_bound)} lies on the box's bound: the optimum may lie "
                f"outside the box, or the fit stopped there; try a wider box or another start (e.g. "
                f"MLE(start='both'))."
            )
        if weak := self.weak_text():
            lines.append(f"note: {weak}.")
        outside = self._outside_box(lo, hi)
        if outside:
            lines.append(
                f"note: the {pct} intervals of {', '.join(outside)} reach outside the model's parameter "
                f"box; normal intervals ignore the box, so they are a poor guide there."
            )
        if self._calibrated_elsewhere and self.covariance_method in _WALD_CAVEAT:
            lines += [
                f"intervals: Wald, from {_WALD_CAVEAT[self.covariance_method]};",
                "  calibrated ones: wj.studies.BootstrapOrProfile()(estimator, fit, data) (docs: Uncertainty).",
            ]
        if np.ndim(self.params) == 1 and getattr(self.model, "param_names", None) is not None:
            report = self.identifiability()
            if not report.ok:  # something is wrong: the whole report (fit.identifiability())
                lines += ["identifiability (fit.identifiability()):", *("  " + ln for ln in str(report).splitlines())]
        return "\n".join(self._head() + lines)

    @property
    def weak_directions(self) -> list[tuple[float, dict[str, float]]]:
        """The combinations of parameters whose 95 % interval contains 0 (see
        [`wendyjax.inference.weak_directions`][]), as `(relative standard error,
        {name: weight})` with the weights that matter (|w| ≥ 0.1)."""
        if self.covariance is None or np.ndim(self.params) != 1:
            return []
        names = self.model.param_names
        return [
            (rel, {n: float(x) for n, x in zip(names, w) if abs(x) >= 0.1})
            for rel, w in weak_directions(self.params, self.covariance)
        ]

    def identifiability(self) -> "Identifiability":
        """What the local curvature says about which parameters the data determine: the
        correlation matrix of the estimate, the parameters with no standard error (the data
        do not determine them: the Jacobian or Hessian is singular along them), the
        [`weak_directions`][] and the estimates on a bound of the box."""
        names = tuple(self.model.param_names)
        cov = np.full((len(names),) * 2, np.nan) if self.covariance is None else np.asarray(self.covariance)
        se = np.sqrt(np.diagonal(cov))
        return Identifiability(
            names=names,
            correlation=cov / np.outer(se, se),
            undetermined=tuple(n for n, v in zip(names, se) if not np.isfinite(v)),
            weak=tuple(self.weak_directions),
            at_bound=tuple(self.at_bound),
        )

    def weak_text(self) -> str:
        """One sentence on the [`weak_directions`][], or "" when there are none."""
        parts = []
        for rel, w in self.weak_directions:
            if len(w) == 1:
                what = next(iter(w))
            else:
                terms = " ".join(f"{'−' if x < 0 else '+'} {abs(x):.2f}·{n}" for n, x in w.items())
                what = f"the combination {terms.removeprefix('+ ')} of the parameters relative to their estimates"
            parts.append(f"{what} (relative standard error {rel:.3g})")
        if not parts:
            return ""
        whose = "its" if len(parts) == 1 else "each one’s"
        return (
            f"the data barely determine {'; '.join(parts)}: {whose} 95% interval contains 0, so not even the sign "
            f"is fixed, and these parameters are practically non-identifiable from these data (too little "
            f"variation in the data, too short a span, too much noise, a model that does not fit, or "
            f"parameters that enter only together)"
        )

    @property
    def at_bound(self) -> list[str]:
        """The parameters whose estimate lies on a finite bound of the box the fit was held to."""
        if self.lower is None or self.upper is None or np.ndim(self.params) != 1:
            return []
        on = [np.isfinite(b) & np.isclose(self.params, b, rtol=1e-10, atol=1e-12) for b in (self.lower, self.upper)]
        return [n for n, a, b in zip(self.model.param_names, *on) if a or b]

    def _outside_box(self, lo: np.ndarray, hi: np.ndarray) -> list[str]:
        """The parameters whose interval (lo, hi) leaves the model's box."""
        if self.model.bounds is None:
            return []
        box_lo, box_hi = (np.asarray(b, float) for b in self.model.bounds)
        return [n for n, a, b, bl, bu in zip(self.model.param_names, lo, hi, box_lo, box_hi) if a < bl or b > bu]

    @property
    def _status_text(self) -> str:
        return "converged" if self.successful else f"NOT CONVERGED: {self.message}"

    def summary(self, level: float = 0.95, truth=None) -> None:
        """Print the parameter table with standard errors and confidence intervals."""
        print(self.table(level, truth))

    def __str__(self) -> str:
        return self.table()

    def __repr__(self) -> str:  # one line: the fields hold arrays of every test function and trajectory
        params = (
            np.array2string(self.params, precision=4, threshold=8)
            if isinstance(self.params, np.ndarray)
            else type(self.params).__name__
        )
        return (
            f"{type(self).__name__}({self.title} of {self.model_name!r}: {self.status_name}, params={params}, "
            f"covariance={self.covariance_method!r})"
        )

    def _repr_pretty_(self, printer, cycle) -> None:  # IPython and Jupyter show the summary table
        printer.text(self.table())


@dataclasses.dataclass(frozen=True, repr=False)
class WENDyFit(AbstractFit):
    """A WENDy fit: [`AbstractFit`][] (`objective` = ℓ at the estimate) plus the
    `test_functions` chosen for every trajectory and the
    [`WeakLikelihood`][wendyjax.WeakLikelihood] it was fitted on. `num_steps`: trust-region
    steps (WLS, MLE) or reweighting iterations (IRLS); `method`: "wls", "irls" or "mle"
    (the one that ran: noiseless data switch to WLS)."""

    _calibrated_elsewhere: ClassVar[bool] = True

    test_functions: tuple[TestFunctionInfo | None, ...]
    likelihood: WeakLikelihood

    @classmethod
    def from_solution(cls, estimator, model, problem, p0, solution, covariance, kind, seconds):
        common = cls._common(
            estimator,
            model,
            p0,
            solution,
            covariance,
            kind,
            seconds,
            "lognormal" if problem.problem.log_space else "gaussian",
        )
        if problem.noiseless:
            common["method"] = "wls"
        return cls(**common, test_functions=problem.test_functions, likelihood=problem)

    @property
    def title(self) -> str:
        return f"WENDy-{self.method.upper()}"

    def _head(self) -> list[str]:
        k = ", ".join(
            f"{info.k} (capped by k_max; the criteria keep {info.k_criteria})" if info.capped else str(info.k)
            for info in self.test_functions
            if info is not None
        )
        return [
            f"{self.title} fit of '{self.model.name}': {self._status_text}",
            f"  ℓ(p̂) = {self.objective:.6g}   steps = {self.num_steps}   noise: {self.noise}   "
            f"covariance: {self.covariance_method}   test functions K = {k or 'given'}",
        ]


@dataclasses.dataclass(frozen=True, repr=False)
class OutputErrorFit(AbstractFit):
    """An output-error (or hybrid) fit: [`AbstractFit`][] (`objective` = the loss
    ½Σ(whitened residual)²) plus the fitted initial states `u0` `(R, D)` and the residual
    `scale` per state. For a hybrid, `wendy_params` and `wendy_status` are the estimate
    and status of the WENDy stage it started from (`None` for plain output error)."""

    _calibrated_elsewhere: ClassVar[bool] = True

    u0: np.ndarray
    scale: np.ndarray
    wendy_params: np.ndarray | None = None
    wendy_status: RESULTS | None = None

    @classmethod
    def from_solution(cls, estimator, model, problem, p0, solution, covariance, kind, seconds):
        oe = getattr(problem, "output_error", problem)
        names = [n if isinstance(n, str) else noise_name(n) for n in oe.noises]
        noise = names[0] if len(set(names)) == 1 else ", ".join(names)
        common = cls._common(estimator, model, p0, solution, covariance, kind, seconds, noise)
        extras = solution.extras
        wendy = extras.get("wendy_params")
        return cls(
            **common,
            u0=np.asarray(extras["u0"]),
            scale=np.asarray(oe.scale),
            wendy_params=None if wendy is None else np.asarray(wendy),
            wendy_status=extras.get("wendy_result"),
        )

    @property
    def title(self) -> str:
        return "WENDy → output-error hybrid" if self.method == "hybrid" else "Output-error"

    def _extra_dict(self) -> dict:
        return {"u0": self.u0.tolist()}

    def stuck_hint(self) -> str:
        u0 = "; ".join(", ".join(f"{v:.6g}" for v in row) for row in self.u0)
        return (
            f" Its initial state was u0 = ({u0}): the first observations unless u0= is given, and a noisy "
            f"first sample can start the ODE where it blows up; pass a better u0=."
        )

    def _head(self) -> list[str]:
        u0 = "; ".join(", ".join(f"{v:.6g}" for v in row) for row in self.u0)
        return [
            f"{self.title} fit of '{self.model.name}': {self._status_text}",
            f"  {'loss' if self.noise in ('gaussian', 'lognormal') else '-log L'} = {self.objective:.6g}   LM steps = "
            f"{self.num_steps}   noise: {self.noise}   covariance: "
            f"{self.covariance_method}   {'u0(p̂)' if callable((self.options or {}).get('u0')) else 'fitted u0'} = "
            f"({u0})",
        ]

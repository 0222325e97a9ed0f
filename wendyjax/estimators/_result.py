"""Results of fits: estimate, uncertainty, diagnostics, and a readable summary."""

import abc
import dataclasses

import diffrax
import numpy as np

from ..inference import confidence_intervals, forward_simulation_error
from ..model import ODEModel
from ..simulate import solve
from ..weak import TestFunctionInfo, WeakLikelihood
from ._results import RESULTS


class StatusMixin:
    """`successful` and `message` of a result with a `status` (a `RESULTS` item)."""

    status: RESULTS

    @property
    def successful(self) -> bool:
        return bool(self.status == RESULTS.successful)

    @property
    def message(self) -> str:
        return RESULTS[self.status]


@dataclasses.dataclass(frozen=True)
class AbstractFit(StatusMixin, abc.ABC):
    """What every fit result has (plain NumPy arrays): `params`, their `covariance`
    (`covariance_method`), the start `p0`, `num_steps`, `status` (a `RESULTS` item,
    `message` its text) and `method`."""

    model: ODEModel
    params: np.ndarray
    covariance: np.ndarray
    covariance_method: str
    p0: np.ndarray
    num_steps: int
    status: RESULTS
    method: str

    @property
    def stderr(self) -> np.ndarray:
        """Standard errors √diag(covariance)."""
        return np.sqrt(np.diagonal(self.covariance))

    def ci(self, level: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
        """(lower, upper) normal confidence intervals at `level` (001 eq. 16)."""
        return confidence_intervals(self.params, self.covariance, level)

    def simulate(self, u0, t, solver: diffrax.AbstractSolver | None = None) -> np.ndarray:
        """The fitted model solved from `u0` on `t` (diffrax)."""
        return np.asarray(solve(self.model, self.params, u0, t, solver=solver))

    def forward_error(self, u0, t, reference, solver: diffrax.AbstractSolver = diffrax.Tsit5()) -> float:
        """Relative forward-simulation error of the fit (000 eq. 13) against `reference`
        (the noiseless states when known, else the data); inf if the solve fails."""
        err, _ = forward_simulation_error(self.model, self.params, np.asarray(u0, float),
                                          np.asarray(t, float), np.asarray(reference, float), solver)
        return float(err)

    def to_dict(self) -> dict:
        """Plain Python/NumPy view: estimates, errors and intervals by parameter name."""
        lo, hi = self.ci(0.95)
        names = self.model.param_names
        return {
            "model": self.model.name,
            "method": self.method,
            "status": self.message or "successful",
            "params": dict(zip(names, self.params.tolist())),
            "stderr": dict(zip(names, self.stderr.tolist())),
            "ci95": {n: (a, b) for n, a, b in zip(names, lo.tolist(), hi.tolist())},
            "covariance": self.covariance.copy(),
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
        """The summary table as text; `truth` adds a column of true values. A note names
        the parameters whose interval leaves the model's box."""
        lo, hi = self.ci(level)
        pct = f"{100 * level:g}%"
        header = ["param", "estimate", "std err", f"{pct} lower", f"{pct} upper"]
        rows = [[n, p, s, a, b] for n, p, s, a, b in
                zip(self.model.param_names, self.params, self.stderr, lo, hi)]
        if truth is not None:
            header.append("truth")
            for row, v in zip(rows, np.asarray(truth, float)):
                row.append(v)
        cells = [header] + [[r[0]] + [f"{v: .6g}" for v in r[1:]] for r in rows]
        widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
        lines = ["  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(row, widths)))
                 for row in cells]
        lines.insert(1, "-" * len(lines[0]))
        outside = self._outside_box(lo, hi)
        if outside:
            lines.append(f"note: the {pct} intervals of {', '.join(outside)} reach outside the model's parameter "
                         f"box; normal intervals ignore the box, so they are a poor guide there.")
        return "\n".join(self._head() + lines)

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


@dataclasses.dataclass(frozen=True)
class WENDyFit(AbstractFit):
    """A WENDy fit: [`AbstractFit`][] plus `nll` (ℓ at the estimate), the
    `test_functions` chosen for every trajectory and the
    [`WeakLikelihood`][wendyjax.WeakLikelihood] it was fitted on. `num_steps`: trust-region
    steps (WLS, MLE) or reweighting iterations (IRLS); `method`: "wls", "irls" or "mle"
    (the one that ran: noiseless data switch to WLS)."""

    nll: float
    test_functions: tuple[TestFunctionInfo | None, ...]
    likelihood: WeakLikelihood

    def _extra_dict(self) -> dict:
        return {"nll": self.nll}

    def _head(self) -> list[str]:
        k = ", ".join(f"{info.k} (capped by k_max; the criteria keep {info.k_criteria})" if info.capped
                      else str(info.k) for info in self.test_functions if info is not None)
        return [
            f"WENDy-{self.method.upper()} fit of '{self.model.name}': {self._status_text}",
            f"  ℓ(p̂) = {self.nll:.6g}   steps = {self.num_steps}   "
            f"covariance: {self.covariance_method}   test functions K = {k or 'given'}",
        ]


@dataclasses.dataclass(frozen=True)
class OutputErrorFit(AbstractFit):
    """An output-error (or hybrid) fit: [`AbstractFit`][] plus the fitted initial states
    `u0` `(R, D)`, the `loss` ½Σ(whitened residual)² and the residual `scale` per state.
    For a hybrid, `wendy` is the WENDy fit it started from."""

    u0: np.ndarray
    loss: float
    scale: np.ndarray
    wendy: WENDyFit | None = None

    def _extra_dict(self) -> dict:
        return {"u0": self.u0.tolist(), "loss": self.loss}

    def _head(self) -> list[str]:
        name = "WENDy-MLE → output-error hybrid" if self.wendy is not None else "Output-error"
        u0 = "; ".join(", ".join(f"{v:.6g}" for v in row) for row in self.u0)
        return [
            f"{name} fit of '{self.model.name}': {self._status_text}",
            f"  loss = {self.loss:.6g}   LM steps = {self.num_steps}   covariance: "
            f"{self.covariance_method}   fitted u0 = ({u0})",
        ]

"""The result of a fit: estimate, uncertainty, diagnostics, and a readable summary."""

import dataclasses

import diffrax
import numpy as np

from ..inference import confidence_intervals, forward_simulation_error
from ..model import ODEModel
from ..simulate import solve
from ..weak import TestFunctionInfo, WeakLikelihood
from ._results import RESULTS


@dataclasses.dataclass(frozen=True)
class WENDyFit:
    """A fitted model (plain NumPy arrays; the likelihood is kept for diagnostics).

    - `params`, `covariance` (`covariance_method`: "sandwich" or "hessian"), `p0`;
    - `nll`: ℓ at the estimate; `num_steps`: trust-region steps (WLS, MLE) or
      reweighting iterations (IRLS); `status`: a `RESULTS` item, `message` its text;
    - `method`: "wls", "irls" or "mle" (the one that ran: noiseless data switch to WLS);
    - `test_functions`: what was chosen for every trajectory; `likelihood`: the
      [`WeakLikelihood`][wendyjax.WeakLikelihood] it was fitted on.
    """

    model: ODEModel
    params: np.ndarray
    covariance: np.ndarray
    covariance_method: str
    p0: np.ndarray
    nll: float
    num_steps: int
    status: RESULTS
    method: str
    test_functions: tuple[TestFunctionInfo | None, ...]
    likelihood: WeakLikelihood

    @property
    def successful(self) -> bool:
        return bool(self.status == RESULTS.successful)

    @property
    def message(self) -> str:
        return RESULTS[self.status]

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
            "nll": self.nll,
            "num_steps": self.num_steps,
        }

    def table(self, level: float = 0.95, truth=None) -> str:
        """The summary table as text; `truth` adds a column of true values."""
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
        k = ", ".join(str(info.k) for info in self.test_functions if info is not None)
        status = "converged" if self.successful else f"NOT CONVERGED: {self.message}"
        head = [
            f"WENDy-{self.method.upper()} fit of '{self.model.name}': {status}",
            f"  ℓ(p̂) = {self.nll:.6g}   steps = {self.num_steps}   "
            f"covariance: {self.covariance_method}   test functions K = {k or 'given'}",
        ]
        return "\n".join(head + lines)

    def summary(self, level: float = 0.95, truth=None) -> None:
        """Print the parameter table with standard errors and confidence intervals."""
        print(self.table(level, truth))

    def __str__(self) -> str:
        return self.table()

"""The outcome of a discovery run: the selected model, its reconstructed states, and every
model tested on the way with its score (Meissner & Glasner 2024, §3.2: kept "for comprehensive review")."""

import dataclasses

import numpy as np
from jaxtyping import Array, ArrayLike

from .._results import RESULTS, status_names
from ..library import AbstractLibrary
from ._problem import DiscoveryProblem


@dataclasses.dataclass(frozen=True, eq=False)
class Candidate:
    """One tested term mask: the unpenalised fit (`theta`, `u`, `loss` = 𝓛_λ, score `ic`) and
    the penalised fit that ranks its terms (`theta_sparse`, `u_sparse`); statuses and step
    counts of both, and `seconds`, the wall time of the two fits (compilation included for
    the first model tested)."""

    mask: np.ndarray
    theta: np.ndarray
    theta_sparse: np.ndarray
    u: np.ndarray
    u_sparse: Array
    loss: float
    ic: float
    status: tuple[RESULTS, RESULTS]
    n_steps: tuple[int, int]
    seconds: float

    @property
    def n_terms(self) -> int:
        """Number of active library terms."""
        return int(self.mask.sum())


@dataclasses.dataclass(frozen=True, eq=False)
class Discovery:
    """The model Algorithm 1 selected (`best`) and every model it tested (`history`, in order)."""

    library: AbstractLibrary
    problem: DiscoveryProblem
    best: Candidate
    history: list[Candidate]
    criterion: str

    @property
    def theta(self) -> np.ndarray:
        """The selected coefficient matrix (terms × states), zero off the selected support."""
        return self.best.theta

    @property
    def support(self) -> np.ndarray:
        """The selected model's term mask `(n_features, n_states)`."""
        return self.best.mask

    @property
    def states(self) -> np.ndarray:
        """The reconstructed states, shape `(T, *space, D)`."""
        return self.best.u

    def equations(self, precision: int = 4) -> list[str]:
        """The selected model as one equation per state, coefficients to `precision` digits."""
        return self.library.equations(self.theta, precision)

    def compare(self, theta_true: ArrayLike) -> dict:
        """Missing and extra terms against a true coefficient matrix, and the relative
        errors of the coefficients on the true support (max over entries, and ‖·‖₂ of the
        support's coefficients relative to ‖θ‖₂)."""
        true = np.asarray(self.library.check_theta(theta_true, "theta_true"))
        support = true != 0
        err = np.abs(self.theta - true)[support] / np.abs(true[support])
        l2 = np.linalg.norm((self.theta - true)[support]) / np.linalg.norm(true[support])
        return {"missing_terms": int((support & ~self.support).sum()),
                "extra_terms": int((~support & self.support).sum()),
                "max_relative_error": float(err.max()), "relative_l2_error": float(l2)}

    def state_error(self, u_true: ArrayLike) -> dict:
        """Relative ‖·‖₂ errors against the clean states: of the reconstruction (every entry)
        and of the data (observed entries)."""
        u_true = np.asarray(u_true, float).reshape(self.states.shape)
        observed = np.asarray(self.problem.observed)
        data = np.asarray(self.problem.data)
        return {"reconstruction": float(np.linalg.norm(self.states - u_true) / np.linalg.norm(u_true)),
                "data": float(np.linalg.norm((data - u_true)[observed]) / np.linalg.norm(u_true[observed]))}

    def table(self) -> str:
        """Every tested model: number of terms, 𝓛_λ, score, steps (unpenalised/penalised fit),
        wall seconds of both fits and statuses."""
        best = self.history.index(self.best)
        lines = [f"{'model':>5} {'terms':>5} {'loss':>12} {self.criterion.upper():>12} {'steps':>9} {'seconds':>8}"
                 "  status"]
        for i, c in enumerate(self.history):
            status = "/".join(str(status_names(s)) or "ok" for s in c.status)
            lines.append(f"{i:>5} {c.n_terms:>5} {c.loss:>12.5g} {c.ic:>12.6g} {c.n_steps[0]:>4}/{c.n_steps[1]:<4} "
                         f"{c.seconds:>8.1f}  {status}{'  <- selected' if i == best else ''}")
        return "\n".join(lines)

    def summary(self) -> None:
        """Print the selected model and the table of every tested model."""
        print(self)

    def __str__(self) -> str:
        return "\n".join([f"Sparse state-and-parameter regression (Meissner & Glasner 2024): {self.best.n_terms} of "
                          f"{self.best.mask.size} terms, {self.criterion.upper()} {self.best.ic:.6g}, "
                          f"{len(self.history)} models tested", *self.equations()])

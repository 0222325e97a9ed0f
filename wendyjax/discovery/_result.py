"""The outcome of a discovery run: the selected model, its reconstructed states, and every
model tested on the way with its score (Meissner & Glasner 2024, §3.2: kept "for comprehensive review")."""

import dataclasses

import diffrax
import equinox as eqx
import jax
import numpy as np
from jaxtyping import Array, Bool, Float, Int

from .._results import RESULTS, status_names
from .._typing import ArrayLike
from ..estimators import AbstractFit
from ..library import PolynomialLibrary
from ..simulate import integrate
from ._problem import DiscoveryProblem


class SearchHistory(eqx.Module):
    """Every model Algorithm 1 tested, in order, as arrays of a fixed length `max_models`
    (rows from `Solution.num_steps` on are padding: masks False, `loss` and `criterion`
    NaN): the term `masks`, the unpenalised fit's coefficients `params` and 𝓛_λ `loss`,
    the penalised fit's coefficients `params_sparse` (they rank the terms to drop), the
    information `criterion` (+inf where the fit failed), the statuses `result` and steps
    `num_steps` of both fits (unpenalised, penalised), and whether the model was `accepted`
    (the last accepted one is selected). One row (one model) is the same without the
    leading axis."""

    masks: Bool[Array, "*M F D"]
    params: Float[Array, "*M F D"]
    params_sparse: Float[Array, "*M F D"]
    loss: Float[Array, " *M"]
    criterion: Float[Array, " *M"]
    result: RESULTS
    num_steps: Int[Array, "*M 2"]
    accepted: Bool[Array, " *M"]


@dataclasses.dataclass(frozen=True, eq=False)
class Candidate:
    """One tested term mask: the unpenalised fit (`params`, `loss` = 𝓛_λ, score `criterion`),
    the penalised fit's coefficients `params_sparse`, the statuses and steps of both, and
    whether it was `accepted`."""

    mask: np.ndarray
    params: np.ndarray
    params_sparse: np.ndarray
    loss: float
    criterion: float
    status: tuple[RESULTS, RESULTS]
    num_steps: tuple[int, int]
    accepted: bool

    @property
    def n_terms(self) -> int:
        """Number of active library terms."""
        return int(self.mask.sum())


def _candidates(history: SearchHistory, n: int) -> tuple[Candidate, ...]:
    """The first `n` rows of `history`."""
    masks, params, sparse, loss, criterion, steps, accepted = (
        np.asarray(x)
        for x in (
            history.masks,
            history.params,
            history.params_sparse,
            history.loss,
            history.criterion,
            history.num_steps,
            history.accepted,
        )
    )
    return tuple(
        Candidate(
            mask=masks[i],
            params=params[i],
            params_sparse=sparse[i],
            loss=float(loss[i]),
            criterion=float(criterion[i]),
            status=tuple(jax.tree.map(lambda x, i=i, j=j: x[i, j], history.result) for j in (0, 1)),
            num_steps=(int(steps[i, 0]), int(steps[i, 1])),
            accepted=bool(accepted[i]),
        )
        for i in range(n)
    )


@dataclasses.dataclass(frozen=True, repr=False)
class Discovery(AbstractFit):
    """A discovery run ([`AbstractFit`][wendyjax.estimators.AbstractFit]; `model` is the library):
    `params` the selected coefficient matrix (terms × states, zero off the `support`),
    `objective` its information criterion (`criterion`: "bic" or "aic"), `num_steps` the
    models tested; the selected `support`, the reconstructed `states` `(T, *space, D)`,
    every tested model (`history`, in order) and the regression `problem`. No covariance:
    standard errors and intervals are NaN."""

    support: np.ndarray
    states: np.ndarray
    history: tuple[Candidate, ...]
    criterion: str
    problem: DiscoveryProblem

    @classmethod
    def from_solution(cls, estimator, model, problem, p0, solution, covariance, kind, seconds):
        ex = solution.extras
        return cls(
            model=model,
            params=np.asarray(solution.params),
            covariance=None,
            covariance_method=None,
            p0=np.asarray(p0),
            num_steps=int(solution.num_steps),
            status=solution.result,
            method=estimator.method,
            objective=float(solution.objective),
            noise=None,
            seconds=seconds,
            support=np.asarray(ex["support"]),
            states=np.asarray(ex["states"]),
            history=_candidates(ex["history"], int(solution.num_steps)),
            criterion=estimator.criterion,
            problem=problem.problem,
        )

    @property
    def selected(self) -> int | None:
        """The index in `history` of the selected model (the last accepted), `None` if none was."""
        accepted = [i for i, c in enumerate(self.history) if c.accepted]
        return accepted[-1] if accepted else None

    @property
    def best(self) -> Candidate | None:
        """The selected model's entry of `history` (`None` if none was accepted)."""
        return None if self.selected is None else self.history[self.selected]

    @property
    def title(self) -> str:
        return "Sparse state-and-parameter regression"

    @property
    def start_text(self) -> str:
        p0 = np.asarray(self.p0)
        return f"{p0.flat[0]:g} for every coefficient" if np.all(p0 == p0.flat[0]) else str(p0.tolist())

    def equations(self, precision: int = 4) -> list[str]:
        """The selected model as one equation per state, coefficients to `precision` digits."""
        return self.model.equations(self.params, precision)

    def simulate(self, u0, t, solver: diffrax.AbstractSolver | None = None) -> np.ndarray:
        """The discovered ODE (a `PolynomialLibrary`'s) solved from `u0` on the grid `t`
        ([`wendyjax.integrate`][]: rows from a failed step on are NaN). A PDE's library has
        no solver here."""
        if not isinstance(self.model, PolynomialLibrary):
            raise TypeError(
                f"simulate solves the ODE of a PolynomialLibrary; {type(self.model).__name__} "
                f"describes a PDE, which wendyjax does not solve."
            )
        return integrate(self.model.rhs, self.params, u0, t, solver=solver)

    def forward_error(self, u0, t, reference, solver: diffrax.AbstractSolver = diffrax.Tsit5()) -> float:
        """Relative forward-simulation error of the discovered ODE (Rummel et al. 2025, eq. 13)
        against `reference`; inf if the solve fails."""
        return self._trajectory_error(self.simulate(u0, t, solver=solver), reference)

    def compare(self, theta_true: ArrayLike) -> dict:
        """Missing and extra terms against a true coefficient matrix, and the relative
        errors of the coefficients on the true support (max over entries, and ‖·‖₂ of the
        support's coefficients relative to ‖θ‖₂)."""
        true = np.asarray(self.model.check_theta(theta_true, "theta_true"))
        support = true != 0
        err = np.abs(self.params - true)[support] / np.abs(true[support])
        l2 = np.linalg.norm((self.params - true)[support]) / np.linalg.norm(true[support])
        return {
            "missing_terms": int((support & ~self.support).sum()),
            "extra_terms": int((~support & self.support).sum()),
            "max_relative_error": float(err.max()),
            "relative_l2_error": float(l2),
        }

    def state_error(self, u_true: ArrayLike) -> dict:
        """Relative ‖·‖₂ errors against the clean states: of the reconstruction (every entry)
        and of the data (observed entries)."""
        u_true = np.asarray(u_true, float).reshape(self.states.shape)
        observed = np.asarray(self.problem.observed)
        data = np.asarray(self.problem.data)
        return {
            "reconstruction": float(np.linalg.norm(self.states - u_true) / np.linalg.norm(u_true)),
            "data": float(np.linalg.norm((data - u_true)[observed]) / np.linalg.norm(u_true[observed])),
        }

    def models_table(self) -> str:
        """Every tested model: number of terms, 𝓛_λ, score, steps (unpenalised/penalised fit)
        and statuses, the selected one marked."""
        lines = [f"{'model':>5} {'terms':>5} {'loss':>12} {self.criterion.upper():>12} {'steps':>9}  status"]
        for i, c in enumerate(self.history):
            status = "/".join(str(status_names(s)) or "ok" for s in c.status)
            lines.append(
                f"{i:>5} {c.n_terms:>5} {c.loss:>12.5g} {c.criterion:>12.6g} {c.num_steps[0]:>4}/"
                f"{c.num_steps[1]:<4}  {status}{'  <- selected' if i == self.selected else ''}"
            )
        return "\n".join(lines)

    def _head(self) -> list[str]:
        return [
            f"{self.title} (Meissner & Glasner 2024) of '{self.model_name}': {self._status_text}",
            f"  {self.criterion.upper()} = {self.objective:.6g}   {int(self.support.sum())} of "
            f"{self.support.size} terms   models tested = {self.num_steps}   time = {self.seconds:.3g} s   "
            "no covariance",
        ]

    def table(self, level: float = 0.95, truth=None) -> str:
        """The status, score and the selected equations; `truth` (a true coefficient matrix)
        adds the missing and extra terms against it (`level` is unused: no intervals)."""
        lines = self._head() + ["  " + line for line in self.equations()]
        if truth is not None:
            c = self.compare(truth)
            lines.append(
                f"  against the truth: {c['missing_terms']} missing, {c['extra_terms']} extra terms, "
                f"max relative error {c['max_relative_error']:.3g}"
            )
        return "\n".join(lines)

    def to_dict(self) -> dict:
        """Plain Python view: status, score, the coefficients by name (`library.param_names`),
        the selected terms and equations, the models tested."""
        names = self.model.param_names
        flat = self.params.T.ravel().tolist()
        return {
            "model": self.model_name,
            "method": self.method,
            "status": self.message or "successful",
            "noise": None,
            "objective": self.objective,
            "criterion": self.criterion,
            "params": dict(zip(names, flat)),
            "stderr": dict.fromkeys(names, float("nan")),
            "ci95": dict.fromkeys(names, (float("nan"), float("nan"))),
            "covariance": None,
            "covariance_method": None,
            "num_steps": self.num_steps,
            "support": [n for n, s in zip(names, self.support.T.ravel()) if s],
            "equations": self.equations(),
            "seconds": self.seconds,
        }

r"""Integral matching on LGR collocation (Anonymous 2025, §3, Algorithm 1, App. C).

On a subinterval $[a, a+h]$ the data give the state's values $X_0..X_K$ at the LGR
support (a least-squares polynomial fit, after Savitzky–Golay denoising); the ODE then
says $X_j = X_0 + h\sum_k A_{jk} f(X_k, \Theta, a + h\tau_k)$ (Anonymous 2025, eq. 5, $A$ the
$K\times K$ block of $D_K^{-1}$). Integral matching minimises

$$\ell(\Theta) = \frac{1}{|S| K D}\sum_{s\in S} \big\| X_{s,0} + hAF(X_s, \Theta) - X_{s,1:K} \big\|^2$$

over a set $S$ of overlapping subintervals (eq. 6 with the regression terms fixed), with
no ODE solve: every term is an independent, vmapped evaluation of $f$ at known states.

Three solvers, one loss:

- [`LeastSquares`][wendyjax.estimators.LeastSquares]: models linear in $\Theta$
  (polynomial libraries) give a linear least-squares problem, solved exactly (per state
  component, one shared Gram matrix), with the sequential thresholding of Anonymous 2025,
  App. C for sparse recovery;
- [`TrustRegion`][wendyjax.estimators.TrustRegion] on the Gauss–Newton model over all
  subintervals, for `ODEModel`s (parameters entering nonlinearly, with bounds);
- [`Gradient`][wendyjax.estimators.Gradient]: optax (Adam by default) on random batches
  of subintervals, a `lax.scan` over a chunk of steps per call (Algorithm 1), for neural
  vector fields.
"""

import dataclasses
from collections.abc import Callable
from typing import ClassVar

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, Int, PRNGKeyArray, PyTree

from .._checks import as_count, as_ratio, dataset_keys
from .._typing import ArrayLike, Keys
from ..collocation import SavitzkyGolay
from ..data import Batch, Dataset, as_batch
from ..library import PolynomialLibrary
from ..model import ODEModel
from ..neural import field_rhs
from ..simulate import integrate
from ._base import AbstractEstimator
from ._hidden import chained_problem, chained_states, fit_hidden, fit_hidden_gradient, node_times
from ._im_problem import (
    IntegralMatchingProblem,
    collocation_residuals,
    integral_matching_loss,
    integral_matching_problem,
    integral_matching_problems,
    shares_missing_entries,
)
from ._im_solvers import Gradient, LeastSquares
from ._result import AbstractFit
from ._solution import Solution
from ._trust_region import TrustRegion

_TRUST_REGION_STEPS, _GRADIENT_STEPS = 200, 20_000
_SOLVER_NAMES = {LeastSquares: "least squares", TrustRegion: "Gauss–Newton trust region", Gradient: "gradient"}


def _batch_loss(params: tuple, args: PyTree, index: Int[Array, " b"] | None) -> Float[Array, ""]:
    """ℓ of `(params,)` on the subintervals `index`, with `args = (rhs, static, problem)`
    (the gradient loop's form: parameter groups, then everything else as arguments)."""
    rhs, static, problem = args
    return integral_matching_loss(rhs, eqx.combine(params[0], static), problem, index)


@dataclasses.dataclass(frozen=True, repr=False)
class IntegralMatchingFit(AbstractFit):
    """An integral-matching fit: [`AbstractFit`][] (`params`: the parameter vector,
    coefficient matrix or trained module; `objective`: the final loss ℓ(Θ̂); no
    covariance) plus the `solver` that ran (its name), the loss `history` per chunk
    (`Gradient` solver) and the vector field `rhs(u, θ, t)`.

    With hidden states (Anonymous 2025, §5), `hidden` lists their indices and
    `node_states` holds every state at the chained collocation nodes `node_times`
    (`node_states[0]` is a full initial state for `simulate`); for libraries and neural
    fields the hidden ones are `standardised` (mean 0, variance 1: defined up to an
    affine map).

    No covariance: Anonymous 2025 gives no sampling theory for ℓ (the node values are
    correlated smoothed data); refine with `OutputError` or `Hybrid` for intervals."""

    params: np.ndarray | eqx.Module  # a trained module for a neural field
    p0: np.ndarray | eqx.Module
    solver: str
    history: np.ndarray
    rhs: Callable
    hidden: tuple[int, ...] = ()
    node_times: np.ndarray | None = None
    node_states: np.ndarray | None = None
    standardised: bool = False

    @classmethod
    def from_solution(cls, estimator, model, problem, p0, solution, covariance, kind, seconds):
        vector = problem.kind != "neural"
        history = np.asarray(solution.extras["history"])
        hidden = problem.hidden
        return cls(
            model=model,
            params=np.asarray(solution.params) if vector else solution.params,
            covariance=None,
            covariance_method=None,
            p0=np.asarray(p0) if vector else p0,
            num_steps=int(solution.num_steps),
            status=solution.result,
            method=estimator.method,
            objective=float(solution.objective),
            noise=None,
            seconds=seconds,
            solver=_SOLVER_NAMES[type(problem.solver)],
            history=history[np.isfinite(history)],
            rhs=problem.rhs,
            hidden=hidden,
            node_times=np.asarray(node_times(problem.subintervals)) if hidden else None,
            node_states=np.asarray(solution.extras["node_states"]) if hidden else None,
            standardised=bool(hidden) and problem.kind != "ode",
        )

    @property
    def title(self) -> str:
        return "Integral matching"

    @property
    def model_name(self) -> str:
        return getattr(self.model, "name", type(self.model).__name__)

    @property
    def start_text(self) -> str:
        return "the given module" if isinstance(self.p0, eqx.Module) else str(np.asarray(self.p0).tolist())

    def vector_field(self, u: Float[Array, " D"], t: float = 0.0) -> Float[Array, " D"]:
        """The fitted f(u, Θ̂, t)."""
        return self.rhs(u, self.params, t)

    def simulate(self, u0: ArrayLike, t: ArrayLike, **kwargs) -> np.ndarray:
        """The fitted ODE solved from `u0` on the grid `t` ([`wendyjax.integrate`][]: rows
        from a failed step on are NaN)."""
        return integrate(self.rhs, self.params, u0, t, **kwargs)

    def forward_error(self, u0, t, reference, solver: diffrax.AbstractSolver = diffrax.Tsit5()) -> float:
        """Relative forward-simulation error of the fitted ODE (Rummel et al. 2025, eq. 13)
        against `reference`; inf if the solve fails."""
        return self._trajectory_error(self.simulate(u0, t, solver=solver), reference)

    def to_dict(self) -> dict:
        """Plain Python/NumPy view: status, loss, steps, solver and the parameters (by
        name for an ODEModel)."""
        params = (
            dict(zip(self.model.param_names, np.asarray(self.params).tolist()))  # an ODEModel: an array
            if isinstance(self.model, ODEModel)
            else self.params.tolist()
            if isinstance(self.params, np.ndarray)
            else None
        )
        return {
            "model": self.model_name,
            "method": self.method,
            "solver": self.solver,
            "status": self.message or "successful",
            "objective": self.objective,
            "params": params,
            "num_steps": self.num_steps,
            "seconds": self.seconds,
        }

    def _head(self) -> list[str]:
        head = [
            f"Integral-matching fit ({self.solver}): {self._status_text}",
            f"  ℓ(Θ̂) = {self.objective:.6g}   steps = {self.num_steps}   time = {self.seconds:.3g} s   "
            f"no covariance (refine with OutputError or Hybrid for intervals)",
        ]
        if self.hidden:
            state_names = getattr(self.model, "state_names", None)  # a neural field has none
            names = [state_names[k] if state_names else f"u[{k}]" for k in self.hidden]
            head.append(
                f"  hidden states reconstructed: {', '.join(names)}" + (" (standardised)" if self.standardised else "")
            )
        return head

    def table(self, level: float = 0.95, truth=None) -> str:
        """Status, loss, steps and time, then the parameters, equations or network size
        (`level` and `truth` as for the other fits, for an ODEModel)."""
        if isinstance(self.model, ODEModel):
            return super().table(level, truth)
        if isinstance(self.model, PolynomialLibrary):
            return "\n".join(self._head() + ["  " + line for line in self.model.equations(np.asarray(self.params))])
        n = sum(x.size for x in jax.tree.leaves(eqx.filter(self.params, eqx.is_inexact_array)))
        return "\n".join(self._head() + [f"  neural vector field {type(self.params).__name__} with {n} parameters"])


class IntegralMatching(AbstractEstimator):
    r"""Integral matching on LGR collocation (Anonymous 2025).

    - `order`, `length`: LGR order $K$ and subinterval length $h$ (Anonymous 2025: $K = 30$, $h = 1$).
    - `smoother`: denoising before the node fits (`None` for none); `stride`: spacing of
      subinterval starts in samples (default: a tenth of a subinterval).
    - `solver`: [`LeastSquares`][wendyjax.estimators.LeastSquares] (polynomial libraries;
      its `threshold` turns on sequential thresholding, App. C),
      [`TrustRegion`][wendyjax.estimators.TrustRegion] (Gauss–Newton; `ODEModel`s,
      bounded, and hidden states) or [`Gradient`][wendyjax.estimators.Gradient] (optax on
      random batches; neural fields); `None` picks by the model: least squares for a
      library (a trust region with hidden states), `TrustRegion(rtol=1e-10, atol=1e-10)`
      for an `ODEModel`, `Gradient()` for a neural field.
    - `max_steps`: the solver's step limit (default 200 trust-region steps, 20 000
      gradient steps).
    """

    order: int = 30
    length: float = 1.0
    smoother: SavitzkyGolay | None = SavitzkyGolay()
    stride: int | None = None
    solver: LeastSquares | TrustRegion | Gradient | None = None
    max_steps: int | None = None
    method: ClassVar[str] = "integral_matching"
    covariances: ClassVar[tuple[str, ...]] = ()
    fit_type: ClassVar[type] = IntegralMatchingFit

    def __check_init__(self):
        if self.solver is not None and not isinstance(self.solver, (LeastSquares, TrustRegion, Gradient)):
            raise TypeError(
                f"IntegralMatching: solver must be LeastSquares(), TrustRegion() or Gradient() of "
                f"wendyjax.estimators (or None: chosen by the model), got {self.solver!r}."
            )
        if self.max_steps is not None and (
            isinstance(self.max_steps, bool) or not isinstance(self.max_steps, int) or self.max_steps < 1
        ):
            raise ValueError(f"IntegralMatching: max_steps must be a positive integer or None, got {self.max_steps!r}.")
        as_count("IntegralMatching: order (the LGR order K)", self.order, 1)
        as_ratio("IntegralMatching: length (the subinterval length h)", self.length)
        if self.stride is not None:
            as_count("IntegralMatching: stride (samples between subinterval starts)", self.stride, 1)
        if self.smoother is not None and not isinstance(self.smoother, SavitzkyGolay):
            raise TypeError(
                f"IntegralMatching: smoother must be a wendyjax.collocation.SavitzkyGolay or None, got "
                f"{self.smoother!r}."
            )

    def subintervals(self, data) -> IntegralMatchingProblem:
        """The subintervals of `data` with this estimator's order, length, smoother and stride."""
        return integral_matching_problem(
            data, order=self.order, length=self.length, smoother=self.smoother, stride=self.stride
        )

    def steps(self, solver) -> int:
        """The step limit of `solver`: `max_steps`, or its default."""
        if self.max_steps is not None:
            return self.max_steps
        return _GRADIENT_STEPS if isinstance(solver, Gradient) else _TRUST_REGION_STEPS

    def solve_gauss_newton(
        self,
        solver: TrustRegion,
        rhs: Callable,
        problem: IntegralMatchingProblem,
        p0: Float[Array, " J"],
        lower: Float[Array, " J"],
        upper: Float[Array, " J"],
    ) -> Solution:
        r"""`solver` on the Gauss–Newton model of $\ell$ over all subintervals."""
        scale = 1.0 / jnp.sqrt(problem.X[:, 1:].size)

        def fn(p, problem):
            res = lambda q: scale * collocation_residuals(rhs, q, problem).reshape(-1)  # noqa: E731
            r, jac = res(p), jax.jacfwd(res)(p)
            return 0.5 * jnp.dot(r, r), jac.T @ r, jac.T @ jac

        sol = solver.minimise(fn, p0, lower, upper, problem, max_steps=self.steps(solver))
        history = jnp.zeros((0,), sol.objective.dtype)
        return Solution(sol.params, 2.0 * sol.objective, sol.num_steps, sol.result, {"history": history})

    def solve_gradient(
        self,
        solver: Gradient,
        rhs: Callable,
        theta0: PyTree,
        problem: IntegralMatchingProblem,
        key: PRNGKeyArray,
        lower: Float[Array, " J"] | None = None,
        upper: Float[Array, " J"] | None = None,
        *,
        progress: bool = False,
    ) -> Solution:
        """Algorithm 1 as one pure function (jit- and vmap-able without `progress`, which
        shows a tqdm bar): chunks of `solver`'s steps in a `lax.while_loop` until its
        stopping rule holds."""
        params, static = eqx.partition(theta0, eqx.is_inexact_array)
        state = solver.run(
            _batch_loss,
            (rhs, static, problem),
            (params,),
            problem.X.shape[0],
            key,
            lower,
            upper,
            self.steps(solver),
            progress=progress,
        )
        return Solution(
            eqx.combine(state.best[0], static),
            state.best_loss,
            state.chunks * solver.chunk,
            solver.status(state),
            {"history": state.history},
        )

    # -- the estimator contract -------------------------------------------------------
    def problem(self, model, data: Dataset, *, key: PRNGKeyArray | None = None, u0=None) -> "IntegralMatchingData":
        r"""The subintervals of `data` for `model`: an `ODEModel`, a `PolynomialLibrary` or a
        neural vector field (an `eqx.Module` called as `field(u, t)` whose arrays are the
        parameters). `key` seeds the random subintervals of the `Gradient` solver
        (required there).

        States never observed in `data` (mask all False) are *hidden*: they are
        reconstructed with the parameters (Anonymous 2025, §5), starting from `u0`, the
        initial state (`(D,)`; only its hidden entries are used) or the hidden states'
        values at the first sample time alone. `TrustRegion` (the default for ODEModels and
        libraries) solves jointly over both; `Gradient` (the default and only choice for
        neural fields) is Algorithm 2, alternating optimizer steps in the parameters and in
        the hidden node values on random batches of subintervals."""
        kind = "ode" if isinstance(model, ODEModel) else "library" if isinstance(model, PolynomialLibrary) else None
        if kind is None:
            if not (isinstance(model, eqx.Module) and callable(model)):
                raise TypeError(
                    f"model must be an ODEModel, a PolynomialLibrary or an equinox Module called as "
                    f"field(u, t), got {type(model).__name__}."
                )
            kind = "neural"
        if kind != "neural" and data.n_states != model.n_states:
            raise ValueError(f"data have {data.n_states} state columns but the model has {model.n_states} states.")
        hidden = np.flatnonzero(
            ~np.all([np.any(np.ones(tr.u.shape, bool) if tr.mask is None else tr.mask, axis=0) for tr in data], axis=0)
        )
        solver = self.solver
        if solver is None:
            solver = {
                "library": TrustRegion(1e-10, 1e-10) if hidden.size else LeastSquares(),
                "ode": TrustRegion(1e-10, 1e-10),
                "neural": Gradient(),
            }[kind]
        if isinstance(solver, LeastSquares) and kind != "library":
            raise ValueError("solver=LeastSquares() needs a PolynomialLibrary model.")
        if isinstance(solver, LeastSquares) and hidden.size:
            raise ValueError(
                "solver=LeastSquares() cannot fit hidden states (the joint problem is nonlinear in them): "
                "use TrustRegion() (the default for a library with hidden states) or Gradient()."
            )
        if isinstance(solver, TrustRegion) and not (kind == "ode" or (hidden.size and kind == "library")):
            raise ValueError(
                "solver=TrustRegion() needs an ODEModel (or a PolynomialLibrary with hidden states); "
                "use LeastSquares() for a library, Gradient() for a neural field."
            )
        if isinstance(solver, Gradient) and key is None:
            raise ValueError("key (a jax.random key) is required by the Gradient solver: it draws the subintervals.")
        if not hidden.size:
            if u0 is not None:
                raise ValueError(
                    "u0 (the start of hidden states) is given but every state is observed somewhere in the data."
                )
            library = model if isinstance(model, PolynomialLibrary) else None
            return IntegralMatchingData(self.subintervals(data), _rhs(model, kind), kind, solver, library, key)
        if len(data) != 1:
            raise ValueError(f"hidden-state reconstruction takes one trajectory, got {len(data)}.")
        if u0 is None:
            raise ValueError(
                f"u0 (the initial state, or the values of the never-observed states {hidden.tolist()} at "
                "the first sample time) is required."
            )
        z0 = np.asarray(u0, float).reshape(-1)
        z0 = z0[hidden] if z0.size == data.n_states and hidden.size != data.n_states else z0
        if z0.shape != (hidden.size,) or not np.all(np.isfinite(z0)):
            raise ValueError(
                f"u0 must hold {hidden.size} finite values (one per hidden state) or a whole initial "
                f"state of {data.n_states}, got {np.asarray(u0).tolist()}."
            )
        chained = chained_problem(data, order=self.order, length=self.length, smoother=self.smoother)
        return IntegralMatchingData(
            chained,
            _rhs(model, kind),
            kind,
            solver,
            model if isinstance(model, PolynomialLibrary) else None,
            key,
            tuple(hidden.tolist()),
            jnp.asarray(z0),
        )

    def start_required(self, model) -> str | None:
        """An `ODEModel` needs `p0` (a library starts at zero, a neural field at itself)."""
        if isinstance(model, ODEModel):
            return f"integral matching of the ODEModel '{model.name}' starts from p0, shape ({model.n_params},)."
        return None

    def init(self, model, problem: "IntegralMatchingData", p0, lower, upper) -> PyTree:
        """`p0` checked: required for an ODEModel (and with hidden states); zeros for a
        library (Anonymous 2025's initialisation); the field itself for a neural field."""
        if problem.kind == "ode":
            self.require_start(model, p0)
            return jnp.asarray(p0, float)
        if p0 is None and problem.hidden and problem.kind == "library":
            raise ValueError(
                "p0 is required with hidden states: the hidden states start as the model's solution "
                "along the observed ones (zero coefficients would make them constant)."
            )
        if problem.kind == "library":
            return model.zeros() if p0 is None else model.check_theta(p0, "p0")
        if p0 is None:
            return model
        if jax.tree.structure(p0) != jax.tree.structure(model):
            raise ValueError(
                "p0 for a neural field must be a module of the field's structure (or None: the field is its own start)."
            )
        return p0

    def solve(self, problem: "IntegralMatchingData", p0, lower, upper) -> Solution:
        """Integral matching from `p0` by the problem's solver (pure: jit/vmap it).
        `extras["history"]`: the full loss after each chunk of gradient steps (NaN past the
        end; empty for the other algorithms); with hidden states `extras["node_states"]`,
        every state at the chained collocation nodes."""
        sub = problem.subintervals
        if problem.hidden:
            hidden = jnp.asarray(problem.hidden)
            standardised = problem.kind != "ode"
            features = None if problem.library is None else problem.library.features
            solver, steps, z0 = problem.solver, self.steps(problem.solver), problem.z0
            assert z0 is not None and not isinstance(solver, LeastSquares)  # as `problem` sets them up
            if isinstance(solver, Gradient):
                assert problem.key is not None  # required by `problem` for this solver
                sol = fit_hidden_gradient(
                    solver,
                    steps,
                    problem.rhs,
                    p0,
                    sub,
                    hidden,
                    z0,
                    problem.key,
                    lower,
                    upper,
                    features=features,
                    standardised=standardised,
                )
            else:
                sol = fit_hidden(solver, steps, problem.rhs, p0, sub, hidden, z0, lower, upper, features)
            extras = {"history": sol.history, "node_states": chained_states(sub, hidden, sol.Z)}
            return Solution(sol.params, sol.objective, sol.num_steps, sol.result, extras)
        if isinstance(problem.solver, LeastSquares):
            assert problem.library is not None  # LeastSquares fits a library only
            return problem.solver.solve(problem.library, sub)
        if isinstance(problem.solver, TrustRegion):
            return self.solve_gauss_newton(problem.solver, problem.rhs, sub, p0, lower, upper)
        assert problem.key is not None  # required by `problem` for the Gradient solver
        return self.solve_gradient(problem.solver, problem.rhs, p0, sub, problem.key, lower, upper)

    def covariance(self, problem, solution: Solution, kind: str | None = None):
        """Integral matching has no covariance (Anonymous 2025 gives no sampling theory for
        ℓ): refine with `OutputError` or `Hybrid` for intervals. NaN, shaped like a
        parameter vector's covariance where the parameters are a vector."""
        n = jnp.size(solution.params) if problem.kind == "ode" else 0
        return jnp.full((n, n), jnp.nan)

    def batch_problems(self, model, datasets: "Batch | list", *, key: Keys | None = None, **options):
        """The problems of a [`Batch`][wendyjax.Batch] of datasets on shared grids (or a
        list of them), each with its own key (split from `key`, or one key per dataset) for
        the `Gradient` solver. Datasets that miss the same entries (and have no hidden
        states) get their subintervals in one compiled call; others one by one, which must
        give the same number of subintervals."""
        batch = as_batch(datasets)
        keys: list = [None] * len(batch) if key is None else dataset_keys(key, len(batch))
        first = self.problem(model, batch[0], key=keys[0], **options)
        if first.hidden or not shares_missing_entries(batch):
            problems = [first] + [self.problem(model, batch[i], key=keys[i], **options) for i in range(1, len(batch))]

            def make(indices):
                arrays, static = eqx.partition([problems[i] for i in indices], eqx.is_array)
                return eqx.combine(jax.tree.map(lambda *x: jnp.stack(x), *arrays), static[0])

            return make, [{} for _ in range(len(batch))]
        X = integral_matching_problems(
            batch, order=self.order, length=self.length, smoother=self.smoother, stride=self.stride
        ).X
        stacked_keys = None if key is None else jnp.stack(keys)

        def make(indices):
            indices = np.asarray(indices)
            arrays, static = eqx.partition(first, eqx.is_array)
            stacked = jax.tree.map(lambda x: jnp.broadcast_to(x, (len(indices), *x.shape)), arrays)
            stacked = eqx.tree_at(lambda p: p.subintervals.X, stacked, X[indices])
            if stacked_keys is not None:
                stacked = eqx.tree_at(lambda p: p.key, stacked, stacked_keys[indices])
            return eqx.combine(stacked, static)

        return make, [{} for _ in range(len(batch))]


class IntegralMatchingData(eqx.Module):
    """The problem an [`IntegralMatching`][] solve takes: the `subintervals` (chained ones
    with hidden states), the vector field `rhs(u, θ, t)`, the model `kind` ("ode",
    "library" or "neural"), the `solver` that runs, the `library` (least squares and
    standardised hidden states), the `key` of the `Gradient` solver, and the `hidden`
    state indices with their start `z0`."""

    subintervals: IntegralMatchingProblem
    rhs: Callable = eqx.field(static=True)
    kind: str = eqx.field(static=True)
    solver: LeastSquares | TrustRegion | Gradient = eqx.field(static=True)
    library: PolynomialLibrary | None = None
    key: PRNGKeyArray | None = None
    hidden: tuple[int, ...] = eqx.field(static=True, default=())
    z0: Float[Array, " H"] | None = None


def _rhs(model, kind: str) -> Callable:
    return field_rhs if kind == "neural" else model.rhs

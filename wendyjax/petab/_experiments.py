"""A PEtab problem as the model and data of the estimator contract: its conditions side by side
as one `ODEModel`, its measurements as trajectories, its observables as `observe`."""

import dataclasses
import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from .._compile import cpu_safe_jit
from .._typing import ArrayLike
from ..data import Dataset, Trajectory
from ..estimators import AbstractEstimator
from ..model import ODEModel
from ._problem import PetabProblem, _pick, require_problem
from ._sbml import PetabError


@dataclasses.dataclass(frozen=True, eq=False)
class _Conditions:
    """The right-hand side, initial states and observables of every condition side by side, as
    functions of the free parameters `q` (the others held in `x`). Compared by identity."""

    problem: PetabProblem
    free: tuple[int, ...]
    x: np.ndarray
    condition: tuple[int, ...]  # per column: its condition,
    observable: tuple[int, ...]  # its observable,
    source: np.ndarray  # and its observable placeholders (a parameter of the table, or a number)
    value: np.ndarray

    def params(self, q):
        """The estimated parameters on their scales, the free ones from `q`."""
        return _params(self.x, self.free, q)

    def __call__(self, u, q, t):
        return _rhs(self.problem, self.free, self.x, u, q, t)

    def initial(self, q):
        """The initial states of every condition side by side."""
        return _initial(self.problem, self.free, self.x, q)

    def observe(self, u, q, t):
        """Every column's observable (untransformed) at the states `u` of all conditions."""
        return _observe(
            self.problem, self.free, self.x, self.condition, self.observable, self.source, self.value, u, q, t
        )


# Compiled once per problem (a check or a user calling them outside jit runs one program, not
# one per operation); inside an estimator's jit they are traced as part of it.
def _params(x, free, q):
    return jnp.asarray(x).at[jnp.asarray(free, dtype=int)].set(q)


@cpu_safe_jit
def _rhs(problem: PetabProblem, free, x, u, q, t):
    _, p, _ = problem._parameters(_params(x, free, q))
    states = u.reshape(p.shape[0], len(problem.states))
    return jax.vmap(problem._field, in_axes=(None, 0, 0))(t, states, p).reshape(-1)


@cpu_safe_jit
def _initial(problem: PetabProblem, free, x, q):
    return problem._parameters(_params(x, free, q))[2].reshape(-1)


@cpu_safe_jit
def _observe(problem: PetabProblem, free, x, condition, observable, source, value, u, q, t):
    values, p, _ = problem._parameters(_params(x, free, q))
    states = u.reshape(p.shape[0], len(problem.states))
    placeholders = _pick(values, source, value)
    functions = problem._functions.observables
    return jnp.stack(
        [
            functions[o](t, states[c], p[c], placeholders[k])[0]
            for k, (c, o) in enumerate(zip(condition, observable, strict=True))
        ]
    )


@cpu_safe_jit
def _noise_levels(problem: PetabProblem, x):
    """Every measurement's noise level (its formula free of states and time) at `x`."""
    values, p, _ = problem._parameters(x)
    placeholders = _pick(values, problem._obs_source, problem._obs_value)
    noise = _pick(values, problem._noise_source, problem._noise_value)
    sigma = jnp.zeros(problem._measured.shape)
    for o, rows in enumerate(problem._groups):
        level = jax.vmap(problem._functions.noises[o], in_axes=(0, None, 0, 0, 0))
        sigma = sigma.at[rows].set(
            level(
                problem._time[rows],
                jnp.zeros(len(problem.states)),
                p[problem._condition[rows]],
                placeholders[rows],
                noise[rows],
            )[:, 0]
        )
    return sigma


@dataclasses.dataclass(frozen=True)
class PetabExperiments:
    """A PEtab problem as the model and data every estimator of the contract fits
    ([`experiments`][wendyjax.petab.experiments]).

    - `model`: the conditions side by side (states `"A[cond]"`), its parameters the
      estimated ones that the dynamics or observables depend on, on their PEtab scales
      (`"log10(k)"`), with the parameter table's box;
    - `data`: one trajectory per replicate on the union of the measurement times (and t = 0),
      a column per condition, observable and placeholder values; NaN where not measured;
    - `options`: the estimators' keywords that make their likelihood PEtab's: `noise` per
      column (log-normal for log and log10 observables), `sigma` (the noise formulas'
      values, held), `u0` (the model's initial states as a function of the parameters) and
      `observe` (absent where every column is a state itself, so the weak form applies);
    - `held`: the estimated parameters that only the noise formulas use, held at their values;
    - `p0`: the start, `params` without the held ones.
    """

    problem: PetabProblem
    model: ODEModel
    data: Dataset
    options: dict[str, Any]
    held: dict[str, float]
    p0: np.ndarray
    _conditions: _Conditions

    def params(self, q: ArrayLike) -> Float[Array, " n"]:
        """The problem's estimated parameters on their scales (for
        [`log_likelihood`][wendyjax.petab.PetabProblem.log_likelihood]) from the model's, e.g.
        `fit.params`."""
        q = jnp.asarray(q, dtype=float)
        if q.shape != (self.model.n_params,):
            raise ValueError(
                f"params: a vector of the model's {self.model.n_params} parameters "
                f"({', '.join(self.model.param_names)}), got shape {q.shape}."
            )
        return self._conditions.params(q)

    def fit(self, estimator, p0: ArrayLike | None = None, **kwargs):
        """`estimator.fit(model, data, p0, **options)` with the options it takes (`u0` and
        `observe` only where it has them: the weak form solves no ODE) and `kwargs` on top;
        `p0` defaults to `self.p0`."""
        if not isinstance(estimator, AbstractEstimator):
            raise TypeError(
                f"estimator must be a wendyjax estimator (e.g. wj.OutputError()), got {type(estimator).__name__}."
            )
        mine = {k: v for k, v in self.options.items() if k in estimator.options() or k == "observe"}
        return estimator.fit(self.model, self.data, self.p0 if p0 is None else p0, **(mine | kwargs))


def experiments(problem: PetabProblem, params: ArrayLike | None = None) -> PetabExperiments:
    """`problem` as the model, data and options that every estimator of the contract fits
    (output error through the observables; the weak form and the hybrid where every column is
    a state itself), its noise levels those of the noise formulas at `params` (default: the
    nominal values; estimated parameters that only the noise formulas use are held there).

    The estimators' likelihood is then PEtab's up to a constant, for the parameters it fits.
    Refused, naming the feature: Laplace noise, noise levels that depend on the states or
    time, and objective priors (fit those with [`multistart`][wendyjax.petab.multistart]).
    """
    require_problem(problem)
    x = np.asarray(problem._as_params(params), dtype=float)
    frame = problem.measurements
    observables = list(problem.observables)
    observable_of = np.array([observables.index(o) for o in frame["observableId"]])
    refuse = f"{problem.name}: the estimators' likelihoods cannot represent"
    laplace = np.asarray(problem._laplace)
    if laplace.any():
        raise PetabError(
            f"{refuse} Laplace noise (observable {observables[observable_of[np.argmax(laplace)]]}); fit "
            f"it with wendyjax.petab.multistart."
        )
    moving = [o for o in set(observable_of) if not problem._noise_static[o]]
    if moving:
        raise PetabError(
            f"{refuse} a noise level that depends on the states or time (observable "
            f"{observables[min(moving)]}): they take one per column; fit it with "
            f"wendyjax.petab.multistart."
        )
    if any(kind is not None for kind in problem._priors):
        raise PetabError(
            f"{refuse} objective priors (parameter "
            f"{problem.parameter_names[next(i for i, k in enumerate(problem._priors) if k)]}): they fit "
            f"the likelihood alone; fit the posterior with wendyjax.petab.multistart."
        )

    condition = np.asarray(problem._condition)
    sigma = np.asarray(_noise_levels(problem, jnp.asarray(x)))
    transform = np.array([problem._transforms[o] for o in observable_of])
    sigma = np.where(transform == "log10", sigma * math.log(10), sigma)
    if not np.all(np.isfinite(sigma) & (sigma > 0)):
        i = int(np.argmax(~(np.isfinite(sigma) & (sigma > 0))))
        raise PetabError(
            f"{problem.name}: the noise formula of measurement row {i} is {sigma[i]} at these "
            f"parameters; a noise level must be positive."
        )

    # Columns: one per condition, observable, placeholder values and noise level.
    source, value = np.asarray(problem._obs_source), np.asarray(problem._obs_value)
    keys = [
        (int(c), int(o), tuple(source[i]), tuple(value[i]), float(sigma[i]), str(transform[i]))
        for i, (c, o) in enumerate(zip(condition, observable_of, strict=True))
    ]
    where = {key: k for k, key in enumerate(dict.fromkeys(keys))}
    columns = list(where)
    column_of = np.array([where[key] for key in keys])
    times = np.asarray(frame["time"], dtype=float)
    grid = np.unique(np.concatenate([[0.0], times]))
    replicate = np.zeros(len(frame), dtype=int)
    seen: dict[tuple[int, float], int] = {}
    for i, key in enumerate(zip(column_of, times, strict=True)):
        replicate[i] = seen.get(key, 0)
        seen[key] = replicate[i] + 1
    u = np.full((replicate.max() + 1, grid.size, len(columns)), np.nan)
    u[replicate, np.searchsorted(grid, times), column_of] = np.asarray(frame["measurement"], dtype=float)
    data = Dataset([Trajectory(grid, rows) for rows in u])

    free = tuple(i for i, d in enumerate(problem._dynamic) if d)
    names = [n if s == "lin" else f"{s}({n})" for n, s in zip(problem.parameter_names, problem.scales, strict=True)]
    conditions = _Conditions(
        problem,
        free,
        x,
        tuple(c[0] for c in columns),
        tuple(c[1] for c in columns),
        np.array([c[2] for c in columns]).reshape(len(columns), -1),
        np.array([c[3] for c in columns]).reshape(len(columns), -1),
    )
    lower, upper = np.asarray(problem.lower)[list(free)], np.asarray(problem.upper)[list(free)]
    states = [f"{s}[{c}]" for c in problem.conditions for s in problem.states]
    model = ODEModel(
        conditions,
        states,
        [names[i] for i in free],
        bounds=(lower, upper),
        name=problem.name,
        check_indexing=False,
        linear_in_params=False,
    )
    options: dict[str, Any] = {
        "noise": ["lognormal" if c[5] != "lin" else "gaussian" for c in columns],
        "sigma": np.array([c[4] for c in columns]),
        "u0": conditions.initial,
    }
    # the weak form applies where every column is one state of one condition, each once
    direct = [(c[0], problem._direct[c[1]]) for c in columns]
    order = [(c, s) for c in range(len(problem.conditions)) for s in range(len(problem.states))]
    if set(direct) != set(order) or len(direct) != len(order):
        options["observe"] = conditions.observe
    else:  # columns in the order of the model's states
        permutation = [direct.index(key) for key in order]
        data = Dataset([Trajectory(grid, rows[:, permutation]) for rows in u])
        options["noise"] = [options["noise"][k] for k in permutation]
        options["sigma"] = options["sigma"][permutation]
    if len(set(options["noise"])) == 1:  # one noise model for all: what every estimator takes
        options["noise"] = options["noise"][0]
    held = {names[i]: float(x[i]) for i in range(len(names)) if i not in free}
    return PetabExperiments(problem, model, data, options, held, x[list(free)], conditions)

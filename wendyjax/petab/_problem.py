"""A PEtab problem as one equinox Module: the SBML model's ODEs and the observables as JAX
functions, the tables as index arrays, and the log-likelihood as PEtab defines it."""

import math
from collections.abc import Callable, Mapping
from pathlib import Path

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import jax.scipy.stats as jstats
import numpy as np
import pandas as pd
import sympy as sp
from jaxtyping import Array, Bool, Float, Int
from petab.v1.math import sympify_petab

from .._checks import as_count, as_ode_solver, as_ratio
from .._compile import cpu_safe_jit, per_run, resolve_vectorize
from .._typing import ArrayLike
from ._exponential import MatrixExponential, linear_autonomous
from ._sbml import TIME, PetabError, read_sbml
from ._stepsize import RejectionLimit
from ._tables import DISTRIBUTIONS, PRIORS, SCALES, Table, number, read_tables

_CONSTANT, _DEFAULT = -1, -2  # sources other than a parameter of the table: a number; the model's own value
_HUGE = 1e30


def _scale(value: np.ndarray | np.floating | float, scale: str) -> np.ndarray | np.floating | float:
    with np.errstate(divide="ignore"):
        return {"lin": value, "log": np.log(value), "log10": np.log10(value)}[scale]


class _Functions(eqx.Module):
    """The generated JAX functions of one problem (static: compared by identity)."""

    rhs: Callable
    initial: Callable
    observables: tuple[Callable, ...]
    noises: tuple[Callable, ...]


def _lambdify(args, exprs: list[sp.Basic]) -> Callable:
    function = sp.lambdify(args, exprs, modules="jax", cse=True)

    def stacked(*values):
        out = function(*values)
        return jnp.stack([jnp.broadcast_to(jnp.asarray(o, dtype=float), ()) for o in out]) if out else jnp.zeros(0)

    return stacked


class _Held:
    """A host object inside a static field: compared by identity, as jit's cache needs."""

    def __init__(self, value):
        self.value = value


class PetabProblem(eqx.Module):
    """A PEtab problem read by [`wendyjax.petab.load`][]: its estimated parameters (names,
    scales, bounds and nominal values on the scale PEtab names), and its log-likelihood,
    simulations and objective as JAX functions of those parameters.

    Conditions are simulated from t = 0, each with its parameter and initial-state overrides:
    by a diffrax solver side by side (vmapped) where `vectorize`, one after another otherwise
    (see [`load`][wendyjax.petab.load]), by the matrix exponential side by side; every
    measurement's log-likelihood is PEtab's (normal or Laplace noise on the lin, log or log10
    scale of its observable).
    """

    name: str = eqx.field(static=True)
    parameter_names: tuple[str, ...] = eqx.field(static=True)
    scales: tuple[str, ...] = eqx.field(static=True)
    lower: Float[Array, " n"]
    upper: Float[Array, " n"]
    nominal: Float[Array, " n"]
    states: tuple[str, ...] = eqx.field(static=True)
    observables: tuple[str, ...] = eqx.field(static=True)
    conditions: tuple[str, ...] = eqx.field(static=True)
    _table: "_Held" = eqx.field(static=True)
    solver: diffrax.AbstractSolver | MatrixExponential
    rtol: float = eqx.field(static=True)
    atol: float = eqx.field(static=True)
    max_steps: int = eqx.field(static=True)
    max_rejections: int = eqx.field(static=True)
    vectorize: bool = eqx.field(static=True)
    _functions: _Functions = eqx.field(static=True)
    _values: Float[Array, " a"]
    _estimated: Int[Array, " n"]
    _par_source: Int[Array, "c q"]
    _par_value: Float[Array, "c q"]
    _x0_source: Int[Array, "c s"]
    _x0_value: Float[Array, "c s"]
    _times: Float[Array, "c k"]
    _measured: Float[Array, " m"]
    _time: Float[Array, " m"]
    _condition: Int[Array, " m"]
    _time_index: Int[Array, " m"]
    _obs_source: Int[Array, "m a1"]
    _obs_value: Float[Array, "m a1"]
    _noise_source: Int[Array, "m a2"]
    _noise_value: Float[Array, "m a2"]
    _groups: tuple[Int[Array, " _mo"], ...]  # one row count per observable
    _transforms: tuple[str, ...] = eqx.field(static=True)
    _laplace: Bool[Array, " m"]
    _priors: tuple[str | None, ...] = eqx.field(static=True)
    _prior_parameters: Float[Array, "n 2"]
    _dynamic: tuple[bool, ...] = eqx.field(static=True)
    _in_ode: tuple[bool, ...] = eqx.field(static=True)  # the estimated parameters the ODE solves depend on
    _direct: tuple[int | None, ...] = eqx.field(static=True)
    _noise_static: tuple[bool, ...] = eqx.field(static=True)

    @property
    def measurements(self) -> pd.DataFrame:
        """The measurement table (a copy), in the order of the likelihood's terms."""
        return self._table.value.copy()

    @property
    def n_parameters(self) -> int:
        """Number of estimated parameters."""
        return len(self.parameter_names)

    def _full(self, x: Float[Array, " n"]) -> Float[Array, " a"]:
        """Every parameter of the table on the linear scale, the estimated ones from `x`."""
        lin = jnp.stack([_unscale(x[i], s) for i, s in enumerate(self.scales)]) if self.scales else x
        return self._values.at[self._estimated].set(lin)

    def _parameters(self, x):
        """Every table parameter's value, and per condition the model parameters `(C, Q)` and
        initial states `(C, S)`, from the estimated parameters `x` on their scales."""
        values = self._full(x)
        p = _pick(values, self._par_source, self._par_value)
        x0 = jax.vmap(self._functions.initial)(p)
        return values, p, jnp.where(self._x0_source == _DEFAULT, x0, _pick(values, self._x0_source, self._x0_value))

    def _field(self, t, u, p):
        """The model's right-hand side, guarded: a non-finite value (a fractional power of a
        concentration that a trial step drove negative, an overflow) becomes a huge finite one,
        so the step-size controller rejects the step and the implicit solver's Newton iteration
        and its forward-mode derivative (a linear solve that refuses non-finite input) never
        see NaN. Accepted steps, whose right-hand side is finite, are unchanged."""
        f = self._functions.rhs(t, u, p)
        return jnp.where(jnp.isfinite(f), f, _HUGE)

    def _field_forward(self, t, u, p):
        r"""[`_field`][] for solves differentiated in forward mode: where the field is finite but
        its tangent is not (a term that saturates through an overflow, as a Hill function
        $1/(1 + (x/K)^n)$ with $(x/K)^n = \infty$: its tangent is inf/inf), the tangent is 0,
        its limit there, so the implicit step's derivative (a linear solve) stays finite. The
        implicit solver's Newton matrix (the field's Jacobian) gets 0 in those entries too:
        its iteration seeks the same root, and may converge differently."""
        return _finite_tangent(self._field(t, u, p))

    def _trajectories(self, x, forward: bool):
        values, p, x0 = self._parameters(x)
        solver = self.solver
        if isinstance(solver, MatrixExponential):
            return values, p, *solver.solve(self._functions.rhs, p, x0, self._times)

        def solve(p, x0, ts):
            solution = diffrax.diffeqsolve(
                diffrax.ODETerm(self._field_forward if forward else self._field),
                solver,
                t0=0.0,
                t1=jnp.maximum(ts[-1], 1e-12),
                dt0=None,
                y0=x0,
                args=p,
                saveat=diffrax.SaveAt(ts=ts),
                stepsize_controller=RejectionLimit(
                    diffrax.PIDController(rtol=self.rtol, atol=self.atol), self.max_rejections
                ),
                max_steps=self.max_steps,
                adjoint=diffrax.ForwardMode() if forward else diffrax.RecursiveCheckpointAdjoint(),
                throw=False,
            )
            assert solution.ys is not None  # saved at `ts`
            return solution.ys, solution.result == diffrax.RESULTS.successful

        # one condition vmapped: a loop of one solve costs Boehm et al. 2014's fits a fifth more
        states, ok = per_run(self.vectorize or len(self.conditions) == 1, solve, p, x0, self._times)
        return values, p, states, jnp.all(ok)

    def _outputs(self, x: Float[Array, " n"]):
        """Per measurement: the transformed simulation and the log of
        the noise scale; and whether every solve succeeded."""
        values, p, states, ok = self._trajectories(x, forward=False)
        return *self._observe(values, p, states), ok

    def _observe(self, values, p, states):
        """Per measurement: the transformed simulation and the log of the noise scale, from
        every table parameter's value, the conditions' model parameters and their solved
        `states` `(C, K, S)`."""
        u = states[self._condition, self._time_index]
        pm = p[self._condition]
        obs = _pick(values, self._obs_source, self._obs_value)
        noise = _pick(values, self._noise_source, self._noise_value)
        sim = jnp.zeros_like(self._measured)
        sigma = jnp.ones_like(self._measured)
        for o, rows in enumerate(self._groups):
            args = (self._time[rows], u[rows], pm[rows])
            y = jax.vmap(self._functions.observables[o])(*args, obs[rows])[:, 0]
            s = jax.vmap(self._functions.noises[o])(*args, obs[rows], noise[rows])[:, 0]
            sim, sigma = sim.at[rows].set(_transform(y, self._transforms[o])), sigma.at[rows].set(s)
        return sim, jnp.log(sigma)

    def _measured_scaled(self):
        m, jac = self._measured, jnp.zeros_like(self._measured)
        for o, rows in enumerate(self._groups):
            t = self._transforms[o]
            m = m.at[rows].set(_transform(self._measured[rows], t))
            jac = jac.at[rows].set(
                {
                    "lin": 0.0,
                    "log": jnp.log(self._measured[rows]),
                    "log10": jnp.log(self._measured[rows] * math.log(10)),
                }[t]
            )
        return m, jac

    def _nll_terms(self, sim, log_sigma):
        m, jac = self._measured_scaled()
        r = (m - sim) * jnp.exp(-log_sigma)
        normal = 0.5 * math.log(2 * math.pi) + 0.5 * r**2
        laplace = math.log(2.0) + jnp.abs(r)
        return log_sigma + jac + jnp.where(self._laplace, laplace, normal)

    def log_likelihood(self, params: ArrayLike | None = None) -> Float[Array, ""]:
        """PEtab's log-likelihood (priors excluded) at `params`, the estimated parameters on
        their scales in the order of `parameter_names` (default: the nominal values).
        Raises `RuntimeError` when a condition's ODE solve fails."""
        x = self._as_params(params)
        value, ok = _log_likelihood(self, x)
        if not bool(ok):
            advice = (
                "its matrix exponential is not finite (non-finite parameters, or more than max_squarings "
                "squarings needed)"
                if isinstance(self.solver, MatrixExponential)
                else "try a larger max_steps or max_rejections, or looser rtol/atol, in wendyjax.petab.load"
            )
            raise RuntimeError(f"{self.name}: the ODE solve failed at these parameters ({advice}).")
        return value

    def log_prior(self, params: ArrayLike | None = None) -> Float[Array, ""]:
        """The log-density of the parameter table's objective priors at `params` (0 without
        priors); each prior's density is of the value it names (linear or parameter scale)."""
        return _log_prior(self, self._as_params(params))

    def objective(self, x: Float[Array, " n"]) -> tuple[Float[Array, ""], Bool[Array, ""]]:
        """Negative log-posterior (negative log-likelihood minus the log prior) at `x` on the
        parameters' scales, and whether the solves succeeded: pure JAX, to jit, vmap and
        differentiate."""
        sim, log_sigma, ok = self._outputs(x)
        return jnp.sum(self._nll_terms(sim, log_sigma)) - _log_prior(self, x), ok

    def simulate(self, params: ArrayLike | None = None) -> pd.DataFrame:
        """The measurement table with a `simulation` column (the observables' values, untransformed)
        and `sigma` at `params` (default: nominal)."""
        x = self._as_params(params)
        sim, log_sigma, ok = _outputs(self, x)
        if not bool(ok):
            raise RuntimeError(f"{self.name}: the ODE solve failed at these parameters.")
        return self.measurements.assign(
            simulation=np.asarray(self._untransformed(sim)), sigma=np.exp(np.asarray(log_sigma))
        )

    def _untransformed(self, values: Float[Array, "*b m"]) -> Float[Array, "*b m"]:
        """Values on the observables' transformed scales (last axis: measurements) back on the
        linear scale."""
        out = values
        for o, rows in enumerate(self._groups):
            v = values[..., rows]
            out = out.at[..., rows].set({"lin": v, "log": jnp.exp(v), "log10": 10.0**v}[self._transforms[o]])
        return out

    def _as_params(self, params) -> Float[Array, " n"]:
        if params is None:
            return self.nominal
        x = jnp.asarray(params, dtype=float)
        if x.shape != (self.n_parameters,):
            raise ValueError(
                f"params must be a vector of the {self.n_parameters} estimated parameters on their scales "
                f"(order: problem.parameter_names), got shape {x.shape}."
            )
        return x


def require_problem(problem) -> None:
    """Raise the clear error for a `problem` that is not a [`PetabProblem`][wendyjax.petab.PetabProblem]."""
    if not isinstance(problem, PetabProblem):
        raise TypeError(f"problem must be a PetabProblem from wendyjax.petab.load, got {type(problem).__name__}.")


def _pick(values, source, value):
    """`values[source]` where `source` names a parameter of the table, else `value`."""
    return jnp.where(source >= 0, values[jnp.maximum(source, 0)], value)


def _unscale(x, scale):
    return {"lin": x, "log": jnp.exp(x), "log10": 10.0**x}[scale]


def _transform(y, transform):
    return {"lin": y, "log": jnp.log(y), "log10": jnp.log10(y)}[transform]


@jax.custom_jvp
def _finite_tangent(f):
    """`f` itself; its tangent with non-finite entries set to 0 (forward mode only: the rule
    is not linear in the tangent, so reverse mode cannot transpose it)."""
    return f


@_finite_tangent.defjvp
def _finite_tangent_jvp(primals, tangents):
    (f,), (df,) = primals, tangents
    return f, jnp.where(jnp.isfinite(df), df, 0.0)


@cpu_safe_jit
def _outputs(problem: PetabProblem, x):
    return problem._outputs(x)


@cpu_safe_jit
def _log_likelihood(problem: PetabProblem, x):
    sim, log_sigma, ok = problem._outputs(x)
    return -jnp.sum(problem._nll_terms(sim, log_sigma)), ok


def _log_prior(problem: PetabProblem, x):
    total = jnp.zeros(())
    for i, kind in enumerate(problem._priors):
        if kind is None:
            continue
        a, b = problem._prior_parameters[i, 0], problem._prior_parameters[i, 1]
        value = x[i] if kind.startswith("parameterScale") else _unscale(x[i], problem.scales[i])
        base = kind.removeprefix("parameterScale").removeprefix("log").lower()
        if kind.startswith("log"):
            value = jnp.log(value)
        density = {
            "uniform": jnp.where((value >= a) & (value <= b), -jnp.log(b - a), -jnp.inf),
            "normal": jstats.norm.logpdf(value, a, b),
            "laplace": jstats.laplace.logpdf(value, a, b),
        }[base]
        total = total + density - (value if kind.startswith("log") else 0.0)
    return total


def _symbols(prefix: str, names) -> dict[str, sp.Basic]:
    return {n: sp.Symbol(f"{prefix}{i}") for i, n in enumerate(names)}


def _formula(table: Table, i: int, column: str, known: Mapping[str, sp.Basic]) -> sp.Basic:
    text = table.frame[column].iloc[i]
    if not isinstance(text, str):
        if column == "noiseFormula":
            raise PetabError(f"{table.where(i, column)}: empty noise formula (give a number or a parameter).")
        raise PetabError(f"{table.where(i, column)}: empty formula.")
    try:
        expr = sympify_petab(text)
    except Exception as error:  # petab's parser raises its own and sympy's errors
        raise PetabError(f"{table.where(i, column)}: cannot parse {text!r} ({error}).") from None
    unknown = sorted(str(s) for s in expr.free_symbols if str(s) not in known)
    if unknown:
        raise PetabError(
            f"{table.where(i, column)}: unknown symbol {unknown[0]!r} in {text!r} (not a state, model "
            f"parameter, rule, parameter-table entry or placeholder of this observable)."
        )
    return expr.xreplace({s: known[str(s)] for s in expr.free_symbols})


def _overrides(table: Table, column: str, counts: np.ndarray, index: dict[str, int]):
    """Per measurement: the values of its observable's placeholders in `column` (`counts[i]` of
    them, ';'-separated numbers or parameters of the table) as (source, value) arrays."""
    rows = len(table.frame)
    width = max(int(counts.max(initial=0)), 1)
    source, value = np.full((rows, width), _CONSTANT), np.zeros((rows, width))
    entries = table.frame[column] if column in table.frame else [None] * rows
    for i, entry in enumerate(entries):
        parts = [] if not isinstance(entry, str) else [e.strip() for e in entry.split(";")]
        if len(parts) != counts[i]:
            raise PetabError(
                f"{table.where(i, column)}: {len(parts)} values for the {counts[i]} placeholders of "
                f"observable {table.frame['observableId'].iloc[i]}."
            )
        for k, part in enumerate(parts):
            try:
                value[i, k] = float(part)
            except ValueError:
                if part not in index:
                    raise PetabError(
                        f"{table.where(i, column)}: {part!r} is neither a number nor a parameter of the "
                        f"parameter table."
                    ) from None
                source[i, k] = index[part]
    return source, value


def _default_solver() -> diffrax.AbstractSolver:
    # The Newton iterations' own tolerances, looser than the step's (diffrax takes the step
    # controller's by default): at rtol 1e-8 / atol 1e-12 the Newton iteration fails to
    # converge on step after step of stiff models, each such step is rejected and shrunk, and
    # the solve crawls (Bachmann et al. 2011 hits 10^5 steps), while the step-size controller
    # bounds the error of each accepted step whatever the Newton tolerance. 1e-4 / 1e-7
    # rejects far fewer steps than 1e-5 / 1e-8 or 1e-6 / 1e-9, with the collection's
    # log-likelihoods as close to AMICI's (benchmarks/README.md, PEtab rows).
    return diffrax.Kvaerno5(root_finder=diffrax.VeryChord(rtol=1e-4, atol=1e-7))


def load(
    path: str | Path,
    *,
    solver: diffrax.AbstractSolver | MatrixExponential | None = None,
    rtol: float = 1e-8,
    atol: float = 1e-12,
    max_steps: int = 10_000,
    max_rejections: int = 100,
    vectorize: bool | str = "auto",
) -> PetabProblem:
    """Read the PEtab v1 problem whose YAML file is `path` (needs `pip install wendyjax[petab]`).

    The SBML model becomes JAX ODEs (species, parameters, compartments, assignment and rate
    rules, reactions, function definitions, piecewise); conditions become trajectories that
    share the estimated parameters. `solver`: by default the exact solution,
    [`MatrixExponential`][wendyjax.petab.MatrixExponential], where the model is linear and
    autonomous (dx/dt = A x + b, A and b constant in time and in the states), else
    `diffrax.Kvaerno5` (for stiff models, with Newton tolerances of its own); a diffrax solver
    solves any model. `rtol`, `atol` and `max_steps` set a diffrax solver's solves
    (`max_steps` steps, accepted and rejected, over a whole solve: a solve that fails at a
    trial point of a fit stops after that many, each step costing the more the more
    parameters are estimated); a solve also fails where one step is rejected
    `max_rejections` times in a row (it has stopped advancing, as at a blow-up). `vectorize`:
    the conditions' solves side by side, vmapped (True; "auto" on accelerators), or one after
    another (False; "auto" on CPU, where vmapped solves step together until the slowest
    condition's last step, at little gain per step); a single condition is solved vmapped
    either way.
    Refused when loading, with the feature and the problem named: preequilibration, steady-state (infinite-time)
    measurements, events, algebraic rules, delays, and noise models other than normal and
    Laplace on the lin, log or log10 scale; `solver=MatrixExponential()` for a model that is
    not linear and autonomous.
    """
    rtol, atol = as_ratio("rtol", rtol), as_ratio("atol", atol)
    max_steps = as_count("max_steps", max_steps, 1)
    max_rejections = as_count("max_rejections", max_rejections, 1)
    vectorize = resolve_vectorize(vectorize, jax.devices())
    if solver is not None and not isinstance(solver, MatrixExponential):
        as_ode_solver("solver", solver)
    tables = read_tables(path)
    name = tables.name
    measurement = tables.measurement
    frame = measurement.frame
    preequilibration = frame.get("preequilibrationConditionId")
    if preequilibration is not None and preequilibration.notna().any():
        where = measurement.where(int(preequilibration.notna().argmax()), "preequilibrationConditionId")
        raise PetabError(f"{name} uses preequilibration ({where}), which wendyjax does not support.")
    ode = read_sbml(tables.model)

    # The parameter table: every parameter's linear value, the estimated ones' scales and bounds.
    ptable = tables.parameter
    pids = list(ptable.frame["parameterId"])
    index = {p: i for i, p in enumerate(pids)}
    values = np.array([number(ptable, i, "nominalValue", allow_missing=True) for i in range(len(pids))])
    estimated, scales, lower, upper, priors, prior_parameters = [], [], [], [], [], []
    for i in range(len(pids)):
        flag = ptable.frame["estimate"].iloc[i]
        if flag not in ("0", "1"):
            raise PetabError(f"{ptable.where(i, 'estimate')}: expected 0 or 1, got {flag!r}.")
        if flag == "0":
            if math.isnan(values[i]):
                raise PetabError(f"{ptable.where(i, 'nominalValue')}: a fixed parameter needs a nominal value.")
            continue
        scale = ptable.frame["parameterScale"].iloc[i]
        if scale not in SCALES:
            raise PetabError(f"{ptable.where(i, 'parameterScale')}: {scale!r} is not one of {', '.join(SCALES)}.")
        lo, hi = number(ptable, i, "lowerBound"), number(ptable, i, "upperBound")
        if not lo < hi or (scale != "lin" and lo < 0):
            raise PetabError(
                f"{ptable.where(i, 'lowerBound')}: bounds [{lo}, {hi}] are not an interval on the {scale} scale."
            )
        if math.isnan(values[i]):
            values[i] = math.sqrt(lo * hi) if scale != "lin" and lo > 0 else 0.5 * (lo + hi)
        kind = ptable.frame["objectivePriorType"].iloc[i] if "objectivePriorType" in ptable.frame else None
        if isinstance(kind, str):
            if kind not in PRIORS:
                raise PetabError(
                    f"{name}: {ptable.where(i, 'objectivePriorType')}: prior {kind!r} is not supported "
                    f"(supported: {', '.join(PRIORS)})."
                )
            text = (
                ptable.frame["objectivePriorParameters"].iloc[i] if "objectivePriorParameters" in ptable.frame else None
            )
            try:
                a, b = (float(v) for v in str(text).split(";"))
            except ValueError:
                raise PetabError(
                    f"{ptable.where(i, 'objectivePriorParameters')}: expected two numbers 'a;b', got {text!r}."
                ) from None
            priors.append(kind)
            prior_parameters.append((a, b))
        else:
            priors.append(None)
            prior_parameters.append((0.0, 1.0))
        estimated.append(i)
        scales.append(scale)
        lower.append(_scale(np.array(lo), scale))
        upper.append(_scale(np.array(hi), scale))

    # Symbols of the model: states, model parameters (SBML constants, compartments, and
    # table-only parameters), their JAX-argument names.
    table_only = [p for p in pids if p not in ode.parameters and p not in ode.states and p not in ode.expressions]
    model_parameters = list(ode.parameters) + table_only
    x_sym = _symbols("x", ode.states)
    p_sym = _symbols("p", model_parameters)
    t_sym = sp.Symbol("t")
    rename = {sp.Symbol(k): v for k, v in (x_sym | p_sym).items()} | {TIME: t_sym}
    expressions = {k: v.xreplace(rename) for k, v in ode.expressions.items()}
    known = {**x_sym, **p_sym, **expressions, "time": t_sym, "t": t_sym}

    # Conditions: per model parameter, a number or a parameter of the table; per state, an override.
    ctable = tables.condition
    conditions = list(ctable.frame["conditionId"])
    used = list(dict.fromkeys(frame["simulationConditionId"]))
    for i, c in enumerate(frame["simulationConditionId"]):
        if c not in conditions:
            raise PetabError(
                f"{measurement.where(i, 'simulationConditionId')}: condition {c!r} is not in the "
                f"condition table ({ctable.frame['_file'].iloc[0] if len(ctable.frame) else 'empty'})."
            )
    columns = [c for c in ctable.frame.columns if c not in ("conditionId", "conditionName", "_file", "_line")]
    for column in columns:
        if column not in p_sym and column not in x_sym:
            raise PetabError(
                f"{ctable.frame['_file'].iloc[0]}, column {column}: not a parameter, compartment or "
                f"species of the model."
            )
    par_source = np.full((len(used), len(model_parameters)), _CONSTANT)
    par_value = np.zeros((len(used), len(model_parameters)))
    x0_source = np.full((len(used), len(ode.states)), _DEFAULT)
    x0_value = np.zeros((len(used), len(ode.states)))
    for j, q in enumerate(model_parameters):
        if q in index:
            par_source[:, j] = index[q]
        elif math.isnan(ode.values.get(q, math.nan)):
            raise PetabError(
                f"{name}: model parameter {q} has no value in the SBML model and is in neither the "
                f"parameter nor the condition table."
            )
        else:
            par_value[:, j] = ode.values[q]
    for c, cid in enumerate(used):
        i = conditions.index(cid)
        for column in columns:
            entry = ctable.frame[column].iloc[i]
            is_state = column in x_sym
            if not isinstance(entry, str):
                if not is_state:
                    raise PetabError(f"{ctable.where(i, column)}: empty; give a number or a parameter.")
                continue
            target = (
                (x0_source, x0_value, list(x_sym).index(column))
                if is_state
                else (par_source, par_value, model_parameters.index(column))
            )
            try:
                target[1][c, target[2]], target[0][c, target[2]] = float(entry), _CONSTANT
            except ValueError:
                if entry not in index:
                    raise PetabError(
                        f"{ctable.where(i, column)}: {entry!r} is neither a number nor a parameter of the "
                        f"parameter table."
                    ) from None
                target[0][c, target[2]] = index[entry]
    for i, state in enumerate(ode.states):
        if ode.initial[i].has(sp.nan) and (x0_source[:, i] == _DEFAULT).any():
            raise PetabError(
                f"{name}: {state} has no initial value in the SBML model, and the condition table does "
                f"not set one for condition {used[int(np.argmax(x0_source[:, i] == _DEFAULT))]}."
            )
    if np.isnan(par_value).any():
        raise PetabError(f"{name}: a condition sets a model parameter to NaN.")

    # Observables and noise: JAX functions of (t, x, p, placeholders).
    otable = tables.observable
    observables = list(otable.frame["observableId"])
    for i, o in enumerate(frame["observableId"]):
        if o not in observables:
            raise PetabError(
                f"{measurement.where(i, 'observableId')}: observable {o!r} is not in the observable "
                f"table ({otable.frame['_file'].iloc[0]})."
            )
    obs_functions, noise_functions, transforms, distributions, direct, noise_static = [], [], [], [], [], []
    used_symbols = set()
    n_obs = n_noise = 1
    placeholders = {}
    for i, o in enumerate(observables):
        count = {}
        for kind, column in (("observable", "observableFormula"), ("noise", "noiseFormula")):
            text = str(otable.frame[column].iloc[i])
            count[kind] = sum(1 for k in range(1, 100) if f"{kind}Parameter{k}_{o}" in text)
        placeholders[o] = count
        n_obs, n_noise = max(n_obs, count["observable"]), max(n_noise, count["noise"])
    a_sym = [sp.Symbol(f"a{k}") for k in range(n_obs)]
    b_sym = [sp.Symbol(f"b{k}") for k in range(n_noise)]
    x_args, p_args = sp.Matrix(list(x_sym.values())), sp.Matrix(list(p_sym.values()))
    for i, o in enumerate(observables):
        own = {f"observableParameter{k + 1}_{o}": a_sym[k] for k in range(n_obs)}
        noise_own = {f"noiseParameter{k + 1}_{o}": b_sym[k] for k in range(n_noise)}
        y = _formula(otable, i, "observableFormula", known | own)
        s = _formula(otable, i, "noiseFormula", known | own | noise_own)
        used_symbols |= y.free_symbols
        # an observable that is one state itself; a noise level that depends on neither states nor time
        direct.append(list(x_sym.values()).index(y) if y in x_sym.values() else None)
        noise_static.append(not s.free_symbols & (set(x_sym.values()) | {t_sym}))
        obs_functions.append(_lambdify([t_sym, x_args, p_args, sp.Matrix(a_sym)], [y]))
        noise_functions.append(_lambdify([t_sym, x_args, p_args, sp.Matrix(a_sym), sp.Matrix(b_sym)], [s]))
        transform = (
            otable.frame["observableTransformation"].iloc[i] if "observableTransformation" in otable.frame else None
        )
        transform = transform if isinstance(transform, str) else "lin"
        distribution = otable.frame["noiseDistribution"].iloc[i] if "noiseDistribution" in otable.frame else None
        distribution = distribution if isinstance(distribution, str) else "normal"
        if transform not in SCALES:
            raise PetabError(
                f"{otable.where(i, 'observableTransformation')}: {transform!r} is not one of {', '.join(SCALES)}."
            )
        if distribution not in DISTRIBUTIONS:
            raise PetabError(
                f"{otable.where(i, 'noiseDistribution')}: {distribution!r} is not supported (normal or laplace)."
            )
        transforms.append(transform)
        distributions.append(distribution)

    # Measurements: values, times, and where each sits in its condition's simulation.
    measured = np.array([number(measurement, i, "measurement") for i in range(len(frame))])
    times = np.array([number(measurement, i, "time") for i in range(len(frame))])
    for i, t in enumerate(times):
        if not math.isfinite(t) or t < 0:
            feature = "steady-state (time inf) measurements" if t == math.inf else "negative times"
            raise PetabError(f"{name} has {feature} ({measurement.where(i, 'time')}), which wendyjax does not support.")
    observable_of = np.array([observables.index(o) for o in frame["observableId"]])
    for i, o in enumerate(observable_of):
        if transforms[o] != "lin" and not measured[i] > 0:
            raise PetabError(
                f"{measurement.where(i, 'measurement')}: {measured[i]} is not positive, but observable "
                f"{observables[o]} is on the {transforms[o]} scale."
            )
    condition_of = np.array([used.index(c) for c in frame["simulationConditionId"]])
    grids = [np.unique(times[condition_of == c]) for c in range(len(used))]
    width = max(len(g) for g in grids)
    padded = np.stack([np.concatenate([g, np.full(width - len(g), g[-1])]) for g in grids])
    time_index = np.array([np.searchsorted(grids[c], t) for c, t in zip(condition_of, times, strict=True)])
    counts = {
        kind: np.array([placeholders[observables[o]][kind] for o in observable_of], dtype=int)
        for kind in ("observable", "noise")
    }
    obs_source, obs_value = _overrides(measurement, "observableParameters", counts["observable"], index)
    noise_source, noise_value = _overrides(measurement, "noiseParameters", counts["noise"], index)
    groups = tuple(jnp.asarray(np.flatnonzero(observable_of == o)) for o in range(len(observables)))

    initial_exprs = [e.xreplace(rename) for e in ode.initial]
    rhs_exprs = [e.xreplace(rename) for e in ode.rhs]
    x0 = _lambdify([p_args], initial_exprs)
    rhs = _lambdify([t_sym, x_args, p_args], rhs_exprs)
    linear = linear_autonomous(rhs_exprs, list(x_sym.values()), t_sym)
    if isinstance(solver, MatrixExponential) and not linear:
        raise PetabError(
            f"{name}: solver=MatrixExponential() needs a linear autonomous model (dx/dt = A x + b, A and b "
            f"constant in time and in the states), and {tables.model.name} is not; leave solver out or pass a "
            f"diffrax solver."
        )
    # the table parameters the ODE solves depend on, and those the dynamics and observables
    # depend on (the others enter only the noise)
    ode_symbols = set().union(*(e.free_symbols for e in initial_exprs + rhs_exprs))
    used_symbols |= ode_symbols

    def sources(symbols):
        return set(par_source[:, [j for j, q in enumerate(model_parameters) if p_sym[q] in symbols]].ravel())

    in_ode = sources(ode_symbols) | set(x0_source.ravel())
    dynamic = in_ode | sources(used_symbols) | set(obs_source.ravel())
    lower, upper = np.array(lower, dtype=float), np.array(upper, dtype=float)
    nominal = np.array([_scale(values[i], s) for i, s in zip(estimated, scales, strict=True)], dtype=float)
    return PetabProblem(
        name=name,
        parameter_names=tuple(pids[i] for i in estimated),
        scales=tuple(scales),
        lower=jnp.asarray(lower),
        upper=jnp.asarray(upper),
        nominal=jnp.asarray(nominal),
        states=ode.states,
        observables=tuple(observables),
        conditions=tuple(used),
        _table=_Held(frame.drop(columns=["_file", "_line"]).assign(measurement=measured, time=times)),
        solver=(MatrixExponential() if linear else _default_solver()) if solver is None else solver,
        rtol=rtol,
        atol=atol,
        max_steps=max_steps,
        max_rejections=max_rejections,
        vectorize=vectorize,
        _functions=_Functions(rhs, x0, tuple(obs_functions), tuple(noise_functions)),
        _values=jnp.asarray(np.nan_to_num(values)),
        _estimated=jnp.asarray(np.array(estimated, dtype=int)),
        _par_source=jnp.asarray(par_source),
        _par_value=jnp.asarray(par_value),
        _x0_source=jnp.asarray(x0_source),
        _x0_value=jnp.asarray(x0_value),
        _times=jnp.asarray(padded),
        _measured=jnp.asarray(measured),
        _time=jnp.asarray(times),
        _condition=jnp.asarray(condition_of),
        _time_index=jnp.asarray(time_index),
        _obs_source=jnp.asarray(obs_source),
        _obs_value=jnp.asarray(obs_value),
        _noise_source=jnp.asarray(noise_source),
        _noise_value=jnp.asarray(noise_value),
        _groups=groups,
        _transforms=tuple(transforms),
        _laplace=jnp.asarray(np.array([distributions[o] == "laplace" for o in observable_of], dtype=bool)),
        _priors=tuple(priors),
        _prior_parameters=jnp.asarray(np.array(prior_parameters, dtype=float).reshape(-1, 2)),
        _dynamic=tuple(i in dynamic for i in estimated),
        _in_ode=tuple(i in in_ode for i in estimated),
        _direct=tuple(direct),
        _noise_static=tuple(noise_static),
    )

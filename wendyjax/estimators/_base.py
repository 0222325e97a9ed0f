"""The estimator contract: every estimator builds its `problem` from `(model, data)`, picks
its start (`init`), `solve`s purely and has a `covariance`; `AbstractEstimator.fit` does
the rest."""

import abc
import dataclasses
import inspect
import time
import warnings
from collections.abc import Callable, Mapping
from typing import Any, ClassVar

import equinox as eqx
import jax
import numpy as np
from jaxtyping import Array, Float, PRNGKeyArray, PyTree

from .._checks import as_key, param_vector, user_stacklevel
from .._compile import cpu_safe_jit
from ..data import Batch, as_data, fingerprint, largest_magnitude
from ..model import ODEModel
from ._solution import Solution

# options some estimators have, and where to go for them from one that has not
_ELSEWHERE = {
    "observe": "Observables other than the states (observe=) are fitted by output error (wj.OutputError): the weak "
    "form needs every state observed directly.",
    "u0": "Initial states (u0=) are an option of output error and the hybrid; the weak form does not solve the ODE.",
}

# statuses after which the estimate is still usable: the fit only warns
_WARN_ONLY = ("max_steps_reached", "stalled", "shapiro_wilk_stop")


def model_box(model, bounds) -> tuple[np.ndarray | None, np.ndarray | None]:
    """`bounds` ("model", `None` or `(lower, upper)`) as two arrays of the model's
    parameter count (±inf where unbounded); `(None, None)` for an object without a
    parameter vector (a library or a neural field: a box is refused)."""
    j = getattr(model, "n_params", None)
    if j is None:
        # a library or a neural field (any other object is the estimator's `problem` to refuse)
        if isinstance(model, eqx.Module) and not (bounds is None or (isinstance(bounds, str) and bounds == "model")):
            raise ValueError(
                f"bounds: {getattr(model, 'name', type(model).__name__)} has no parameter vector (a "
                f"library or a neural field), so a box does not apply; pass bounds=None, got "
                f"{bounds!r}."
            )
        return None, None
    if isinstance(bounds, str):
        if bounds != "model":
            raise ValueError(f"bounds must be 'model', None or a pair (lower, upper), got {bounds!r}.")
        box = getattr(model, "bounds", None)
        if box is None:
            return np.full(j, -np.inf), np.full(j, np.inf)
        return np.asarray(box[0], float), np.asarray(box[1], float)
    if bounds is None:
        return np.full(j, -np.inf), np.full(j, np.inf)
    if len(bounds) != 2:
        raise ValueError("bounds must be 'model', None or a pair (lower, upper).")
    lo, hi = (np.broadcast_to(np.asarray(b, float), (j,)) if np.ndim(b) == 0 else np.asarray(b, float) for b in bounds)
    if lo.shape != (j,) or hi.shape != (j,):
        raise ValueError(
            f"bounds must be two arrays of shape ({j},) for model '{model.name}' "
            f"(parameters {', '.join(model.param_names)}), got {lo.shape} and {hi.shape}."
        )
    if np.any(np.isnan(lo)) or np.any(np.isnan(hi)) or np.any(lo > hi):
        raise ValueError("bounds: lower and upper must be non-NaN with lower <= upper.")
    return lo, hi


def hold(model, fixed, p0, bounds) -> tuple:
    """`fit(..., fixed=...)`: `model` with the parameters `fixed` names held
    ([`ODEModel.fix`][wendyjax.ODEModel.fix]; a boolean mask holds them at `p0`), and `p0`
    and explicit `bounds` given for all parameters cut to the free ones (given for the free
    ones, they are kept)."""
    if fixed is None:
        return model, p0, bounds
    if not isinstance(model, ODEModel):
        raise TypeError(
            f"fixed holds parameters of an ODEModel; {type(model).__name__} has no named parameter vector to hold."
        )
    if isinstance(fixed, Mapping):
        values = dict(fixed)
    else:
        mask = np.asarray(fixed)
        if mask.dtype != bool or mask.shape != (model.n_params,):
            raise ValueError(
                f"fixed must be a dict {{name: value}} or a boolean mask of shape ({model.n_params},) "
                f"(parameters {', '.join(model.param_names)}), got {fixed!r}."
            )
        if p0 is None or np.shape(p0) != (model.n_params,):
            raise ValueError(
                f"fixed as a mask holds parameters at their p0: pass p0 with all {model.n_params} "
                f"parameters ({', '.join(model.param_names)}), or fixed={{name: value}}."
            )
        values = {n: v for n, v, m in zip(model.param_names, param_vector(model, p0, "p0"), mask) if m}
    held = model.fix(values)
    free = [model.param_names.index(n) for n in held.param_names]
    if p0 is not None and np.shape(p0) == (model.n_params,):
        p0 = np.asarray(p0, float)[free]
    if not (bounds is None or isinstance(bounds, str)) and len(bounds) == 2:
        bounds = tuple(np.asarray(b, float)[free] if np.shape(b) == (model.n_params,) else b for b in bounds)
    return held, p0, bounds


def check_start(model, p0, lower: np.ndarray, upper: np.ndarray, argname: str = "p0") -> np.ndarray:
    """`p0` as a finite parameter vector of `model` inside `[lower, upper]`."""
    p0 = param_vector(model, p0, argname)
    outside = [
        f"{n} = {v:g} not in [{a:g}, {b:g}]"
        for n, v, a, b in zip(model.param_names, p0, lower, upper)
        if not a <= v <= b
    ]
    if outside:
        raise ValueError(f"{argname} lies outside the bounds: " + "; ".join(outside) + ".")
    return p0


@cpu_safe_jit
def _solve(estimator, problem, p0, lower, upper) -> Solution:
    return estimator.solve(problem, p0, lower, upper)


@cpu_safe_jit
def _covariance(estimator, problem, solution, kind):
    return estimator.covariance(problem, solution, kind)


class AbstractEstimator(eqx.Module):
    """The contract every estimator implements, and the one `fit` they share.

    An estimator is an `eqx.Module` of options. It provides

    - `problem(model, data, *, key, ...)`: the arrays it fits (a weak likelihood, the
      output-error data, the collocation subintervals, …), built and checked outside `jit`
      from a [`Dataset`][wendyjax.Dataset], with the estimator's own keyword options after
      `key` ([`options`][]);
    - `init(model, problem, p0, lower, upper)`: the checked start (a default where the
      method has one);
    - `solve(problem, p0, lower, upper)` → [`Solution`][wendyjax.estimators.Solution]:
      pure, so `jax.jit`, `jax.vmap` and sharding apply;
    - `covariance(problem, solution, kind)`: the covariance of the estimate, by one of
      its `covariances` (NaN where it has none);
    - `batch_problems(model, datasets, *, key, ...)`: the stacked problems of many
      datasets, for `vmap` (studies, bootstraps), with `problem`'s options.
    - `objective(problem, params)`: the objective `solve` reports, at given parameters
      (WENDy, output error and the hybrid; what a bootstrap or profile checks a rebuilt
      problem against).

    Class variables: `method` (its name), `covariances` (the kinds, the default first;
    empty when the method has none) and `fit_type` (its result class).
    """

    method: ClassVar[str]
    covariances: ClassVar[tuple[str, ...]]
    fit_type: ClassVar[type]

    @abc.abstractmethod
    def problem(self, model, data, *, key: PRNGKeyArray | None = None) -> PyTree:
        """The problem `solve` takes, from `model` and `data` (a [`Dataset`][wendyjax.Dataset];
        a [`Field`][wendyjax.Field] for the estimators that fit one)."""

    @abc.abstractmethod
    def init(self, model, problem, p0, lower, upper) -> PyTree:
        """The start: `p0` checked against the model and bounds, or the method's default."""

    @abc.abstractmethod
    def solve(self, problem, p0, lower, upper, /) -> Solution:
        """Estimate from `p0` within `lower ≤ p ≤ upper` (±inf allowed). Pure."""

    @abc.abstractmethod
    def covariance(self, problem, solution: Solution, /, kind: str | None = None) -> Float[Array, "j j"]:
        """Covariance of `solution.params` by `kind` (default: the first of `covariances`)."""

    @abc.abstractmethod
    def batch_problems(
        self, model, datasets: "Batch | list", *, key: PRNGKeyArray | None = None
    ) -> tuple[Callable, list[dict]]:
        """For batched fits (studies, bootstraps): from a [`Batch`][wendyjax.Batch] of
        datasets on shared grids (or a list of datasets), `(make, notes)`, where
        `make(indices)` builds the problems of datasets `indices` (with `problem`'s options;
        `key`, one key or one per dataset, for an estimator that draws random numbers)
        stacked along a leading axis, every call with the same shapes (so one compiled
        program serves all), and `notes[i]` says how dataset `i`'s problem was set up (e.g.
        its number of test functions `k` and `radius`; empty where there is nothing to
        say). What every dataset shares is prepared once, here; `make` assembles a chunk."""

    def objective(self, problem, params) -> Float[Array, ""]:
        """The objective `solve` reports, at `params` (e.g. ℓ(p) for WENDy): what a
        bootstrap or profile checks a rebuilt problem against. Estimators whose objective
        is not a function of the parameters alone do not have it."""
        raise NotImplementedError(f"{type(self).__name__} has no objective at given parameters.")

    def start_required(self, model) -> str | None:
        """Why `fit` needs a `p0` for `model` (checked before any work), or `None` where
        the method has a default start."""
        return None

    def require_start(self, model, p0) -> None:
        """Raise the clear error of [`start_required`][] when `p0` is `None` but needed."""
        if p0 is None and (why := self.start_required(model)):
            raise ValueError(f"p0 is required: {why}")

    def options(self) -> tuple[str, ...]:
        """The keyword options of this estimator's `fit` beyond the common ones."""
        params = inspect.signature(self.problem).parameters.values()
        return tuple(p.name for p in params if p.kind is p.KEYWORD_ONLY and p.name != "key")

    def fit(
        self,
        model,
        data,
        p0: PyTree | None = None,
        *,
        bounds: Any = "model",
        key: PRNGKeyArray | int | None = None,
        throw: bool = True,
        covariance: str | None = None,
        fixed: "Mapping[str, float] | Any" = None,
        **options,
    ):
        """Fit `model` to `data` from `p0` and return the fit result (`fit_type`).

        **Arguments:**

        - `model`: what is fitted (an [`ODEModel`][wendyjax.ODEModel]; a library or a
          neural field for integral matching; a `LinearODE` for Data2LD).
        - `data`: a [`Trajectory`][wendyjax.Trajectory], [`Dataset`][wendyjax.Dataset] or
          list of trajectories; NaN or the mask marks a missing value.
        - `p0`: the start (a pytree for a library or a neural field); `None` takes the
          method's default where it has one.
        - `bounds`: "model" (the model's box where it has one), `None` (unbounded) or
          `(lower, upper)`.
        - `key`: a PRNG key or integer seed for estimators that draw random numbers.
        - `throw`: raise `RuntimeError` when the solve fails; `False` reports it in
          `status` (and warns). A fit that stops at its step limit or stalls only warns.
        - `covariance`: the kind of covariance, one of the estimator's `covariances`.
        - `fixed`: parameters of an `ODEModel` held, not fitted: `{name: value}`, or a
          boolean mask holding those at their `p0`. The fit is that of
          [`model.fix(...)`][wendyjax.ODEModel.fix] (its `model`, `params` and intervals
          are the free parameters'; bootstraps and profiles hold the same ones); `p0` and
          `bounds` may be given for all parameters or for the free ones.
        - `options`: the estimator's own keywords ([`options`][]), e.g. `noise` and
          `sigma`, passed to its `problem`.
        """
        allowed = self.options()
        unknown = sorted(set(options) - set(allowed))
        if unknown:
            hint = "".join(f" {_ELSEWHERE[k]}" for k in unknown if k in _ELSEWHERE)
            raise TypeError(
                f"{type(self).__name__}.fit got unknown keyword(s) {', '.join(unknown)}; its options "
                f"are bounds, key, throw, covariance, fixed{''.join(', ' + a for a in allowed)}.{hint}"
            )
        if covariance is not None and covariance not in self.covariances:
            raise ValueError(
                f"covariance must be one of {self.covariances} for {type(self).__name__}, got {covariance!r}."
            )
        kind = covariance if covariance is not None else (self.covariances[0] if self.covariances else None)
        model, p0, bounds = hold(model, fixed, p0, bounds)
        lower, upper = model_box(model, bounds)
        if p0 is not None and lower is not None and upper is not None:  # a parameter vector: checked before any work
            p0 = check_start(model, p0, lower, upper)
        self.require_start(model, p0)
        key = None if key is None else as_key(key)
        data = as_data(data)
        problem = self.problem(model, data, key=key, **options)
        start = self.init(model, problem, p0, lower, upper)
        box = (None, None) if lower is None else (jax.numpy.asarray(lower), jax.numpy.asarray(upper))
        clock = time.perf_counter()
        sol = jax.block_until_ready(_solve(self, problem, start, *box))
        cov = None if kind is None else np.asarray(_covariance(self, problem, sol, kind))
        seconds = time.perf_counter() - clock
        result = self.fit_type.from_solution(self, model, problem, start, sol, cov, kind, seconds)
        result = dataclasses.replace(result, options=dict(options), data_fingerprint=fingerprint(data))
        if lower is not None:
            result = dataclasses.replace(result, lower=lower, upper=upper)
        _report(result, throw, data)
        return result


def _listed(names, most: int = 8) -> str:
    """`names` joined by commas; beyond `most`, the first few and how many more."""
    names = list(names)
    return (
        ", ".join(names) if len(names) <= most else f"{', '.join(names[: most - 2])} and {len(names) - most + 2} more"
    )


def _report(fit, throw: bool, data) -> None:
    """Raise (with `throw`) or warn on a failed solve, warn on a usable but unconverged one,
    on weakly determined parameters and on a covariance that is not finite."""
    stack = user_stacklevel()  # the user's line
    if not fit.successful:
        name, title, model = fit.status_name, fit.title, f"model '{fit.model_name}'"
        if name == "max_steps_reached":
            warnings.warn(
                f"{title} stopped at its step limit without converging on {model}; the estimate may be inaccurate.",
                RuntimeWarning,
                stacklevel=stack,
            )
        elif name in _WARN_ONLY:
            warnings.warn(
                f"{title} {'stalled' if name == 'stalled' else 'stopped early'} on {model}: {fit.message} "
                f"The estimate may be inaccurate.",
                RuntimeWarning,
                stacklevel=stack,
            )
        else:
            text = f"{title} failed on {model} from p0 = {fit.start_text}: {fit.message}"
            if isinstance(fit.params, np.ndarray) and np.array_equal(fit.params, fit.p0):
                text += " It fails at the start already (the estimate never left p0)." + fit.stuck_hint()
            big = largest_magnitude(data)
            if big > 1e20 or 0 < big < 1e-20:
                text += (
                    f" The data's largest magnitude is {big:.3g}: the model's terms may overflow or underflow "
                    f"float64 at that scale; rescale the data to order one (and the parameters with them)."
                )
            if throw:
                raise RuntimeError(text)
            warnings.warn(text, RuntimeWarning, stacklevel=stack)
    small = largest_magnitude(data) if fit.successful else 0.0
    if 0 < small < 1e-6:  # stopping tests and floors are absolute too: below them every change looks converged
        warnings.warn(
            f"the data's largest magnitude is {small:.3g}: the solvers' absolute tolerances (atol, e.g. "
            f"1e-8) and floors assume data of order one, so {fit.title} may stop at its start or at a poor "
            f"estimate, and its warnings may blame the data. Rescale the data to order one (and the "
            f"parameters with them).",
            RuntimeWarning,
            stacklevel=stack,
        )
    if fit.successful and fit.at_bound:
        warnings.warn(
            f"the {fit.title} estimate of {_listed(fit.at_bound)} on model '{fit.model_name}' lies on "
            f"the box's bound: the optimum may lie outside the box, or the fit stopped there from a poor "
            f"start; try a wider box (bounds=...) or another start (e.g. MLE(start='both')).",
            RuntimeWarning,
            stacklevel=stack,
        )
    if weak := fit.weak_text():
        warnings.warn(f"{fit.title} on model '{fit.model_name}': {weak}.", RuntimeWarning, stacklevel=stack)
    if fit.covariance is not None and not np.all(np.isfinite(fit.covariance)):
        names = getattr(fit.model, "param_names", None)
        bad = np.flatnonzero(~np.isfinite(np.diagonal(fit.covariance)))
        which = (
            _listed([names[i] for i in bad]) if names is not None and 0 < len(bad) < len(names) else "all parameters"
        )
        warnings.warn(
            f"the {fit.covariance_method} parameter covariance of {fit.title} is not finite at the "
            f"estimate: standard errors of {which} are NaN (the data do not determine them there: the "
            f"Hessian or Jacobian is singular along them).",
            RuntimeWarning,
            stacklevel=stack,
        )

"""The checks the bootstrap and the profiles share: an estimator and its own successful fit,
on the fit's own data, with the fit's own options."""

import inspect

import jax
import numpy as np

from .._compile import cpu_safe_jit
from ..data import as_dataset, fingerprint
from ..estimators import AbstractEstimator, AbstractFit, Hybrid, OutputError, WENDyFit
from ..model import ODEModel
from ..noise import observable_noises


def check_fit(estimator: AbstractEstimator, fit: AbstractFit, what: str) -> None:
    """`fit` is a successful fit of an `ODEModel` by `estimator` (the same method: a WENDy fit
    of noiseless data that ran as WLS counts as its estimator's); `what` names the caller."""
    if not isinstance(estimator, AbstractEstimator):
        raise TypeError(f"estimator must be a wendyjax estimator (e.g. wj.MLE()), got {estimator!r}.")
    if not isinstance(fit, AbstractFit):
        raise TypeError(f"fit must be the result of estimator.fit(...), got {type(fit).__name__}.")
    if not isinstance(fit.model, ODEModel) or np.ndim(fit.params) != 1:
        raise TypeError(f"{what} works on fits of an ODEModel; the fit is of {type(fit.model).__name__}.")
    same = fit.method == estimator.method or (
        isinstance(fit, WENDyFit) and fit.method == "wls" and isinstance(fit, estimator.fit_type)
    )
    if not same:
        raise ValueError(
            f"the fit was made by {fit.title} but the estimator is {type(estimator).__name__}: pass the "
            f"estimator that made the fit."
        )
    if not fit.successful:
        raise ValueError(f"the fit did not succeed ({fit.status_name}): there is no estimate for {what}.")


def check_data(fit: AbstractFit, data, what: str) -> None:
    """`data` are the data the fit was made on (where the fit recorded them)."""
    if fit.data_fingerprint is not None and fingerprint(data) != fit.data_fingerprint:
        raise ValueError(
            f"data are not the data the fit was made on (other times, values or missing entries): "
            f"{what} of a fit starts from the fit's own data; pass those, or refit on these."
        )


def _same(a, b) -> bool:
    """Whether two option values are equal (arrays and pytrees of arrays entry by entry)."""
    leaves_a, tree_a = jax.tree.flatten(a)
    leaves_b, tree_b = jax.tree.flatten(b)
    if tree_a != tree_b:
        return False
    for x, y in zip(leaves_a, leaves_b):
        if isinstance(x, (np.ndarray, jax.Array, np.generic, int, float)):
            x, y = np.asarray(x), np.asarray(y)
            if x.shape != y.shape or not np.array_equal(x, y, equal_nan=x.dtype.kind in "fc" and y.dtype.kind in "fc"):
                return False
        elif not x == y:
            return False
    return True


def _shown(value) -> str:
    if isinstance(value, (np.ndarray, jax.Array)) and np.size(value) > 6:
        return f"an array of shape {np.shape(value)}"
    text = repr(value.tolist() if isinstance(value, (np.ndarray, jax.Array)) else value)
    return text if len(text) <= 60 else text[:57] + "..."


def _same_noise(model, a, b) -> bool:
    """Whether two `noise` options give every observable the same noise model (`None` is
    the model's own; Gaussian and log-normal ones by name, counts as objects; one for all
    or one per observable)."""
    k = next((len(v) for v in (a, b) if isinstance(v, (list, tuple))), 1)
    return observable_noises(model, a, k) == observable_noises(model, b, k)


def fit_options(estimator: AbstractEstimator, fit: AbstractFit, options: dict, what: str) -> dict:
    """The options to rebuild the fit's problem with: the fit's own, which `options` may
    repeat but not change (a fit not made by `estimator.fit` has none recorded: `options`)."""
    unknown = sorted(set(options) - set(estimator.options()))
    if unknown:
        raise TypeError(
            f"{what} got unknown keyword(s) {', '.join(unknown)}; {type(estimator).__name__}'s options "
            f"are {', '.join(estimator.options()) or 'none'}."
        )
    if fit.options is None:
        return dict(options)
    signature = inspect.signature(estimator.problem).parameters
    made = {name: signature[name].default for name in estimator.options()} | fit.options
    changed = [
        name
        for name, value in options.items()
        if not (_same_noise(fit.model, value, made[name]) if name == "noise" else _same(value, made[name]))
    ]
    if changed:
        raise ValueError(
            f"{what} got {', '.join(f'{n}={_shown(options[n])}' for n in changed)} but the fit was made with "
            f"{', '.join(f'{n}={_shown(made[n])}' for n in changed)}: {what} of a fit rebuilds the fit's own problem "
            f"(its options are reused when left out); leave them out, or refit with them first."
        )
    return {**fit.options, **options}


@cpu_safe_jit
def _objective(estimator, problem, params):
    return estimator.objective(problem, params)


def check_objective(estimator: AbstractEstimator, fit: AbstractFit, problem, what: str) -> None:
    """The problem rebuilt from the data and options given has the fit's objective at the
    estimate (to 1e-6 relative): otherwise it is not the fit's problem."""
    value = float(_objective(estimator, problem, np.asarray(fit.params, float)))
    if not abs(value - fit.objective) <= 1e-6 * max(1.0, abs(fit.objective)):
        raise ValueError(
            f"the problem rebuilt for {what} has objective {value:.8g} at the estimate, but the fit's is "
            f"{fit.objective:.8g}: the data or the options (sigma, test_functions, k, noise) are not those the fit "
            f"was made with. Pass the fit's data, and leave the options out (a fit made by estimator.fit reuses "
            f"its own) or pass those it was made with."
        )


def fit_problem(estimator: AbstractEstimator, fit: AbstractFit, data, options: dict, what: str):
    """The fit's problem rebuilt from `data` and `options` (with the fit's noise model and,
    for output error and the hybrid, its fitted initial states), refused unless it has the
    fit's objective at the estimate."""
    own = {"noise": options.get("noise", fit.noise), "u0": fitted_u0(estimator, fit, options)}
    options = {**options, **{k: v for k, v in own.items() if v is not None and k in estimator.options()}}
    problem = estimator.problem(fit.model, as_dataset(data), **options)
    check_objective(estimator, fit, problem, what)
    return problem


def fitted_u0(estimator: AbstractEstimator, fit: AbstractFit, options: dict):
    """The initial states a rebuilt problem of output error or the hybrid starts from: the
    fit's own, unless its options tie them to the parameters (`u0` a function, kept)."""
    if not isinstance(estimator, (OutputError, Hybrid)) or callable(options.get("u0")):
        return None
    return getattr(fit, "u0", None)


def has_objective(estimator: AbstractEstimator) -> bool:
    """Whether `estimator` gives its objective at given parameters."""
    return type(estimator).objective is not AbstractEstimator.objective

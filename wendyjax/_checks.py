"""Input checks shared by the public entry points: each names the argument it refuses; and
the warning when a fit is set up in float32."""

import math
import operator
import os
import sys
import warnings
from collections.abc import Sequence

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import jaxtyping
import numpy as np
from jaxtyping import PRNGKeyArray


def as_count(name: str, value, minimum: int) -> int:
    """`value` as an int of at least `minimum`: Python, NumPy and 0-d JAX integers; bools and
    floats refused."""
    try:
        if isinstance(value, (bool, np.bool_)):
            raise TypeError
        count = operator.index(value)
    except TypeError:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}.") from None
    if count < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}.")
    return count


def as_ratio(name: str, value, *, zero_ok: bool = False) -> float:
    """`value` (any real scalar, 0-d arrays too) as a finite float > 0 (>= 0 with `zero_ok`)."""
    try:
        if np.ndim(value) != 0 or isinstance(value, (str, bytes)):
            raise TypeError
        ratio = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number, got {value!r}.") from None
    if not (math.isfinite(ratio) and (ratio >= 0 if zero_ok else ratio > 0)):
        raise ValueError(f"{name} must be a finite number {'>=' if zero_ok else '>'} 0, got {value!r}.")
    return ratio


def as_ode_solver(name: str, solver):
    """`solver` if it is a diffrax solver of one ODE term (what every solve of the package
    builds); one for several terms (IMEX, partitioned, most SDE solvers) is refused."""
    if not isinstance(solver, diffrax.AbstractSolver):
        raise TypeError(
            f"{name} must be a diffrax solver (e.g. diffrax.Tsit5() or diffrax.Kvaerno5()), got {solver!r}."
        )
    structure = solver.term_structure
    if not (isinstance(structure, type) and issubclass(diffrax.ODETerm, structure)):
        raise TypeError(
            f"{name}: {type(solver).__name__} solves equations of several terms ({structure}), but the ODE is one "
            f"term u' = f(u, p, t); use a solver of one term, e.g. diffrax.Tsit5(), or diffrax.Kvaerno5() for a "
            f"stiff model."
        )
    return solver


def as_level(value, name: str = "level") -> float:
    """`value` as a float strictly between 0 and 1 (a confidence level)."""
    try:
        if np.ndim(value) != 0 or isinstance(value, (str, bytes, bool, np.bool_)):
            raise TypeError
        level = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number strictly between 0 and 1 (e.g. 0.95), got {value!r}.") from None
    if not 0 < level < 1:
        raise ValueError(f"{name} must lie strictly between 0 and 1, got {value!r}.")
    return level


def as_sigma(sigma, d: int, *, zero_ok: bool) -> np.ndarray:
    """A noise level per state, `(d,)`, from a number or a `(d,)` array of numbers: finite
    and > 0 (>= 0 with `zero_ok`)."""
    s = np.asarray(sigma)
    if s.dtype.kind not in "biuf":
        raise TypeError(f"sigma must be a number or an array of numbers, got {sigma!r}.")
    s = np.full(d, float(s)) if s.ndim == 0 else s.astype(float)
    if s.shape != (d,) or not np.all(np.isfinite(s)) or np.any(s < 0 if zero_ok else s <= 0):
        raise ValueError(
            f"sigma must be a finite {'non-negative' if zero_ok else 'positive'} scalar or have shape "
            f"({d},), got {sigma!r}."
        )
    return s


def as_key(key, name: str = "key") -> PRNGKeyArray:
    """`key` as one PRNG key: a typed key of shape () or raw key data (uint32, shape (2,) or
    (4,)) as it is, an integer seed (0-d arrays too) as `jax.random.key(seed)`."""
    if _is_typed_key(key):
        if key.shape == ():
            return key
    elif isinstance(key, (jax.Array, np.ndarray)) and key.dtype == np.uint32 and key.shape in ((2,), (4,)):
        return jnp.asarray(key)
    elif not isinstance(key, (bool, np.bool_)) and np.ndim(key) == 0:
        try:
            return jax.random.key(operator.index(key))
        except (TypeError, OverflowError):
            pass
    raise TypeError(
        f"{name} must be one PRNG key (jax.random.key(seed)) or an integer seed below 2**63, "
        f"got {type(key).__name__} {key!r}."
    )


def dataset_keys(key, n: int) -> list:
    """One PRNG key per dataset of `n`: `n` keys given (typed keys of shape `(n,)`, or raw key
    data `(n, 2)` / `(n, 4)`) as they are; one key (or seed) split `n` ways."""
    if _is_typed_key(key) and key.shape == (n,):
        return list(key)
    if isinstance(key, (jax.Array, np.ndarray)) and key.dtype == np.uint32 and key.ndim == 2 and len(key) == n:
        return list(jnp.asarray(key))
    return list(jax.random.split(as_key(key), n))


def _is_typed_key(x) -> bool:
    return isinstance(x, jax.Array) and jnp.issubdtype(x.dtype, jax.dtypes.prng_key)


_JAXTYPING = os.path.dirname(jaxtyping.__file__ or "") + os.sep
_INTERNAL = (*(os.path.dirname(path) + os.sep for path in (__file__, eqx.__file__, jax.__file__)), _JAXTYPING)


def user_stacklevel() -> int:
    """The `stacklevel` for a `warnings.warn` in the function that calls this, such that the
    warning points at the first frame outside wendyjax, equinox, jax and jaxtyping: the user's
    line, whatever path led there (equinox's method wrappers add frames of their own, and so
    do jaxtyping's run-time checks where they are installed, as in the test suite)."""
    frame = sys._getframe(1)
    while frame.f_back is not None and frame.f_code.co_filename.startswith(_JAXTYPING):  # the checks' wrappers
        frame = frame.f_back
    frame, level = frame.f_back, 2
    while frame is not None and frame.f_code.co_filename.startswith(_INTERNAL):
        frame, level = frame.f_back, level + 1
    return level


def warn_if_float32(what: str) -> None:
    """Warn that `what` will compute in float32 unless `jax_enable_x64` is on: the weak
    covariances' Cholesky factorisations and the solvers' stopping tolerances (1e-8) are
    meant for float64."""
    if not jax.config.read("jax_enable_x64"):
        warnings.warn(
            f"{what}: JAX is in float32 (jax_enable_x64 is off), so the fit's covariance "
            "factorisations and solver tolerances (1e-8) work with 7 digits; estimates and "
            "intervals can differ from float64's. Call jax.config.update('jax_enable_x64', True) "
            "at the start of the program.",
            UserWarning,
            stacklevel=user_stacklevel(),
        )


def as_names(names: int | Sequence[str], prefix: str, what: str) -> tuple[str, ...]:
    """`names` as a tuple of distinct strings; a count `n` gives `prefix1…prefixn`."""
    if isinstance(names, (int, np.integer)):
        if names < 1:
            raise ValueError(f"{what} must be a positive count or a list of names, got {names}.")
        return tuple(f"{prefix}{i + 1}" for i in range(int(names)))
    names = tuple(str(n) for n in names)
    if len(names) == 0:
        raise ValueError(f"{what} must not be empty.")
    if len(set(names)) != len(names):
        raise ValueError(f"{what} contains duplicate names: {names}.")
    return names


def check_state_columns(n_columns: int, model) -> None:
    """Data with `n_columns` state columns fit `model` (anything with `n_states`,
    `state_names` and `name`)."""
    if n_columns != model.n_states:
        raise ValueError(
            f"data have {n_columns} state columns but model '{model.name}' has {model.n_states} "
            f"states ({', '.join(model.state_names)})."
        )


def param_vector(model, p, argname: str = "p") -> np.ndarray:
    """`p` as a float vector of `model`'s parameters (anything with `n_params`,
    `param_names` and `name`), raising a clear error on a wrong length or a non-finite
    entry."""
    if np.iscomplexobj(p) or any(isinstance(x, complex) for x in np.ravel(np.asarray(p, dtype=object))):
        raise TypeError(f"{argname} must be real numbers, got complex values {np.asarray(p).tolist()}.")
    p = np.asarray(p, dtype=float)
    if p.shape != (model.n_params,):
        raise ValueError(
            f"{argname} must have shape ({model.n_params},) for model '{model.name}' "
            f"(parameters {', '.join(model.param_names)}), got shape {p.shape}."
        )
    if not np.all(np.isfinite(p)):
        raise ValueError(f"{argname} contains NaN or inf: {p}.")
    return p


def check_solver_options(est, solvers: type | tuple[type, ...], example: str) -> None:
    """Refuse a `solver` of `est` that is not one of `solvers` (naming `example`) and a
    `max_steps` that is not a positive integer."""
    if not isinstance(est.solver, solvers):
        raise TypeError(f"{type(est).__name__}: solver must be a solver object such as {example}, got {est.solver!r}.")
    if isinstance(est.max_steps, bool) or not isinstance(est.max_steps, int) or est.max_steps < 1:
        raise ValueError(f"{type(est).__name__}: max_steps must be a positive integer, got {est.max_steps!r}.")

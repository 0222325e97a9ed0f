"""Quantities derived from parameters: their names and values with Jacobians (for
`fit.derived`, `Bootstrap.derived` and the delta method)."""

from collections.abc import Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from numpy.typing import ArrayLike


def derived_names(names: "str | Sequence[str] | None", size: int) -> tuple[str, ...]:
    """Names of `size` derived quantities: given (one string for one), or g1, g2, ...
    ("derived" for one)."""
    if names is None:
        return ("derived",) if size == 1 else tuple(f"g{i + 1}" for i in range(size))
    names = (names,) if isinstance(names, str) else tuple(str(n) for n in names)
    if len(names) != size:
        raise ValueError(f"names: fn returns {size} value(s), got {len(names)} name(s) {names}.")
    return names


def derived_values(fn: Callable, params: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    """`fn(params)` as a vector and its Jacobian `(k, j)` (autodiff), checked finite."""
    p = jnp.asarray(params, float)
    flat = lambda q: jnp.atleast_1d(jnp.asarray(fn(q), float))  # noqa: E731
    try:
        value = np.asarray(flat(p))
    except Exception as e:  # noqa: BLE001 - re-raised with context
        raise ValueError(f"fn(p) failed on the {p.size} parameters p (a vector in the model's order): {e}") from e
    if value.ndim != 1:
        raise ValueError(f"fn(p) must return a number or a vector, got shape {value.shape}.")
    if not np.all(np.isfinite(value)):
        raise ValueError(f"fn(p) is not finite at the estimate p = {np.asarray(p).tolist()}: {value.tolist()}.")
    return value, np.asarray(jax.jacfwd(flat)(p))

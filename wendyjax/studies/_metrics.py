r"""Accuracy and uncertainty metrics of Rummel et al. 2025, Table 1, over Monte Carlo runs.

Estimates are arrays of shape (N, J) (runs × parameters); $p^*$ has shape (J,). A
parameter whose true value is 0 is measured absolutely (the relative forms divide by 1).
"""

import numpy as np

from .._typing import ArrayLike


def _checked(p_hat, **per_parameter) -> list[np.ndarray]:
    """`p_hat` as a float array of shape (N, J) and the named arrays as float arrays:
    `p_true` of shape (J,), `stderr` of shape (N, J) or (J,), others (J,) or scalar."""
    p_hat = np.asarray(p_hat, float)
    if p_hat.ndim != 2:
        raise ValueError(f"p_hat must have shape (runs, parameters), got shape {p_hat.shape}")
    out = [p_hat]
    for name, value in per_parameter.items():
        value = np.asarray(value, float)
        allowed = {"p_true": [p_hat.shape[1:]], "stderr": [p_hat.shape, p_hat.shape[1:]]}.get(
            name, [p_hat.shape[1:], ()]
        )
        if value.shape not in allowed:
            raise ValueError(
                f"{name} must have shape {' or '.join(map(str, allowed))} to match p_hat of shape "
                f"{p_hat.shape}, got shape {value.shape}"
            )
        out.append(value)
    return out


def _scale(p_true: np.ndarray) -> np.ndarray:
    return np.where(p_true == 0, 1.0, np.abs(p_true))


def relative_coefficient_error(p_hat: ArrayLike, p_true: ArrayLike) -> np.ndarray | float:
    r"""$\|\hat p - p^*\|_2 / \|p^*\|_2$ per run (Rummel et al. 2025, eq. 12; absolute when $p^* = 0$); of one
    estimate, shape (J,), a scalar."""
    one = np.ndim(p_hat) == 1
    p_hat, p_true = _checked(np.atleast_2d(p_hat) if one else p_hat, p_true=p_true)
    err = np.linalg.norm(p_hat - p_true, axis=-1) / (np.linalg.norm(p_true) or 1.0)
    return err[0] if one else err


def relative_squared_bias(p_hat: ArrayLike, p_true: ArrayLike) -> np.ndarray:
    r"""$\big(\sum_n (\hat p^{(n)}_j - p^*_j)\big)^2 / (N^2 {p^*_j}^2)$ per parameter (Rummel et al. 2025, eq. 15)."""
    p_hat, p_true = _checked(p_hat, p_true=p_true)
    return (np.mean(p_hat - p_true, axis=0) / _scale(p_true)) ** 2


def relative_variance(p_hat: ArrayLike, p_true: ArrayLike) -> np.ndarray:
    r"""$\sum_n (\hat p^{(n)}_j - \bar p_j)^2 / (N {p^*_j}^2)$ per parameter (Rummel et al. 2025, eq. 16)."""
    p_hat, p_true = _checked(p_hat, p_true=p_true)
    return np.var(p_hat, axis=0) / _scale(p_true) ** 2


def relative_mse(p_hat: ArrayLike, p_true: ArrayLike) -> np.ndarray:
    r"""$\sum_n (\hat p^{(n)}_j - p^*_j)^2 / (N {p^*_j}^2)$ per parameter (Rummel et al. 2025, eq. 17);
    equals squared bias + variance."""
    p_hat, p_true = _checked(p_hat, p_true=p_true)
    return np.mean((p_hat - p_true) ** 2, axis=0) / _scale(p_true) ** 2


def coverage(p_hat: ArrayLike, p_true: ArrayLike, stderr: ArrayLike, z: float = 2.0) -> np.ndarray:
    r"""Fraction of runs with $|\hat p_j - p^*_j| < z\sqrt{C_{jj}}$ per parameter (Rummel et al. 2025, eq. 18
    with $z = 2$; the absolute value is implied there). A NaN standard error never covers."""
    if isinstance(z, bool) or not isinstance(z, (int, float, np.number)) or not 0 < z < np.inf:
        raise ValueError(f"z must be a positive finite number of standard errors (2 in Rummel et al. 2025), got {z!r}.")
    p_hat, p_true, stderr = _checked(p_hat, p_true=p_true, stderr=stderr)
    if np.any(stderr < 0):
        raise ValueError("stderr must be non-negative (NaN where there is none); got negative entries.")
    with np.errstate(invalid="ignore"):
        return np.mean(np.abs(p_hat - p_true) < z * stderr, axis=0)


def on_bound(p_hat: ArrayLike, lower: ArrayLike, upper: ArrayLike, rtol: float = 1e-6) -> np.ndarray:
    r"""Which estimates lie on a finite bound of the parameter box (within
    `rtol`·max(1, |bound|)), shape (N, J). Not a metric of Rummel et al. 2025: a bounded fit stops on the
    box when the objective's minimum within it lies there, and such a run is a success in
    Rummel et al. 2025's sense although its estimate is only the box's edge (e.g. Goodwin-3D's corner
    minimum, see the README); estimates on the box are a warning sign."""
    p_hat, lower, upper = _checked(p_hat, lower=lower, upper=upper)
    on = np.zeros(p_hat.shape, bool)
    for bound in (lower, upper):
        finite = np.isfinite(bound)
        value = np.where(finite, bound, 0.0)
        on |= finite & (np.abs(p_hat - value) <= rtol * np.maximum(1.0, np.abs(value)))
    return on

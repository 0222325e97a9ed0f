r"""Accuracy and uncertainty metrics of paper 000 Table 1, over Monte Carlo runs.

Estimates are arrays of shape (N, J) (runs × parameters); $p^*$ has shape (J,). A
parameter whose true value is 0 is measured absolutely (the relative forms divide by 1).
"""

import numpy as np
from jaxtyping import ArrayLike


def _scale(p_true) -> np.ndarray:
    p_true = np.asarray(p_true, float)
    return np.where(p_true == 0, 1.0, np.abs(p_true))


def relative_coefficient_error(p_hat: ArrayLike, p_true: ArrayLike) -> np.ndarray:
    r"""$\|\hat p - p^*\|_2 / \|p^*\|_2$ per run (000 eq. 12)."""
    p_hat, p_true = np.asarray(p_hat, float), np.asarray(p_true, float)
    return np.linalg.norm(p_hat - p_true, axis=-1) / np.linalg.norm(p_true)


def relative_squared_bias(p_hat: ArrayLike, p_true: ArrayLike) -> np.ndarray:
    r"""$\big(\sum_n (\hat p^{(n)}_j - p^*_j)\big)^2 / (N^2 {p^*_j}^2)$ per parameter (000 eq. 15)."""
    p_hat = np.asarray(p_hat, float)
    return (np.mean(p_hat - np.asarray(p_true, float), axis=0) / _scale(p_true)) ** 2


def relative_variance(p_hat: ArrayLike, p_true: ArrayLike) -> np.ndarray:
    r"""$\sum_n (\hat p^{(n)}_j - \bar p_j)^2 / (N {p^*_j}^2)$ per parameter (000 eq. 16)."""
    return np.var(np.asarray(p_hat, float), axis=0) / _scale(p_true) ** 2


def relative_mse(p_hat: ArrayLike, p_true: ArrayLike) -> np.ndarray:
    r"""$\sum_n (\hat p^{(n)}_j - p^*_j)^2 / (N {p^*_j}^2)$ per parameter (000 eq. 17);
    equals squared bias + variance."""
    p_hat = np.asarray(p_hat, float)
    return np.mean((p_hat - np.asarray(p_true, float)) ** 2, axis=0) / _scale(p_true) ** 2


def coverage(p_hat: ArrayLike, p_true: ArrayLike, stderr: ArrayLike, z: float = 2.0) -> np.ndarray:
    r"""Fraction of runs with $|\hat p_j - p^*_j| < z\sqrt{C_{jj}}$ per parameter (000 eq. 18
    with $z = 2$; the absolute value is implied there). A NaN standard error never covers."""
    err = np.abs(np.asarray(p_hat, float) - np.asarray(p_true, float))
    with np.errstate(invalid="ignore"):
        return np.mean(err < z * np.asarray(stderr, float), axis=0)


def on_bound(p_hat: ArrayLike, lower: ArrayLike, upper: ArrayLike, rtol: float = 1e-6) -> np.ndarray:
    r"""Which estimates lie on a finite bound of the parameter box (within
    `rtol`·max(1, |bound|)), shape (N, J). Not a metric of 000: a bounded fit stops on the
    box when the objective's minimum within it lies there, and such a run is a success in
    000's sense although its estimate is only the box's edge (e.g. Goodwin-3D's corner
    minimum, see the README); estimates on the box are a warning sign."""
    p_hat = np.asarray(p_hat, float)
    on = np.zeros(p_hat.shape, bool)
    for bound in (np.asarray(lower, float), np.asarray(upper, float)):
        finite = np.isfinite(bound)
        value = np.where(finite, bound, 0.0)
        on |= finite & (np.abs(p_hat - value) <= rtol * np.maximum(1.0, np.abs(value)))
    return on

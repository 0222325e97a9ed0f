r"""Starting states for the joint fit: the data with missing entries filled forward (Meissner & Glasner 2024, §5),
a Gaussian kernel smoother of the observations whose widths are chosen by leave-one-out
cross-validation (for heavy noise, where the first steps from the raw data lead the fit
astray), or the data with only the missing entries taken from that smoother."""

import numpy as np
from scipy import ndimage

from ._problem import DiscoveryProblem

# Candidate kernel widths (standard deviations, in grid steps); 0 leaves an axis unsmoothed.
WIDTHS = (0.0, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, 8.0)
_TRUNCATE = 4.0  # scipy.ndimage's default kernel radius, in widths


def _radius(width: float) -> int:
    return int(_TRUNCATE * width + 0.5)


def fill_missing(problem: DiscoveryProblem) -> np.ndarray:
    """Initial states from the data: each missing entry takes the next observed value of its
    point in time (the last observed one after the final observation) (Meissner & Glasner 2024, §5)."""
    data = np.asarray(problem.data).copy()
    observed = np.asarray(problem.observed)
    flat, seen = data.reshape(data.shape[0], -1), observed.reshape(observed.shape[0], -1)
    for column in range(flat.shape[1]):
        times = np.flatnonzero(seen[:, column])
        if times.size == 0:  # a point never observed: the mean of its level's observations
            continue
        nxt = np.searchsorted(times, np.arange(flat.shape[0]))
        flat[:, column] = flat[times[np.minimum(nxt, times.size - 1)], column]
    missing_cols = ~seen.any(axis=0)
    if missing_cols.any():
        level_mean = np.nanmean(np.where(seen, flat, np.nan), axis=1, keepdims=True)
        flat[:, missing_cols] = np.nan_to_num(level_mean)
    return flat.reshape(data.shape)


def _centre_weight(widths: tuple[float, ...]) -> float:
    """The weight a point gives itself in `ndimage.gaussian_filter` with these widths."""
    weight = 1.0
    for w in widths:
        if w > 0:
            r = np.arange(-_radius(w), _radius(w) + 1)
            weight /= np.exp(-0.5 * (r / w) ** 2).sum()
    return weight


def _kernel_sums(values: np.ndarray, seen: np.ndarray, widths: tuple[float, ...]):
    """Kernel-weighted sums of the observed values and of the observation indicator."""

    def smooth(a):
        return ndimage.gaussian_filter(a, widths, mode="constant", truncate=_TRUNCATE)

    return smooth(np.where(seen, values, 0.0)), smooth(seen.astype(float))


def leave_one_out_error(values: np.ndarray, seen: np.ndarray, widths: tuple[float, ...]) -> float:
    r"""Mean squared error of the normalised-convolution (Nadaraya–Watson) smoother with
    Gaussian kernel `widths` (grid steps per axis) in predicting each observed value from
    the other observations; `inf` where some observed value has no observed neighbour."""
    total, weight = _kernel_sums(values, seen, widths)
    g0 = _centre_weight(widths)
    others = (weight - g0)[seen]
    if np.any(others <= 1e-12 * g0):
        return np.inf
    prediction = (total[seen] - g0 * values[seen]) / others
    return float(np.mean((values[seen] - prediction) ** 2))


def smooth_missing(problem: DiscoveryProblem, sweeps: int = 3) -> tuple[np.ndarray, np.ndarray]:
    r"""Initial states by Gaussian kernel smoothing of the observations (normalised convolution
    over time and space, missing entries weighted 0), each state component with its own
    per-axis widths chosen by leave-one-out cross-validation over the `WIDTHS` whose kernel
    fits in the axis (coordinate descent, at most `sweeps` passes over the axes; a wider
    kernel would average the axis's variation away: two snapshots, as in Meissner & Glasner 2024's Allen–Cahn
    case, would be made equal and the time derivative lost). Points with no observation
    within reach of the kernel keep the forward-filled value. Returns the states and the widths, shape
    `(D, 1 + n_space)`."""
    data, observed = np.asarray(problem.data), np.asarray(problem.observed)
    states, fallback = np.empty_like(data), fill_missing(problem)
    chosen = np.zeros((data.shape[-1], data.ndim - 1))
    for c in range(data.shape[-1]):
        values, seen = data[..., c], observed[..., c]
        allowed = [[w for w in WIDTHS if 2 * _radius(w) + 1 <= n] for n in values.shape]
        widths = [max(w for w in ws if w <= 1.0) for ws in allowed]
        score = leave_one_out_error(values, seen, tuple(widths))
        for _ in range(sweeps):
            before = list(widths)
            for axis, w in ((a, w) for a in range(values.ndim) for w in allowed[a]):
                trial = widths[:axis] + [w] + widths[axis + 1 :]
                trial_score = leave_one_out_error(values, seen, tuple(trial))
                if trial_score < score:
                    widths, score = trial, trial_score
            if widths == before:
                break
        if not np.isfinite(score):
            raise ValueError(
                f"state component {c} has too few observations to smooth; start from the data (u0='data') instead."
            )
        total, weight = _kernel_sums(values, seen, tuple(widths))
        states[..., c] = np.where(weight > 1e-12, total / np.maximum(weight, 1e-300), fallback[..., c])
        chosen[c] = widths
    return states, chosen


def interpolate_missing(problem: DiscoveryProblem) -> np.ndarray:
    """Initial states: the data where observed, and at the missing entries the
    cross-validated kernel smoother of `smooth_missing` (a weighted average of the point's
    observed neighbours in space and time). Unlike `fill_missing` it does not copy a value
    across time, which would give a missing point a zero time difference; unlike the
    smoothed start it leaves the observations as they are."""
    observed = np.asarray(problem.observed)
    return np.where(observed, np.asarray(problem.data), smooth_missing(problem)[0])

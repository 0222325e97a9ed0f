"""Data against a fitted model, and a forest plot of estimates with their intervals."""

from collections.abc import Sequence

import numpy as np

from ..data import as_dataset
from ..estimators import AbstractFit, IntegralMatchingFit, OutputErrorFit
from ._axes import grid


def _state_names(result, n_states: int) -> list[str]:
    names = getattr(result.model, "state_names", None)
    return list(names) if names is not None else [f"u{d}" for d in range(n_states)]


def _initial_states(result, data, u0) -> np.ndarray:
    """(R, D) initial states: `u0`, the fitted ones, a reconstructed one, or the first samples."""
    n, d = len(data), data.n_states
    if u0 is not None:
        u0 = np.asarray(u0, float)
        if u0.shape not in ((d,), (n, d)):
            raise ValueError(f"u0 must have shape ({d},) or ({n}, {d}), got {u0.shape}.")
        return np.broadcast_to(u0, (n, d))
    if isinstance(result, OutputErrorFit):
        return result.u0
    if isinstance(result, IntegralMatchingFit) and result.node_states is not None:
        return result.node_states[:1]
    first = np.stack([np.asarray(traj.u[0]) for traj in data])
    masks = [traj.mask for traj in data]
    if any(m is not None and not np.all(np.asarray(m)[0]) for m in masks):
        raise ValueError("the first sample of the data is not fully observed: pass u0 to start the simulation.")
    return first


def fit(result: "AbstractFit | IntegralMatchingFit", data, u0=None, *, truth=None, n_points: int = 400, axes=None):
    """Data against the fitted model solved forward with diffrax (Rummel et al. 2025, eq. 13): one panel per
    state, the samples as dots (unobserved entries left out), the fit as a line from `u0`.

    `u0` defaults to the fitted initial states (output error), the reconstructed state
    (hidden-state integral matching) or the first sample of each trajectory (noisy: the
    curve starts off by the noise there). `truth`, a trajectory (or list) of noiseless
    states, is drawn dashed. Returns `(figure, axes)`."""
    if not isinstance(result, (AbstractFit, IntegralMatchingFit)):
        raise TypeError(
            f"result must be a fit result (WENDyFit, OutputErrorFit, IntegralMatchingFit), got {type(result).__name__}."
        )
    data = as_dataset(data)
    starts = _initial_states(result, data, u0)
    truths = [] if truth is None else list(as_dataset(truth))
    if truths and len(truths) != len(data):
        raise ValueError(f"truth: need one trajectory per data trajectory ({len(data)}), got {len(truths)}.")
    fig, axes = grid(data.n_states, axes)
    names = _state_names(result, data.n_states)
    for r, traj in enumerate(data):
        t, u = np.asarray(traj.t), np.asarray(traj.u)
        mask = np.ones_like(u, bool) if traj.mask is None else np.asarray(traj.mask)
        dense = np.linspace(t[0], t[-1], max(n_points, len(t)))
        sim = result.simulate(starts[r], dense)
        tag = f" {r}" if len(data) > 1 else ""
        for d, ax in enumerate(axes):
            ax.plot(t[mask[:, d]], u[mask[:, d], d], ".", ms=3, alpha=0.5, color="0.4", label="data" + tag)
            ax.plot(dense, sim[:, d], "-", lw=1.5, label="fit" + tag)
            if truths:
                ax.plot(np.asarray(truths[r].t), np.asarray(truths[r].u)[:, d], "k--", lw=1, label="truth" + tag)
            ax.set_ylabel(names[d])
    axes[-1].set_xlabel("t")
    axes[0].legend(loc="best", fontsize="small")
    return fig, axes


def forest(
    fits: "AbstractFit | Sequence[AbstractFit]",
    truth=None,
    *,
    level: float = 0.95,
    labels: Sequence[str] | None = None,
    axes=None,
):
    """Estimates with `level` confidence intervals (Bortz et al. 2023, eq. 16), one panel per parameter and
    one row per fit (e.g. WENDy-MLE beside output error); `truth` is a vertical dashed line.
    Returns `(figure, axes)`."""
    fits = [fits] if isinstance(fits, AbstractFit) else list(fits)
    if not fits or not all(isinstance(f, AbstractFit) for f in fits):
        raise TypeError("fits must be a fit with a covariance (WENDyFit, OutputErrorFit) or a non-empty list of them.")
    names = fits[0].model.param_names
    if any(f.model.param_names != names for f in fits):
        raise ValueError("fits must all have the same parameters to share a forest plot.")
    labels = [f.method for f in fits] if labels is None else list(labels)
    if len(labels) != len(fits):
        raise ValueError(f"labels: need {len(fits)} labels, got {len(labels)}.")
    truth = None if truth is None else np.asarray(truth, float)
    if truth is not None and truth.shape != (len(names),):
        raise ValueError(f"truth must have shape ({len(names)},), got {truth.shape}.")
    fig, axes = grid(len(names), axes, size=(5.0, 0.45 * len(fits) + 0.9), sharex=False)
    rows = np.arange(len(fits))[::-1]
    for j, ax in enumerate(axes):
        for y, f in zip(rows, fits):
            lo, hi = f.ci(level)
            ax.errorbar(f.params[j], y, xerr=[[f.params[j] - lo[j]], [hi[j] - f.params[j]]], fmt="o", capsize=3)
        if truth is not None:
            ax.axvline(truth[j], color="k", ls="--", lw=1)
        ax.set_yticks(rows, labels)
        ax.set_ylim(-0.7, len(fits) - 0.3)
        ax.set_title(f"{names[j]}  ({100 * level:g} % intervals)", fontsize="medium", loc="left")
    return fig, axes

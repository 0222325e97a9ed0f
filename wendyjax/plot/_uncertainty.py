"""Profile likelihoods and bootstrap distributions."""

from collections.abc import Mapping

import matplotlib.pyplot as plt
import numpy as np

from .._checks import as_count
from ..studies import Bootstrap, Profile
from ._axes import grid


def profiles(result: Mapping[str, Profile], *, ncols: int = 3, axes=None):
    """The likelihood-ratio statistic of each profile ([`profile`][wendyjax.studies.profile])
    against its parameter: the χ²₁ threshold dashed, the estimate as a dot, the interval's
    ends as vertical lines (a side left open by the profile is not drawn), the verdict in
    the title. Returns `(figure, axes)`."""
    if not isinstance(result, Mapping) or not result or not all(isinstance(p, Profile) for p in result.values()):
        raise TypeError("result must be the {name: Profile} dict that wj.studies.profile returns.")
    ncols = as_count("ncols", ncols, 1)
    items = list(result.values())
    fig, axes = grid(len(items), axes, ncols=min(ncols, len(items)), size=(3.6, 2.8), sharex=False)
    for ax, prof in zip(axes, items):
        ok = ~np.isnan(prof.statistic)
        ax.plot(prof.grid[ok], prof.statistic[ok], ".-", lw=1.2, ms=4)
        ax.axhline(prof.threshold, color="0.3", ls="--", lw=1, label=f"χ²₁ {prof.level:g}")
        ax.plot([prof.estimate], [0.0], "o", color="k", ms=4)
        for end in prof.interval:
            if np.isfinite(end):
                ax.axvline(end, color="C3", lw=1)
        ax.set_title(f"{prof.name}: {prof.verdict}", fontsize="small")
        ax.set_xlabel(prof.name)
        top = np.nanmax(prof.statistic, initial=0.0)
        # keep the threshold in view when the profile shoots up at the grid's edge
        ax.set_ylim(0.0, 1.05 * min(max(top, 1.2 * prof.threshold), 5 * prof.threshold))
    axes[0].set_ylabel("2 Δℓ")
    axes[0].legend(loc="upper center", fontsize="x-small")
    return fig, axes


def bootstrap(result: Bootstrap, *, level: float = 0.95, truth=None, max_params: int = 6, axes=None):
    """The bootstrap draws ([`bootstrap`][wendyjax.studies.bootstrap]) of up to `max_params`
    parameters as a corner plot: histograms on the diagonal with the estimate (black) and the
    basic `level` interval (red), scatter plots of the pairs below it; `truth` (known
    parameters) as dashed lines. Parameters without an interval (undetermined by the fit)
    show their draws only. Returns `(figure, axes)` with `axes` of shape (j, j)."""
    if not isinstance(result, Bootstrap):
        raise TypeError(f"result must be a wj.studies.Bootstrap, got {type(result).__name__}.")
    j = min(len(result.names), as_count("max_params", max_params, 1))
    truth = None if truth is None else np.asarray(truth, float)
    if truth is not None and truth.shape != (len(result.names),):
        raise ValueError(f"truth must have one value per parameter ({len(result.names)}), got shape {truth.shape}.")
    if axes is None:
        fig, axes = plt.subplots(j, j, figsize=(2.2 * j + 0.6, 2.2 * j), squeeze=False, layout="constrained")
    else:
        axes = np.asarray(axes, dtype=object)
        if axes.shape != (j, j):
            raise ValueError(f"axes: need a ({j}, {j}) array of axes for this plot, got {axes.shape}.")
        fig = axes[0, 0].figure
    draws = result.draws[~np.isnan(result.draws).any(axis=1)]
    lo, hi = result.basic(level)
    for a in range(j):
        for b in range(j):
            ax = axes[a, b]
            if b > a:
                ax.set_visible(False)
                continue
            if a == b:
                ax.hist(draws[:, a], bins="auto", color="C0", alpha=0.7)
                ax.axvline(result.estimate[a], color="k", lw=1.2)
                for end in (lo[a], hi[a]):
                    if np.isfinite(end):
                        ax.axvline(end, color="C3", lw=1)
                ax.set_yticks([])
            else:
                ax.plot(draws[:, b], draws[:, a], ".", ms=2, alpha=0.5)
                ax.plot(result.estimate[b], result.estimate[a], "k+", ms=8)
                if truth is not None:
                    ax.axhline(truth[a], color="k", ls="--", lw=0.8)
            if truth is not None:
                ax.axvline(truth[b], color="k", ls="--", lw=0.8)
            if a == j - 1:
                ax.set_xlabel(result.names[b])
            if b == 0 and a > 0:
                ax.set_ylabel(result.names[a])
    fig.suptitle(f"parametric bootstrap: {len(draws)} refits; basic {level:g} intervals in red", fontsize="small")
    return fig, axes

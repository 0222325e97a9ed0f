"""Loss against wall time or function evaluations (Anonymous 2025, Fig. 1)."""

from collections.abc import Mapping

import numpy as np

from ._axes import single


def loss_curves(
    curves: Mapping[str, tuple],
    *,
    xlabel: str = "wall time (s)",
    ylabel: str = "loss",
    logx: bool = False,
    logy: bool = True,
    ax=None,
):
    """One line per method: `curves` maps a label to `(x, y)` (e.g. cumulative seconds or
    vector-field evaluations, and the loss or an error). Returns `(figure, axes)`."""
    if not isinstance(curves, Mapping) or not curves:
        raise TypeError("curves must be a non-empty mapping label -> (x, y).")
    fig, ax = single(ax, (5.5, 4.0))
    for label, xy in curves.items():
        if len(xy) != 2:
            raise ValueError(f"curves[{label!r}] must be a pair (x, y).")
        x, y = (np.asarray(v, float) for v in xy)
        if x.shape != y.shape or x.ndim != 1:
            raise ValueError(f"curves[{label!r}]: x and y must be 1-D of equal length, got {x.shape} and {y.shape}.")
        ax.plot(x, y, ".-" if len(x) < 30 else "-", label=label)
    ax.set(xlabel=xlabel, ylabel=ylabel, xscale="log" if logx else "linear", yscale="log" if logy else "linear")
    ax.legend(fontsize="small")
    return fig, ax

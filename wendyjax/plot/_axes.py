"""Figure and axes creation shared by the plots."""

import matplotlib.pyplot as plt
import numpy as np


def grid(n: int, axes=None, *, ncols: int = 1, size: tuple[float, float] = (6.0, 2.2), sharex: bool = True):
    """`n` axes as a flat array: the given `axes` (checked) or a new figure of `ncols` columns."""
    if axes is not None:
        flat = np.ravel(np.asarray(axes, dtype=object))
        if flat.size != n:
            raise ValueError(f"axes: need {n} axes for this plot, got {flat.size}.")
        return flat[0].figure, flat
    nrows = -(-n // ncols)
    fig, ax = plt.subplots(
        nrows, ncols, figsize=(size[0] * ncols, size[1] * nrows), sharex=sharex, squeeze=False, layout="constrained"
    )
    for extra in ax.ravel()[n:]:
        extra.set_visible(False)
    return fig, ax.ravel()[:n]


def single(ax=None, size: tuple[float, float] = (6.0, 4.0)):
    """One axes: `ax` or a new figure."""
    if ax is not None:
        return ax.figure, ax
    fig, ax = plt.subplots(figsize=size, layout="constrained")
    return fig, ax

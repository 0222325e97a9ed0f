"""Monte Carlo study metrics against the noise level (Rummel et al. 2025's appendix figures)."""

from collections.abc import Sequence

import numpy as np
import scipy.stats

from ..studies import Study
from ._axes import grid

_LABELS = {
    "rel_sq_bias": "relative squared bias",
    "rel_variance": "relative variance",
    "rel_mse": "relative MSE",
    "coverage_2se": "coverage |p̂ − p*| < 2 se",
    "median_coef_error": "median coefficient error",
    "median_forward_error": "median forward error",
    "failure_rate": "failure rate",
}


def study(
    result: Study, metrics: Sequence[str] = ("rel_sq_bias", "rel_variance", "rel_mse", "coverage_2se"), *, axes=None
):
    """Metrics of Rummel et al. 2025, Table 1 per parameter against the noise level, one line per parameter
    and number of samples M (Rummel et al. 2025, Figs. 10–15); a sweep is drawn against its grid point.
    Relative metrics on a log scale; coverage with its nominal level dotted. Returns
    `(figure, axes)`."""
    if not isinstance(result, Study):
        raise TypeError(f"result must be a wendyjax.studies.Study, got {type(result).__name__}.")
    rows = result.rows()
    level = result.settings["level"]
    known = set(_LABELS) | {f"coverage_{level:g}"}
    for m in metrics:
        if m not in known:
            raise ValueError(f"metrics: unknown metric {m!r}; choose from {sorted(known)}.")
    sweep = result.settings["kind"] == "sweep"
    for i, row in enumerate(rows):
        row["_x"] = i // len(result.param_names) if sweep else row["noise_ratio"]
    fig, axes = grid(len(metrics), axes, ncols=min(len(metrics), 2), size=(4.6, 3.4))
    sizes = sorted({row["M"] for row in rows})
    styles = ["-", "--", ":", "-."]
    for ax, metric in zip(axes, metrics):
        for j, name in enumerate(result.param_names):
            for s, m in enumerate(sizes):
                sel = [row for row in rows if row["param"] == name and row["M"] == m]
                x = [row["_x"] for row in sel]
                y = [row.get(metric, np.nan) for row in sel]
                label = name if len(sizes) == 1 else f"{name}, M = {m}"
                ax.plot(x, y, styles[s % len(styles)], marker="o", ms=3, color=f"C{j}", label=label)
        if metric.startswith("coverage"):
            nominal = 2 * scipy.stats.norm.cdf(2.0) - 1 if metric == "coverage_2se" else level
            ax.axhline(nominal, color="k", ls=":", lw=1)
            ax.set_ylim(-0.02, 1.02)
        elif metric != "failure_rate":
            ax.set_yscale("log")
        if not sweep:
            ax.set_xscale("log")
        ax.set(xlabel="grid point" if sweep else "noise ratio", title=_LABELS.get(metric, metric))
    axes[0].legend(fontsize="small")
    return fig, axes

"""Data2LD plots: the fitted smooth with its bands (Carey & Ramsay 2021, Fig. 4) and the estimates along
the ρ continuation (Carey & Ramsay 2021, Fig. 3)."""

import numpy as np
import scipy.stats

from ..linear import Data2LDFit
from ._axes import grid


def _check(result):
    if not isinstance(result, Data2LDFit):
        raise TypeError(f"result must be a Data2LDFit, got {type(result).__name__}.")


def bands(result: Data2LDFit, *, level: float = 0.95, truth=None, n_points: int = 400, axes=None):
    """The data, the fitted smooth $\\hat x$ and its pointwise `level` confidence (dashed)
    and prediction (shaded) bands, one panel per variable (Carey & Ramsay 2021, Fig. 4). `truth`, a callable
    $x(t)$ returning `(n, D)` or `(n,)`, is drawn dotted. Returns `(figure, axes)`."""
    _check(result)
    variables = result.linear_model.variables
    fig, axes = grid(len(variables), axes, size=(6.0, 3.0))
    lo, hi = result.basis.domain
    dense = np.linspace(lo, hi, n_points)
    b = result.bands(dense, level)
    y = result.y.reshape(result.t.size, -1)
    ref = None if truth is None else np.asarray(truth(dense), float).reshape(n_points, -1)
    pct = f"{100 * level:g} %"
    for d, ax in enumerate(axes):
        ax.fill_between(dense, b["pred_lower"][:, d], b["pred_upper"][:, d], color="0.85", label=f"{pct} prediction")
        ax.plot(dense, b["lower"][:, d], "k--", lw=0.8, label=f"{pct} confidence")
        ax.plot(dense, b["upper"][:, d], "k--", lw=0.8)
        ax.plot(dense, b["x"][:, d], "C0-", lw=1.5, label="fit")
        ax.plot(result.t, y[:, d], "o", ms=3, color="0.3", label="data")
        if ref is not None:
            ax.plot(dense, ref[:, d], "C3:", lw=1.5, label="truth")
        ax.set_ylabel(variables[d])
    axes[-1].set_xlabel("t")
    axes[0].legend(loc="best", fontsize="small")
    axes[0].set_title(f"Data2LD, ρ = {result.rho:.6g}", fontsize="medium", loc="left")
    return fig, axes


def continuation(result: Data2LDFit, *, level: float = 0.95, min_rho: float = 0.9, axes=None):
    """Estimates with `level` normal intervals against ρ along the continuation, for the
    stages with ρ ≥ `min_rho`, the selected stage marked (Carey & Ramsay 2021, Fig. 3). Returns `(figure, axes)`."""
    _check(result)
    path = result.path
    keep = path["rho"] >= min_rho
    if not np.any(keep):
        raise ValueError(f"min_rho = {min_rho} leaves no stage (the largest ρ is {path['rho'].max():.6g}).")
    names = result.model.param_names
    fig, axes = grid(len(names), axes, size=(6.0, 2.0))
    z = scipy.stats.norm.ppf(0.5 + level / 2)
    x = 1 - path["rho"][keep]
    for j, ax in enumerate(axes):
        ax.errorbar(x, path["theta"][keep, j], yerr=z * path["stderr"][keep, j], fmt="o-", ms=3, capsize=2)
        ax.axvline(1 - result.rho, color="k", ls=":", lw=1)
        ax.set_xscale("log")
        ax.invert_xaxis()
        ax.set_ylabel(names[j])
    axes[-1].set_xlabel("1 − ρ")
    return fig, axes

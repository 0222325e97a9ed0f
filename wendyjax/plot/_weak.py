"""Weak-form diagnostics: the radius selection curve, the test functions, and the weak
likelihood landscape in two parameters."""

import jax
import jax.numpy as jnp
import numpy as np

from .._compile import cpu_safe_jit
from .._typing import ArrayLike
from ..data import trapezoid_weights
from ..estimators import WENDyFit
from ..weak import RadiusSelection, TestFunctionInfo, TestFunctions, WeakLikelihood, nll
from ._axes import grid, single


def radius(selection: "RadiusSelection | TestFunctionInfo | WENDyFit", *, ax=None):
    """The integration-error surrogate ê_rms against the test-function radius (Bortz et al. 2023, eq. 21,
    Fig. 2) with the selected corner marked. Accepts `wj.weak.select_radius`'s result, a
    fit's test-function info or a WENDy fit (its first trajectory). Returns `(figure, axes)`."""
    sel = selection.test_functions[0] if isinstance(selection, WENDyFit) else selection
    if isinstance(sel, TestFunctionInfo):
        if sel.selection is None:
            raise ValueError("selection: the radius was given, not selected; there is no selection curve.")
        sel = sel.selection
    if not isinstance(sel, RadiusSelection):
        raise TypeError(f"selection must be a RadiusSelection, TestFunctionInfo or WENDyFit, got {type(sel).__name__}.")
    fig, ax = single(ax, (5.0, 3.5))
    ax.semilogy(sel.radii, sel.errors, ".-", label="ê_rms (Bortz et al. 2023 eq. 21)")
    ax.axvline(sel.radius, color="k", ls="--", lw=1, label=f"selected radius {sel.radius:.3g}")
    ax.plot([sel.radius], [sel.errors[sel.index]], "o", color="C3")
    ax.set(xlabel="test-function radius (time units)", ylabel="integration-error surrogate")
    ax.legend(fontsize="small")
    return fig, ax


def test_functions(tf: "TestFunctions | WENDyFit", t: ArrayLike | None = None, *, n: int = 6, axes=None):
    """The first `n` orthonormal test functions φ_k (rows of Φ divided by the quadrature
    weights; Bortz et al. 2023, Fig. 3) and, when recorded, the singular values of the full bump matrix
    with the K kept (Rummel et al. 2025, App. A.1.2). A WENDy fit gives its first trajectory's functions
    and grid; bare `TestFunctions` need the grid `t`. Returns `(figure, axes)`."""
    if isinstance(tf, WENDyFit):
        problem = tf.likelihood.problem
        phi, t, info = np.asarray(problem.phi[0]), np.asarray(problem.t[0]), tf.test_functions[0]
        phi = phi[np.asarray(problem.kmask[0]) > 0]
    elif isinstance(tf, TestFunctions):
        if t is None:
            raise ValueError("t: the time grid is needed to draw bare TestFunctions.")
        phi, t, info = np.asarray(tf.phi)[np.asarray(tf.mask) > 0], np.asarray(t, float), tf.info
    else:
        raise TypeError(f"tf must be TestFunctions or a WENDyFit, got {type(tf).__name__}.")
    if phi.shape[1] != len(t):
        raise ValueError(f"t has {len(t)} points but the test functions have {phi.shape[1]} columns.")
    panels = 2 if info is not None else 1
    fig, axes = grid(panels, axes, ncols=panels, size=(5.0, 3.5), sharex=False)
    w = np.asarray(trapezoid_weights(jnp.asarray(t)))
    for k in range(min(n, len(phi))):
        axes[0].plot(t, phi[k] / w, lw=1.2, label=f"φ_{k + 1}")
    axes[0].set(xlabel="t", ylabel="φ_k(t)", title=f"first {min(n, len(phi))} of K = {len(phi)} test functions")
    axes[0].legend(fontsize="x-small", ncols=2)
    if info is not None:
        s = np.asarray(info.singular_values)
        axes[1].semilogy(np.arange(1, len(s) + 1), s / s[0], ".", ms=3)
        axes[1].axvline(info.k, color="k", ls="--", lw=1, label=f"K = {info.k} kept")
        axes[1].set(xlabel="index", ylabel="σ_k / σ_1", title="singular values of the bump matrix")
        axes[1].legend(fontsize="small")
    return fig, axes


@cpu_safe_jit
def _landscape(lik: WeakLikelihood, points):
    return jax.vmap(nll, in_axes=(None, 0))(lik, points)


def likelihood(
    lik: "WeakLikelihood | WENDyFit",
    centre: ArrayLike | None = None,
    params: tuple[int, int] = (0, 1),
    *,
    span: float = 0.5,
    n: int = 41,
    truth: ArrayLike | None = None,
    ax=None,
):
    """Contours of the weak negative log-likelihood ℓ (Rummel et al. 2025, eq. 6) over two parameters
    `params`, the others held at `centre` (Rummel et al. 2025, Fig. 8): each varies by ±`span` relative to
    its centre value (absolute where it is 0). `centre` defaults to a fit's estimate; `truth`
    is marked. One vmapped, compiled evaluation of the n × n grid. Returns `(figure, axes)`."""
    if isinstance(lik, WENDyFit):
        centre = lik.params if centre is None else centre
        lik = lik.likelihood
    if not isinstance(lik, WeakLikelihood):
        raise TypeError(f"lik must be a WeakLikelihood or WENDyFit, got {type(lik).__name__}.")
    j = lik.model.n_params
    if centre is None:
        raise ValueError("centre: give the parameter vector to draw around.")
    centre = np.asarray(centre, float)
    if centre.shape != (j,):
        raise ValueError(f"centre must have shape ({j},), got {centre.shape}.")
    a, b = params
    if not (0 <= a < j and 0 <= b < j and a != b):
        raise ValueError(f"params must be two different indices in [0, {j}), got {params}.")
    if not span > 0 or n < 3:
        raise ValueError(f"need span > 0 and n >= 3, got span={span}, n={n}.")
    axes_values = []
    for i in (a, b):
        half = span * (abs(centre[i]) if centre[i] != 0 else 1.0)
        axes_values.append(np.linspace(centre[i] - half, centre[i] + half, n))
    pa, pb = np.meshgrid(*axes_values, indexing="xy")
    points = np.tile(centre, (pa.size, 1))
    points[:, a], points[:, b] = pa.ravel(), pb.ravel()
    values = np.asarray(_landscape(lik, jnp.asarray(points))).reshape(pa.shape)
    fig, ax = single(ax, (5.0, 4.2))
    shifted = values - np.nanmin(values)
    cs = ax.contourf(pa, pb, np.log10(1 + shifted), levels=20, cmap="viridis")
    fig.colorbar(cs, ax=ax, label="log10(1 + ℓ − min ℓ)")
    ax.plot(centre[a], centre[b], "w+", ms=10, mew=2, label="centre")
    if truth is not None:
        truth = np.asarray(truth, float)
        ax.plot(truth[a], truth[b], "r*", ms=10, label="truth")
    names = lik.model.param_names
    ax.set(xlabel=names[a], ylabel=names[b], title="weak negative log-likelihood")
    ax.legend(fontsize="small")
    return fig, ax

"""The README's main job: simulate a zoo model with its paper protocol, fit it with
WENDy-MLE from a random start in the paper's box, print the parameter table."""

import time

import jax
import numpy as np

from .. import models
from ..estimators import MLE, WLS


def demo(name: str = "lorenz", noise_ratio: float = 0.1, seed: int = 0):
    """Fit `name` from the zoo on noisy data; returns the [`WENDyFit`][wendyjax.WENDyFit]."""
    jax.config.update("jax_enable_x64", True)
    bench = getattr(models, name)()
    model = bench.model
    data = bench.simulate(jax.random.key(seed), noise_ratio=noise_ratio)
    lo, hi = (np.asarray(b) for b in model.bounds)
    p0 = lo + np.random.default_rng(seed).uniform(size=lo.size) * (hi - lo)
    print(
        f"wendyjax demo: {model.name} ({model.n_states} states, {model.n_params} parameters, "
        f"{'linear' if model.linear_in_params else 'nonlinear'} in the parameters)"
    )
    print(
        f"data: {data.n_samples} samples on [{float(data.t[0]):g}, {float(data.t[-1]):g}], "
        f"{type(bench.noise).__name__} noise, ratio {noise_ratio:g}, seed {seed}"
    )
    print(f"start p0 (uniform in the paper's box): {np.array2string(p0, precision=4)}")
    t0 = time.perf_counter()
    fit = MLE().fit(model, data, p0)  # the zoo model's own noise model
    secs = time.perf_counter() - t0
    wls = WLS().fit(model, data, p0)
    print()
    fit.summary(truth=bench.p_true)
    print()
    rel = lambda p: np.linalg.norm(p - bench.p_true) / np.linalg.norm(bench.p_true)  # noqa: E731
    clean = bench.simulate(None, noise_ratio=0.0)
    fwd = fit.forward_error(bench.u0, clean.t, clean.u, bench.solver)
    print(
        f"relative coefficient error (Rummel et al. 2025, eq. 12): MLE {rel(fit.params):.3g}, WLS {rel(wls.params):.3g}"
    )
    print(f"forward-simulation relative error of the MLE fit (Rummel et al. 2025, eq. 13): {fwd:.3g}")
    print(f"fit time {secs:.2f} s (including JIT compilation on the first call)")
    return fit

"""The README's main job: simulate a zoo model, build its weak likelihood, report."""

import time

import jax
import numpy as np

from . import models
from .noise import estimate_noise_std
from .weak import build_test_functions, nll_grad, weak_likelihood


def demo(name: str = "lorenz", noise_ratio: float = 0.1, seed: int = 0) -> dict:
    """Simulate `name` from the zoo with its paper protocol, evaluate the weak likelihood
    ℓ and its gradient at the truth and at a perturbed point, and print a report."""
    jax.config.update("jax_enable_x64", True)
    bench = getattr(models, name)()
    model = bench.model
    clean = bench.simulate(None, noise_ratio=0.0)
    data = bench.simulate(jax.random.key(seed), noise_ratio=noise_ratio)
    log_space = bench.noise.log_space
    u = np.log(np.asarray(data.u)) if log_space else np.asarray(data.u)
    t0 = time.perf_counter()
    tf = build_test_functions(data.t, u)
    lik = weak_likelihood(model, data, bench.noise, test_functions=tf)
    build_s = time.perf_counter() - t0
    p_star = np.asarray(bench.p_true)
    rows = []
    for label, p in (("p*", p_star), ("1.1·p*", 1.1 * p_star)):
        t0 = time.perf_counter()
        value, grad = float(lik(p)), np.asarray(nll_grad(lik, p))
        rows.append((label, value, grad, time.perf_counter() - t0))
    sigma_true = np.asarray(bench.noise.std(clean.u))
    print(f"wendyjax demo: {model.name} ({model.n_states} states, {model.n_params} parameters, "
          f"{'linear' if model.linear_in_params else 'nonlinear'} in the parameters)")
    print(f"data: {data.n_samples} samples on [{float(data.t[0]):g}, {float(data.t[-1]):g}], "
          f"{type(bench.noise).__name__} noise, ratio {noise_ratio:g}, seed {seed}")
    print(f"noise std per state: estimated {np.array2string(np.asarray(estimate_noise_std(u)), precision=4)}, "
          f"true {np.array2string(sigma_true * noise_ratio / bench.noise.noise_ratio, precision=4)}")
    print(f"test functions: K = {tf.k} of {tf.info.k_full}, radii {np.round(tf.info.radii, 4)} "
          f"(time units); built in {build_s:.2f} s")
    print()
    print("weak negative log-likelihood ℓ and its gradient (first call includes compilation):")
    print(f"  {'at':8s}{'ℓ(p)':>14s}  {'seconds':>8s}   ∇ℓ(p)")
    for label, value, grad, secs in rows:
        g = np.array2string(grad, precision=4, max_line_width=120)
        print(f"  {label:8s}{value:14.4f}  {secs:8.3f}   {g}")
    print()
    print("true parameters:")
    for n, v in zip(model.param_names, p_star):
        print(f"  {n:10s}{v:12.6g}")
    return {label: value for label, value, _, _ in rows}

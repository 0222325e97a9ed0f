"""The per-dataset build of wendyjax before the batched one (landed main 9119ae6), kept as the
reference the batched build is tested against: the minimum-radius search in NumPy (one loop
over candidate radii, probe sums from the bumps' non-zeros) and the stacking of one
dataset's weak problem."""

import jax.numpy as jnp
import numpy as np

from wendyjax.noise import estimate_noise_std
from wendyjax.weak import TestFunctionConfig, WeakProblem, bump
from wendyjax.weak._test_functions import _cached_basis


def _probe_sums(t, w, radius, eta, centres, wave_u):
    lo = np.searchsorted(t, centres - radius, side="right")
    counts = np.searchsorted(t, centres + radius, side="left") - lo
    rows = np.repeat(np.arange(len(centres)), counts)
    starts = np.repeat(np.cumsum(counts) - counts, counts)
    cols = lo[rows] + np.arange(counts.sum()) - starts
    psi = bump((t[cols] - centres[rows]) / radius, eta)
    norm = np.sqrt(np.bincount(rows, weights=psi**2 * w[cols], minlength=len(centres)))
    values = (psi * w[cols] / norm[rows])[:, None] * wave_u[cols]
    return np.stack([np.bincount(rows, weights=v, minlength=len(centres)) for v in values.T], axis=1)


def _corner(x, y):
    n = len(x)
    xs = (x - x.min()) / max(np.ptp(x), 1e-300)
    ys = (y - y.min()) / max(np.ptp(y), 1e-300)
    best, best_cost = 1, np.inf
    for k in range(1, n - 1):
        l1 = ys[0] + (ys[k] - ys[0]) * (xs[: k + 1] - xs[0]) / (xs[k] - xs[0])
        l2 = ys[k] + (ys[-1] - ys[k]) * (xs[k:] - xs[k]) / (xs[-1] - xs[k])
        cost = np.sum((l1 - ys[: k + 1]) ** 2) + np.sum((l2 - ys[k:]) ** 2)
        if cost < best_cost:
            best, best_cost = k, cost
    return best


def _secant_corner(x, y, order):
    n = len(y)
    y = y / np.max(np.abs(y)) * n
    best, best_cost = 0, np.inf
    for k in range(1, n - 1):
        cost = 0.0
        for part in (slice(0, k + 1), slice(k, n)):
            xs, ys = x[part], y[part]
            line = ys[0] + (ys[-1] - ys[0]) * (xs - xs[0]) / (xs[-1] - xs[0])
            cost += np.sum(np.abs((line - ys) / ys) ** order)
        if cost < best_cost:
            best, best_cost = k, cost
    return best


def select_radius(t, u, config=TestFunctionConfig()):
    """`(radii, errors, index)` of the old search on one dataset (uniform grid)."""
    t, u = np.asarray(t, float), np.asarray(u, float)
    dt = float(np.diff(t).mean())
    if config.rule == "matlab":
        n = len(t)
        radii = np.arange(2, (n - 1) // 2 - config.k_min + 1)
        mode, T = int(np.floor(n / config.sub_rate)), n * dt
        sine_u = np.sin(2 * np.pi * mode * np.arange(n) / n)[:, None] * u
        errors = np.empty(len(radii))
        for i, r in enumerate(radii):
            centres = t[np.arange(r - 1, n - r - 1, r)]
            im = -(dt / np.sqrt(T)) * _probe_sums(t, np.ones(n), r * dt, config.eta, centres, sine_u)
            errors[i] = np.sqrt(np.mean((4 * np.pi / np.sqrt(T) * im) ** 2))
        errors = np.maximum(errors, np.finfo(float).tiny)
        return radii * dt, errors, _secant_corner(radii.astype(float), np.log(errors), 2)
    m = len(t) - 1
    r_lo = max(int(np.ceil(config.radius_min_time / dt)), 2)
    r_max = min(int(np.floor(config.radius_max_time / dt)), (m - 3) // 2)
    r_hi = int(np.floor(r_max / max(config.radii_factors)))
    if r_hi <= r_lo:
        r_hi = min(r_max, 10 * r_lo)
    radii = np.arange(r_lo, r_hi + 1, max(int(np.ceil((r_hi - r_lo) / config.num_radii)), 1))
    n = int(np.floor(m / config.sub_rate))
    T = t[-1] - t[0]
    sine_u = np.sin(2 * np.pi * n * np.arange(m + 1) / m)[:, None] * u
    errors = np.empty(len(radii))
    for i, r in enumerate(radii):
        first, last = r + 1, m - r - 1
        count = min(config.n_probe, last - first + 1)
        centres = t[np.unique(np.round(np.linspace(first, last, count)).astype(int))]
        im = -np.sqrt(dt / T) * _probe_sums(t, np.full(m + 1, dt), r * dt, config.eta, centres, sine_u)
        errors[i] = np.mean(np.sum((-4 * np.pi * n / np.sqrt(T) * im) ** 2, axis=1))
    errors = np.maximum(errors, np.finfo(float).tiny)
    return radii * dt, errors, _corner(radii.astype(float), np.log(errors))


def weak_problem(t, u, log_space=False, config=TestFunctionConfig()) -> WeakProblem:
    """One fully observed trajectory's weak problem, stacked as the old `build_problem` did
    (the basis of the selected radius from the unchanged cached construction)."""
    t, u = np.asarray(t, float), np.asarray(u, float)
    if log_space:
        u = np.log(u)
    radii, _, index = select_radius(t, u, config)
    tf = _cached_basis(t.tobytes(), float(radii[index]), config)
    phi, dphi = np.asarray(tf.phi)[None], np.asarray(tf.dphi)[None]
    b = -np.einsum("rkn,rnd->rdk", dphi, u[None]).reshape(1, -1)
    return WeakProblem(
        phi=jnp.asarray(phi),
        dphi=jnp.asarray(dphi),
        dphi_gram=jnp.asarray(np.einsum("rkn,rln->rkl", dphi, dphi)),
        kmask=jnp.ones((1, tf.k)),
        u=jnp.asarray(u[None]),
        t=jnp.asarray(t[None]),
        b=jnp.asarray(b),
        sigma=jnp.asarray(np.asarray(estimate_noise_std(u))[None]),
        log_space=log_space,
    )

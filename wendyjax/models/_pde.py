r"""Reference solutions of the PDEs of Meissner & Glasner 2024, §5.2, computed in JAX: Kuramoto–Sivashinsky in 1-D
(periodic, pseudo-spectral) and Allen–Cahn in 2-D (Neumann, cosine-spectral)."""

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.fft import dctn, idctn

from .._compile import cpu_safe_jit


def _etdrk4(lin: np.ndarray, h: float, nonlinear):
    r"""One ETDRK4 step of $v' = Lv + N(v)$ with $L$ = diag(`lin`) (Kassam & Trefethen 2005: the
    φ-function coefficients by contour integrals on 32 points)."""
    e, e2 = np.exp(h * lin), np.exp(h * lin / 2)
    r = np.exp(1j * np.pi * (np.arange(1, 33) - 0.5) / 32)
    lr = h * lin[..., None] + r
    q = h * np.real(np.mean((np.exp(lr / 2) - 1) / lr, axis=-1))
    f1 = h * np.real(np.mean((-4 - lr + np.exp(lr) * (4 - 3 * lr + lr**2)) / lr**3, axis=-1))
    f2 = h * np.real(np.mean((2 + lr + np.exp(lr) * (-2 + lr)) / lr**3, axis=-1))
    f3 = h * np.real(np.mean((-4 - 3 * lr - lr**2 + np.exp(lr) * (4 - lr)) / lr**3, axis=-1))

    def step(v):
        nv = nonlinear(v)
        a = e2 * v + q * nv
        na = nonlinear(a)
        b = e2 * v + q * na
        nb = nonlinear(b)
        c = e2 * a + q * (2 * nb - nv)
        return e * v + nv * f1 + 2 * (na + nb) * f2 + nonlinear(c) * f3

    return step


def _sample(step, v0, n_samples: int, substeps: int, physical) -> np.ndarray:
    """`n_samples` snapshots `physical(v)` of the spectral state, `substeps` steps apart, after v0."""

    def sample(v, _):
        v = jax.lax.fori_loop(0, substeps, lambda i, w: step(w), v)
        return v, physical(v)

    return np.asarray(cpu_safe_jit(lambda v: jax.lax.scan(sample, v, None, length=n_samples)[1])(v0))


def kuramoto_sivashinsky(
    n: int = 128, length: float = 40.0, dt: float = 0.3, n_times: int = 128, substeps: int = 12
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    r"""$u_t = u u_x - u_{xx} - u_{xxxx}$ (Meissner & Glasner 2024's sign of the nonlinear term) on a periodic domain of
    `length`, $u(x, 0) = -2\sin(12\pi x/L) + 2\exp(-(x-2)^2/5)$, sampled on `n` points every `dt`
    for `n_times` levels from t = 0 (Meissner & Glasner 2024, §5.2.1: L = 40, 128 × 128 samples, Δt = 0.3).

    Pseudo-spectral in space, ETDRK4 in time with `substeps` steps per sample (Meissner & Glasner 2024 used the
    trapezoidal rule and does not give its step). Returns `(t, x, u)` with `u` of shape
    `(n_times, n)`."""
    x = np.arange(n) * length / n
    k = 2 * np.pi * np.fft.rfftfreq(n, length / n)
    g = 0.5j * k  # u u_x = (u²/2)_x
    step = _etdrk4(k**2 - k**4, dt / substeps, lambda v: g * jnp.fft.rfft(jnp.fft.irfft(v, n) ** 2))
    u0 = -2 * np.sin(12 * np.pi * x / length) + 2 * np.exp(-((x - 2) ** 2) / 5)
    rest = _sample(step, jnp.fft.rfft(jnp.asarray(u0)), n_times - 1, substeps, lambda v: jnp.fft.irfft(v, n))
    return np.arange(n_times) * dt, x, np.concatenate([u0[None], rest])


def allen_cahn_2d(
    n: int = 256, spacing: float = 40.0 / 127, dt: float = 0.05, times: tuple[float, ...] = (25.0, 26.0), seed: int = 0
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    r"""$u_t = \Delta u + u - u^3$ on an `n` × `n` grid of step `spacing` with Neumann boundaries,
    $u(x, y, 0) = 0.1(\mathrm{rand} - 0.5)$ (uniform, `seed`), sampled at `times`, equally spaced
    (Meissner & Glasner 2024, §5.2.2: N = 256, Δx = 40/127, Δt = 0.01, snapshots at t = 25 and 26).

    Cosine transforms diagonalise the Neumann Laplacian (the 5-point stencil with mirrored
    boundaries); ETDRK4 in time with step `dt` (Meissner & Glasner 2024 used an iterated convexity splitting with
    Δt = 0.01; ETDRK4 at 0.05 differs from ETDRK4 at 0.01 by 9e-5 at t = 26).
    Returns `(times, x, u)` with `u` of shape `(len(times), n, n)`, `x` the grid of both axes."""
    ts = np.asarray(times, float)
    steps = np.round(ts / dt).astype(int)
    gaps = np.diff(steps)
    if steps[0] <= 0 or np.any(gaps <= 0) or np.any(gaps != gaps[:1]):
        raise ValueError(f"times must be positive, increasing and equally spaced, got {ts!r}.")
    kx = 2 * (1 - np.cos(np.pi * np.arange(n) / n)) / spacing**2  # eigenvalues of -Δ (Neumann)

    def dct(u):
        return dctn(u, type=2, norm="ortho")

    def idct(v):
        return idctn(v, type=2, norm="ortho")

    step = _etdrk4(1 - kx[:, None] - kx[None, :], dt, lambda v: dct(-(idct(v) ** 3)))
    u0 = 0.1 * (np.random.default_rng(seed).uniform(size=(n, n)) - 0.5)
    v = cpu_safe_jit(lambda v: jax.lax.fori_loop(0, int(steps[0]), lambda i, w: step(w), v))(dct(jnp.asarray(u0)))
    rest = _sample(step, v, len(ts) - 1, int(gaps[0]) if gaps.size else 1, idct)
    return ts, np.arange(n) * spacing, np.concatenate([np.asarray(idct(v))[None], rest])

"""Noise models of the papers and the data-driven noise-level estimate."""

import abc
import functools

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Float, PRNGKeyArray


def _check_ratio(ratio):
    if isinstance(ratio, (int, float, np.number)) and not ratio >= 0:
        raise ValueError(f"noise_ratio must be a non-negative number, got {ratio}.")


class AbstractNoise(eqx.Module):
    """A measurement-noise model: how data are corrupted and how the weak form sees them."""

    noise_ratio: eqx.AbstractVar[float]

    @abc.abstractmethod
    def std(self, u_clean: Float[Array, "n d"]) -> Float[Array, " d"]:
        """Per-state standard deviation of the (additive, possibly log-space) noise."""

    @abc.abstractmethod
    def sample(self, u_clean: Float[Array, "n d"], key: PRNGKeyArray) -> Float[Array, "n d"]:
        """Corrupt a noiseless trajectory."""

    @property
    @abc.abstractmethod
    def log_space(self) -> bool:
        """Whether the noise is additive Gaussian after taking logarithms."""


class AdditiveGaussian(AbstractNoise):
    r"""Additive i.i.d. Gaussian noise $u_m = u^*_m + \varepsilon_m$, $\varepsilon_m \sim N(0, \Sigma)$.

    The standard deviation is `noise_ratio` times the RMS of the noiseless data over all
    entries, $\sigma = \sigma_{nr}\|\mathrm{vec}\,U^*\|_{rms}$ (Bortz et al. 2023, §3.1), the same for every
    state; with `per_state=True` each state uses its own RMS (WENDy.jl's
    `isotropic=false`), and with `centred=True` the RMS about each state's mean, so
    `per_state=True, centred=True` scales by each state's standard deviation (the
    definition of Meissner & Glasner 2024 and much of the SINDy literature). Rummel et al. 2025, eq. (19) prints
    $\Sigma = \mathrm{diag}(\sigma_{nr}\|U\|_F^2/(M+1))$, a variance without the square on $\sigma_{nr}$ and without the
    division by $D$; the code that produced its figures (rummelWENDy2025,
    `src/wendyData.jl`) uses the standard deviation above, so both papers agree.
    `noise_ratio` 0.1 means "10 % noise".
    """

    noise_ratio: float
    per_state: bool = eqx.field(static=True, default=False)
    centred: bool = eqx.field(static=True, default=False)

    def __check_init__(self):
        _check_ratio(self.noise_ratio)

    def std(self, u_clean):
        axis = 0 if self.per_state else None
        if self.centred:
            u_clean = u_clean - jnp.mean(u_clean, axis=0)
        rms = jnp.sqrt(jnp.mean(u_clean**2, axis=axis))
        return jnp.broadcast_to(self.noise_ratio * rms, (u_clean.shape[1],))

    def sample(self, u_clean, key):
        eps = jax.random.normal(key, u_clean.shape, dtype=u_clean.dtype)
        return u_clean + eps * self.std(u_clean)

    @property
    def log_space(self) -> bool:
        return False


class LogNormal(AbstractNoise):
    r"""Multiplicative log-normal noise $u_m = u^*_m \circ \nu_m$, $\log\nu_m \sim N(0, \sigma_{nr}^2 I)$.

    Rummel et al. 2025, eq. (20); `noise_ratio` is the standard deviation of $\log\nu$.
    """

    noise_ratio: float

    def __check_init__(self):
        _check_ratio(self.noise_ratio)

    def std(self, u_clean):
        return jnp.full((u_clean.shape[1],), self.noise_ratio, dtype=u_clean.dtype)

    def sample(self, u_clean, key):
        z = jax.random.normal(key, u_clean.shape, dtype=u_clean.dtype)
        return u_clean * jnp.exp(self.noise_ratio * z)

    @property
    def log_space(self) -> bool:
        return True


def is_log_space(noise: "str | AbstractNoise") -> bool:
    """Whether `noise` ("gaussian", "lognormal" or a noise model) is fitted on log data."""
    if isinstance(noise, AbstractNoise):
        return noise.log_space
    if noise in ("gaussian", "lognormal"):
        return noise == "lognormal"
    raise ValueError(f"noise must be 'gaussian', 'lognormal' or a noise model, got {noise!r}.")


def resolve_noise(model, noise: "str | AbstractNoise | None") -> "str | AbstractNoise":
    """`noise`, or where it is `None` the model's own (`model.noise`, "gaussian" for
    models that declare none)."""
    if noise is None:
        return getattr(model, "noise", "gaussian")
    is_log_space(noise)  # refuses an unknown name
    return noise


def fornberg_weights(x: np.ndarray, x0: float, order: int) -> np.ndarray:
    """Finite-difference weights of the `order`-th derivative at `x0` on nodes `x`
    (Fornberg 1988, the recursion over nodes and derivative orders)."""
    n = len(x)
    c = np.zeros((n, order + 1))
    c[0, 0] = 1.0
    c1, c4 = 1.0, x[0] - x0
    for i in range(1, n):
        mn = min(i, order)
        c2, c5, c4 = 1.0, c4, x[i] - x0
        for j in range(i):
            c3 = x[i] - x[j]
            c2 *= c3
            if j == i - 1:
                for k in range(mn, 0, -1):
                    c[i, k] = c1 * (k * c[i - 1, k - 1] - c5 * c[i - 1, k]) / c2
                c[i, 0] = -c1 * c5 * c[i - 1, 0] / c2
            for k in range(mn, 0, -1):
                c[j, k] = (c4 * c[j, k] - k * c[j, k - 1]) / c3
            c[j, 0] = c4 * c[j, 0] / c3
        c1 = c2
    return c[:, order]


NOISE_WIDTH = 15  # points of the noise estimate's stencil


@functools.cache
def _noise_filter(order: int = 6, width: int = NOISE_WIDTH) -> np.ndarray:
    # Centred finite-difference weights of the `order`-th derivative on `width` equally
    # spaced points, scaled to unit 2-norm: white noise of standard deviation σ keeps σ.
    # (scipy.signal.savgol_coeffs(width, width - 1, deriv=order) is the same stencil, but
    # its ill-conditioned fit leaves ~1e-9 on constants, a floor on smooth data.)
    half = (width - 1) / 2
    f = fornberg_weights(np.arange(width) - half, 0.0, order)
    return f / np.linalg.norm(f)


def estimate_noise_std(u: ArrayLike, order: int = 6, width: int = NOISE_WIDTH) -> Float[Array, " d"]:
    """Per-state noise standard deviation estimated from data (Bortz et al. 2023, §2.2).

    Each column is filtered with the unit-norm centred finite-difference stencil of the
    `order`-th derivative over `width` points; the smooth signal is annihilated up to
    degree `order - 1` and the RMS of what remains estimates σ.
    """
    u = jnp.asarray(u, dtype=float)
    if u.ndim == 1:
        u = u[:, None]
    if u.ndim != 2:
        raise ValueError(f"u must have shape (M+1, D), got {u.shape}.")
    if u.shape[0] < width:
        raise ValueError(
            f"the noise estimate needs at least {width} samples per state, got {u.shape[0]}."
        )
    f = jnp.asarray(_noise_filter(order, width), dtype=u.dtype)
    filtered = jax.vmap(lambda col: jnp.convolve(col, f, mode="valid"), in_axes=1, out_axes=1)(u)
    return jnp.sqrt(jnp.mean(filtered**2, axis=0))

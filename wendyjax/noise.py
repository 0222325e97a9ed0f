"""Noise models of the papers and the data-driven noise-level estimate."""

import abc
import functools

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import scipy.signal
from jaxtyping import Array, ArrayLike, Float, PRNGKeyArray


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

    The scale follows one of the papers' conventions:

    - `scale="000"` (paper 000 eq. 19): $\Sigma = \operatorname{diag}(\sigma_{nr}^2
      \|U^*\|_F^2/(M+1))$, the same standard deviation $\sigma_{nr}\|U^*\|_F/\sqrt{M+1}$
      for every state.
    - `scale="001"` (paper 001 §3.1): $\sigma = \sigma_{NR}\|\mathrm{vec}\,U^*\|_{rms}$.

    `noise_ratio` is $\sigma_{nr}$ (0.1 means "10 % noise").
    """

    noise_ratio: float
    scale: str = eqx.field(static=True, default="000")

    def __check_init__(self):
        if self.scale not in ("000", "001"):
            raise ValueError(f"scale must be '000' or '001', got {self.scale!r}.")
        if not np.isscalar(self.noise_ratio) or not self.noise_ratio >= 0:
            raise ValueError(f"noise_ratio must be a non-negative number, got {self.noise_ratio}.")

    def std(self, u_clean):
        n, d = u_clean.shape
        if self.scale == "000":
            s = self.noise_ratio * jnp.sqrt(jnp.sum(u_clean**2) / n)
        else:
            s = self.noise_ratio * jnp.sqrt(jnp.mean(u_clean**2))
        return jnp.full((d,), s)

    def sample(self, u_clean, key):
        eps = jax.random.normal(key, u_clean.shape, dtype=u_clean.dtype)
        return u_clean + eps * self.std(u_clean)

    @property
    def log_space(self) -> bool:
        return False


class LogNormal(AbstractNoise):
    r"""Multiplicative log-normal noise $u_m = u^*_m \circ \nu_m$, $\log\nu_m \sim N(0, \sigma_{nr}^2 I)$.

    Paper 000 eq. (20); `noise_ratio` is the standard deviation of $\log\nu$.
    """

    noise_ratio: float

    def __check_init__(self):
        if not np.isscalar(self.noise_ratio) or not self.noise_ratio >= 0:
            raise ValueError(f"noise_ratio must be a non-negative number, got {self.noise_ratio}.")

    def std(self, u_clean):
        return jnp.full((u_clean.shape[1],), self.noise_ratio, dtype=u_clean.dtype)

    def sample(self, u_clean, key):
        z = jax.random.normal(key, u_clean.shape, dtype=u_clean.dtype)
        return u_clean * jnp.exp(self.noise_ratio * z)

    @property
    def log_space(self) -> bool:
        return True


@functools.cache
def _noise_filter(order: int = 6, width: int = 15) -> np.ndarray:
    # Centred finite-difference weights of the `order`-th derivative on `width` equally
    # spaced points (the derivative of the interpolating polynomial at the centre), scaled
    # to unit 2-norm: white noise of standard deviation σ keeps σ after filtering.
    f = scipy.signal.savgol_coeffs(width, width - 1, deriv=order, use="dot")
    return f / np.linalg.norm(f)


def estimate_noise_std(u: ArrayLike, order: int = 6, width: int = 15) -> Float[Array, " d"]:
    """Per-state noise standard deviation estimated from data (paper 001 §2.2).

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

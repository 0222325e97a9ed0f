"""Noise models of the papers and the data-driven noise-level estimate."""

import abc
import functools

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, PRNGKeyArray

from ._typing import ArrayLike


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


def _xlogm(y, mean):
    """y·log(mean), 0 where y = 0 (also at mean = 0, with a zero derivative there)."""
    return jnp.where(y > 0, y * jnp.log(jnp.where(y > 0, mean, 1.0)), 0.0)


def _inverse(x):
    """1/x, and 0 where x = 0 (a count of 0 at a mean of exactly 0, e.g. a state that starts
    at 0: no information there)."""
    return jnp.where(x > 0, 1.0 / jnp.where(x > 0, x, 1.0), 0.0)


class AbstractCountNoise(eqx.Module):
    """A likelihood for counts, fitted by output error: each observation is a count whose
    mean is the model's prediction (positive, or 0 where the count is 0)."""

    @abc.abstractmethod
    def nll(self, y: Array, mean: Array, p: Array | None) -> Array:
        """The negative log-likelihood of each count `y` at `mean` (constants included),
        with `p` the model's parameters (for a dispersion fitted with them)."""

    @abc.abstractmethod
    def information(self, mean: Array, p: Array | None) -> Array:
        """The expected Fisher information about the mean of each count."""

    @abc.abstractmethod
    def draw(self, mean: Array, p: Array | None, key: PRNGKeyArray) -> Array:
        """Counts drawn at `mean` (a parametric bootstrap's data)."""

    def resolve(self, model) -> "AbstractCountNoise":
        """This noise model with its parameter names checked against `model`."""
        return self

    def sample(self, u_clean: Float[Array, "n d"], key: PRNGKeyArray) -> Float[Array, "n d"]:
        """Counts with mean `u_clean` (`wj.simulate`)."""
        return self.draw(u_clean, jnp.zeros(0, u_clean.dtype), key)

    @property
    def log_space(self) -> bool:
        """Counts are fitted as they are, not as logarithms."""
        return False


class Poisson(AbstractCountNoise):
    """Poisson counts: variance equal to the mean."""

    def nll(self, y, mean, p):
        return mean - _xlogm(y, mean) + jax.scipy.special.gammaln(y + 1)

    def information(self, mean, p):
        return _inverse(mean)

    def draw(self, mean, p, key):
        return jax.random.poisson(key, mean, dtype=jnp.int32).astype(mean.dtype)


class NegativeBinomial(AbstractCountNoise):
    r"""Negative-binomial counts, variance $\mu + \mu^2/\phi$ (overdispersed Poisson; the
    gamma–Poisson mixture). `dispersion` $\phi > 0$: a number, or the name of a model
    parameter fitted with the others (give it a box, e.g. [0.1, 1000])."""

    dispersion: "float | str" = eqx.field(static=True)
    index: int | None = eqx.field(static=True, default=None)

    def __check_init__(self):
        if isinstance(self.dispersion, str):
            return
        if not (isinstance(self.dispersion, (int, float)) and np.isfinite(self.dispersion) and self.dispersion > 0):
            raise ValueError(
                f"NegativeBinomial: dispersion must be a number > 0 or the name of a model parameter, "
                f"got {self.dispersion!r}."
            )

    def resolve(self, model) -> "NegativeBinomial":
        if not isinstance(self.dispersion, str):
            return self
        if self.dispersion not in model.param_names:
            raise ValueError(
                f"NegativeBinomial(dispersion={self.dispersion!r}): model '{model.name}' has no such "
                f"parameter; its parameters are {', '.join(model.param_names)} (add one for the "
                f"dispersion, or give a number)."
            )
        return NegativeBinomial(self.dispersion, model.param_names.index(self.dispersion))

    def _phi(self, p):
        if not isinstance(self.dispersion, str):
            return self.dispersion
        if self.index is None:
            raise ValueError(
                f"NegativeBinomial(dispersion={self.dispersion!r}) names a parameter: only a fit, which "
                f"knows the model's parameters, can use it; give a number to simulate."
            )
        return p[self.index]

    def nll(self, y, mean, p):
        phi, gammaln = self._phi(p), jax.scipy.special.gammaln
        return -(
            gammaln(y + phi)
            - gammaln(phi)
            - gammaln(y + 1)
            + phi * jnp.log(phi / (phi + mean))
            + _xlogm(y, mean)
            - y * jnp.log(phi + mean)
        )

    def information(self, mean, p):
        phi = self._phi(p)
        return phi * _inverse(mean * (phi + mean))

    def draw(self, mean, p, key):
        phi = self._phi(p)
        rate_key, count_key = jax.random.split(key)
        rate = jax.random.gamma(rate_key, jnp.broadcast_to(phi, mean.shape), dtype=mean.dtype) * mean / phi
        return jax.random.poisson(count_key, rate, dtype=jnp.int32).astype(mean.dtype)


def is_log_space(noise: "str | AbstractNoise | AbstractCountNoise") -> bool:
    """Whether `noise` ("gaussian", "lognormal" or a noise model) is fitted on log data."""
    if isinstance(noise, (AbstractNoise, AbstractCountNoise)):
        return noise.log_space
    if noise in ("gaussian", "lognormal"):
        return noise == "lognormal"
    raise ValueError(
        f"noise must be 'gaussian', 'lognormal' or a noise model (e.g. wj.Poisson()), got {noise!r} "
        f"(one noise model per observable, a sequence, is an option of output error)."
    )


def noise_name(noise: "str | AbstractNoise | AbstractCountNoise") -> str:
    """The noise model's name in results: "gaussian", "lognormal", "poisson", "negative binomial"."""
    if isinstance(noise, AbstractCountNoise):
        return {"Poisson": "poisson", "NegativeBinomial": "negative binomial"}.get(
            type(noise).__name__, type(noise).__name__
        )
    return "lognormal" if is_log_space(noise) else "gaussian"


def observable_noises(model, noise, k: int) -> tuple:
    """The noise model of each of the `k` observables: one for all, or a sequence of `k`
    ("gaussian", "lognormal", count likelihoods), resolved against the model."""
    given = list(noise) if isinstance(noise, (list, tuple)) else [noise] * k
    if len(given) != k:
        raise ValueError(f"noise: one noise model per observable ({k}), got {len(given)}.")
    out = []
    for n in given:
        n = resolve_noise(model, n)
        out.append(n.resolve(model) if isinstance(n, AbstractCountNoise) else noise_name(n))
    return tuple(out)


def resolve_noise(
    model, noise: "str | AbstractNoise | AbstractCountNoise | None"
) -> "str | AbstractNoise | AbstractCountNoise":
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
        raise ValueError(f"the noise estimate needs at least {width} samples per state, got {u.shape[0]}.")
    f = jnp.asarray(_noise_filter(order, width), dtype=u.dtype)
    filtered = jax.vmap(lambda col: jnp.convolve(col, f, mode="valid"), in_axes=1, out_axes=1)(u)
    return jnp.sqrt(jnp.mean(filtered**2, axis=0))

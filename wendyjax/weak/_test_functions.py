"""Test functions of WENDy: bump family, minimum-radius selection, multi-scale SVD basis.

Rummel et al. 2025, App. A and Bortz et al. 2023, §2.3; defaults are those of WENDy.jl (`WENDyParameters`).
What depends only on the grid (the candidate radii and their probes, the basis of each
radius) is computed once per grid and cached (the probe matrix, where it is small, on the
device); the radius search, which reads the data, is one compiled computation for any
number of datasets on that grid.
"""

import dataclasses
import functools

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import scipy.linalg
import scipy.sparse
from jaxtyping import Array, Float

from .._checks import as_ratio
from .._compile import cpu_safe_jit
from ..data import trapezoid_weights

RULES = ("wendy.jl", "matlab")


def bump(x, eta: float = 9.0):
    r"""Bump $\psi(x) = \exp(-\eta / (1 - x^2))$ on $(-1, 1)$, zero outside (Bortz et al. 2023, eq. 17)."""
    x = np.asarray(x, dtype=float)
    inside = np.abs(x) < 1
    xi = np.where(inside, x, 0.0)
    return np.where(inside, np.exp(-eta / (1.0 - xi**2)), 0.0)


def bump_derivative(x, eta: float = 9.0):
    r"""$\psi'(x) = \psi(x)\,(-2\eta x)/(1 - x^2)^2$, zero outside $(-1, 1)$."""
    x = np.asarray(x, dtype=float)
    inside = np.abs(x) < 1
    xi = np.where(inside, x, 0.0)
    return np.where(inside, bump(xi, eta) * (-2.0 * eta * xi) / (1.0 - xi**2) ** 2, 0.0)


@dataclasses.dataclass(frozen=True)
class TestFunctionConfig:
    """How test functions are chosen (defaults: WENDy.jl's `WENDyParameters`).

    - `eta`: bump shape parameter η.
    - `radius`: a fixed minimum radius in time units; `None` selects it from the data
      (uniform grids only).
    - `radius_min_time`, `radius_max_time`: search range of the radius in time units.
    - `num_radii`: number of candidate radii in the minimum-radius search.
    - `radii_factors`: multi-scale stack, radii = factors × minimum radius.
    - `sub_rate`: coarsening factor s of the integration-error surrogate, 2 < s < 4
      (Bortz et al. 2023, §2.3.1; MATLAB WENDy's 2.1). At s = 2 the mode read is the Nyquist mode,
      whose imaginary part vanishes; WENDy.jl's default 2.0 works only because it reads
      mode ⌊M/2⌋ − 1.
    - `n_probe`: test functions placed per candidate radius in the search (Kᵣ).
    - `max_cond`, `min_info`, `k_max`: SVD truncation: condition number bound,
      cumulative singular-value information fraction, and maximal K. The cap of 200 is
      WENDy.jl's; Rummel et al. 2025, §4.3 used 200–500. Where it binds (`TestFunctionInfo.capped`, shown
      in a fit's summary) the estimate can be biased at large M and noise: raise it (see the
      docs' Rummel et al. 2025 page).
    - `k_min`: least K kept (MATLAB WENDy: twice the number of parameters).
    - `rule`: "wendy.jl" (above) or "matlab", the construction of Bortz et al. 2023's MATLAB code
      (`TestFunctionConfig.matlab`): the minimum radius searched over every integer
      radius from 2 to ⌊(N−1)/2⌋ − `k_min` steps (N samples) with probes one radius
      apart, the surrogate read at mode ⌊N/s⌋ of the length-N transform, its corner
      taken by MATLAB's two-secant relative-error rule; stacked radii capped at the
      search maximum instead of dropped; unnormalised bump rows; K at the corner of
      the cumulative singular values (at least `k_min`). `radius_min_time`,
      `radius_max_time`, `num_radii`, `n_probe`, `max_cond`, `min_info` and `k_max` are
      WENDy.jl's and unused by it.
    """

    __test__ = False  # tell pytest this is not a test class

    eta: float = 9.0
    radius: float | None = None
    radius_min_time: float = 0.01
    radius_max_time: float = 5.0
    num_radii: int = 100
    radii_factors: tuple[float, ...] = (1.0, 2.0, 4.0, 8.0)
    sub_rate: float = 2.1
    n_probe: int = 100
    max_cond: float = 1e4
    min_info: float = 0.95
    k_max: int = 200
    k_min: int = 1
    rule: str = "wendy.jl"

    @classmethod
    def matlab(cls, k_min: int, **kwargs) -> "TestFunctionConfig":
        """Bortz et al. 2023's MATLAB code's test functions (`wendy_snf_params.m`: sub-sampling rate 3;
        `wendy_script.m`: `K_min` = twice the number of parameters, pass it as `k_min`)."""
        return cls(rule="matlab", sub_rate=3.0, k_min=k_min, **kwargs)

    def __post_init__(self):
        if self.rule not in RULES:
            raise ValueError(f"rule must be one of {RULES}, got {self.rule!r}.")
        if self.k_min < 1:
            raise ValueError(f"k_min must be >= 1, got {self.k_min}.")
        if not self.eta > 0:
            raise ValueError(f"eta must be positive, got {self.eta}.")
        if self.radius is not None:
            as_ratio("radius (time units)", self.radius)
        if not 0 < self.radius_min_time < self.radius_max_time:
            raise ValueError("need 0 < radius_min_time < radius_max_time.")
        if not 2 < self.sub_rate < 4:
            raise ValueError(f"sub_rate must satisfy 2 < s < 4, got {self.sub_rate}.")
        if self.num_radii < 2 or self.n_probe < 1 or self.k_max < 1:
            raise ValueError("num_radii must be >= 2, n_probe >= 1 and k_max >= 1.")
        if len(self.radii_factors) == 0 or min(self.radii_factors) < 1:
            raise ValueError("radii_factors must be non-empty with every factor >= 1.")
        if not self.max_cond > 1 or not 0 < self.min_info <= 1:
            raise ValueError("need max_cond > 1 and 0 < min_info <= 1.")


@dataclasses.dataclass(frozen=True, eq=False)
class RadiusSelection:
    """The minimum-radius search: candidate radii (time units), the integration-error
    surrogate ê_rms at each (Bortz et al. 2023, eq. 21), and the chosen corner."""

    radii: np.ndarray
    errors: np.ndarray
    index: int

    @property
    def radius(self) -> float:
        """The selected minimum radius (time units)."""
        return float(self.radii[self.index])


@dataclasses.dataclass(frozen=True, eq=False)
class TestFunctionInfo:
    """What was chosen: minimum radius, the stack of radii (time units), the number of
    stacked rows `k_full`, K kept, `k_criteria` (the K the condition-number and information
    criteria alone keep: above `k` when `k_max` binds), singular values of the full matrix,
    and the radius search."""

    __test__ = False

    radius: float
    radii: tuple[float, ...]
    k_full: int
    k: int
    k_criteria: int
    singular_values: np.ndarray
    selection: RadiusSelection | None

    @property
    def capped(self) -> bool:
        """Whether `k_max` cut K below what the truncation criteria keep."""
        return self.k < self.k_criteria


class TestFunctions(eqx.Module):
    r"""Test-function matrices $\Phi, \dot\Phi \in \mathbb{R}^{K\times(M+1)}$ with quadrature
    weights folded in, so that $\Phi U \approx \int \varphi u\,dt$ (Rummel et al. 2025, eq. 4).

    `mask` is 1 for real test functions and 0 for padding rows (see `pad`).
    """

    __test__ = False

    phi: Float[Array, "k n"]
    dphi: Float[Array, "k n"]
    mask: Float[Array, " k"]
    info: TestFunctionInfo | None = eqx.field(static=True, default=None)

    @property
    def k(self) -> int:
        """Number of test functions K."""
        return self.phi.shape[0]

    def pad(self, k: int) -> "TestFunctions":
        """Pad with zero rows to exactly `k` test functions, masked out of the likelihood."""
        extra = k - self.k
        if extra < 0:
            raise ValueError(f"cannot pad {self.k} test functions down to {k}.")
        z = jnp.zeros((extra, self.phi.shape[1]), self.phi.dtype)
        return TestFunctions(
            jnp.concatenate([self.phi, z]),
            jnp.concatenate([self.dphi, z]),
            jnp.concatenate([self.mask, jnp.zeros(extra, self.mask.dtype)]),
            self.info,
        )


def _bump_entries(t, w, radius, eta, normalise=True):
    """The non-zeros of the rows ψ((t - t_c)/a)·w / ‖ψ‖ for every admissible centre:
    `(rows, cols, x, psi, scale, n_rows)` with the row value ψ(x)·scale at (rows, cols).

    Admissible centres keep the support [t_c - a, t_c + a] inside [t_1, t_{M-1}]
    (WENDy.jl never touches the first and last samples). Each row is normalised to unit
    L2 norm in time, ∑ ψ² w = 1, unless `normalise` is false (rows ψ·w).
    """
    ok = (t - radius >= t[1] - 1e-12 * abs(radius)) & (t + radius <= t[-2] + 1e-12 * abs(radius))
    centres = t[ok]
    lo = np.searchsorted(t, centres - radius, side="right")
    counts = np.searchsorted(t, centres + radius, side="left") - lo
    rows = np.repeat(np.arange(len(centres)), counts)
    starts = np.repeat(np.cumsum(counts) - counts, counts)
    cols = lo[rows] + np.arange(counts.sum()) - starts
    x = (t[cols] - centres[rows]) / radius
    psi = bump(x, eta)
    if not normalise:
        return rows, cols, x, psi, w[cols], len(centres)
    norm = np.sqrt(np.bincount(rows, weights=psi**2 * w[cols], minlength=len(centres)))
    return rows, cols, x, psi, w[cols] / norm[rows], len(centres)


def _full_matrices(t, w, radius, eta, normalise=True):
    """The rows of [`_bump_entries`][] and their time derivatives, as sparse (CSR) matrices:
    a row is non-zero only on its support, so building them costs O(rows × support)."""
    rows, cols, x, psi, scale, n_rows = _bump_entries(t, w, radius, eta, normalise=normalise)
    shape = (n_rows, len(t))
    phi = scipy.sparse.csr_array((psi * scale, (rows, cols)), shape=shape)
    dphi = scipy.sparse.csr_array((bump_derivative(x, eta) / radius * scale, (rows, cols)), shape=shape)
    return phi, dphi


def _admissible_count(t, radius):
    return int(np.sum((t - radius >= t[1]) & (t + radius <= t[-2])))


@dataclasses.dataclass(frozen=True, eq=False)
class _Search:
    """The minimum-radius search of one grid and configuration, independent of the data:
    candidate radii and the probes placed for each (their centres and radii, one row of a
    probe matrix each), computed once per grid and shared by every dataset on it."""

    radii: np.ndarray  # (n,) candidate radii, time units
    steps: np.ndarray  # (n,) the same in steps (the corner's abscissa)
    centres: np.ndarray  # (P,) centre time of every probe
    probe_radii: np.ndarray  # (P,) its radius
    groups: np.ndarray  # (P,) its candidate radius (index)
    counts: np.ndarray  # (n,) probes per candidate radius
    weights: np.ndarray  # (N,) quadrature weights of the probe rows
    wave: np.ndarray  # (N,) the sine of the surrogate's mode
    factor: float  # ê² per unit squared probe sum
    matlab: bool


def _uniform_step(t: np.ndarray) -> float:
    dt = np.diff(t)
    if np.max(np.abs(dt - dt.mean())) > 1e-6 * dt.mean():
        raise ValueError(
            "automatic test-function radius selection requires a uniform time grid; pass a "
            "fixed radius (TestFunctionConfig(radius=...), in time units) for non-uniform "
            f"grids (steps of t range from {dt.min():.6g} to {dt.max():.6g})."
        )
    return float(dt.mean())


@functools.lru_cache(maxsize=32)
def _cached_search(t_bytes: bytes, config: TestFunctionConfig) -> _Search:
    t = np.frombuffer(t_bytes, dtype=float)
    n = len(t)
    dt = _uniform_step(t)
    if config.rule == "matlab":  # Bortz et al. 2023's rad_select.m with s = 1, inc = 1
        r_max = _matlab_radius_max(n, config.k_min)
        if r_max < 4:
            raise ValueError(
                f"too few samples ({n}) for the 'matlab' radius search with k_min={config.k_min}: "
                f"its largest radius ⌊(N−1)/2⌋ − k_min is {r_max} steps (need at least 4)."
            )
        steps = np.arange(2, r_max + 1)
        # probes one radius apart with unit ℓ2 norm in samples; ê = (4π/√T) Im F̂ with
        # F̂ = (Δt/√T) ∑_j φ_j u_j e^{-2πi·mode·j/N}, T = NΔt
        centres = [t[np.arange(r - 1, n - r - 1, r)] for r in steps]
        mode, period, weights = int(np.floor(n / config.sub_rate)), n, np.ones(n)
        factor = (4 * np.pi / np.sqrt(n * dt) * dt / np.sqrt(n * dt)) ** 2
    else:
        m = n - 1
        r_lo = max(int(np.ceil(config.radius_min_time / dt)), 2)
        # the largest radius with a probe centre strictly inside: r < (M − 2)/2 steps
        r_max = min(int(np.floor(config.radius_max_time / dt)), (m - 3) // 2)
        r_hi = int(np.floor(r_max / max(config.radii_factors)))
        if r_hi <= r_lo:
            r_hi = min(r_max, 10 * r_lo)
        if r_hi <= r_lo:
            raise ValueError(
                f"too few samples ({n}) to search for a test-function radius: the smallest "
                f"radius {r_lo} steps leaves no room."
            )
        steps = np.arange(r_lo, r_hi + 1, max(int(np.ceil((r_hi - r_lo) / config.num_radii)), 1))
        centres = []
        for r in steps:  # n_probe centres spread evenly over the admissible range (first and last included)
            first, last = r + 1, m - r - 1
            count = min(config.n_probe, last - first + 1)
            centres.append(t[np.unique(np.round(np.linspace(first, last, count)).astype(int))])
        # F̂_n[φ u] = (Δt/√T) Σ_m φ_m u_m e^{-2πinm/M} with φ of unit ℓ2 norm; the rows are
        # √Δt·φ (unit L2 norm in time), so ê = (4πn/√T)·√(Δt/T)·(row · u sin)
        mode, period, weights = int(np.floor(m / config.sub_rate)), m, np.full(n, dt)
        span = t[-1] - t[0]
        factor = (4 * np.pi * mode / np.sqrt(span) * np.sqrt(dt / span)) ** 2
    counts = np.array([len(c) for c in centres])
    return _Search(
        radii=steps * dt,
        steps=steps.astype(float),
        centres=np.concatenate(centres),
        probe_radii=np.repeat(steps * dt, counts),
        groups=np.repeat(np.arange(len(steps)), counts),
        counts=counts,
        weights=weights,
        wave=np.sin(2 * np.pi * mode * np.arange(n) / period),
        factor=float(factor),
        matlab=config.rule == "matlab",
    )


def _bump_jax(x, eta):
    inside = jnp.abs(x) < 1
    xi = jnp.where(inside, x, 0.0)
    return jnp.where(inside, jnp.exp(-eta / (1.0 - xi**2)), 0.0)


#: probe-matrix entries formed at a time (the search never holds more of the matrix, unless cached)
_PROBE_BLOCK = 2**22
#: probe matrices of at most this many entries (64 MB in float64) are formed once per grid and
#: kept on the device; larger ones are re-formed block by block in every search
_PROBE_CACHE = 2**23


def _probe_blocks(t, centres, probe_radii, groups, n_radii):
    """The probes' centres, radii and groups `(n_blocks, size)` in blocks of at most
    `_PROBE_BLOCK` matrix entries (padded rows: probes of a dummy group `n_radii`)."""
    n_rows, n = centres.shape[0], t.shape[0]
    size = max(1, min(n_rows, _PROBE_BLOCK // n))
    n_blocks = -(-n_rows // size)
    pad = n_blocks * size - n_rows
    return [
        jnp.pad(a, (0, pad), constant_values=v).reshape(n_blocks, size)
        for a, v in ((centres, t[0]), (probe_radii, 1.0), (groups, n_radii))
    ]


def _probe_rows(t, weights, centres, probe_radii, eta):
    """Probe rows: bumps at `centres` with radii `probe_radii`, normalised in the weights."""
    psi = _bump_jax((t[None, :] - centres[:, None]) / probe_radii[:, None], eta)
    norm = jnp.sqrt(jnp.sum(psi**2 * weights, axis=1, keepdims=True))
    return psi * weights / jnp.where(norm > 0, norm, 1.0)


@cpu_safe_jit
def _probe_table(t, weights, centres, probe_radii, groups, *, eta, n_radii):
    """The whole probe matrix, `(n_blocks, size, N)` in [`_probe_blocks`][]'s blocks."""
    c, a, _ = _probe_blocks(t, centres, probe_radii, groups, n_radii)
    return jax.vmap(lambda c, a: _probe_rows(t, weights, c, a, eta))(c, a)


@functools.lru_cache(maxsize=4)
def _cached_probes(t_bytes: bytes, config: "TestFunctionConfig"):
    """The probe matrix of a grid's search, formed once on the default device (None when it
    has more than `_PROBE_CACHE` entries)."""
    search = _cached_search(t_bytes, config)
    t = np.frombuffer(t_bytes, dtype=float)
    if len(search.centres) * len(t) > _PROBE_CACHE:
        return None
    return _probe_table(
        *(jnp.asarray(x) for x in (t, search.weights, search.centres, search.probe_radii, search.groups)),
        eta=float(config.eta),
        n_radii=len(search.radii),
    )


@cpu_safe_jit
def _search_errors(t, weights, wave, centres, probe_radii, groups, counts, factor, u, probes, *, eta, n_radii, matlab):
    r"""The surrogate $\hat e_{rms}$ of every candidate radius for each of the datasets `u`
    `(R, N, D)`: `(R, n_radii)`. The probe rows (bumps normalised in the rows' weights) are
    applied to all datasets at once: read from `probes` ([`_probe_table`][]) in one matrix
    product where the sums fit `_PROBE_CACHE` entries, else block by block (one product per
    block, the rows formed block by block where `probes` is None)."""
    r, n, d = u.shape
    x = jnp.moveaxis(wave[None, :, None] * u, 1, 0).reshape(n, r * d)
    blocks = _probe_blocks(t, centres, probe_radii, groups, n_radii)

    def block(total, rows):
        c, a, g, rows = rows
        if rows is None:
            rows = _probe_rows(t, weights, c, a, eta)
        sums = rows @ x  # (size, R·D)
        squares = jnp.sum(sums.reshape(rows.shape[0], r, d) ** 2, axis=2)  # (size, R)
        return total + jax.nn.one_hot(g, n_radii + 1, dtype=u.dtype).T @ squares, None

    zero = jnp.zeros((n_radii + 1, r), u.dtype)
    if probes is not None and probes.shape[0] * probes.shape[1] * r * d <= _PROBE_CACHE:
        # the cached table in one product: a scan over its blocks would copy each one out of it
        total, _ = block(zero, (*(b.reshape(-1) for b in blocks), probes.reshape(-1, n)))
    else:
        total, _ = jax.lax.scan(block, zero, (*blocks, probes))
    mean = total[:n_radii].T / counts
    errors = jnp.sqrt(factor * mean / d) if matlab else factor * mean
    return jnp.maximum(errors, jnp.finfo(u.dtype).tiny)


def _scaled(v):
    return (v - jnp.min(v)) / jnp.maximum(jnp.max(v) - jnp.min(v), 1e-300)


def _secant_costs(x, y, relative: bool, order: int):
    """For every interior split k of the curve (x, y), the misfit of the secants through
    (x_0, x_k) and (x_k, x_{n-1}): squared (`relative=False`) or relative |·/y|^order."""
    n = x.shape[0]
    k = jnp.arange(1, n - 1)[:, None]
    j = jnp.arange(n)[None, :]
    xk, yk = x[k], y[k]
    first = y[0] + (yk - y[0]) * (x[j] - x[0]) / (xk - x[0])
    second = yk + (y[-1] - yk) * (x[j] - xk) / (x[-1] - xk)
    miss = lambda line: jnp.abs((line - y[j]) / y[j]) ** order if relative else (line - y[j]) ** 2  # noqa: E731
    return jnp.sum(jnp.where(j <= k, miss(first), 0.0), axis=1) + jnp.sum(jnp.where(j >= k, miss(second), 0.0), axis=1)


@cpu_safe_jit
def _corners(steps, log_errors, *, matlab):
    """The corner of every curve `log_errors` `(R, n)` against the radii `steps`: the best
    two-secant fit of both axes scaled to [0, 1] (WENDy.jl), or (`matlab`) the least relative
    misfit with the curve scaled to max |y| = n (MATLAB WENDy's `getcorner`)."""
    n = steps.shape[0]
    if n < 3:  # no interior split: the last candidate (a search of two radii)
        return jnp.full(log_errors.shape[:1], n - 1)

    def one(y):
        if matlab:
            costs = _secant_costs(steps, y / jnp.max(jnp.abs(y)) * n, True, 2)
        else:
            costs = _secant_costs(_scaled(steps), _scaled(y), False, 2)
        return 1 + jnp.argmin(costs)

    return jax.lax.map(one, log_errors, batch_size=16)


def _corner(x, y) -> int:
    """Corner of a curve by the best two-segment fit (secants through the ends and the split).

    Both axes are scaled to [0, 1]; the split minimising the summed squared deviation of
    the two secants is returned (never an end point).
    """
    return int(_corners(jnp.asarray(x, float), jnp.asarray(y, float)[None], matlab=False)[0])


def _secant_corner(x, y, order: int) -> int:
    """Corner as MATLAB WENDy's `getcorner` finds it: y scaled to max |y| = n; the interior
    split k whose secants through (x_0, x_k) and (x_k, x_{n-1}) have the least summed
    relative misfit |(line - y)/y|^order (order 2 for the radius, 1 for the SVD cut)."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    costs = _secant_costs(jnp.asarray(x), jnp.asarray(y / np.max(np.abs(y)) * len(y)), True, order)
    return 1 + int(jnp.argmin(costs))


def _matlab_radius_max(n: int, k_min: int) -> int:
    """The largest radius (steps) of Bortz et al. 2023's MATLAB code, ⌊(N−1)/2⌋ − K_min for N samples."""
    return (n - 1) // 2 - k_min


#: datasets searched in one compiled call (more are searched in chunks of this many)
_SEARCH_CHUNK = 1024


def select_radii(t, u, config: TestFunctionConfig = TestFunctionConfig()) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    r"""[`select_radius`][] for several datasets on one grid at once: `u` `(R, N, D)`.
    Returns the candidate radii `(n,)`, the surrogate of each dataset `(R, n)` and the
    index of each dataset's corner `(R,)`; one compiled computation for up to 1,024 datasets
    (more in chunks of that many)."""
    t = np.ascontiguousarray(t, dtype=float)
    search = _cached_search(t.tobytes(), config)
    probes = _cached_probes(t.tobytes(), config)
    u = np.asarray(u, dtype=float)
    grid = tuple(
        jnp.asarray(x)
        for x in (
            t,
            search.weights,
            search.wave,
            search.centres,
            search.probe_radii,
            search.groups,
            search.counts.astype(float),
            search.factor,
        )
    )
    size = min(len(u), _SEARCH_CHUNK)
    errors, index = [], []
    for start in range(0, len(u), size):
        chunk = u[np.minimum(np.arange(start, start + size), len(u) - 1)]  # the last chunk padded: one shape
        e = _search_errors(
            *grid,
            u=jnp.asarray(chunk),
            probes=probes,
            eta=float(config.eta),
            n_radii=len(search.radii),
            matlab=search.matlab,
        )
        errors.append(np.asarray(e))
        index.append(np.asarray(_corners(jnp.asarray(search.steps), jnp.log(e), matlab=search.matlab)))
    return search.radii, np.concatenate(errors)[: len(u)], np.concatenate(index)[: len(u)]


def select_radius(t, u, config: TestFunctionConfig = TestFunctionConfig()) -> RadiusSelection:
    r"""Minimum test-function radius from the integration-error surrogate (Bortz et al. 2023, §2.3.1).

    For each candidate radius, `n_probe` bumps are placed along the series and the
    surrogate $\hat e_{int} = (4\pi n/\sqrt{T})\,|\mathrm{Im}\,\hat{\mathcal F}_n[\varphi_k u]|$
    with $n = \lfloor M/s \rfloor$ is evaluated for every state; $\hat e_{rms}$ (eq. 21)
    averages its square over test functions and sums over states. The radius is the
    corner of $\log \hat e_{rms}$ against the radius. Needs a uniform grid.
    """
    radii, errors, index = select_radii(t, np.asarray(u, dtype=float)[None], config)
    return RadiusSelection(radii, errors[0], int(index[0]))


def min_samples(t, config: TestFunctionConfig = TestFunctionConfig()) -> tuple[int, str]:
    """The fewest samples from which test functions can be built on the grid `t` (its
    step) with `config`, and why."""
    if config.radius is not None:
        return 8, "the smallest bump, of radius 2 steps, needs 8 to fit inside the span [t_1, t_{M−1}]"
    if config.rule == "matlab":
        return 2 * config.k_min + 9, (
            f"the 'matlab' radius search needs a largest radius ⌊(N−1)/2⌋ − k_min of at "
            f"least 4 steps, with k_min = {config.k_min}"
        )
    t = np.asarray(t, dtype=float)
    r_lo = max(int(np.ceil(config.radius_min_time / float(np.mean(np.diff(t))))), 2)
    return 2 * r_lo + 6, (
        f"the radius search compares radii from {r_lo} steps (radius_min_time = "
        f"{config.radius_min_time:g}), each with a test function inside the span; a fixed "
        f"TestFunctionConfig(radius=...) needs 8"
    )


def build_test_functions(t, u, config: TestFunctionConfig = TestFunctionConfig()) -> TestFunctions:
    r"""Orthonormal multi-scale test functions for one trajectory (Rummel et al. 2025, App. A.1.2).

    Stacks the bump rows at radii `radii_factors × r_min`, takes the SVD
    $\Phi_{full} = Q\,\mathrm{diag}(\sigma)\,V^T$ and keeps $K$ = min(last index with
    $\sigma_1/\sigma_k \le$ `max_cond`, last index with $\sum_{i\le k}\sigma_i / \sum\sigma
    \le$ `min_info`, `k_max`) modes: $\Phi = P Q^T \Phi_{full}$, $\dot\Phi = P Q^T
    \dot\Phi_{full}$ with $P = \mathrm{diag}(1/\sigma_{1..K})$. The SVD is taken through
    the eigendecomposition of the sparse-built Gram matrix $\Phi_{full}^T\Phi_{full}$.
    With `config.rule == "matlab"` the radii, rows and K follow Bortz et al. 2023's MATLAB code (see
    [`TestFunctionConfig`][]); $\dot\Phi$ is still exact, not Fourier-differentiated.
    """
    t = np.asarray(t, dtype=float)
    u = np.asarray(u, dtype=float)
    n = len(t)
    need, why = min_samples(t, config)
    if n < need:
        raise ValueError(f"too few samples for test functions: got {n}, need at least {need} ({why}).")
    if config.radius is None:
        selection = select_radius(t, u, config)
        r_min = selection.radius
    else:
        selection = None
        r_min = float(config.radius)
    basis = _cached_basis(t.tobytes(), r_min, config)
    assert basis.info is not None  # a built basis carries its info
    return TestFunctions(basis.phi, basis.dphi, basis.mask, dataclasses.replace(basis.info, selection=selection))


@functools.lru_cache(maxsize=32)
def _cached_basis(t_bytes: bytes, r_min: float, config: TestFunctionConfig) -> TestFunctions:
    """The multi-scale basis of minimum radius `r_min` on the grid `t` (given as bytes, so
    that the cache key is hashable). It depends on the data only through `r_min`, which
    takes one of a few candidate values: Monte Carlo studies on one grid reuse it."""
    t = np.frombuffer(t_bytes, dtype=float)
    n = len(t)
    matlab = config.rule == "matlab"
    if matlab:  # capped at the search maximum, as Bortz et al. 2023's get_rad.m does
        r_cap = _matlab_radius_max(n, config.k_min) * float(np.mean(np.diff(t)))
        radii = sorted({min(f * r_min, r_cap) for f in config.radii_factors})
    else:
        span_max = (t[-2] - t[1]) / 2
        radii = [f * r_min for f in config.radii_factors if f * r_min < span_max]
    radii = [r for r in radii if _admissible_count(t, r) > 0]
    if not radii:
        raise ValueError(
            f"no test function of radius {r_min:.6g} fits in the time span "
            f"[{t[0]:.6g}, {t[-1]:.6g}] with {n} samples; choose a smaller radius or "
            f"provide more data."
        )
    w = np.asarray(trapezoid_weights(jnp.asarray(t)))
    blocks = [_full_matrices(t, w, r, config.eta, normalise=not matlab) for r in radii]
    phi_full = scipy.sparse.vstack([b[0] for b in blocks], format="csr")
    dphi_full = scipy.sparse.vstack([b[1] for b in blocks], format="csr")
    k_full = phi_full.shape[0]  # pyright: ignore[reportOptionalSubscript]  # scipy's sparse `shape` infers as None
    # Right singular vectors and singular values of Φ_full from its Gram matrix ΦᵀΦ
    # ((M+1)², banded; faster than a dense SVD). Kept modes have
    # σ_k ≥ σ_1/max_cond, so squaring the condition number costs at most a relative
    # eps·max_cond² ≤ 1e-8 on their σ_k², and the kept subspace is exact to rounding.
    gram = (phi_full.T @ phi_full).toarray()
    lam, v = scipy.linalg.eigh(gram)
    s = np.sqrt(np.maximum(lam[::-1], 0.0))[: min(k_full, n)]  # Φ_full is (k_full, n)
    info = np.cumsum(s) / np.sum(s)
    if matlab:  # Bortz et al. 2023's VVp_svd.m
        k_criteria = _secant_corner(np.arange(1.0, len(s) + 1), info, 1) + 1
        k = k_criteria
    else:
        k_cond = int(np.sum(s / s[0] >= 1.0 / config.max_cond))
        k_criteria = min(k_cond, int(np.sum(info <= config.min_info)))
        k = min(k_criteria, config.k_max)
    k_criteria, k = (min(max(config.k_min, x), len(s)) for x in (k_criteria, k))
    phi = v[:, ::-1][:, :k].T
    # Φ̇ = P Qₖᵀ Φ̇_full with Qₖ = Φ_full Vₖ / σₖ, i.e. Vₖᵀ (Φ_fullᵀ Φ̇_full) / σₖ².
    dphi = (phi @ (phi_full.T @ dphi_full).toarray()) / s[:k, None] ** 2
    info_obj = TestFunctionInfo(
        radius=r_min,
        radii=tuple(float(r) for r in radii),
        k_full=k_full,
        k=k,
        k_criteria=k_criteria,
        singular_values=s,
        selection=None,
    )
    return TestFunctions(jnp.asarray(phi), jnp.asarray(dphi), jnp.ones(k), info_obj)

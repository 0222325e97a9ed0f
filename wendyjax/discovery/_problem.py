r"""The joint state-and-parameter regression problem of Meissner & Glasner 2024: data on a uniform
time grid (a `Trajectory` or a `Field`; its mask marks the observed entries), a library, the
midpoint one-step residual (eq. 13), the objective (eq. 12), and the structure of its Hessian
in the states (eq. 17)."""

import itertools
from collections.abc import Sequence

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import scipy.sparse
from jaxtyping import Array, ArrayLike, Bool, Float, Int

from ..data import Dataset, Field, Trajectory, as_data
from ..library import AbstractLibrary
from ._colouring import recovery_indices, star_colouring

HESSIAN_KINDS = {"cholesky": "blocks", "sparse": "sparse", "cg": "diagonal"}  # linear solver: structure it needs


class HessianStructure(eqx.Module):
    r"""Where the non-zeros of the state–state Hessian block lie and how to read them off
    $n_c$ compressed Hessian–vector products.

    With the states ordered by time level (level $t$ holds $S$ values), a residual couples
    levels $t$ and $t+1$ only, so the block is block tridiagonal. For `kind="blocks"`,
    `colour` is a star colouring of its sparsity graph and the entry `(dst_block, dst_row,
    dst_col)` of the stacked blocks (diagonal blocks $0..T-1$, then sub-diagonal blocks
    $(t+1, t)$) is the compressed product's entry `(src_row, src_colour)`. For
    `kind="sparse"` (general sparse factorisation) `colour` is a distance-2 colouring of
    the stencil lattice, `(dst_row, dst_col)` are the flat state indices of every non-zero
    (both triangles) and `dst_block` is unused. For `kind="diagonal"` (matrix-free solves)
    `colour` is a proper colouring of the lattice, which yields the diagonal only."""

    colour: Int[Array, " n"]
    src_row: Int[Array, " nnz"]
    src_colour: Int[Array, " nnz"]
    dst_block: Int[Array, " nnz_blocks"]  # nnz for kind="blocks"; empty (unused) for "sparse"
    dst_row: Int[Array, " nnz"]
    dst_col: Int[Array, " nnz"]
    n_colours: int = eqx.field(static=True)
    kind: str = eqx.field(static=True, default="blocks")


def _lattice_colouring(shape: tuple[int, ...], reach: tuple[int, ...], time_period: int = 2) -> np.ndarray:
    """A colouring of the pattern graph without building it, by time level mod
    `time_period`, each spatial index mod 2·reach + 1, and the component. With period 2 it
    is proper (neighbours differ); with period 3 it is a distance-2 colouring (two states
    with a common neighbour differ: they lie within two levels and 2·reach points), so every
    entry of the matrix is read directly off the compressed products."""
    periods = (time_period, *(2 * r + 1 for r in reach), shape[-1])
    grids = np.meshgrid(*(np.arange(n) % p for n, p in zip(shape, periods)), indexing="ij")
    return np.ravel_multi_index(tuple(grids), periods).ravel()


def _pattern(shape: tuple[int, ...], reach: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    """Every pair (i, j), both orders and i = j, of flat state indices of an array of
    `shape` = (T, *space, D) within one time level and `reach` grid points per spatial axis."""
    index = np.arange(int(np.prod(shape))).reshape(shape)
    rows, cols = [], []
    offsets = itertools.product((-1, 0, 1), *(range(-r, r + 1) for r in reach))
    for offset in offsets:
        src = tuple(slice(max(0, -o), n - max(0, o)) for o, n in zip(offset, shape))
        dst = tuple(slice(max(0, o), n - max(0, -o)) for o, n in zip(offset, shape))
        a, b = index[src], index[dst]  # (..., D) each: every component pair couples
        rows.append(np.repeat(a[..., :, None], shape[-1], -1).ravel())
        cols.append(np.repeat(b[..., None, :], shape[-1], -2).ravel())
    return np.concatenate(rows), np.concatenate(cols)


def hessian_structure(shape: tuple[int, ...], halfwidth: tuple[int, ...], kind: str = "blocks") -> HessianStructure:
    """The state–state Hessian structure for states of `shape` = (T, *space, D) and a library
    whose terms reach `halfwidth` points along each spatial axis (two residuals at most
    2·halfwidth apart share a state)."""
    reach = tuple(2 * w for w in halfwidth)
    if kind == "sparse":
        colour = _lattice_colouring(shape, reach, time_period=3)
        rows, cols = _pattern(shape, reach)
        return HessianStructure(
            colour=jnp.asarray(colour),
            src_row=jnp.asarray(rows),
            src_colour=jnp.asarray(colour[cols]),
            dst_block=jnp.zeros(0, int),
            dst_row=jnp.asarray(rows),
            dst_col=jnp.asarray(cols),
            n_colours=int(colour.max()) + 1,
            kind=kind,
        )
    if kind == "diagonal":
        colour = _lattice_colouring(shape, reach)
        empty = jnp.zeros(0, int)
        return HessianStructure(jnp.asarray(colour), empty, empty, empty, empty, empty, int(colour.max()) + 1, kind)
    rows, cols = _pattern(shape, reach)
    n = int(np.prod(shape))
    off = rows != cols
    graph = scipy.sparse.csr_matrix((np.ones(off.sum()), (rows[off], cols[off])), shape=(n, n))
    graph.sort_indices()
    colour = star_colouring(graph.indptr, graph.indices)
    src_row, src_colour = recovery_indices(rows, cols, colour)
    size = n // shape[0]
    t_row, t_col = rows // size, cols // size
    keep = t_row >= t_col  # the diagonal blocks and the sub-diagonal blocks (t + 1, t)
    block = np.where(t_row == t_col, t_row, shape[0] + t_col)
    return HessianStructure(
        colour=jnp.asarray(colour),
        src_row=jnp.asarray(src_row[keep]),
        src_colour=jnp.asarray(src_colour[keep]),
        dst_block=jnp.asarray(block[keep]),
        dst_row=jnp.asarray(rows[keep] % size),
        dst_col=jnp.asarray(cols[keep] % size),
        n_colours=int(colour.max()) + 1,
    )


class DiscoveryProblem(eqx.Module):
    r"""Observations `data` of shape `(T, *space, D)` on a uniform time grid of step `dt`,
    `observed` marking the entries that were observed (others hold 0), a `library`, and
    the Hessian structure of the objective."""

    data: Float[Array, "T *space D"]
    observed: Bool[Array, "T *space D"]
    dt: Float[Array, ""]
    library: AbstractLibrary
    structure: HessianStructure

    @property
    def state_shape(self) -> tuple[int, ...]:
        """Shape of the state array u: `(T, *space, D)`."""
        return tuple(self.data.shape)

    @property
    def n_observed(self) -> Array:
        """Number of observed data values n̂ (Meissner & Glasner 2024, eq. 9)."""
        return jnp.sum(self.observed)


def residual(problem: DiscoveryProblem, u: Float[Array, "T *space D"], theta: Float[Array, "F D"]) -> Array:
    r"""Meissner & Glasner 2024, eq. 13:
    $(u_{t+1} - u_t)/\Delta t - \Phi(\tfrac12(u_{t+1} + u_t))\,\Theta$ on the interior
    points of every time step."""
    mid = 0.5 * (u[1:] + u[:-1])
    features = jax.vmap(problem.library.features)(mid)
    crop = (slice(None),) + tuple(slice(w, n - w) for w, n in zip(problem.library.halfwidth, u.shape[1:-1]))
    return ((u[1:] - u[:-1]) / problem.dt)[crop] - features @ theta


def smoothed_l0(theta: Array, eps: ArrayLike) -> Array:
    r"""Meissner & Glasner 2024, eq. 7: $\sum_i 1 - \exp(-\theta_i^2 / 2\varepsilon^2)$."""
    return jnp.sum(1.0 - jnp.exp(-(theta**2) / (2.0 * eps**2)))


def weighted_residuals(problem: DiscoveryProblem, u: Array, theta: Array, mask: Array, lam: ArrayLike) -> Array:
    r"""The vector whose squared norm is $\mathcal L_\lambda$ (Meissner & Glasner 2024, eq. 12 without the penalty): the
    model residuals over $\sqrt{n}$ and the misfits on the observed entries times $\sqrt{\lambda/\hat n}$."""
    r = residual(problem, u, theta * mask)
    misfit = jnp.where(problem.observed, problem.data - u, 0.0)
    return jnp.concatenate([r.ravel() / jnp.sqrt(r.size), misfit.ravel() * jnp.sqrt(lam / problem.n_observed)])


def objective(
    problem: DiscoveryProblem, u: Array, theta: Array, mask: Array, lam: ArrayLike, penalty: ArrayLike, eps: ArrayLike
) -> Array:
    r"""Meissner & Glasner 2024, eq. 12: mean squared model residual + $\lambda$ × mean squared misfit on the observed
    entries + $R/d$ × smoothed $\ell_0$ of the active coefficients $\Theta \odot M$ ($d$ the library
    size). `penalty` = 0 gives $\mathcal L_\lambda$."""
    return (
        jnp.sum(weighted_residuals(problem, u, theta, mask, lam) ** 2)
        + penalty * smoothed_l0(theta * mask, eps) / theta.size
    )


def _arrays(data, library: AbstractLibrary) -> tuple[np.ndarray, np.ndarray, float]:
    """The values, the observed entries and the time step of `data` (a `Field`, or a
    `Trajectory` or `Dataset` of one), checked against `library`."""
    data = as_data(data)
    if isinstance(data, Dataset):
        if len(data) != 1:
            raise ValueError(f"data must hold one trajectory (equation discovery fits one), got {len(data)}.")
        data = data[0]
        dt = data.require_uniform("equation discovery (the one-step residual of Meissner & Glasner 2024, eq. 13)")
    else:
        dt = data.dt
    if not dt > 0:
        raise ValueError("data: the times t must be increasing.")
    values = np.asarray(data.u)
    observed = np.ones(values.shape, bool) if data.mask is None else np.asarray(data.mask)
    n_space = len(library.halfwidth)
    if values.ndim != n_space + 2 or values.shape[-1] != library.n_states:
        kind = "a wendyjax.Field (T, *space, D)" if n_space else "a wendyjax.Trajectory (T, D)"
        raise ValueError(
            f"data must be {kind} with {n_space} spatial axes and D = {library.n_states} states (the "
            f"library's), got u of shape {values.shape}."
        )
    if not observed.any():
        raise ValueError("every entry of data is missing: there is nothing to fit.")
    empty = np.flatnonzero(~observed.reshape(-1, library.n_states).any(axis=0))
    if empty.size:
        raise ValueError(
            f"data: state(s) {empty.tolist()} are never observed; leave them out of the data and the library."
        )
    for axis, (w, n) in enumerate(zip(library.halfwidth, values.shape[1:-1])):
        if n <= 2 * w:
            raise ValueError(
                f"data: spatial axis {axis} has {n} points; the library's stencils need more than {2 * w}."
            )
    return values, observed, dt


def discovery_problem(
    data: Field | Trajectory | Dataset | Sequence[Trajectory], library: AbstractLibrary, hessian: str = "blocks"
) -> DiscoveryProblem:
    """The regression problem of `data` for `library`, with the Hessian structure its linear
    solver needs (`"blocks"` for the block Cholesky, `"sparse"` for a general sparse
    factorisation, `"diagonal"` for conjugate gradients).

    `data`: a [`Trajectory`][wendyjax.Trajectory] (or a `Dataset` of one) for ODEs, a
    [`Field`][wendyjax.Field] for PDEs, on a uniform time grid; the mask marks the missing
    entries."""
    if not isinstance(library, AbstractLibrary):
        raise TypeError(
            f"library must be a wendyjax library (PolynomialLibrary, FiniteDifferenceLibrary), "
            f"got {type(library).__name__}."
        )
    if hessian not in HESSIAN_KINDS.values():
        raise ValueError(f"hessian must be one of {sorted(HESSIAN_KINDS.values())}, got {hessian!r}.")
    values, observed, dt = _arrays(data, library)
    return DiscoveryProblem(
        data=jnp.asarray(np.where(observed, values, 0.0)),
        observed=jnp.asarray(observed),
        dt=jnp.asarray(dt),
        library=library,
        structure=hessian_structure(values.shape, library.halfwidth, hessian),
    )

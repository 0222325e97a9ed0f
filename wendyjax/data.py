"""Observed time series: one or several trajectories on uniform or non-uniform grids."""

from collections.abc import Sequence

import equinox as eqx
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Bool, Float


def _real(name: str, x) -> np.ndarray:
    """`x` as a float array, refusing complex and non-numeric input by name (NumPy would drop
    an imaginary part with only a warning)."""
    x = np.asarray(x)
    if np.iscomplexobj(x):
        raise TypeError(f"{name} must be real, got complex values (dtype {x.dtype}); pass the real part or fit "
                        f"real and imaginary parts as separate states.")
    if x.dtype.kind not in "biuf":
        raise TypeError(f"{name} must be numeric, got dtype {x.dtype}.")
    return x.astype(float)


def _observed_mask(u: np.ndarray, mask) -> Bool[Array, "..."] | None:
    """The observed entries of `u` as a boolean array (`None` when everything is observed):
    `mask` checked against `u`'s shape, or without one, every entry but the NaN ones (NaN
    marks a missing value). An observed entry must be finite; inf is never a missing value."""
    if mask is None:
        mask = ~np.isnan(u)
    else:
        mask = np.asarray(mask)
        if mask.shape != u.shape:
            raise ValueError(f"mask must have the shape of u {u.shape}, got {mask.shape}.")
        if not (mask.dtype == bool or (mask.dtype.kind in "iuf" and np.isin(mask, (0, 1)).all())):
            raise TypeError(f"mask must be boolean (True where observed) or hold only 0 and 1, got dtype "
                            f"{mask.dtype}{' with other values' if mask.dtype.kind in 'iuf' else ''}.")
        mask = mask.astype(bool)
    bad = ~np.isfinite(u) & mask
    if bad.any():
        first = tuple(int(i) for i in np.argwhere(bad)[0])
        where = f"row {first[0]}, column {first[1]}" if u.ndim == 2 else f"index {first}"
        raise ValueError(f"u contains {'inf' if np.isinf(u[first]) else 'NaN'} at {int(bad.sum())} observed "
                         f"entries (first at {where}); a missing value is NaN, or False in mask=... (True where "
                         f"observed), and inf is never one.")
    _squarable("u", np.where(mask, u, 0.0))
    return None if mask.all() else jnp.asarray(mask)


_SQRT_MAX, _SQRT_TINY = np.sqrt(np.finfo(float).max), np.sqrt(np.finfo(float).tiny)


def _squarable(name: str, x: np.ndarray) -> None:
    """Refuse values whose squares overflow or underflow float64 (every fit squares its
    residuals): the remedy is to rescale them, not a solver setting."""
    big = float(np.max(np.abs(x), initial=0.0))
    if big > _SQRT_MAX or 0 < big < _SQRT_TINY:
        flows = "overflows" if big > 1 else "underflows"
        raise ValueError(f"{name}'s largest magnitude is {big:.3g}: its square {flows}"
                         f" float64 (|{name}|² must stay within about 1e±308), so no fit can use it. Rescale {name} to "
                         f"order one (e.g. {name} / {big:.3g}) and the parameters with it.")


class Trajectory(eqx.Module):
    """One observed trajectory.

    **Arguments:**

    - `t`: sorted sample times, shape `(M+1,)`. A repeated time is a replicate
      measurement: Data2LD pools them; the estimators that need distinct times (WENDy,
      output error, integral matching) refuse them.
    - `u`: observations, shape `(M+1, D)` (a 1-D array is read as `D = 1`).
    - `mask`: optional boolean array of `u`'s shape, `True` where a value was observed;
      without one, NaN entries are the missing ones. Missing entries may hold anything
      (NaN included); observed entries must be finite.
    """

    t: Float[Array, " n"]
    u: Float[Array, "n d"]
    mask: Bool[Array, "n d"] | None

    def __init__(self, t: ArrayLike, u: ArrayLike, mask: ArrayLike | None = None):
        t, u = _real("t", t), _real("u", u)
        if t.ndim != 1:
            raise ValueError(f"t must be 1-D (one time per sample), got shape {t.shape}.")
        if u.ndim == 1:
            u = u[:, None]
        if u.ndim != 2:
            raise ValueError(f"u must have shape (M+1, D), got shape {u.shape}.")
        if u.shape[0] != t.shape[0]:
            raise ValueError(
                f"u has {u.shape[0]} rows but t has {t.shape[0]} times; u must have shape "
                f"(len(t), D)."
            )
        if t.shape[0] < 2:
            raise ValueError(f"a trajectory needs at least 2 samples, got {t.shape[0]}.")
        if not np.all(np.isfinite(t)):
            raise ValueError("t contains NaN or inf.")
        _squarable("t", t)
        if not np.all(np.diff(t) >= 0):
            i = int(np.argmax(np.diff(t) < 0))
            raise ValueError(f"t must be sorted (increasing; a repeated time is a replicate measurement), but "
                             f"t[{i + 1}] = {t[i + 1]:.6g} < t[{i}] = {t[i]:.6g}.")
        if mask is not None and np.ndim(mask) == 1 and u.shape[1] == 1:
            mask = np.asarray(mask)[:, None]
        self.t = jnp.asarray(t)
        self.u = jnp.asarray(u)
        self.mask = _observed_mask(u, mask)

    @property
    def n_samples(self) -> int:
        """Number of samples M + 1."""
        return self.t.shape[0]

    @property
    def n_states(self) -> int:
        """Number of states D."""
        return self.u.shape[1]

    @property
    def repeated_times(self) -> np.ndarray:
        """The sample times that occur more than once (replicate measurements), sorted."""
        t = np.asarray(self.t)
        return np.unique(t[1:][np.diff(t) == 0])

    def is_uniform(self, rtol: float = 1e-6) -> bool:
        """Whether the grid is uniform up to `rtol` relative to the mean step."""
        dt = np.diff(np.asarray(self.t))
        return bool(np.max(np.abs(dt - dt.mean())) <= rtol * dt.mean())

    def require_uniform(self, feature: str) -> float:
        """Return the step of a uniform grid; raise a clear error on a non-uniform one."""
        dt = np.diff(np.asarray(self.t))
        if not self.is_uniform():
            raise ValueError(
                f"{feature} requires a uniform time grid, but the steps of t range from "
                f"{dt.min():.6g} to {dt.max():.6g}."
            )
        return float(dt.mean())

    def observed_rows(self) -> "Trajectory":
        """The trajectory restricted to fully observed rows (a possibly non-uniform grid).

        Rows with every state missing are dropped; a row with only some states missing
        raises, since the weak form needs every state at a sample time.
        """
        if self.mask is None:
            return self
        mask = np.asarray(self.mask)
        partial = mask.any(axis=1) & ~mask.all(axis=1)
        if partial.any():
            rows = np.flatnonzero(partial)
            raise ValueError(
                f"{len(rows)} sample times (first at t={float(self.t[rows[0]]):.6g}) have "
                f"only some states missing; the weak form needs all states at a sample time. "
                f"Drop or impute those entries."
            )
        keep = mask.all(axis=1)
        return Trajectory(np.asarray(self.t)[keep], np.asarray(self.u)[keep])


def trapezoid_weights(t: Float[Array, " n"]) -> Float[Array, " n"]:
    """Composite trapezoidal quadrature weights on the grid `t` (Bortz et al. 2023, §2.1)."""
    dt = jnp.diff(t)
    return 0.5 * (jnp.concatenate([dt, jnp.zeros(1)]) + jnp.concatenate([jnp.zeros(1), dt]))


class Dataset(eqx.Module):
    """Several trajectories of the same system (same states), possibly of different lengths."""

    trajectories: tuple[Trajectory, ...]

    def __init__(self, trajectories: Sequence[Trajectory]):
        trajectories = tuple(trajectories)
        if not trajectories:
            raise ValueError("a Dataset needs at least one trajectory.")
        for i, tr in enumerate(trajectories):
            if not isinstance(tr, Trajectory):
                raise TypeError(f"trajectory {i} is a {type(tr).__name__}, not a Trajectory.")
        d = trajectories[0].n_states
        for i, tr in enumerate(trajectories):
            if tr.n_states != d:
                raise ValueError(
                    f"trajectory {i} has {tr.n_states} states but trajectory 0 has {d}."
                )
        self.trajectories = trajectories

    @property
    def n_states(self) -> int:
        """Number of states D (the same in every trajectory)."""
        return self.trajectories[0].n_states

    def __len__(self) -> int:
        return len(self.trajectories)

    def __iter__(self):
        return iter(self.trajectories)

    def __getitem__(self, i) -> Trajectory:
        return self.trajectories[i]

    def require_distinct_times(self, feature: str) -> None:
        """Raise a clear error if a trajectory repeats a sample time (`feature` names who needs
        distinct times)."""
        for i, tr in enumerate(self.trajectories):
            rep = tr.repeated_times
            if rep.size:
                where = "the data have" if len(self) == 1 else f"trajectory {i} has"
                raise ValueError(f"{feature} needs distinct sample times, but {where} {rep.size} repeated ones "
                                 f"(first t = {rep[0]:.6g}); average the replicates at each time, or fit a linear ODE "
                                 f"with Data2LD, which pools them.")


def as_dataset(data: "Trajectory | Dataset | Sequence[Trajectory]") -> Dataset:
    """Accept a trajectory, a list of trajectories or a dataset; return a dataset."""
    if isinstance(data, Dataset):
        return data
    if isinstance(data, Trajectory):
        return Dataset([data])
    if isinstance(data, (list, tuple)):
        return Dataset(data)
    raise TypeError(
        f"data must be a Trajectory, a Dataset or a list of Trajectory, got {type(data).__name__}."
    )


class Field(eqx.Module):
    """One observed field on a uniform grid in time and space (equation discovery of PDEs).

    **Arguments:**

    - `t`: the time levels, sorted and equally spaced, shape `(T,)`, `T ≥ 2`.
    - `u`: observations, shape `(T, *space, D)`: one to three spatial axes, then the `D`
      fields (`u[..., None]` for one field).
    - `mask`: optional boolean array of `u`'s shape, `True` where a value was observed;
      without one, NaN entries are the missing ones. Missing entries may hold anything
      (NaN included); observed entries must be finite.
    """

    t: Float[Array, " T"]
    u: Float[Array, "T *space D"]
    mask: Bool[Array, "T *space D"] | None

    def __init__(self, t: ArrayLike, u: ArrayLike, mask: ArrayLike | None = None):
        t, u = _real("t", t), _real("u", u)
        if t.ndim != 1:
            raise ValueError(f"t must be 1-D (one time per level), got shape {t.shape}.")
        if t.shape[0] < 2:
            raise ValueError(f"a field needs at least 2 time levels, got {t.shape[0]}.")
        if not np.all(np.isfinite(t)):
            raise ValueError("t contains NaN or inf.")
        _squarable("t", t)
        dt = np.diff(t)
        if not (np.all(dt > 0) and np.max(np.abs(dt - dt.mean())) <= 1e-6 * dt.mean()):
            raise ValueError(f"t must be increasing and equally spaced, but its steps range from {dt.min():.6g} to "
                             f"{dt.max():.6g}.")
        if not 3 <= u.ndim <= 5 or u.shape[0] != t.shape[0]:
            raise ValueError(f"u must have shape (len(t), *space, D) = ({t.shape[0]}, *space, D) with one to three "
                             f"spatial axes (u[..., None] for one field), got {u.shape}.")
        self.t = jnp.asarray(t)
        self.u = jnp.asarray(u)
        self.mask = _observed_mask(u, mask)

    @property
    def n_states(self) -> int:
        """Number of fields D."""
        return self.u.shape[-1]

    @property
    def dt(self) -> float:
        """The time step."""
        return float(np.diff(np.asarray(self.t)).mean())


def as_data(data: "Field | Trajectory | Dataset | Sequence[Trajectory]") -> "Field | Dataset":
    """A [`Field`][] unchanged; anything else through [`as_dataset`][]."""
    return data if isinstance(data, Field) else as_dataset(data)


def largest_magnitude(data: "Field | Dataset") -> float:
    """The largest |observed value| of a [`Field`][] or [`Dataset`][] (0 when none)."""
    parts = [data] if isinstance(data, Field) else list(data)
    return max(float(np.max(np.abs(np.where(True if p.mask is None else p.mask, p.u, 0.0)), initial=0.0))
               for p in parts)

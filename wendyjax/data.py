"""Observed time series: one or several trajectories on uniform or non-uniform grids."""

import hashlib
from collections.abc import Sequence

import equinox as eqx
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Bool, Float
from numpy.typing import ArrayLike


def _real(name: str, x) -> np.ndarray:
    """`x` as a float array, refusing complex and non-numeric input by name (NumPy would drop
    an imaginary part with only a warning)."""
    x = np.asarray(x)
    if np.iscomplexobj(x):
        raise TypeError(
            f"{name} must be real, got complex values (dtype {x.dtype}); pass the real part or fit "
            f"real and imaginary parts as separate states."
        )
    if x.dtype.kind not in "biuf":
        raise TypeError(f"{name} must be numeric, got dtype {x.dtype}.")
    return x.astype(float)


def _observed_mask(u: np.ndarray, mask, axes: tuple[str, ...] = ("row", "column")) -> Bool[Array, "..."] | None:
    """The observed entries of `u` as a boolean array (`None` when everything is observed):
    `mask` checked against `u`'s shape, or without one, every entry but the NaN ones (NaN
    marks a missing value). An observed entry must be finite; inf is never a missing value.
    `axes` names `u`'s axes in the error (an index tuple where their number differs)."""
    if mask is None:
        mask = ~np.isnan(u)
    else:
        mask = np.asarray(mask)
        if mask.shape != u.shape:
            raise ValueError(f"mask must have the shape of u {u.shape}, got {mask.shape}.")
        if not (mask.dtype == bool or (mask.dtype.kind in "iuf" and np.isin(mask, (0, 1)).all())):
            raise TypeError(
                f"mask must be boolean (True where observed) or hold only 0 and 1, got dtype "
                f"{mask.dtype}{' with other values' if mask.dtype.kind in 'iuf' else ''}."
            )
        mask = mask.astype(bool)
    bad = ~np.isfinite(u) & mask
    if bad.any():
        first = tuple(int(i) for i in np.argwhere(bad)[0])
        where = ", ".join(f"{a} {i}" for a, i in zip(axes, first)) if len(axes) == u.ndim else f"index {first}"
        raise ValueError(
            f"u contains {'inf' if np.isinf(u[first]) else 'NaN'} at {int(bad.sum())} observed "
            f"entries (first at {where}); a missing value is NaN, or False in mask=... (True where "
            f"observed), and inf is never one."
        )
    _squarable("u", np.where(mask, u, 0.0))
    return None if mask.all() else jnp.asarray(mask)


_SQRT_MAX, _SQRT_TINY = np.sqrt(np.finfo(float).max), np.sqrt(np.finfo(float).tiny)


def _squarable(name: str, x: np.ndarray) -> None:
    """Refuse values whose squares overflow or underflow float64 (every fit squares its
    residuals): the remedy is to rescale them, not a solver setting."""
    big = float(np.max(np.abs(x), initial=0.0))
    if big > _SQRT_MAX or 0 < big < _SQRT_TINY:
        flows = "overflows" if big > 1 else "underflows"
        raise ValueError(
            f"{name}'s largest magnitude is {big:.3g}: its square {flows}"
            f" float64 (|{name}|² must stay within about 1e±308), so no fit can use it. Rescale {name} to "
            f"order one (e.g. {name} / {big:.3g}) and the parameters with it."
        )


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
            raise ValueError(f"u has {u.shape[0]} rows but t has {t.shape[0]} times; u must have shape (len(t), D).")
        if t.shape[0] < 2:
            raise ValueError(f"a trajectory needs at least 2 samples, got {t.shape[0]}.")
        if not np.all(np.isfinite(t)):
            raise ValueError("t contains NaN or inf.")
        _squarable("t", t)
        if not np.all(np.diff(t) >= 0):
            i = int(np.argmax(np.diff(t) < 0))
            raise ValueError(
                f"t must be sorted (increasing; a repeated time is a replicate measurement), but "
                f"t[{i + 1}] = {t[i + 1]:.6g} < t[{i}] = {t[i]:.6g}."
            )
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
                raise ValueError(f"trajectory {i} has {tr.n_states} states but trajectory 0 has {d}.")
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
                raise ValueError(
                    f"{feature} needs distinct sample times, but {where} {rep.size} repeated ones "
                    f"(first t = {rep[0]:.6g}); average the replicates at each time, or fit a linear ODE "
                    f"with Data2LD, which pools them."
                )


def as_dataset(data: "Trajectory | Dataset | Sequence[Trajectory]") -> Dataset:
    """Accept a trajectory, a list of trajectories or a dataset; return a dataset."""
    if isinstance(data, Dataset):
        return data
    if isinstance(data, Trajectory):
        return Dataset([data])
    if isinstance(data, (list, tuple)):
        return Dataset(data)
    raise TypeError(f"data must be a Trajectory, a Dataset or a list of Trajectory, got {type(data).__name__}.")


def _trajectory_tuple(x) -> tuple:
    """A tuple (one entry per trajectory) as it is; anything else as the only entry."""
    return tuple(x) if isinstance(x, tuple) else (x,)


class Batch:
    """Many datasets of one system on shared grids, as stacked arrays: what studies, sweeps
    and bootstraps fit in one batched computation (an estimator's `batch_problems`).

    **Arguments:**

    - `t`: the sample times of each trajectory, shared by every dataset: one array `(n,)`,
      or a tuple of them for datasets of several trajectories.
    - `u`: the observations, `(R, n, D)` for `R` datasets (a tuple, one per trajectory).
    - `mask`: optional, `True` where observed, `(R, n, D)` or `(n, D)` for all datasets
      (a tuple, one per trajectory); without one, NaN entries are the missing ones.

    The checks of [`Trajectory`][wendyjax.Trajectory] apply to every dataset at once.
    `batch[i]` is dataset `i` as a [`Dataset`][wendyjax.Dataset]; [`from_datasets`][]
    stacks datasets whose trajectories share their grids.
    """

    __slots__ = ("t", "u", "mask")

    def __init__(self, t, u, mask=None):
        ts, us = _trajectory_tuple(t), _trajectory_tuple(u)
        masks = (None,) * len(ts) if mask is None else _trajectory_tuple(mask)
        if not (len(ts) == len(us) == len(masks)) or not ts:
            raise ValueError(
                f"t, u and mask must give the same number of trajectories (a tuple each for several), got "
                f"{len(ts)}, {len(us)} and {len(masks)}."
            )
        checked_t, checked_u, checked_m = [], [], []
        for i, (ti, ui, mi) in enumerate(zip(ts, us, masks)):
            which = f" of trajectory {i}" if len(ts) > 1 else ""
            ti = Trajectory(ti, np.zeros((np.size(ti), 1))).t  # the checks of a trajectory's times
            ui = _real("u", ui)
            if ui.ndim != 3 or ui.shape[1] != ti.shape[0]:
                raise ValueError(
                    f"u{which} must have shape (R, len(t), D) = (R, {ti.shape[0]}, D) for R datasets, got {ui.shape}."
                )
            if mi is not None and np.shape(mi) == ui.shape[1:]:
                mi = np.broadcast_to(np.asarray(mi), ui.shape)
            observed = _observed_mask(ui, mi, ("dataset", "row", "column"))
            checked_t.append(np.asarray(ti))
            checked_u.append(ui)
            checked_m.append(None if observed is None else np.asarray(observed).reshape(ui.shape))
        if len({u.shape[0] for u in checked_u}) > 1 or len({u.shape[2] for u in checked_u}) > 1:
            raise ValueError(
                f"every trajectory needs the same number of datasets R and states D, got (R, D) = "
                f"{[(u.shape[0], u.shape[2]) for u in checked_u]}."
            )
        self.t, self.u, self.mask = tuple(checked_t), tuple(checked_u), tuple(checked_m)

    @classmethod
    def from_datasets(cls, datasets: "Sequence[Trajectory | Dataset | Sequence[Trajectory]]") -> "Batch":
        """Stack datasets (each a trajectory, a list of trajectories or a `Dataset`) whose
        trajectory `i` has the same times in every dataset."""
        sets = [as_dataset(d) for d in datasets]
        if not sets:
            raise ValueError("a Batch needs at least one dataset.")
        first = sets[0]
        for r, ds in enumerate(sets[1:], 1):
            if len(ds) != len(first):
                raise ValueError(
                    f"datasets on different grids: dataset {r} has {len(ds)} trajectories, dataset 0 has "
                    f"{len(first)}; a batch stacks datasets of the same design."
                )
            for i, (a, b) in enumerate(zip(first, ds)):
                if a.n_samples != b.n_samples or not np.array_equal(np.asarray(a.t), np.asarray(b.t)):
                    which = f"trajectory {i} of dataset" if len(first) > 1 else "dataset"
                    raise ValueError(
                        f"datasets on different grids: {which} {r} has {b.n_samples} samples from "
                        f"t = {float(b.t[0]):.6g} to {float(b.t[-1]):.6g}, dataset 0 has {a.n_samples} "
                        f"from {float(a.t[0]):.6g} to {float(a.t[-1]):.6g}; a batch stacks datasets "
                        f"sampled at the same times (fit the others separately, or mark their missing "
                        f"samples NaN on a common grid)."
                    )
            if ds.n_states != first.n_states:
                raise ValueError(f"dataset {r} has {ds.n_states} states, dataset 0 has {first.n_states}.")
        ts = tuple(np.asarray(tr.t) for tr in first)
        us = tuple(np.stack([np.asarray(ds[i].u) for ds in sets]) for i in range(len(first)))
        masks = tuple(
            None
            if all(ds[i].mask is None for ds in sets)
            else np.stack(
                [np.ones(ds[i].u.shape, bool) if ds[i].mask is None else np.asarray(ds[i].mask) for ds in sets]
            )
            for i in range(len(first))
        )
        out = cls.__new__(cls)
        out.t, out.u, out.mask = ts, us, masks  # checked as trajectories already
        return out

    def __len__(self) -> int:
        return self.u[0].shape[0]

    @property
    def n_states(self) -> int:
        """Number of states D."""
        return self.u[0].shape[2]

    @property
    def n_trajectories(self) -> int:
        """Number of trajectories per dataset."""
        return len(self.t)

    def __getitem__(self, r: int) -> Dataset:
        return Dataset([Trajectory(t, u[r], None if m is None else m[r]) for t, u, m in zip(self.t, self.u, self.mask)])

    def __iter__(self):
        return (self[r] for r in range(len(self)))

    def take(self, indices) -> "Batch":
        """The datasets `indices` (in that order) as a batch."""
        indices = np.asarray(indices, int)
        out = Batch.__new__(Batch)
        out.t = self.t
        out.u = tuple(u[indices] for u in self.u)
        out.mask = tuple(None if m is None else m[indices] for m in self.mask)
        return out


def as_batch(datasets: "Batch | Sequence") -> Batch:
    """A [`Batch`][], or a list of datasets stacked by [`Batch.from_datasets`][]."""
    return datasets if isinstance(datasets, Batch) else Batch.from_datasets(datasets)


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
            raise ValueError(
                f"t must be increasing and equally spaced, but its steps range from {dt.min():.6g} to {dt.max():.6g}."
            )
        if not 3 <= u.ndim <= 5 or u.shape[0] != t.shape[0]:
            raise ValueError(
                f"u must have shape (len(t), *space, D) = ({t.shape[0]}, *space, D) with one to three "
                f"spatial axes (u[..., None] for one field), got {u.shape}."
            )
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


def fingerprint(data: "Field | Trajectory | Dataset | Sequence[Trajectory]") -> str:
    """A digest of the data's times, values and missing entries (whatever their container):
    equal for the same data, so that a fit's data can be recognised later."""
    digest = hashlib.sha256()
    parts = [data] if isinstance(data, Field) else list(as_dataset(data))
    for part in parts:
        for x in (part.t, part.u, part.mask):
            x = np.asarray(True if x is None else x)
            digest.update(f"{x.dtype.str}{x.shape}".encode())
            digest.update(np.ascontiguousarray(x).tobytes())
    return digest.hexdigest()


def largest_magnitude(data: "Field | Dataset") -> float:
    """The largest |observed value| of a [`Field`][] or [`Dataset`][] (0 when none)."""
    parts = [data] if isinstance(data, Field) else list(data)
    return max(
        float(np.max(np.abs(np.where(True if p.mask is None else p.mask, p.u, 0.0)), initial=0.0)) for p in parts
    )

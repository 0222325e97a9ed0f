"""Several experiments of one model, with parameters shared by all of them or differing per
experiment, as one model and one dataset that every estimator fits."""

import dataclasses
from collections.abc import Callable, Mapping, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from ._typing import ArrayLike
from .data import Dataset, Trajectory, as_dataset
from .model import ODEModel


@dataclasses.dataclass(frozen=True)
class _Stacked:
    """The right-hand side of `R` copies of `rhs`, copy `r` with parameters `p_r`: entry `j`
    of `p_r` is `theta[index[r][j]]`, or `held[r][j]` where that is not `None`. Frozen and
    compared by value, so fits of the same experiments share compiled code."""

    rhs: Callable
    n_states: int
    index: tuple[tuple[int, ...], ...]
    held: tuple[tuple[float | None, ...], ...]

    def params(self, theta):
        """The experiments' parameter vectors `(R, J)` from the fitted ones `theta`."""
        theta = jnp.asarray(theta)
        rows = [
            jnp.stack([theta[i] if h is None else jnp.asarray(h, theta.dtype) for i, h in zip(idx, held)])
            for idx, held in zip(self.index, self.held)
        ]
        return jnp.stack(rows)

    def __call__(self, u, theta, t):
        states = u.reshape(len(self.index), self.n_states)
        return jax.vmap(self.rhs, in_axes=(0, 0, None))(states, self.params(theta), t).reshape(-1)


class Experiments:
    """Experiments (trajectories) of one `model` fitted together: the parameters named in
    `per_trajectory` get one value per experiment (`"gamma[0]"`, `"gamma[1]"`, …), those a
    `conditions` entry names are held at that experiment's value (e.g. a known dose), and
    the others are shared. `model` and `data` are then one `ODEModel` of the experiments
    side by side (states `"S[0]"`, …, `"S[1]"`, …) and one trajectory on the union of their
    sample times (NaN where an experiment has no sample), which every estimator, bootstrap
    and profile takes as it would any model and data. The experiments must start at the
    same time (they are solved as one system from it); on one shared grid the weak form
    (WENDy) applies too, otherwise output error does.

    - `params(theta)`: each experiment's full parameter vector `(R, J)` from the fitted ones;
    - `initial(u0)`: initial states for output error's `u0=`: from a function `u0(p)` of an
      experiment's parameters (e.g. S₀ = N − I₀ with I₀ per experiment), or from `(R, D)`
      numbers.
    """

    def __init__(
        self,
        model: ODEModel,
        data,
        per_trajectory: Sequence[str] = (),
        conditions: Sequence[Mapping[str, float]] | None = None,
    ):
        if not isinstance(model, ODEModel):
            raise TypeError(f"model must be an ODEModel, got {type(model).__name__}.")
        dataset = as_dataset(data)
        dataset.require_distinct_times("Experiments (the trajectories side by side on one grid)")
        r, names = len(dataset), model.param_names
        if r < 2:
            raise ValueError("Experiments needs at least two trajectories (experiments); one is fitted as it is.")
        per = tuple(per_trajectory)
        unknown = [n for n in per if n not in names]
        if unknown:
            raise ValueError(
                f"per_trajectory: model '{model.name}' has no parameter(s) "
                f"{', '.join(map(repr, unknown))}; its parameters are {', '.join(names)}."
            )
        conditions = [{}] * r if conditions is None else [dict(c) for c in conditions]
        if len(conditions) != r:
            raise ValueError(f"conditions: one mapping per trajectory ({r}), got {len(conditions)}.")
        held_names = {n for c in conditions for n in c}
        bad = [n for n in held_names if n not in names]
        if bad:
            raise ValueError(f"conditions: model '{model.name}' has no parameter(s) {', '.join(map(repr, bad))}.")
        partial = [n for n in held_names if any(n not in c for c in conditions)]
        if partial:
            raise ValueError(
                f"conditions: {', '.join(partial)} must be given for every trajectory (a value per "
                f"experiment), or for none."
            )
        both = sorted(held_names & set(per))
        if both:
            raise ValueError(f"{', '.join(both)} cannot be both held by conditions and fitted per trajectory.")
        starts = {float(tr.t[0]) for tr in dataset}
        if len(starts) > 1:
            raise ValueError(
                f"the experiments start at different times {sorted(starts)}: they are solved as one "
                f"system from one start time; give every trajectory the same first time (with NaN "
                f"rows where nothing was measured)."
            )
        shared = [n for n in names if n not in per and n not in held_names]
        fitted = shared + [f"{n}[{i}]" for n in names if n in per for i in range(r)]
        index = tuple(
            tuple(fitted.index(n) if n in shared else fitted.index(f"{n}[{i}]") if n in per else -1 for n in names)
            for i in range(r)
        )
        held = tuple(tuple(float(conditions[i][n]) if n in held_names else None for n in names) for i in range(r))
        rhs = _Stacked(model.rhs, model.n_states, index, held)
        bounds = None
        if model.bounds is not None:
            lo, hi = (np.asarray(b, float) for b in model.bounds)
            where = [names.index(n.split("[")[0]) for n in fitted]
            bounds = (lo[where], hi[where])
        states = [f"{s}[{i}]" for i in range(r) for s in model.state_names]
        self.model = ODEModel(
            rhs,
            states,
            fitted,
            bounds=bounds,
            name=model.name,
            jump_ts=model.jump_ts,
            check_indexing=False,
            noise=model.noise,
            linear_in_params=True if model.linear_in_params else None,
        )
        self.data = _side_by_side(dataset, model.n_states)
        self.base = model
        self.n_experiments = r

    def params(self, theta: ArrayLike) -> Float[Array, "r j"]:
        """Each experiment's parameter vector `(R, J)` (the base model's order) from the
        fitted parameters `theta` (e.g. `fit.params`)."""
        return self.model.rhs.params(jnp.asarray(theta, float))

    def initial(self, u0: "Callable | ArrayLike") -> "Callable | np.ndarray":
        """Output error's `u0=` for the experiments: from `u0(p)` of one experiment's
        parameters a function of the fitted ones, or `(R, D)` numbers side by side."""
        if callable(u0):
            stacked = self.model.rhs
            return lambda theta: jax.vmap(u0)(stacked.params(theta)).reshape(-1)
        u0 = np.asarray(u0, float)
        if u0.shape != (self.n_experiments, self.base.n_states):
            raise ValueError(
                f"u0: one row of {self.base.n_states} initial states per experiment, shape "
                f"({self.n_experiments}, {self.base.n_states}), got {u0.shape}."
            )
        return u0.reshape(-1)


def _side_by_side(dataset: Dataset, d: int) -> Trajectory:
    """The trajectories as one, on the union of their times: experiment `r`'s states in
    columns `r·D … r·D + D − 1`, NaN where it has no sample (or a missing value)."""
    t = np.unique(np.concatenate([np.asarray(tr.t) for tr in dataset]))
    u = np.full((t.size, len(dataset) * d), np.nan)
    for r, tr in enumerate(dataset):
        rows = np.searchsorted(t, np.asarray(tr.t))
        values = np.asarray(tr.u, float)
        if tr.mask is not None:
            values = np.where(np.asarray(tr.mask), values, np.nan)
        u[rows, r * d : (r + 1) * d] = values
    return Trajectory(t, u)

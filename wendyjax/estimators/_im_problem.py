r"""The collocation problem of integral matching (Anonymous 2025, §3): the node values
of the data on every subinterval, and the collocation residual and loss on them."""

from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, Int, PyTree

from ..collocation import LGR, SavitzkyGolay, node_values
from ..data import as_dataset


class IntegralMatchingProblem(eqx.Module):
    r"""The subintervals an integral-matching fit runs on: node values `X` $(S, K+1, D)$ of
    every candidate subinterval (all trajectories together), their start times `a`
    $(S,)$, the subinterval length `length` and the collocation `lgr`."""

    lgr: LGR
    X: Float[Array, "S K1 D"]
    a: Float[Array, " S"]
    length: Float[Array, ""]


def _fill_gaps(t: np.ndarray, y: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """`y` with each partially observed state's missing samples linearly interpolated in
    time between its observed ones and held constant before the first and after the last
    (a degree-K fit that extrapolates there instead amplifies noise); the samples of
    never-observed states are set to 0."""
    observed = mask > 0
    out = np.where(observed, y, 0.0)
    for k in np.flatnonzero(observed.any(axis=0) & ~observed.all(axis=0)):
        out[:, k] = np.interp(t, t[observed[:, k]], y[observed[:, k], k])
    return out


def integral_matching_problem(
    data,
    *,
    order: int = 30,
    length: float = 1.0,
    smoother: SavitzkyGolay | None = SavitzkyGolay(),
    stride: int | None = None,
    hidden: bool = False,
) -> IntegralMatchingProblem:
    r"""Denoise `data` (a `Trajectory`, `Dataset` or list of trajectories) with `smoother`
    (Anonymous 2025, App. A; `None` to skip), and fit the degree-`order` LGR polynomial to the samples
    in $[t_i, t_i + h]$ for every `stride`-th sample $t_i$ with $t_i + h$ inside the data
    (default stride: a tenth of the samples per subinterval). Missing values (mask) of a
    state are filled by linear interpolation between its observed samples (held constant
    beyond the first and last) before both fits; every subinterval must still hold K + 1
    observed samples of every observed state. Non-uniform grids need nothing special. With
    `hidden`, states never observed are allowed (their node values are 0: partial
    observation, Anonymous 2025, §5).

    Why filling: degree-K fits through the observed samples alone extrapolate wildly
    across gaps near a subinterval's ends, where LGR nodes cluster (measured: the docs'
    Anonymous 2025 page)."""
    dataset = as_dataset(data)
    dataset.require_distinct_times("integral matching")
    if not length > 0:
        raise ValueError(f"length (the subinterval length h) must be positive, got {length}.")
    lgr = LGR(order)
    X, a = [], []
    for r, traj in enumerate(dataset):
        t, y = np.asarray(traj.t, float), np.asarray(traj.u, float)
        mask = np.ones_like(y) if traj.mask is None else np.asarray(traj.mask, float)
        seen = mask.sum(axis=0) > 0
        if not (hidden and seen.any()) and not seen.all():
            k = int(np.argmin(seen))
            raise ValueError(f"trajectory {r}: state {k} is never observed; integral matching needs every state "
                             "observed, or hidden-state reconstruction (Anonymous 2025, §5: IntegralMatching.fit "
                             "with u0).")
        last = np.searchsorted(t, t[-1] - length * (1 - 1e-9), side="right")  # t_i + h ≤ t_end, to rounding
        if last == 0:
            raise ValueError(f"trajectory {r} spans {t[-1] - t[0]:.6g}, shorter than the subinterval length "
                             f"h = {length}; lower `length`.")
        ends = np.searchsorted(t, t[:last] + length * (1 + 1e-9), side="right")
        cum = np.concatenate([np.zeros((1, y.shape[1])), np.cumsum(mask, axis=0)])
        observed = (cum[ends] - cum[:last])[:, seen].min()
        if observed < order + 1:
            raise ValueError(f"trajectory {r}: a subinterval of length h = {length} holds only {int(observed)} "
                             f"observed samples of some state, but LGR order K = {order} needs at least K + 1 = "
                             f"{order + 1}; lengthen `length` or lower `order`.")
        window = int((ends - np.arange(last)).max())  # samples in the fullest subinterval
        step = max(1, window // 10) if stride is None else int(stride)
        if step < 1:
            raise ValueError(f"stride must be a positive integer, got {stride}.")
        starts = np.arange(0, last, step)
        weights = np.broadcast_to(seen.astype(float), y.shape)  # after filling: every sample of a seen state
        tj, yj, mj = jnp.asarray(t), jnp.asarray(_fill_gaps(t, y, mask)), jnp.asarray(weights)
        grid = bool(weights.all() and np.allclose(np.diff(t), t[1] - t[0], rtol=1e-9, atol=0.0))
        if smoother is not None:
            yj = smoother(tj, yj, mj, grid)
        counts = ends - np.arange(last)
        uniform = grid and bool(np.all(counts == window) and starts[-1] + window <= t.size)
        X.append(node_values(lgr, tj, yj, mj, jnp.asarray(starts), float(length), window, uniform))
        a.append(t[starts])
    return IntegralMatchingProblem(lgr, jnp.concatenate(X), jnp.asarray(np.concatenate(a)), jnp.asarray(length, float))


def collocation_residuals(
    rhs: Callable, theta: PyTree, problem: IntegralMatchingProblem, index: Int[Array, " b"] | None = None
) -> Float[Array, "b K D"]:
    r"""$X_{s,0} + hAF(X_s, \Theta) - X_{s,1:K}$ for the subintervals `index` (all by
    default): Anonymous 2025, eq. 5, the right-hand side vmapped over the nodes of all of them at once
    (one batch of B·K points, faster than nested vmaps over subintervals and nodes)."""
    X, a = (problem.X, problem.a) if index is None else (problem.X[index], problem.a[index])
    h, lgr = problem.length, problem.lgr
    b, k, d = X.shape[0], X.shape[1] - 1, X.shape[2]
    t = a[:, None] + h * lgr.nodes[None, 1:]
    F = jax.vmap(rhs, (0, None, 0))(X[:, 1:].reshape(b * k, d), theta, t.reshape(-1)).reshape(b, k, d)
    return X[:, :1] + h * jnp.einsum("ij,bjd->bid", lgr.A, F) - X[:, 1:]


def integral_matching_loss(
    rhs: Callable, theta: PyTree, problem: IntegralMatchingProblem, index: Int[Array, " b"] | None = None
) -> Float[Array, ""]:
    r"""$\ell(\Theta)$: the mean squared collocation residual over the subintervals `index`."""
    return jnp.mean(collocation_residuals(rhs, theta, problem, index) ** 2)

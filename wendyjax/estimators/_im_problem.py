r"""The collocation problem of integral matching (Anonymous 2025, §3): the node values
of the data on every subinterval, and the collocation residual and loss on them."""

from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, Int, PyTree

from .._compile import cpu_safe_jit
from ..collocation import LGR, SavitzkyGolay, node_values
from ..data import Batch, as_dataset


class IntegralMatchingProblem(eqx.Module):
    r"""The subintervals an integral-matching fit runs on: node values `X` $(S, K+1, D)$ of
    every candidate subinterval (all trajectories together), their start times `a`
    $(S,)$, the subinterval length `length` and the collocation `lgr` (a batch's: `X` with the
    datasets' axis in front, the rest shared)."""

    lgr: LGR
    X: Float[Array, "*R S K1 D"]
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


def _plan(t: np.ndarray, mask: np.ndarray, order: int, length: float, stride, hidden: bool, r: int) -> dict:
    """What the subintervals of one trajectory depend on besides its values: from its times
    `t` and observation `mask` `(n, D)`, checked."""
    seen = mask.sum(axis=0) > 0
    if not (hidden and seen.any()) and not seen.all():
        k = int(np.argmin(seen))
        raise ValueError(
            f"trajectory {r}: state {k} is never observed; integral matching needs every state "
            "observed, or hidden-state reconstruction (Anonymous 2025, §5: IntegralMatching.fit "
            "with u0)."
        )
    last = np.searchsorted(t, t[-1] - length * (1 - 1e-9), side="right")  # t_i + h ≤ t_end, to rounding
    if last == 0:
        raise ValueError(
            f"trajectory {r} spans {t[-1] - t[0]:.6g}, shorter than the subinterval length "
            f"h = {length}; lower `length`."
        )
    ends = np.searchsorted(t, t[:last] + length * (1 + 1e-9), side="right")
    cum = np.concatenate([np.zeros((1, mask.shape[1])), np.cumsum(mask, axis=0)])
    observed = (cum[ends] - cum[:last])[:, seen].min()
    if observed < order + 1:
        raise ValueError(
            f"trajectory {r}: a subinterval of length h = {length} holds only {int(observed)} "
            f"observed samples of some state, but LGR order K = {order} needs at least K + 1 = "
            f"{order + 1}; lengthen `length` or lower `order`."
        )
    window = int((ends - np.arange(last)).max())  # samples in the fullest subinterval
    step = max(1, window // 10) if stride is None else int(stride)
    if step < 1:
        raise ValueError(f"stride must be a positive integer, got {stride}.")
    starts = np.arange(0, last, step)
    weights = np.broadcast_to(seen.astype(float), mask.shape)  # after filling: every sample of a seen state
    grid = bool(weights.all() and np.allclose(np.diff(t), t[1] - t[0], rtol=1e-9, atol=0.0))
    counts = ends - np.arange(last)
    uniform = grid and bool(np.all(counts == window) and starts[-1] + window <= t.size)
    return {"weights": weights, "starts": starts, "window": window, "grid": grid, "uniform": uniform}


@cpu_safe_jit
def _node_values(lgr, smoother, t, y, weights, starts, length, window, grid, uniform):
    """The node values `(S, K+1, D)` of the subintervals of every dataset `y` `(R, n, D)` on
    the times `t` (smoothed first, unless `smoother` is None): `(R, S, K+1, D)`."""

    def one(y):
        if smoother is not None:
            y = smoother(t, y, weights, grid)
        return node_values(lgr, t, y, weights, starts, length, window, uniform)

    return jax.vmap(one)(y)


def _subintervals(batch: Batch, order, length, smoother, stride, hidden) -> tuple[LGR, np.ndarray, np.ndarray]:
    """The node values `(R, S, K+1, D)` of every dataset of `batch` (all trajectories
    together) and the start times `(S,)`, for datasets that share their missing entries."""
    if not length > 0:
        raise ValueError(f"length (the subinterval length h) must be positive, got {length}.")
    if any(np.any(np.diff(t) == 0) for t in batch.t):
        batch[0].require_distinct_times("integral matching")
    lgr = LGR(order)
    X, a = [], []
    for r, (t, u, m) in enumerate(zip(batch.t, batch.u, batch.mask)):
        mask = np.ones(u.shape[1:]) if m is None else m[0].astype(float)
        plan = _plan(t, mask, order, length, stride, hidden, r)
        y = np.stack([_fill_gaps(t, y, mask) for y in u]) if m is not None else u
        X.append(
            np.asarray(
                _node_values(
                    lgr,
                    smoother,
                    jnp.asarray(t),
                    jnp.asarray(y),
                    jnp.asarray(plan["weights"]),
                    jnp.asarray(plan["starts"]),
                    float(length),
                    plan["window"],
                    plan["grid"],
                    plan["uniform"],
                )
            )
        )
        a.append(t[plan["starts"]])
    return lgr, np.concatenate(X, axis=1), np.concatenate(a)


def shares_missing_entries(batch: Batch) -> bool:
    """Whether every dataset of `batch` misses the same entries (its subintervals then are
    one batched computation)."""
    return all(m is None or bool(np.all(m == m[:1])) for m in batch.mask)


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
    lgr, X, a = _subintervals(Batch.from_datasets([as_dataset(data)]), order, length, smoother, stride, hidden)
    return IntegralMatchingProblem(lgr, jnp.asarray(X[0]), jnp.asarray(a), jnp.asarray(length, float))


def integral_matching_problems(
    batch: Batch,
    *,
    order: int = 30,
    length: float = 1.0,
    smoother: SavitzkyGolay | None = SavitzkyGolay(),
    stride: int | None = None,
    hidden: bool = False,
) -> IntegralMatchingProblem:
    """[`integral_matching_problem`][] of every dataset of `batch` (sharing their missing
    entries) in one compiled call: `X` `(R, S, K+1, D)`, the rest shared."""
    lgr, X, a = _subintervals(batch, order, length, smoother, stride, hidden)
    return IntegralMatchingProblem(lgr, jnp.asarray(X), jnp.asarray(a), jnp.asarray(length, float))


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

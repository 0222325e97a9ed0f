"""Ground-truth trajectories with diffrax, and noisy synthetic data."""

import diffrax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, PRNGKeyArray

from ._checks import as_key, as_ode_solver
from ._compile import cpu_safe_jit
from ._typing import ArrayLike
from .data import Trajectory
from .model import ODEModel
from .noise import AbstractCountNoise, AbstractNoise


def _controller(rtol, atol, jump_ts) -> diffrax.AbstractAdaptiveStepSizeController:
    """diffrax's PID controller, stepping onto `jump_ts` where there are any."""
    pid = diffrax.PIDController(rtol=rtol, atol=atol)
    return pid if jump_ts is None else diffrax.ClipStepSizeController(pid, jump_ts=jnp.asarray(jump_ts))


@cpu_safe_jit
def _solve(rhs, p, u0, t, solver, rtol, atol, max_steps, jump_ts=None):
    term = diffrax.ODETerm(lambda s, u, args: rhs(u, args, s))
    sol = diffrax.diffeqsolve(
        term,
        solver,
        t0=t[0],
        t1=t[-1],
        dt0=None,
        y0=u0,
        args=p,
        saveat=diffrax.SaveAt(ts=t),
        stepsize_controller=_controller(rtol, atol, jump_ts),
        max_steps=max_steps,
        throw=False,
    )
    assert sol.ys is not None  # saved at `t`
    return sol.ys, sol.result


def _check_grid(t: ArrayLike, backward_ok: bool = False) -> Float[Array, " n"]:
    t = jnp.asarray(t, dtype=float)
    monotone = bool(jnp.all(jnp.diff(t) > 0)) or (backward_ok and bool(jnp.all(jnp.diff(t) < 0)))
    if t.ndim != 1 or t.shape[0] < 2 or not monotone:
        raise ValueError(
            f"t must be a strictly {'monotone' if backward_ok else 'increasing'} 1-D array of at least 2 times."
        )
    return t


def solve(
    model: ODEModel,
    p: ArrayLike,
    u0: ArrayLike,
    t: ArrayLike,
    *,
    solver: diffrax.AbstractSolver | None = None,
    rtol: float = 1e-10,
    atol: float = 1e-10,
    max_steps: int = 1_000_000,
) -> Float[Array, "n d"]:
    """Solve the model on the grid `t` from `u0` with diffrax (tight tolerances).

    `solver` defaults to `Tsit5`; pass `diffrax.Kvaerno5()` for stiff systems. Raises
    `RuntimeError` when the solve fails (it is a ground truth; estimators report status
    codes instead).
    """
    p = model.check_params(p)
    u0 = jnp.asarray(u0, dtype=float).reshape(-1)
    if u0.shape != (model.n_states,):
        raise ValueError(f"u0 must have shape ({model.n_states},) for model '{model.name}', got {u0.shape}.")
    t = _check_grid(t)
    solver = diffrax.Tsit5() if solver is None else as_ode_solver("solver", solver)
    ys, result = _solve(model.rhs, p, u0, t, solver, jnp.asarray(rtol), jnp.asarray(atol), max_steps, model.jump_ts)
    ok = bool(result == diffrax.RESULTS.successful) and bool(jnp.all(jnp.isfinite(ys)))
    if not ok:
        where = f"model '{model.name}' on [{float(t[0])}, {float(t[-1])}]"
        finite = np.all(np.isfinite(np.asarray(ys)), axis=1)
        last = float(t[np.flatnonzero(finite)[-1]]) if finite.any() else float(t[0])
        hint = (
            f"it got past t = {last:.6g} only. Either the solution blows up in finite time after that with "
            f"these parameters (then no solver helps: check p and u0, or end the grid earlier), or the "
            f"system is stiff (use an implicit solver, solver=diffrax.Kvaerno5()), or it needs more than "
            f"max_steps={max_steps} steps."
        )
        raise RuntimeError(f"diffrax failed to solve {where} ({result}): {hint}")
    return ys


def integrate(
    rhs,
    theta,
    u0: ArrayLike,
    t: ArrayLike,
    *,
    solver: diffrax.AbstractSolver | None = None,
    rtol: float = 1e-8,
    atol: float = 1e-8,
    max_steps: int = 100_000,
) -> np.ndarray:
    """Solve `u' = rhs(u, theta, t)` from `u0` on the grid `t` for any parameter pytree
    `theta` (a vector, a coefficient matrix, a neural network); the rows from the first
    failed step on are NaN instead of an error (fitted models may blow up). A strictly
    decreasing `t` integrates backwards in time from `t[0]`."""
    t = _check_grid(t, backward_ok=True)
    solver = diffrax.Tsit5() if solver is None else as_ode_solver("solver", solver)
    ys, _ = _solve(rhs, theta, jnp.asarray(u0, float), t, solver, jnp.asarray(rtol), jnp.asarray(atol), max_steps)
    ys = np.array(ys)
    ys[~np.isfinite(ys)] = np.nan  # diffrax leaves the unreached save times at inf
    return ys


def simulate(
    model: ODEModel,
    p: ArrayLike,
    u0: ArrayLike,
    t: ArrayLike,
    noise: AbstractNoise | AbstractCountNoise | None,
    key: PRNGKeyArray | None = None,
    **solve_kwargs,
) -> Trajectory:
    """Simulate `model` from `u0` on `t` and corrupt it with `noise` (Rummel et al. 2025, §3.4).

    With `noise=None` the noiseless trajectory is returned. `key`: a PRNG key or an
    integer seed. `solve_kwargs` go to [`solve`][wendyjax.solve].
    """
    if noise is None:
        return Trajectory(np.asarray(t), np.asarray(solve(model, p, u0, t, **solve_kwargs)))
    if key is None:
        raise ValueError("simulate needs a PRNG key (key=jax.random.key(...)) to draw noise.")
    key = as_key(key)
    noisy = noise.sample(solve(model, p, u0, t, **solve_kwargs), key)
    return Trajectory(np.asarray(t), np.asarray(noisy))

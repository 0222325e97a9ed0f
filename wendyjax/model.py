"""Problem description: an ODE right-hand side with names, bounds and structure."""

import dataclasses
from collections.abc import Callable, Mapping, Sequence

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import checkify
from jaxtyping import Array, Float

from ._checks import as_names, param_vector
from ._compile import cpu_safe_jit
from ._typing import ArrayLike


def _detect_linear_in_params(rhs, n_states: int, n_params: int, n_probe: int = 4) -> bool:
    """True when ∂²f/∂p² vanishes identically at random probe points.

    Autodiff of an expression that is affine in ``p`` gives exact zeros for the second
    derivative, so the test is structural in practice; any non-finite or non-zero entry
    counts as nonlinear.
    """
    rng = np.random.default_rng(0)
    u = jnp.asarray(rng.uniform(0.5, 1.5, (n_probe, n_states)))
    p = jnp.asarray(rng.uniform(0.5, 1.5, (n_probe, n_params)))
    t = jnp.asarray(rng.uniform(0.1, 1.0, (n_probe,)))
    hess = cpu_safe_jit(jax.vmap(jax.jacfwd(jax.jacfwd(rhs, argnums=1), argnums=1)))(u, p, t)
    hess = np.asarray(hess)
    return bool(np.all(hess == 0.0))


def _check_indexing(rhs, n_states: int, n_params: int) -> None:
    """Raise when `rhs` indexes an array beyond its length, which JAX clamps silently (e.g.
    `p[1]` with one parameter reads `p[0]`): one compiled evaluation at u = 1, p = 1, t = 0
    under `checkify`'s index checks (branches not taken there are not checked)."""
    checked = cpu_safe_jit(checkify.checkify(rhs, errors=checkify.index_checks))
    try:
        error, _ = checked(jnp.ones(n_states), jnp.ones(n_params), jnp.zeros(()))
    except Exception:  # noqa: BLE001 - a function checkify cannot evaluate keeps the shape check only
        return
    message = error.get()
    if message:
        raise ValueError(
            f"rhs(u, p, t) with u of shape ({n_states},) and p of shape ({n_params},) indexes past the end "
            f"of an array: {message.strip()} Are the state and parameter names complete? (If the "
            f"out-of-range index is intended, e.g. .at[i].get(mode='fill'), pass check_indexing=False.)"
        )


def _check_finite(rhs, n_states: int, n_params: int) -> None:
    """Raise when `rhs` is not finite at any of 8 random points (states and parameters of
    either sign, magnitudes 0.5 to 1.5, t in [0.1, 1]): a formula that is NaN everywhere
    (e.g. a log of a difference that is always negative) would make every fit fail later."""
    rng = np.random.default_rng(1)
    sign = np.where(np.arange(8)[:, None] < 4, 1.0, -1.0)
    u = sign * rng.uniform(0.5, 1.5, (8, n_states))
    p = sign * rng.uniform(0.5, 1.5, (8, n_params))
    t = rng.uniform(0.1, 1.0, 8)
    try:
        values = np.asarray(cpu_safe_jit(jax.vmap(rhs))(jnp.asarray(u), jnp.asarray(p), jnp.asarray(t)))
    except Exception:  # noqa: BLE001 - a function vmap cannot evaluate keeps the shape check only
        return
    if not np.any(np.all(np.isfinite(values), axis=1)):
        raise ValueError(
            "rhs(u, p, t) is not finite at any of 8 random points (u, p with entries of either sign "
            "and magnitude 0.5 to 1.5, t in [0.1, 1]): every fit would fail. Check the formula (e.g. a "
            "log or a division that is never defined)."
        )


@dataclasses.dataclass(frozen=True)
class _Held:
    """`rhs` of a model with some parameters held: called with the free ones `q`, it calls
    the full model's `rhs` with `p[free] = q` and `p[i] = v` for each `(i, v)` in `held`.
    Frozen and compared by value, so fits of the same held values share compiled code."""

    rhs: Callable
    names: tuple[str, ...]
    free: tuple[int, ...]
    held: tuple[tuple[int, float], ...]

    def __call__(self, u, q, t):
        return self.rhs(u, self.full(q), t)

    def full(self, q):
        """The full parameter vector from the free parameters `q` (the last axis)."""
        q = jnp.asarray(q)
        columns = {i: q[..., k] for k, i in enumerate(self.free)}
        columns |= {i: jnp.full(q.shape[:-1], v, q.dtype) for i, v in self.held}
        return jnp.stack([columns[i] for i in range(len(self.names))], axis=-1)


class ODEModel(eqx.Module):
    r"""An ODE $\dot u = f(u, p, t)$ with named states and parameters.

    **Arguments:**

    - `rhs`: pure JAX function `f(u, p, t) -> du/dt` with `u` of shape `(D,)`, `p` of
      shape `(J,)` and scalar `t`.
    - `state_names`, `param_names`: names, or counts (names become `u1…`, `p1…`).
    - `bounds`: optional `(lower, upper)` box for the parameters (default search box).
    - `linear_in_params`: declare whether `f` is affine in `p`; `None` detects it by
      autodiff (the second derivative in `p` vanishing at random probe points).
    - `name`: a label used in summaries.
    - `noise`: the noise model that fits of this model assume unless told otherwise:
      "gaussian" (additive) or "lognormal" (multiplicative); the model zoo sets each
      benchmark's own.
    - `jump_ts`: times where `f` jumps in `t` (known forcing such as a pulse): every
      diffrax solve of the model steps exactly onto them instead of stepping over them.
    - `check_indexing`: evaluate `f` once under JAX's index checks and refuse it when it
      indexes past the end of an array (JAX would clamp the index: `p[1]` with one
      parameter reads `p[0]`); `False` for an `f` that does so on purpose.
    """

    rhs: Callable = eqx.field(static=True)
    state_names: tuple[str, ...] = eqx.field(static=True)
    param_names: tuple[str, ...] = eqx.field(static=True)
    bounds: tuple[Float[Array, " J"], Float[Array, " J"]] | None
    linear_in_params: bool = eqx.field(static=True)
    name: str = eqx.field(static=True)
    noise: str = eqx.field(static=True)
    jump_ts: tuple[float, ...] | None = eqx.field(static=True)

    def __init__(
        self,
        rhs: Callable,
        state_names: int | Sequence[str],
        param_names: int | Sequence[str],
        bounds: Sequence[ArrayLike | Sequence[float]] | None = None,
        linear_in_params: bool | None = None,
        name: str = "ode",
        jump_ts: ArrayLike | Sequence[float] | None = None,
        check_indexing: bool = True,
        noise: str = "gaussian",
    ):
        if not callable(rhs):
            raise TypeError(f"rhs must be callable f(u, p, t), got {type(rhs).__name__}.")
        self.rhs = rhs
        self.state_names = as_names(state_names, "u", "state_names")
        self.param_names = as_names(param_names, "p", "param_names")
        self.name = str(name)
        if noise not in ("gaussian", "lognormal"):
            raise ValueError(f"noise must be 'gaussian' or 'lognormal', got {noise!r}.")
        self.noise = noise
        d, j = len(self.state_names), len(self.param_names)
        try:
            out = jax.eval_shape(rhs, jnp.zeros(d), jnp.zeros(j), jnp.zeros(()))
        except Exception as e:  # noqa: BLE001 - re-raised with context
            raise ValueError(
                f"calling rhs(u, p, t) with u of shape ({d},), p of shape ({j},) and a scalar t failed: {e}"
            ) from e
        if check_indexing:
            _check_indexing(rhs, d, j)
        if not hasattr(out, "shape") or tuple(out.shape) != (d,):
            shape = getattr(out, "shape", type(out).__name__)
            raise ValueError(
                f"rhs(u, p, t) must return an array of shape ({d},) (one derivative per state), got {shape}."
            )
        _check_finite(rhs, d, j)
        if bounds is None:
            self.bounds = None
        else:
            if len(bounds) != 2:
                raise ValueError("bounds must be a pair (lower, upper).")
            lo = jnp.asarray(bounds[0], dtype=float)
            hi = jnp.asarray(bounds[1], dtype=float)
            if lo.shape != (j,) or hi.shape != (j,):
                raise ValueError(
                    f"bounds must be two arrays of shape ({j},) (one entry per parameter), "
                    f"got {lo.shape} and {hi.shape}."
                )
            if not bool(jnp.all(lo <= hi)):
                raise ValueError("bounds: every lower bound must be <= its upper bound.")
            self.bounds = (lo, hi)
        if jump_ts is not None:
            jumps = np.asarray(jump_ts, dtype=float).reshape(-1)
            if not np.all(np.isfinite(jumps)) or np.any(np.diff(jumps) <= 0):
                raise ValueError(f"jump_ts must be strictly increasing finite times, got {jump_ts}.")
            jump_ts = tuple(jumps.tolist()) or None
        self.jump_ts = jump_ts
        if linear_in_params is None:
            linear_in_params = _detect_linear_in_params(rhs, d, j)
        self.linear_in_params = bool(linear_in_params)

    @property
    def n_states(self) -> int:
        """Number of states D."""
        return len(self.state_names)

    @property
    def n_params(self) -> int:
        """Number of parameters J."""
        return len(self.param_names)

    @property
    def fixed(self) -> dict[str, float]:
        """The parameters [`fix`][wendyjax.ODEModel.fix] holds, by name (empty for a model
        that holds none)."""
        return {self.rhs.names[i]: v for i, v in self.rhs.held} if isinstance(self.rhs, _Held) else {}

    def fix(self, values: "Mapping[str, float] | None" = None, /, **named: float) -> "ODEModel":
        """This model with some parameters held at given values, by name
        (`model.fix({"K": 10.0})` or `model.fix(K=10.0)`): a model of the other parameters
        (their names and box) that every estimator fits as it would a model written without
        them; `fixed` records the held values. Estimators' `fit(..., fixed=...)` calls it."""
        given = {**dict(values or {}), **named}
        if not given:
            raise ValueError("fix needs at least one parameter to hold, e.g. model.fix(K=10.0).")
        unknown = [n for n in given if n not in self.param_names]
        if unknown:
            raise ValueError(
                f"fix: model '{self.name}' has no parameter(s) {', '.join(map(repr, unknown))}; its "
                f"parameters are {', '.join(self.param_names)}."
            )
        held = {self.param_names.index(n): float(v) for n, v in given.items()}
        bad = [f"{self.param_names[i]} = {v}" for i, v in held.items() if not np.isfinite(v)]
        if bad:
            raise ValueError(f"fix: held values must be finite, got {', '.join(bad)}.")
        if len(held) == self.n_params:
            raise ValueError(
                f"fix would hold every parameter of model '{self.name}' ({', '.join(self.param_names)}): "
                f"nothing would be left to fit; solve or simulate the model instead."
            )
        if isinstance(self.rhs, _Held):  # hold more of the original model's parameters
            free = self.rhs.free
            held = {**dict(self.rhs.held), **{free[i]: v for i, v in held.items()}}
            base, names = self.rhs.rhs, self.rhs.names
        else:
            base, names = self.rhs, self.param_names
        free = tuple(i for i in range(len(names)) if i not in held)
        rhs = _Held(base, names, free, tuple(sorted(held.items())))
        own = [self.param_names.index(names[i]) for i in free]  # the free parameters' places in this model
        bounds = None if self.bounds is None else tuple(np.asarray(b)[own] for b in self.bounds)
        return ODEModel(
            rhs,
            self.state_names,
            [names[i] for i in free],
            bounds=bounds,
            name=self.name,
            jump_ts=self.jump_ts,
            check_indexing=False,
            noise=self.noise,
            linear_in_params=True if self.linear_in_params else None,
        )

    def check_params(self, p: ArrayLike, argname: str = "p") -> Float[Array, " J"]:
        """Return `p` as an array, raising a clear error on a wrong length or non-finite entry."""
        return jnp.asarray(param_vector(self, p, argname))

    def stepsize_controller(self, rtol, atol, **kwargs) -> diffrax.AbstractAdaptiveStepSizeController:
        """diffrax's PID controller at these tolerances, stepping onto `jump_ts` (clipped by a
        `ClipStepSizeController`)."""
        pid = diffrax.PIDController(rtol=rtol, atol=atol, **kwargs)
        return pid if self.jump_ts is None else diffrax.ClipStepSizeController(pid, jump_ts=jnp.asarray(self.jump_ts))

    def __call__(self, u, p, t):
        return self.rhs(u, p, t)

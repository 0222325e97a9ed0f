r"""Gradients of a trajectory-matching loss through diffrax: the baselines that integral
matching is compared with (Anonymous 2025, Tables 1, 3, 5).

$$L(\theta) = \frac{1}{N D}\sum_{i,d} (x_d(t_i; \theta) - y_{id})^2,\qquad
\dot x = f_\theta(t, x),\ x(t_0) = x_0,$$

differentiated by backpropagation through the solver (`RecursiveCheckpointAdjoint`),
the continuous adjoint (`BacksolveAdjoint`: a backward solve of the adjoint ODE, exact
only as the tolerances go to zero) or forward mode (one tangent solve per parameter).
Vector-field evaluations are counted exactly, by host callbacks inside the compiled
solve: primal calls, vector–Jacobian products and Jacobian–vector products (forward mode
counts one per tangent direction).
"""

import dataclasses
from collections.abc import Callable
from typing import Literal

import diffrax
import jax
import jax.flatten_util
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, PyTree

from .._checks import as_ode_solver
from .._compile import cpu_safe_jit

GRADIENT_MODES = ("backprop", "backsolve", "forward")


@dataclasses.dataclass
class EvaluationCounts:
    """Vector-field evaluations of one gradient: `primal` calls, `vjp` (reverse) and `jvp`
    (forward, per tangent direction) products."""

    primal: int = 0
    vjp: int = 0
    jvp: int = 0

    @property
    def total(self) -> int:
        """Vector-field evaluations of every kind together."""
        return self.primal + self.vjp + self.jvp

    def _add(self, field: str, n: int) -> None:
        setattr(self, field, getattr(self, field) + n)


def _counted(f: Callable, counts: EvaluationCounts, mode: str) -> Callable:
    """`f(t, x, θ)` that reports each evaluation to `counts`: a custom VJP rule for the
    reverse modes, a custom JVP rule for forward mode (diffrax's reverse adjoints apply
    `jax.vjp`; forward mode cannot differentiate a custom VJP). A callback on a batched
    value runs once per batch element, so `jacfwd`'s tangent directions count one each."""

    def tick(field: str, value) -> None:
        jax.debug.callback(lambda _: counts._add(field, 1), jnp.sum(value))

    if mode == "forward":

        @jax.custom_jvp
        def g(t, x, theta):
            tick("primal", x)
            return f(t, x, theta)

        @g.defjvp
        def g_jvp(primals, tangents):
            tick("primal", primals[1])
            tick("jvp", tangents[1])
            return jax.jvp(f, primals, tangents)

        return g

    @jax.custom_vjp
    def h(t, x, theta):
        tick("primal", x)
        return f(t, x, theta)

    def h_fwd(t, x, theta):
        tick("primal", x)
        return jax.vjp(f, t, x, theta)

    def h_bwd(vjp, ct):
        tick("vjp", ct)
        return vjp(ct)

    h.defvjp(h_fwd, h_bwd)
    return h


def _adjoint(mode: str) -> diffrax.AbstractAdjoint:
    if mode == "backprop":
        return diffrax.RecursiveCheckpointAdjoint()
    if mode == "backsolve":
        return diffrax.BacksolveAdjoint()
    if mode == "forward":
        return diffrax.ForwardMode()
    raise ValueError(f"mode must be one of {GRADIENT_MODES}, got {mode!r}.")


def _loss(vector_field, theta, x0, t, y, solver, controller, adjoint, max_steps):
    sol = diffrax.diffeqsolve(
        diffrax.ODETerm(vector_field),
        solver,
        t0=t[0],
        t1=t[-1],
        dt0=None,
        y0=x0,
        args=theta,
        saveat=diffrax.SaveAt(ts=t),
        stepsize_controller=controller,
        adjoint=adjoint,
        max_steps=max_steps,
    )
    return jnp.mean((sol.ys - y) ** 2)


def trajectory_loss_gradient(
    vector_field: Callable[[Float[Array, ""], Float[Array, " d"], PyTree], Float[Array, " d"]],
    theta: PyTree,
    x0: Float[Array | np.ndarray, "*bx d"],
    t: Float[Array | np.ndarray, "*bt n"],
    y: Float[Array | np.ndarray, "*by n d"],
    *,
    mode: Literal["backprop", "backsolve", "forward"] = "backprop",
    solver: diffrax.AbstractSolver = diffrax.Tsit5(),
    rtol: float = 1e-6,
    atol: float = 1e-8,
    max_steps: int = 16_384,
    count: bool = False,
) -> tuple[Float[Array, ""], PyTree, EvaluationCounts | None]:
    r"""Loss $L(\theta)$ (mean squared trajectory error) and $\nabla_\theta L$ by `mode`, with
    the vector-field evaluation counts when `count=True` (host callbacks: leave it off
    when timing).

    `vector_field(t, x, θ)` is diffrax's convention; `θ` any pytree of arrays (e.g. the
    parameters of an `eqx.nn.MLP`, split with `eqx.partition`). The computation is
    jit-compiled per (vector field, shapes, mode).

    A batch of windows (Chen et al. 2018's minibatches of short subtrajectories) is given
    by a leading axis on all three: `x0` (B, d), `t` (B, n), `y` (B, n, d); the loss is
    then the mean over windows, each solved from its own `x0` (vmapped)."""
    if mode not in GRADIENT_MODES:
        raise ValueError(f"mode must be one of {GRADIENT_MODES}, got {mode!r}.")
    as_ode_solver("solver", solver)
    t = jnp.asarray(t, float)
    y = jnp.asarray(y, float)
    x0 = jnp.asarray(x0, float)
    windows = x0.ndim == 2
    if t.ndim != 1 + windows or t.shape[-1] < 2:
        raise ValueError(
            f"t must have shape (n,) ((B, n) with a batch of windows, x0 of shape (B, d)) with "
            f"n ≥ 2 times, got shape {t.shape} for x0 of shape {x0.shape}."
        )
    if y.shape != t.shape + x0.shape[-1:]:
        raise ValueError(f"y must have shape {t.shape + x0.shape[-1:]} (t's shape, state), got {y.shape}.")
    if windows and (count or t.shape[0] != x0.shape[0]):
        raise ValueError(
            f"a batch of windows needs x0 and t with the same leading axis (got {x0.shape[0]} and "
            f"{t.shape[0]}) and count=False."
        )
    counts = EvaluationCounts() if count else None
    f = vector_field if counts is None else _counted(vector_field, counts, mode)
    controller = diffrax.PIDController(rtol=rtol, atol=atol)
    value, grad = _value_and_grad(f, theta, x0, t, y, solver, controller, _adjoint(mode), max_steps, mode)
    jax.block_until_ready((value, grad))
    return value, grad, counts


@cpu_safe_jit
def _value_and_grad(f, theta, x0, t, y, solver, controller, adjoint, max_steps, mode):
    one = lambda th, x0, t, y: _loss(f, th, x0, t, y, solver, controller, adjoint, max_steps)  # noqa: E731
    if x0.ndim == 2:
        loss = lambda th: jnp.mean(jax.vmap(one, (None, 0, 0, 0))(th, x0, t, y))  # noqa: E731
    else:
        loss = lambda th: one(th, x0, t, y)  # noqa: E731
    if mode == "forward":
        flat, unravel = jax.flatten_util.ravel_pytree(theta)
        value = loss(theta)
        grad = jax.jacfwd(lambda v: loss(unravel(v)))(flat)
        return value, unravel(grad)
    return jax.value_and_grad(loss)(theta)

r"""Neural vector fields for integral matching and the diffrax baselines (Anonymous 2025, §4, Tables
3–4): equinox modules called as `field(u, t)`, whose arrays are the parameters."""

from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree
from jaxtyping import Array, Float, PRNGKeyArray

from .model import ODEModel
from .simulate import integrate


class MLPField(eqx.Module):
    r"""$f(u) = W_{out}\,\sigma(\dots\sigma(W_1 g(u) + b_1)\dots) + b_{out}$: an MLP with `depth`
    hidden layers of `width` units and activation `activation` (Anonymous 2025, Table 3: one hidden
    layer of 50, ReLU) applied to the features `g(u)` (`input_transform`, default the
    identity; Chen et al.'s spiral demo uses $u^3$)."""

    mlp: eqx.nn.MLP
    input_transform: Callable | None = eqx.field(static=True)

    def __init__(
        self,
        n_states: int,
        width: int = 50,
        depth: int = 1,
        *,
        key: PRNGKeyArray,
        activation: Callable = jax.nn.relu,
        input_transform: Callable | None = None,
    ):
        self.mlp = eqx.nn.MLP(n_states, n_states, width, depth, activation=activation, key=key)
        self.input_transform = input_transform

    def __call__(self, u: Float[Array, " D"], t=None) -> Float[Array, " D"]:
        return self.mlp(u if self.input_transform is None else self.input_transform(u))


class ResNetField(eqx.Module):
    r"""A residual network $h_0 = W_{in} u$, $h_{i+1} = h_i + W_{i,2}\,\sigma(W_{i,1} h_i + b_i)$,
    $f(u) = W_{out} h_B + b_{out}$ with `blocks` residual blocks of `width` units (the
    ResNet family Anonymous 2025 trains on Lorenz-63, Table 4)."""

    inp: eqx.nn.Linear
    blocks: tuple[tuple[eqx.nn.Linear, eqx.nn.Linear], ...]
    out: eqx.nn.Linear
    activation: Callable = eqx.field(static=True)

    def __init__(
        self, n_states: int, width: int = 64, blocks: int = 2, *, key: PRNGKeyArray, activation: Callable = jax.nn.tanh
    ):
        keys = jax.random.split(key, 2 * blocks + 2)
        self.inp = eqx.nn.Linear(n_states, width, key=keys[0])
        self.blocks = tuple(
            (
                eqx.nn.Linear(width, width, key=keys[2 * i + 1]),
                eqx.nn.Linear(width, width, use_bias=False, key=keys[2 * i + 2]),
            )
            for i in range(blocks)
        )
        self.out = eqx.nn.Linear(width, n_states, key=keys[-1])
        self.activation = activation

    def __call__(self, u: Float[Array, " D"], t=None) -> Float[Array, " D"]:
        h = self.inp(u)
        for first, second in self.blocks:
            h = h + second(self.activation(first(h)))
        return self.out(h)


def solve_field(field: eqx.Module, u0, t, **kwargs):
    """A neural vector field `field(u, t)` solved from `u0` on the grid `t`
    ([`wendyjax.integrate`][]: rows from a failed step on are NaN)."""
    return integrate(field_rhs, field, u0, t, **kwargs)


def field_rhs(u: Float[Array, " D"], field: Callable, t) -> Float[Array, " D"]:
    """A module as a right-hand side `rhs(u, θ, t)` whose parameters θ are the module."""
    return field(u, t)


def n_parameters(field: eqx.Module) -> int:
    """Number of trainable scalars of a module."""
    return sum(x.size for x in jax.tree.leaves(eqx.filter(field, eqx.is_inexact_array)))


def as_ode_model(
    field: eqx.Module, n_states: int, name: str = "neural field"
) -> tuple[ODEModel, Float[Array, " J"], Callable[[Float[Array, " J"]], eqx.Module]]:
    """`field` as an [`ODEModel`][wendyjax.ODEModel] whose parameter vector is the module's
    trainable scalars, flattened: returns `(model, p, rebuild)` with `p` the module's
    values and `rebuild(p)` the module with values `p`. This lets the estimators of
    parameter vectors take a neural field, e.g. an integral-matching fit refined by
    output error: `OutputError(fit_u0=False).fit(model, data, p, bounds=None)`."""
    if not isinstance(n_states, int) or n_states < 1:
        raise ValueError(f"n_states must be a positive integer, got {n_states!r}.")
    params, static = eqx.partition(field, eqx.is_inexact_array)
    p, unravel = ravel_pytree(params)
    if p.size == 0:
        raise ValueError("field has no trainable (inexact array) parameters.")

    def rebuild(q: Float[Array | np.ndarray, " J"]) -> eqx.Module:
        return eqx.combine(unravel(jnp.asarray(q)), static)

    def rhs(u, q, t):
        return field_rhs(u, eqx.combine(unravel(q), static), t)

    return ODEModel(rhs, n_states, int(p.size), linear_in_params=False, name=name, check_indexing=False), p, rebuild


__all__ = [
    "MLPField",
    "ResNetField",
    "solve_field",
    "field_rhs",
    "n_parameters",
    "as_ode_model",
]

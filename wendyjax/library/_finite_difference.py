r"""PDE libraries: products of powers of the fields and of their spatial derivatives by
second-order centred finite differences, up to fourth derivatives, in one to three
dimensions (Meissner & Glasner 2024, §3.3, eq. 15)."""

import re
from collections.abc import Sequence

import equinox as eqx
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from .._checks import as_names
from ._base import AbstractLibrary

# second-order centred stencils on offsets -2..2 for derivatives of order 0-4
_STENCILS = {
    0: (0.0, 0.0, 1.0, 0.0, 0.0),
    1: (0.0, -0.5, 0.0, 0.5, 0.0),
    2: (0.0, 1.0, -2.0, 1.0, 0.0),
    3: (-0.5, 1.0, 0.0, -1.0, 0.5),
    4: (1.0, -4.0, 6.0, -4.0, 1.0),
}
_HALFWIDTH = {0: 0, 1: 1, 2: 1, 3: 2, 4: 2}
_FACTOR = re.compile(r"^([A-Za-z]\w*?)(?:_([a-z]+))?(?:\^(\d+))?$")


def _parse(term: str, states: tuple[str, ...], axes: tuple[str, ...]) -> tuple[tuple[int, tuple[int, ...], int], ...]:
    """`"u^2 u_x"` → ((state, derivative order per axis, power), …)."""
    factors = []
    for text in term.replace("*", " ").split():
        m = _FACTOR.match(text)
        if m is None or m.group(1) not in states:
            raise ValueError(
                f"cannot read the factor {text!r} of the term {term!r}: write a state name "
                f"({', '.join(states)}), optionally _ and spatial axes ({''.join(axes)}) and ^power, "
                f"e.g. 'u', 'u^3', 'u_xx', 'u u_x'."
            )
        orders = tuple(m.group(2).count(a) if m.group(2) else 0 for a in axes)
        if m.group(2) and sum(orders) != len(m.group(2)):
            raise ValueError(
                f"the factor {text!r} of {term!r} differentiates along an axis other than {', '.join(axes)}."
            )
        if max(orders) > 4:
            raise ValueError(f"the factor {text!r} of {term!r} asks for a derivative of order > 4 along one axis.")
        power = int(m.group(3) or 1)
        if power < 1:
            raise ValueError(f"the power in {text!r} of {term!r} must be a positive integer.")
        factors.append((states.index(m.group(1)), orders, power))
    if not factors:
        raise ValueError("a library term cannot be empty.")
    return tuple(factors)


class FiniteDifferenceLibrary(AbstractLibrary):
    r"""Terms such as `u`, `u^3`, `u_xx`, `u u_x`, `u^2 u_y`, `u v_x` of the fields on a uniform
    grid, spatial derivatives by second-order centred differences (Meissner & Glasner 2024, eq. 15). `features`
    of one time level of shape `(*space, D)` returns the terms on the interior points, where
    every stencil lies inside the grid: no boundary condition is assumed (Meissner & Glasner 2024, §3.3).

    **Arguments:**

    - `terms`: the candidate terms, as strings (factors separated by spaces).
    - `spacing`: the grid step along each spatial axis (a number for one axis).
    - `state_names`: the fields (default one field `u`).
    - `axis_names`: the spatial axes (default `x`, `y`, `z` for as many axes as `spacing`).
    """

    terms: tuple[str, ...] = eqx.field(static=True)
    spacing: tuple[float, ...] = eqx.field(static=True)
    state_names: tuple[str, ...] = eqx.field(static=True)
    axis_names: tuple[str, ...] = eqx.field(static=True)
    _parsed: tuple = eqx.field(static=True)

    def __init__(
        self,
        terms: Sequence[str],
        spacing: float | Sequence[float],
        state_names: int | Sequence[str] = ("u",),
        axis_names: Sequence[str] | None = None,
    ):
        steps: tuple = (spacing,) if np.ndim(spacing) == 0 else tuple(spacing)  # pyright: ignore[reportArgumentType]  # np.ndim: a sequence here
        if not 1 <= len(steps) <= 3 or not all(np.isfinite(h) and h > 0 for h in steps):
            raise ValueError(f"spacing must be one to three positive grid steps, got {steps!r}.")
        self.spacing = tuple(float(h) for h in steps)
        self.state_names = as_names(state_names, "u", "state_names")
        self.axis_names = tuple(axis_names) if axis_names is not None else ("x", "y", "z")[: len(steps)]
        if len(self.axis_names) != len(steps) or not all(len(a) == 1 for a in self.axis_names):
            raise ValueError(f"axis_names must be {len(steps)} single letters, got {axis_names!r}.")
        if isinstance(terms, str) or len(terms) == 0:
            raise ValueError(f"terms must be a non-empty sequence of strings, got {terms!r}.")
        self.terms = tuple(terms)
        if len(set(self.terms)) != len(self.terms):
            raise ValueError(f"terms has repeated entries: {self.terms}.")
        self._parsed = tuple(_parse(t, self.state_names, self.axis_names) for t in self.terms)

    @property
    def n_features(self) -> int:
        return len(self.terms)

    @property
    def feature_names(self) -> tuple[str, ...]:
        return self.terms

    @property
    def halfwidth(self) -> tuple[int, ...]:
        return tuple(
            max(_HALFWIDTH[orders[a]] for term in self._parsed for _, orders, _ in term)
            for a in range(len(self.spacing))
        )

    def _lhs(self, state: str) -> str:
        return f"{state}_t"

    def _derivative(self, field: Float[Array, " *space"], orders: tuple[int, ...]) -> Float[Array, " *interior"]:
        """The derivative of one field on the interior (periodic shifts, cropped)."""
        out = field
        for axis, (order, h) in enumerate(zip(orders, self.spacing)):
            if order:
                stencil = sum(
                    c * jnp.roll(out, -offset, axis=axis)
                    for offset, c in zip(range(-2, 3), _STENCILS[order])
                    if c != 0.0
                )
                out = jnp.asarray(stencil) / h**order  # `sum` types an empty sum's 0 too
        crop = tuple(slice(w, n - w) for w, n in zip(self.halfwidth, field.shape))
        return out[crop]

    def features(self, u: Float[Array, "*space D"]) -> Float[Array, "*interior F"]:
        cache = {}
        columns = []
        for term in self._parsed:
            value = 1.0
            for state, orders, power in term:
                if (state, orders) not in cache:
                    cache[state, orders] = self._derivative(u[..., state], orders)
                value = value * cache[state, orders] ** power
            columns.append(value)
        return jnp.stack(columns, axis=-1)

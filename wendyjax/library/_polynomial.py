r"""Polynomial function libraries: $\dot u = \Phi(u)\,\Theta$ with $\Phi$ the monomials of the
states up to a degree and $\Theta$ a (features × states) coefficient matrix (Anonymous 2025, §4,
App. C; Meissner & Glasner 2024, eq. 14; the SINDy parametrisation)."""

import itertools
from collections.abc import Sequence

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from .._checks import as_names
from .._typing import ArrayLike
from ..model import ODEModel
from ._base import AbstractLibrary


def _factors(n_states: int, degree: int, constant: bool) -> np.ndarray:
    """Each monomial of total degree ≤ `degree` as `degree` indices into (1, u_1, …, u_D)
    (0 pads), by degree then in the order of `itertools.combinations_with_replacement`
    (pysindy's order); the constant first where `constant`."""
    rows = []
    for d in range(0 if constant else 1, degree + 1):
        for combo in itertools.combinations_with_replacement(range(1, n_states + 1), d):
            rows.append(list(combo) + [0] * (degree - d))
    return np.asarray(rows, dtype=int)


class PolynomialLibrary(AbstractLibrary):
    r"""All monomials of the states of total degree ≤ `degree`, the constant included unless
    `constant=False` (Meissner & Glasner 2024's libraries have none): $f(u, \Theta) = \Phi(u)\,\Theta$ with
    $\Theta$ of shape (`n_features`, `n_states`).

    `state_names` (or a count) names the states in feature names and printed equations."""

    # the state indices (0: the constant 1) multiplied in each feature; static, so that `library.rhs`
    # carries no array when an estimator keeps it as a static field
    factors: tuple[tuple[int, ...], ...] = eqx.field(static=True)
    degree: int = eqx.field(static=True)
    state_names: tuple[str, ...] = eqx.field(static=True)
    constant: bool = eqx.field(static=True)

    def __init__(self, state_names: int | Sequence[str], degree: int = 3, constant: bool = True):
        if not isinstance(degree, (int, np.integer)) or degree < 1:
            raise ValueError(f"degree must be a positive integer, got {degree!r}.")
        self.state_names = as_names(state_names, "x", "state_names")
        self.degree = int(degree)
        self.constant = bool(constant)
        self.factors = tuple(map(tuple, _factors(len(self.state_names), self.degree, self.constant).tolist()))

    @property
    def n_features(self) -> int:
        return len(self.factors)

    @property
    def feature_names(self) -> tuple[str, ...]:
        out = []
        for row in np.asarray(self.factors):
            powers = np.bincount(row, minlength=self.n_states + 1)[1:]
            terms = [n if e == 1 else f"{n}^{e}" for n, e in zip(self.state_names, powers) if e > 0]
            out.append(" ".join(terms) if terms else "1")
        return tuple(out)

    def features(self, u: Float[Array, " D"]) -> Float[Array, " F"]:
        r"""$\Phi(u)$: every monomial at the state `u` (products of factors: smooth in `u`)."""
        return jnp.prod(jnp.concatenate([jnp.ones((1,), u.dtype), u])[np.asarray(self.factors)], axis=1)

    def rhs(self, u: Float[Array, " D"], theta: Float[Array | np.ndarray, "F D"], t=None) -> Float[Array, " D"]:
        """The vector field f(u) = features(u) @ θ (Anonymous 2025, App. C, Meissner & Glasner 2024, eq. 14)."""
        return self.features(u) @ theta

    def coefficients(self, model: ODEModel, p: ArrayLike) -> np.ndarray:
        r"""The coefficient matrix of `model` at `p` in this library (exact when `model.rhs` is
        a polynomial of degree ≤ `degree` in the states): least squares on random states."""
        rng = np.random.default_rng(0)
        u = rng.uniform(-2.0, 2.0, (4 * self.n_features, self.n_states))
        phi = np.asarray(jax.vmap(self.features)(jnp.asarray(u)))
        f = np.asarray(jax.vmap(model.rhs, (0, None, None))(jnp.asarray(u), jnp.asarray(p, float), 0.0))
        theta = np.linalg.lstsq(phi, f, rcond=None)[0]
        return np.where(np.abs(theta) < 1e-9 * max(np.abs(theta).max(), 1.0), 0.0, theta)

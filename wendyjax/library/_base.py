r"""Function libraries: a model linear in its coefficients, $\partial_t u = \Phi(u)\,\Theta$, with
$\Phi$ a fixed set of candidate terms and $\Theta$ a (terms × states) coefficient matrix
(Meissner & Glasner 2024, eqs. 6, 14, 15)."""

import abc

import equinox as eqx
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from .._typing import ArrayLike


class AbstractLibrary(eqx.Module):
    """A library of candidate terms. Subclasses give the names and `features`."""

    state_names: eqx.AbstractVar[tuple[str, ...]]

    @property
    @abc.abstractmethod
    def n_features(self) -> int:
        """The number of candidate terms."""

    @property
    @abc.abstractmethod
    def feature_names(self) -> tuple[str, ...]:
        """Each term as printed in equations."""

    @abc.abstractmethod
    def features(self, u: Array) -> Array:
        """Every term at one state (ODEs: shape `(D,)` → `(F,)`) or one time level of a
        field (PDEs: `(*space, D)` → `(*interior, F)`)."""

    @property
    def halfwidth(self) -> tuple[int, ...]:
        """Per spatial axis, how many grid points at each end `features` drops (none for ODEs)."""
        return ()

    @property
    def n_states(self) -> int:
        """Number of states D."""
        return len(self.state_names)

    @property
    def name(self) -> str:
        """The library in words (for messages and summaries)."""
        return f"{type(self).__name__}({self.n_features} terms in {', '.join(self.state_names)})"

    @property
    def param_names(self) -> tuple[str, ...]:
        """One name per coefficient, equation by equation (the order of `theta.T.ravel()`),
        e.g. `"x': x y"`."""
        return tuple(f"{self._lhs(state)}: {term}" for state in self.state_names for term in self.feature_names)

    def _lhs(self, state: str) -> str:
        return f"{state}'"

    def zeros(self) -> Float[Array, "F D"]:
        """A coefficient matrix of zeros (Anonymous 2025's initialisation)."""
        return jnp.zeros((self.n_features, self.n_states))

    def check_theta(self, theta: ArrayLike, argname: str = "theta") -> Float[Array, "F D"]:
        """`theta` as a `(n_features, n_states)` array; raises naming `argname` otherwise."""
        theta = jnp.asarray(theta, float)
        if theta.shape != (self.n_features, self.n_states):
            raise ValueError(
                f"{argname} must have shape ({self.n_features}, {self.n_states}) (terms × states "
                f"of this library: {', '.join(self.feature_names)}), got {theta.shape}."
            )
        return theta

    def equations(self, theta: ArrayLike, precision: int = 4) -> list[str]:
        """Each state's equation, e.g. `x' = -10 x + 10 y`, listing the non-zero terms."""
        theta = np.asarray(self.check_theta(theta))
        lines = []
        for k, state in enumerate(self.state_names):
            terms = [
                f"{c:+.{precision}g}" + ("" if n == "1" else f" {n}")
                for c, n in zip(theta[:, k], self.feature_names)
                if c != 0.0
            ]
            body = " ".join(terms).lstrip("+") if terms else "0"
            lines.append(f"{self._lhs(state)} = {body}")
        return lines

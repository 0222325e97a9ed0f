"""The one output type of every estimator's `solve`."""

import equinox as eqx
from jaxtyping import Array, Bool, Float, Int, PyTree

from .._results import RESULTS


class Solution(eqx.Module):
    """Output of an estimator's `solve`, the same for every estimator:

    - `params`: the estimate (a parameter vector, a coefficient matrix or a neural
      field's weights: the structure of the start `p0`);
    - `objective`: the objective minimised, at the estimate (ℓ for WENDy, the
      least-squares loss for output error, …);
    - `num_steps`: the solver's (outer) steps;
    - `result`: the status, a [`RESULTS`][wendyjax.estimators.RESULTS] item;
    - `extras`: what only this estimator returns (output error's fitted initial states
      `u0`, integral matching's loss `history`, Data2LD's `rho`, …), a dict of arrays.

    Batched along a leading axis when `solve` is vmapped.
    """

    params: PyTree
    objective: Float[Array, ""]
    num_steps: Int[Array, ""]
    result: RESULTS
    extras: dict = eqx.field(default_factory=dict)

    @property
    def successful(self) -> Bool[Array, "..."]:
        """Whether the solve converged (`result == RESULTS.successful`)."""
        return self.result == RESULTS.successful

"""The one output type of every estimator's `solve`."""

import equinox as eqx
from jaxtyping import Array, Bool, Float, Int, PyTree

from .._results import RESULTS

#: extras an estimator's `covariance` reads from its solution (output error's Jacobian at the
#: estimate), per run as large as the data: studies do not bring them back to the host
DEVICE_EXTRAS = ("jacobian",)


class Solution(eqx.Module):
    """Output of an estimator's `solve`, the same for every estimator:

    - `params`: the estimate (a parameter vector, a coefficient matrix or a neural
      field's weights: the structure of the start `p0`);
    - `objective`: the objective minimised, at the estimate (ℓ for WENDy, the
      least-squares loss for output error, …);
    - `num_steps`: the solver's (outer) steps;
    - `result`: the status, a [`RESULTS`][wendyjax.estimators.RESULTS] item;
    - `extras`: what only this estimator returns (output error's fitted initial states
      `u0`, integral matching's loss `history`, Data2LD's `rho`, …), a dict of arrays;
      those named in `DEVICE_EXTRAS` serve the estimator's `covariance` and are left on the
      device by [`on_host`][].

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

    def on_host(self) -> "Solution":
        """The solution without the extras of `DEVICE_EXTRAS` (what a study keeps per run)."""
        return eqx.tree_at(lambda s: s.extras, self, {k: v for k, v in self.extras.items() if k not in DEVICE_EXTRAS})

"""Running a compiled batch of trust-region fits of a PEtab problem, and what to do when
differentiating one fit's ODE solve raises inside it."""

import warnings
from collections.abc import Callable
from typing import TypeVar

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from .._checks import user_stacklevel
from ..estimators import RESULTS, TrustRegion, TrustRegionSolution
from ._problem import PetabProblem

_T = TypeVar("_T")

#: The trust region of the PEtab fits (multistart, profile, bootstrap): the current
#: iterate's scaling, as starts drawn over boxes of several decades begin at objectives of
#: 1e10 and more, whose curvature would fix a monotone scaling far too large; stopping also
#: by the Newton decrement, as weakly determined directions of a likelihood are not worth the
#: last tens of steps (mostly rejected, at the ODE solves' noise floor); the step's model
#: curved towards the bounds, as boxes of several decades hold parameters the data barely
#: determine, whose steps computed without the bounds cross the box; and a BFGS approximation
#: in place of the Fisher information once 20 steps in a row left the radius unchanged
#: (pyPESTO's default with fides), as far starts' Fisher-information steps can crawl.
SOLVER = TrustRegion(
    rtol=1e-8, atol=1e-8, monotone_scaling=False, newton_decrement=True, bound_curvature=True, bfgs_after=20
)

#: how lineax words a tangent solve of a failed implicit step: non-finite output (a singular
#: Newton matrix) or non-finite input (derivatives of the right-hand side that overflowed)
_TANGENT_SOLVE_FAILURES = ("returned", "received")


class ImplicitStepError(RuntimeError):
    """Differentiating a trial point's failed implicit ODE step raised inside a compiled batch of
    fits, which stops the whole batch (its message says what to do)."""


def _wait(fits: Callable[..., _T], problem: PetabProblem, args: tuple) -> _T:
    """`fits(problem, *args)` (compiled fits, or the check that a fit can start), waited for;
    the runtime error of a failed implicit step's derivative as an [`ImplicitStepError`][]
    that explains it."""
    try:
        return jax.block_until_ready(fits(problem, *args))
    except eqx.EquinoxRuntimeError as error:
        if not any(f"linear solver {what} non-finite" in str(error) for what in _TANGENT_SOLVE_FAILURES):
            raise
        raise ImplicitStepError(
            "a trial point's implicit ODE step failed (its Newton iteration diverged, or the model's derivatives are "
            "not finite there), and differentiating it raised inside the compiled fits (optimistix's "
            "implicit-function-theorem derivative solves with throw=True), "
            "which stops every fit of the batch. Run with the environment variable EQX_ON_ERROR=nan set before "
            "Python starts: such trial points then get a non-finite objective and the trust region rejects them "
            "(errors of other kinds inside equinox code become NaN too). Or load the problem with tighter rtol/atol "
            "or another solver."
        ) from error


def run_fits(
    fits: Callable,
    problem: PetabProblem,
    *args,
    each: Callable[[int], tuple],
    starts: Float[Array, "f n"],
    what: str = "fits",
) -> TrustRegionSolution:
    """`fits(problem, *args)`, a compiled batch of trust-region fits, waited for. Where
    differentiating a trial point's failed implicit ODE step raises inside it (which stops the
    whole batch), the `len(starts)` fits are run again one call each, `fits(problem, *each(i))`:
    those that raise again get the status `derivative_failed` (objective `inf`, parameters at
    their row of `starts`), with a warning that calls them `what`; where every one raises, the
    [`ImplicitStepError`][] that explains it."""
    try:
        return _wait(fits, problem, args)
    except ImplicitStepError:
        pass
    done, error = [], None
    for i in range(len(starts)):
        try:
            done.append(_wait(fits, problem, each(i)))
        except ImplicitStepError as raised:
            done.append(None)
            error = raised
    failed = np.array([fit is None for fit in done])
    if failed.all():
        assert error is not None  # every fit raised
        raise error
    warnings.warn(
        f"{problem.name}: differentiating the ODE solve raised at a trial point of {failed.sum()} of {len(done)} "
        f"{what}, which stopped the batched call; all {len(done)} were run again one call each, and the "
        f"{failed.sum()} that raised again have the status derivative_failed (objective inf). Set the environment "
        f"variable EQX_ON_ERROR=nan before Python starts to have such trial points rejected instead.",
        RuntimeWarning,
        stacklevel=user_stacklevel(),
    )
    template = next(fit for fit in done if fit is not None)
    stand_in = eqx.tree_at(
        lambda s: (s.objective, s.num_steps), template, (jnp.full(1, jnp.inf), 0 * template.num_steps)
    )
    stacked = jax.tree_util.tree_map(lambda *x: jnp.concatenate(x), *(stand_in if fit is None else fit for fit in done))
    mask = jnp.asarray(failed)
    return eqx.tree_at(
        lambda s: (s.params, s.result),
        stacked,
        (
            jnp.where(mask[:, None], starts, stacked.params),
            jax.vmap(lambda fail, r: RESULTS.where(fail, RESULTS.derivative_failed, r))(mask, stacked.result),
        ),
    )

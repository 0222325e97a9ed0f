"""Status codes of every solve: returned as values, so vmapped fits report per-run failure.

`RESULTS` extends `optimistix.RESULTS` (as diffrax's does), so an optimistix or lineax
failure keeps its own status and message (`RESULTS.promote`), and adds wendyjax's own.
"""

from typing import TYPE_CHECKING, ClassVar

import numpy as np
import optimistix as optx


class RESULTS(optx.RESULTS):  # pyright: ignore[reportGeneralTypeIssues]
    """Outcome of a solve. Compare with `==`, e.g. `sol.result == RESULTS.successful`;
    `RESULTS[item]` is the message. Inherits optimistix's items (`max_steps_reached`,
    `nonfinite`, `singular`, …) and adds the failures of wendyjax's estimators."""

    cholesky_failed = (
        "The residual covariance S(p) is not positive definite (its Cholesky "
        "factorisation failed): the parameters are outside the region where the weak "
        "likelihood is defined. Try another starting point or tighter bounds."
    )
    forward_failed = (
        "The forward simulation of the ODE failed (diffrax did not reach the last sample "
        "time or the states became non-finite): the failure of a fit as Rummel et al. 2025 "
        "define it. For a stiff system use an implicit solver (OutputError(ode_solver="
        "diffrax.Kvaerno5())); else raise ode_max_steps, or start nearer the data (Hybrid "
        "starts from the WENDy estimate)."
    )
    stalled = (
        "The solver stopped without converging: its step bound shrank to nothing (a trust "
        "region below the step tolerance, or Levenberg-Marquardt damping past 1e16) without "
        "a step that lowers the objective, while its derivatives still promise a decrease "
        "(the Hessian is far from positive definite, the objective is not smooth there, or "
        "its gradient is wrong)."
    )
    derivative_failed = (
        "Differentiating the ODE solve at a trial point raised (an implicit step whose Newton "
        "iteration diverged, or a right-hand side whose derivatives are not finite there, e.g. a "
        "Hill term that overflows), which stops a compiled batch of fits: this fit was stopped there. "
        "Set the environment variable EQX_ON_ERROR=nan before Python starts to have such trial "
        "points rejected instead, or narrow the parameter table's bounds, or load the problem with "
        "another solver."
    )
    shapiro_wilk_stop = (
        "IRLS stopped early because the whitened residual failed the Shapiro-Wilk "
        "normality test (Bortz, Messenger & Dukic 2023, §2.4); the previous iterate is returned."
    )

    if TYPE_CHECKING:
        # The inherited items are this class's at runtime; pyright types them as optimistix's
        # and lineax's (not a `RESULTS` for `RESULTS.where`) unless declared here.
        successful: ClassVar["RESULTS"]
        nonlinear_max_steps_reached: ClassVar["RESULTS"]
        nonlinear_divergence: ClassVar["RESULTS"]
        nonfinite: ClassVar["RESULTS"]
        max_steps_reached: ClassVar["RESULTS"]
        singular: ClassVar["RESULTS"]


def status_names(result) -> np.ndarray:
    """The name of every status of a (possibly batched) result, as a string array."""
    names = np.full(np.shape(np.asarray(result == RESULTS.successful)), "", dtype=object)
    for name, item in RESULTS._name_to_item.items():
        names[np.asarray(result == item)] = name
    return names.astype(str)

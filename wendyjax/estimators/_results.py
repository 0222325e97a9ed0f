"""Status codes of the solvers: returned as values, so vmapped fits report per-run failure."""

import equinox as eqx
import numpy as np


class RESULTS(eqx.Enumeration):
    """Outcome of a solve. Compare with `==`, e.g. `sol.result == RESULTS.successful`."""

    successful = ""
    max_steps_reached = "The solver reached its maximum number of steps before converging."
    nonfinite = (
        "The objective, its gradient or its Hessian is not finite at the starting point "
        "or became non-finite during the solve."
    )
    cholesky_failed = (
        "The residual covariance S(p) is not positive definite (its Cholesky "
        "factorisation failed): the parameters are outside the region where the weak "
        "likelihood is defined. Try another starting point or tighter bounds."
    )
    forward_failed = (
        "The forward simulation of the ODE at the estimate failed (diffrax did not reach "
        "the last sample time or the states became non-finite): 000's definition of a "
        "failed fit."
    )
    stalled = (
        "The solver stopped without converging: its step bound shrank to nothing (a trust "
        "region below the step tolerance, or Levenberg-Marquardt damping past 1e16) without "
        "a step that lowers the objective, while its derivatives still promise a decrease "
        "(the Hessian is far from positive definite, the objective is not smooth there, or "
        "its gradient is wrong)."
    )
    shapiro_wilk_stop = (
        "IRLS stopped early because the whitened residual failed the Shapiro-Wilk "
        "normality test (001 §2.4); the previous iterate is returned."
    )


def status_names(result: RESULTS) -> np.ndarray:
    """The name of every status of a (possibly batched) result, as a string array."""
    names = np.full(np.shape(np.asarray(result == RESULTS.successful)), "", dtype=object)
    for name, item in RESULTS._name_to_item.items():
        names[np.asarray(result == item)] = name
    return names.astype(str)

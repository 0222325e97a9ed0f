"""The checks the bootstrap and the profiles share: an estimator and its own successful fit."""

import numpy as np

from ..estimators import AbstractEstimator, AbstractFit, WENDyFit
from ..model import ODEModel


def check_fit(estimator: AbstractEstimator, fit: AbstractFit, what: str) -> None:
    """`fit` is a successful fit of an `ODEModel` by `estimator` (the same method: a WENDy fit
    of noiseless data that ran as WLS counts as its estimator's); `what` names the caller."""
    if not isinstance(estimator, AbstractEstimator):
        raise TypeError(f"estimator must be a wendyjax estimator (e.g. wj.MLE()), got {estimator!r}.")
    if not isinstance(fit, AbstractFit):
        raise TypeError(f"fit must be the result of estimator.fit(...), got {type(fit).__name__}.")
    if not isinstance(fit.model, ODEModel) or np.ndim(fit.params) != 1:
        raise TypeError(f"{what} works on fits of an ODEModel; the fit is of {type(fit.model).__name__}.")
    same = fit.method == estimator.method or (isinstance(fit, WENDyFit) and fit.method == "wls"
                                              and isinstance(fit, estimator.fit_type))
    if not same:
        raise ValueError(f"the fit was made by {fit.title} but the estimator is {type(estimator).__name__}: pass the "
                         f"estimator that made the fit.")
    if not fit.successful:
        raise ValueError(f"the fit did not succeed ({fit.status_name}): there is no estimate for {what}.")

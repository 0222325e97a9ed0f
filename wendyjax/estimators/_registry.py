"""The one name → estimator registry, used by the studies and the command line."""

from ._base import AbstractEstimator
from ._integral_matching import IntegralMatching
from ._output_error import Hybrid, OutputError
from ._wendy import IRLS, MLE, WLS

#: Estimators that can be made from their name alone, with default options.
ESTIMATORS: dict[str, type[AbstractEstimator]] = {
    "mle": MLE,
    "irls": IRLS,
    "wls": WLS,
    "output_error": OutputError,
    "hybrid": Hybrid,
    "integral_matching": IntegralMatching,
}


def get_estimator(estimator: "str | AbstractEstimator") -> AbstractEstimator:
    """`estimator` itself, or the estimator registered under that name (default options)."""
    if isinstance(estimator, AbstractEstimator):
        return estimator
    if isinstance(estimator, str) and estimator.lower() in ESTIMATORS:
        return ESTIMATORS[estimator.lower()]()
    raise ValueError(
        f"estimator must be one of {', '.join(map(repr, ESTIMATORS))} or an estimator object "
        f"(e.g. wendyjax.MLE(start='both')), got {estimator!r}."
    )

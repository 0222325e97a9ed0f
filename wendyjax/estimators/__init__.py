"""WENDy estimators (WLS, IRLS, MLE), the bounded trust-region solver and fit results."""

from ._result import WENDyFit as WENDyFit
from ._results import RESULTS as RESULTS
from ._trust_region import TrustRegionSolution as TrustRegionSolution, bounded_trust_region as bounded_trust_region
from ._wendy import (
    IRLS as IRLS,
    MLE as MLE,
    WLS as WLS,
    AbstractWENDyEstimator as AbstractWENDyEstimator,
    Solution as Solution,
)

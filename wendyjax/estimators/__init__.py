"""Estimators: one contract ([`AbstractEstimator`][]: `problem`, `init`, `solve`,
`covariance`, and the shared `fit`) implemented by WENDy (WLS, IRLS, MLE), output error,
the WENDy → output-error hybrid and integral matching on LGR collocation; the solver
objects (the bounded trust region, integral matching's least squares and gradient loop);
fit results; the name → estimator registry."""

from .._results import RESULTS as RESULTS, status_names as status_names
from ._base import AbstractEstimator as AbstractEstimator, check_start as check_start, model_box as model_box
from ._im_solvers import Gradient as Gradient, GradientState as GradientState, LeastSquares as LeastSquares
from ._integral_matching import (
    IntegralMatching as IntegralMatching,
    IntegralMatchingData as IntegralMatchingData,
    IntegralMatchingFit as IntegralMatchingFit,
    IntegralMatchingProblem as IntegralMatchingProblem,
    collocation_residuals as collocation_residuals,
    integral_matching_loss as integral_matching_loss,
    integral_matching_problem as integral_matching_problem,
)
from ._output_error import (
    Hybrid as Hybrid,
    HybridProblem as HybridProblem,
    OutputError as OutputError,
    OutputErrorProblem as OutputErrorProblem,
    output_error_problem as output_error_problem,
    stack_problems as stack_problems,
)
from ._registry import ESTIMATORS as ESTIMATORS, get_estimator as get_estimator
from ._result import (
    AbstractFit as AbstractFit,
    Identifiability as Identifiability,
    OutputErrorFit as OutputErrorFit,
    WENDyFit as WENDyFit,
)
from ._solution import Solution as Solution
from ._trust_region import TrustRegion as TrustRegion, TrustRegionSolution as TrustRegionSolution
from ._wendy import IRLS as IRLS, MLE as MLE, WLS as WLS, AbstractWENDyEstimator as AbstractWENDyEstimator

"""Equation discovery by sparse state and parameter regression (Meissner & Glasner 2024): states and
library coefficients fitted jointly (Levenberg–Marquardt on a star-coloured sparse Hessian),
terms selected by drop-k subset search scored by BIC or AIC; an estimator of the common
contract (`StateParameterRegression().fit(library, data)`, its `solve` jit- and vmap-able)."""

from ._colouring import star_colouring as star_colouring
from ._levenberg_marquardt import LevenbergMarquardt as LevenbergMarquardt, LMSolution as LMSolution
from ._problem import (
    HESSIAN_KINDS as HESSIAN_KINDS,
    DiscoveryProblem as DiscoveryProblem,
    discovery_problem as discovery_problem,
    objective as objective,
    residual as residual,
)
from ._regression import (
    SearchProblem as SearchProblem,
    StateParameterRegression as StateParameterRegression,
    drop_terms as drop_terms,
)
from ._result import Candidate as Candidate, Discovery as Discovery, SearchHistory as SearchHistory
from ._start import (
    fill_missing as fill_missing,
    interpolate_missing as interpolate_missing,
    leave_one_out_error as leave_one_out_error,
    smooth_missing as smooth_missing,
)

__all__ = [
    "star_colouring",
    "LevenbergMarquardt",
    "LMSolution",
    "HESSIAN_KINDS",
    "DiscoveryProblem",
    "discovery_problem",
    "objective",
    "residual",
    "SearchProblem",
    "StateParameterRegression",
    "drop_terms",
    "Candidate",
    "Discovery",
    "SearchHistory",
    "fill_missing",
    "interpolate_missing",
    "leave_one_out_error",
    "smooth_missing",
]

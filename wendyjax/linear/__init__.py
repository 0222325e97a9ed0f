"""Linear dynamical systems: B-spline bases, linear ODE models with known forcing and the
Data2LD estimator (Carey & Ramsay 2021)."""

from ._bspline import BSplineBasis as BSplineBasis, breakpoint_quadrature as breakpoint_quadrature
from ._data2ld import (
    CODE_LADDER as CODE_LADDER,
    DEFAULT_START as DEFAULT_START,
    GCV as GCV,
    AbstractContinuation as AbstractContinuation,
    Adaptive as Adaptive,
    Continuation as Continuation,
    Data2LD as Data2LD,
    Ladder as Ladder,
    Uncertainty as Uncertainty,
    criterion as criterion,
    dtheta_dy as dtheta_dy,
    fitted as fitted,
    residuals as residuals,
    residuals_and_jacobian as residuals_and_jacobian,
    rho_of as rho_of,
    smooth as smooth,
    uncertainty as uncertainty,
)
from ._model import Input as Input, LinearODE as LinearODE, Pulse as Pulse, Term as Term, TimeVarying as TimeVarying
from ._problem import (
    Data2LDProblem as Data2LDProblem,
    data2ld_problem as data2ld_problem,
    penalty_matrices as penalty_matrices,
)
from ._result import Data2LDFit as Data2LDFit

__all__ = [
    "BSplineBasis",
    "breakpoint_quadrature",
    "CODE_LADDER",
    "DEFAULT_START",
    "GCV",
    "AbstractContinuation",
    "Adaptive",
    "Continuation",
    "Data2LD",
    "Ladder",
    "Uncertainty",
    "criterion",
    "dtheta_dy",
    "fitted",
    "residuals",
    "residuals_and_jacobian",
    "rho_of",
    "smooth",
    "uncertainty",
    "Input",
    "LinearODE",
    "Pulse",
    "Term",
    "TimeVarying",
    "Data2LDProblem",
    "data2ld_problem",
    "penalty_matrices",
    "Data2LDFit",
]

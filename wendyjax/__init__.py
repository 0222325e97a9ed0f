"""wendyjax: weak-form (WENDy) estimation of ODE parameters in JAX."""

from . import (
    baselines as baselines,
    collocation as collocation,
    datasets as datasets,
    discovery as discovery,
    estimators as estimators,
    inference as inference,
    library as library,
    linear as linear,
    models as models,
    neural as neural,
    studies as studies,
    weak as weak,
)
from ._compile import CPU_COMPILER_OPTIONS as CPU_COMPILER_OPTIONS
from ._experiments import Experiments as Experiments
from ._version import __version__ as __version__
from .data import (
    Batch as Batch,
    Dataset as Dataset,
    Field as Field,
    Trajectory as Trajectory,
    trapezoid_weights as trapezoid_weights,
)
from .discovery import Discovery as Discovery, StateParameterRegression as StateParameterRegression
from .estimators import (
    IRLS as IRLS,
    MLE as MLE,
    RESULTS as RESULTS,
    WLS as WLS,
    AbstractEstimator as AbstractEstimator,
    AbstractFit as AbstractFit,
    Gradient as Gradient,
    Hybrid as Hybrid,
    IntegralMatching as IntegralMatching,
    IntegralMatchingFit as IntegralMatchingFit,
    LeastSquares as LeastSquares,
    OutputError as OutputError,
    OutputErrorFit as OutputErrorFit,
    Solution as Solution,
    TrustRegion as TrustRegion,
    WENDyFit as WENDyFit,
)
from .library import FiniteDifferenceLibrary as FiniteDifferenceLibrary, PolynomialLibrary as PolynomialLibrary
from .linear import (
    BSplineBasis as BSplineBasis,
    Data2LD as Data2LD,
    Data2LDFit as Data2LDFit,
    LinearODE as LinearODE,
    Pulse as Pulse,
)
from .model import ODEModel as ODEModel
from .noise import (
    AbstractCountNoise as AbstractCountNoise,
    AbstractNoise as AbstractNoise,
    AdditiveGaussian as AdditiveGaussian,
    LogNormal as LogNormal,
    NegativeBinomial as NegativeBinomial,
    Poisson as Poisson,
    estimate_noise_std as estimate_noise_std,
)
from .simulate import integrate as integrate, simulate as simulate, solve as solve
from .weak import (
    TestFunctionConfig as TestFunctionConfig,
    WeakLikelihood as WeakLikelihood,
    weak_likelihood as weak_likelihood,
)


def __getattr__(name):
    # `wj.plot` imports matplotlib, `wj.petab` the petab extra: loaded on first use, not with the package.
    if name in ("plot", "petab"):
        import importlib

        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module 'wendyjax' has no attribute {name!r}")

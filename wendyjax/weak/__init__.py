"""Weak form: test functions, weak residual, covariance and the weak likelihood, built for
one dataset or for a batch of datasets at once."""

from ._batch import (
    NOISELESS_RATIO as NOISELESS_RATIO,
    WeakBatch as WeakBatch,
    build_batch as build_batch,
    weak_likelihood as weak_likelihood,
)
from ._covariance import blocks_to_matrix as blocks_to_matrix, covariance_blocks as covariance_blocks
from ._general import SensitivityStructure as SensitivityStructure
from ._likelihood import (
    WeakLikelihood as WeakLikelihood,
    covariance as covariance,
    nll as nll,
    nll_derivatives as nll_derivatives,
    nll_grad as nll_grad,
    nll_hessian as nll_hessian,
    pad_likelihood as pad_likelihood,
    residual as residual,
    spd_inverse as spd_inverse,
    stack_likelihoods as stack_likelihoods,
    whitened_residual as whitened_residual,
)
from ._linear import LinearBlocks as LinearBlocks
from ._problem import WeakProblem as WeakProblem, log_space_rhs as log_space_rhs
from ._test_functions import (
    RadiusSelection as RadiusSelection,
    TestFunctionConfig as TestFunctionConfig,
    TestFunctionInfo as TestFunctionInfo,
    TestFunctions as TestFunctions,
    build_test_functions as build_test_functions,
    bump as bump,
    bump_derivative as bump_derivative,
    select_radii as select_radii,
    select_radius as select_radius,
)

__all__ = [
    "NOISELESS_RATIO",
    "WeakBatch",
    "build_batch",
    "weak_likelihood",
    "blocks_to_matrix",
    "covariance_blocks",
    "SensitivityStructure",
    "WeakLikelihood",
    "covariance",
    "nll",
    "nll_derivatives",
    "nll_grad",
    "nll_hessian",
    "pad_likelihood",
    "residual",
    "spd_inverse",
    "stack_likelihoods",
    "whitened_residual",
    "LinearBlocks",
    "WeakProblem",
    "log_space_rhs",
    "RadiusSelection",
    "TestFunctionConfig",
    "TestFunctionInfo",
    "TestFunctions",
    "build_test_functions",
    "bump",
    "bump_derivative",
    "select_radii",
    "select_radius",
]

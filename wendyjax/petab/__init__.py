"""PEtab problems: read the systems-biology standard (an SBML model and tables of conditions,
observables, measurements and parameters) into JAX, evaluate its log-likelihood, and fit it
by batched multistart. Needs the `petab` extra: `pip install wendyjax[petab]`."""

try:
    import libsbml as _libsbml  # noqa: F401
    import petab.v1 as _petab  # noqa: F401
    import sbmlmath as _sbmlmath  # noqa: F401
except ImportError as error:
    raise ImportError(
        f"wendyjax.petab needs the petab extra ({error.name} is missing): pip install 'wendyjax[petab]'."
    ) from error

from ._experiments import PetabExperiments as PetabExperiments, experiments as experiments
from ._exponential import MatrixExponential as MatrixExponential
from ._multistart import MultistartResult as MultistartResult, multistart as multistart
from ._problem import PetabProblem as PetabProblem, load as load
from ._sbml import PetabError as PetabError
from ._uncertainty import Bootstrap as Bootstrap, Profile as Profile, bootstrap as bootstrap, profile as profile

__all__ = [
    "load",
    "PetabProblem",
    "PetabError",
    "MatrixExponential",
    "experiments",
    "PetabExperiments",
    "multistart",
    "MultistartResult",
    "profile",
    "Profile",
    "bootstrap",
    "Bootstrap",
]

"""Plots with matplotlib: every function draws into new axes (or the `ax`/`axes` given)
and returns `(figure, axes)`, so notebooks can restyle or save them."""

from ._fits import fit as fit, forest as forest
from ._linear import bands as bands, continuation as continuation
from ._studies import study as study
from ._training import loss_curves as loss_curves
from ._uncertainty import bootstrap as bootstrap, profiles as profiles
from ._weak import likelihood as likelihood, radius as radius, test_functions as test_functions

__all__ = [
    "fit",
    "forest",
    "bands",
    "continuation",
    "study",
    "profiles",
    "bootstrap",
    "loss_curves",
    "likelihood",
    "radius",
    "test_functions",
]

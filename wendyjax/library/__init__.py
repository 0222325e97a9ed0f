"""Libraries of candidate terms for equation discovery and integral matching."""

from ._base import AbstractLibrary as AbstractLibrary
from ._finite_difference import FiniteDifferenceLibrary as FiniteDifferenceLibrary
from ._polynomial import PolynomialLibrary as PolynomialLibrary

__all__ = [
    "AbstractLibrary",
    "FiniteDifferenceLibrary",
    "PolynomialLibrary",
]

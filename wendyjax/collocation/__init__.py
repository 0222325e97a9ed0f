"""Legendre–Gauss–Radau collocation for integral matching (Anonymous 2025): nodes, Lagrange
basis, differentiation and integration matrices, Savitzky–Golay denoising and the
projection of data onto the nodes of subintervals."""

from ._lgr import LGR as LGR, lgr_nodes as lgr_nodes
from ._smoothing import SavitzkyGolay as SavitzkyGolay, node_values as node_values

__all__ = [
    "LGR",
    "lgr_nodes",
    "SavitzkyGolay",
    "node_values",
]

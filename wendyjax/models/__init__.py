"""Model zoo: the benchmark systems of the papers with their protocols (ODEs), and reference
solutions of the papers' PDEs."""

from ._pde import allen_cahn_2d as allen_cahn_2d, kuramoto_sivashinsky as kuramoto_sivashinsky
from ._zoo import (
    Benchmark as Benchmark,
    duffing as duffing,
    fitzhugh_nagumo as fitzhugh_nagumo,
    goodwin_2d as goodwin_2d,
    goodwin_3d as goodwin_3d,
    hindmarsh_rose as hindmarsh_rose,
    logistic as logistic,
    lorenz as lorenz,
    lorenz96 as lorenz96,
    lotka_volterra as lotka_volterra,
    ptb as ptb,
    rossler as rossler,
    sir_tdi as sir_tdi,
    spiral as spiral,
    van_der_pol as van_der_pol,
)

__all__ = [
    "allen_cahn_2d",
    "kuramoto_sivashinsky",
    "Benchmark",
    "duffing",
    "fitzhugh_nagumo",
    "goodwin_2d",
    "goodwin_3d",
    "hindmarsh_rose",
    "logistic",
    "lorenz",
    "lorenz96",
    "lotka_volterra",
    "ptb",
    "rossler",
    "sir_tdi",
    "spiral",
    "van_der_pol",
]

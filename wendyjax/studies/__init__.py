"""Monte Carlo coverage studies and parameter sweeps as jit-compiled chunk computations
(vmapped on GPU/TPU, sequential inside the compiled call on CPU; Rummel et al. 2025, §3.3–3.4), with
the metrics of Rummel et al. 2025, Table 1; the parametric bootstrap and the profile likelihood of a fit,
and the interval methods a study measures side by side (`monte_carlo(..., intervals=...)`)."""

from ._bootstrap import Bootstrap as Bootstrap, bootstrap as bootstrap, min_refits as min_refits
from ._engine import Cell as Cell, CellRuns as CellRuns
from ._intervals import (
    AbstractIntervals as AbstractIntervals,
    BootstrapIntervals as BootstrapIntervals,
    BootstrapOrProfile as BootstrapOrProfile,
    ProfileIntervals as ProfileIntervals,
    Wald as Wald,
)
from ._metrics import (
    coverage as coverage,
    on_bound as on_bound,
    relative_coefficient_error as relative_coefficient_error,
    relative_mse as relative_mse,
    relative_squared_bias as relative_squared_bias,
    relative_variance as relative_variance,
)
from ._profile import Profile as Profile, profile as profile
from ._study import Study as Study, monte_carlo as monte_carlo, sweep as sweep

__all__ = [
    "AbstractIntervals",
    "Wald",
    "BootstrapIntervals",
    "ProfileIntervals",
    "BootstrapOrProfile",
    "Bootstrap",
    "bootstrap",
    "min_refits",
    "Profile",
    "profile",
    "Cell",
    "CellRuns",
    "coverage",
    "on_bound",
    "relative_coefficient_error",
    "relative_mse",
    "relative_squared_bias",
    "relative_variance",
    "Study",
    "monte_carlo",
    "sweep",
]

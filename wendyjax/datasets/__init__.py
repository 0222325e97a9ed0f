"""Real datasets used by the papers, shipped with the package."""

from importlib import resources
from pathlib import Path

import numpy as np

from ..data import Trajectory
from ..linear import BSplineBasis, LinearODE, Pulse

#: Impact pulse of the head-impact data (Carey & Ramsay 2021, §4): the blow lasts from 14 to 15 ms.
IMPACT = (14.0, 15.0)


def head_impact(raw: bool = False) -> Trajectory:
    """Head acceleration of a cadaver in a simulated motorcycle crash (Schmidt, Mattern &
    Schüler 1981; the "mcycle" data of Silverman 1985), as a [`Trajectory`][wendyjax.Trajectory]:
    133 samples at 94 distinct times (ms) in [2.4, 57.6] (repeated times are replicate
    measurements), as shipped with the Data2LD MATLAB package (MIT licence). With `raw`
    the accelerations in g; otherwise that package's preprocessing used by Carey & Ramsay 2021, §4
    (`HI.m`): $y = (\\bar a_{t<14} - a)/100$, the baseline before impact removed, the sign
    flipped and the scale divided by 100."""
    with resources.files(__name__).joinpath("motorcycle_head_impact.txt").open() as f:
        table = np.loadtxt(f)
    t, acc = table[:, 1], table[:, 2]
    return Trajectory(t, acc if raw else (acc[t < IMPACT[0]].mean() - acc) / 100)


#: Published Lotka–Volterra estimates for the Hudson's Bay data (u' = (α − βv)u, v' = (−γ + δu)v,
#: u hare, v lynx, t in years): the Stan case study's posterior means with 80 % intervals
#: (Carpenter 2018) and Howard's least-squares values (Howard 2009).
HUDSON_BAY_PUBLISHED = {
    "stan_mean": (0.55, 0.028, 0.80, 0.024),
    "stan_80": ((0.47, 0.63), (0.023, 0.033), (0.69, 0.91), (0.020, 0.029)),
    "howard_least_squares": (0.55, 0.028, 0.84, 0.026),
}


def hudson_bay() -> Trajectory:
    """Hudson's Bay Company pelt counts of snowshoe hare and lynx, 1900–1920, in thousands of
    pelts, as a [`Trajectory`][wendyjax.Trajectory] with `t` in years since 1900 (21 yearly
    samples) and columns (hare, lynx): prey first, as in `wj.models.lotka_volterra()`. Source:
    P. Howard, "Modeling basics", lecture notes, Texas A&M University (2009), as tabulated in
    B. Carpenter's Stan case study "Predator-prey population dynamics: the Lotka-Volterra model
    in Stan" (2018); published estimates in `HUDSON_BAY_PUBLISHED`. Counts are positive, so
    log-normal noise fits them; 21 samples are just above WENDy's floor (15 per trajectory,
    for the noise estimate)."""
    with resources.files(__name__).joinpath("hudson_bay_lynx_hare.csv").open() as f:
        rows = [line.strip().split(",") for line in f if line.strip() and not line.startswith("#")]
    columns = {name: np.array([float(r[i]) for r in rows[1:]]) for i, name in enumerate(rows[0])}
    return Trajectory(columns["year"] - 1900.0, np.c_[columns["hare"], columns["lynx"]])


#: Boys at the school in the 1978 influenza outbreak (`boarding_school`).
BOARDING_SCHOOL_N = 763

#: Published SIR estimates for the boarding-school outbreak (S' = −βSI/N, I' = βSI/N − γI,
#: R' = γI, N = 763, t in days): Murray 2002, §10.2's least squares and the Stan case study's
#: posterior means under negative-binomial noise (Grinsztajn et al. 2021).
BOARDING_SCHOOL_PUBLISHED = {
    "murray_least_squares": {"beta": 1.66, "gamma": 0.44, "R0": 3.8},
    "stan_negative_binomial": {"beta": 1.73, "gamma": 0.54},
}


def boarding_school() -> Trajectory:
    """The influenza outbreak in a boys' boarding school in the north of England, January
    1978: the number of the 763 boys confined to bed on each of 14 days, as a
    [`Trajectory`][wendyjax.Trajectory] with `t` the day (1 to 14, day 1 = 22 January) and
    columns (S, I, R) of which only I (the boys in bed) is observed: S and R are NaN. Source:
    "Influenza in a boarding school", British Medical Journal 1978, 1(6112):587; tabulated in
    Murray 2002, *Mathematical Biology I*, §10.2, in the R package outbreaks
    (`influenza_england_1978_school`) and in Grinsztajn et al. 2021's Stan case study;
    published estimates in `BOARDING_SCHOOL_PUBLISHED`. Only a state of three observed, on
    14 samples: output error fits it (WENDy needs every state observed)."""
    with resources.files(__name__).joinpath("boarding_school_influenza_1978.csv").open() as f:
        rows = [line.strip().split(",") for line in f if line.strip() and not line.startswith("#")]
    day = np.array([float(r[0]) for r in rows[1:]])
    in_bed = np.array([float(r[2]) for r in rows[1:]])
    u = np.full((len(day), 3), np.nan)
    u[:, 1] = in_bed
    return Trajectory(day, u)


#: AMICI's log-likelihood of `boehm_petab()` at its nominal parameters (AMICI-dev/AMICI's test
#: suite, tests/benchmark_models/benchmark_models.yaml).
BOEHM_AMICI_LOG_LIKELIHOOD = -138.22199693517703


def boehm_petab() -> Path:
    """The YAML file of the PEtab problem of Boehm et al. 2014 (J. Proteome Res.), for
    [`wendyjax.petab.load`][]: STAT5 dimerisation, 8 states, 9 estimated parameters (log10
    scale), 48 measurements of 3 observables. The PEtab benchmark collection's copy
    (Benchmarking-Initiative/Benchmark-Models-PEtab, BSD-3-Clause: `petab/LICENSE` beside
    it), unchanged; AMICI's value at the nominal parameters is
    `BOEHM_AMICI_LOG_LIKELIHOOD`."""
    return Path(str(resources.files(__name__).joinpath("petab/Boehm_JProteomeRes2014/Boehm_JProteomeRes2014.yaml")))


def head_impact_model() -> LinearODE:
    r"""Carey & Ramsay 2021, eq. (2) in the Data2LD code's sign convention:
    $D^2x = \beta_0 x + \beta_1 Dx + \alpha u$, $u$ the unit pulse on [14, 15) ms."""
    return LinearODE.scalar(2, ["beta0", "beta1"], [(Pulse(*IMPACT), "alpha")], name="head_impact")


#: θ = (β₀, β₁, α) of the simulation model Carey & Ramsay 2021, eq. (14).
SIMULATION_THETA = (-0.05, -0.15, 0.39)


def head_impact_solution(t, theta=SIMULATION_THETA) -> np.ndarray:
    r"""Exact solution of $D^2x = \beta_0x + \beta_1Dx + \alpha u$ from rest, $u$ the unit
    pulse on [14, 15) (Carey & Ramsay 2021, eq. 14 at the default θ; under-damped: needs
    $\beta_1^2/4 < -\beta_0$): $x(t) = g(t-14) - g(t-15)$ with the step response
    $g(s) = \frac{\alpha}{k}[1 - e^{-\lambda s}(\cos\omega s + \frac{\lambda}{\omega}\sin\omega s)]$,
    $k = -\beta_0$, $\lambda = -\beta_1/2$, $\omega = \sqrt{k - \lambda^2}$."""
    beta0, beta1, alpha = (float(v) for v in theta)
    k, lam = -beta0, -beta1 / 2
    if not k - lam**2 > 0:
        raise ValueError(f"theta = {tuple(theta)} is not under-damped (need beta1^2/4 < -beta0).")
    omega = np.sqrt(k - lam**2)

    def step(s):
        s = np.maximum(s, 0.0)
        return alpha / k * (1 - np.exp(-lam * s) * (np.cos(omega * s) + lam / omega * np.sin(omega * s)))

    t = np.asarray(t, dtype=float)
    return step(t - IMPACT[0]) - step(t - IMPACT[1])


def head_impact_basis(start: float = 2.4, stop: float = 57.6, order: int = 6, n_after: int = 11) -> BSplineBasis:
    """The B-spline basis of Carey & Ramsay 2021, §4 on `[start, stop]`: a triple break at the impact (14)
    and at impact + 1 (15), none before the impact and `n_after` equally spaced breaks
    from 15 to `stop` (the code's `HI.m`: 17 breaks, K = 21 at order 6). Order 6 is the
    code's; with the code's ρ ladder it reproduces §4 (θ̂ and df ≈ 2.5), while the order 5
    of the text lets $D^2x$ jump at the pulse edges (the docs' Carey & Ramsay 2021 page
    compares both)."""
    a, b = IMPACT
    return BSplineBasis([start, a, a, a, b, b, *np.linspace(b, stop, n_after)], order=order)


__all__ = [
    "BOEHM_AMICI_LOG_LIKELIHOOD",
    "boehm_petab",
    "BOARDING_SCHOOL_N",
    "BOARDING_SCHOOL_PUBLISHED",
    "boarding_school",
    "HUDSON_BAY_PUBLISHED",
    "hudson_bay",
    "IMPACT",
    "SIMULATION_THETA",
    "head_impact",
    "head_impact_model",
    "head_impact_solution",
    "head_impact_basis",
]

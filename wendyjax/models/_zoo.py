"""Benchmark systems of the papers, each with its protocol (truth, grid, noise, box)."""

import dataclasses
from collections.abc import Mapping

import diffrax
import equinox as eqx
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, Int

from .._checks import as_count, as_key, as_ode_solver, as_ratio
from .._typing import ArrayLike, KeyLike
from ..data import Trajectory
from ..model import ODEModel
from ..noise import AbstractCountNoise, AbstractNoise, AdditiveGaussian, LogNormal
from ..simulate import simulate


class Benchmark(eqx.Module):
    """A model with the protocol a paper uses for it.

    `model` (its `bounds` are the paper's parameter box), `p_true`, `u0`, the full sample
    grid `t`, the default `noise` and the ODE `solver` used for ground truth.
    """

    model: ODEModel
    p_true: Float[Array, " j"]
    u0: Float[Array, " d"]
    t: Float[Array, " n"]
    noise: AbstractNoise | AbstractCountNoise
    solver: diffrax.AbstractSolver
    source: str = eqx.field(static=True)

    def __check_init__(self):
        as_ode_solver("solver", self.solver)

    def fix(self, values: "Mapping[str, float] | None" = None, /, **named: float) -> "Benchmark":
        """This benchmark with some parameters held (by name, as
        [`ODEModel.fix`][wendyjax.ODEModel.fix]): its model and `p_true` are the other
        parameters', and data are simulated with the held values, so that a study of it
        (`monte_carlo`, `sweep`) is the study of the problem with those parameters known."""
        held = self.model.fix(values, **named)
        names = self.model.param_names
        free = [names.index(n) for n in held.param_names]
        return dataclasses.replace(self, model=held, p_true=jnp.asarray(self.p_true)[jnp.asarray(free)])

    def simulate(
        self,
        key: KeyLike | None,
        noise_ratio: float | ArrayLike | None = None,
        subsample: int | np.integer | Int[Array, ""] = 1,
        p: ArrayLike | None = None,
    ) -> Trajectory:
        """Noisy data on the protocol grid (every `subsample`-th point), at `p_true` unless
        `p` is given; `noise_ratio=0` gives the noiseless trajectory. `key`: a PRNG key or
        an integer seed.

        Under log-normal noise, samples with a non-positive state (e.g. SIR-TDI's
        u(0) = (1, 0, 0)) carry no information in log space and are dropped, as WENDy.jl
        does."""
        key = None if key is None else as_key(key)
        subsample = as_count("subsample", subsample, 1)
        noise = self.noise
        if noise_ratio is not None:
            if isinstance(noise, AbstractCountNoise):
                raise ValueError(
                    f"noise_ratio scales additive or log-normal noise; {self.model.name}'s "
                    f"{type(noise).__name__} counts have none (leave noise_ratio=None)."
                )
            noise = dataclasses.replace(noise, noise_ratio=as_ratio("noise_ratio", noise_ratio, zero_ok=True))
        t = np.asarray(self.t)[::subsample]
        p = self.p_true if p is None else p
        data = simulate(
            self.model,
            p,
            self.u0,
            t,
            None if isinstance(noise, AbstractNoise) and noise.noise_ratio == 0 else noise,
            key,
            solver=self.solver,
        )
        if noise.log_space:
            keep = np.all(np.asarray(data.u) > 0, axis=1)
            data = Trajectory(np.asarray(data.t)[keep], np.asarray(data.u)[keep])
        return data


def _grid(t1: float, n: int = 1025, t0: float = 0.0):
    return jnp.linspace(t0, t1, n)


def _logistic_rhs(u, p, t):
    return p[0] * u + p[1] * u**2


def logistic() -> Benchmark:
    """Logistic growth u' = p1 u + p2 u² (Rummel et al. 2025, eq. 21), p* = (1, -1), 10 % additive noise.

    Rummel et al. 2025, Table 2 prints the box of p2 as [0, 10], which excludes p2* = -1; the box
    here is [-10, 0]."""
    model = ODEModel(
        _logistic_rhs,
        ["u"],
        ["p1", "p2"],
        bounds=([0.0, -10.0], [10.0, 0.0]),
        name="logistic",
    )
    return Benchmark(
        model,
        jnp.array([1.0, -1.0]),
        jnp.array([0.01]),
        _grid(10.0),
        AdditiveGaussian(0.1),
        diffrax.Tsit5(),
        "Rummel et al. 2025, Table 2",
    )


def _lotka_volterra_rhs(u, p, t):
    x, y = u
    return jnp.stack([p[0] * x - p[1] * x * y, -p[2] * y + p[3] * x * y])


def lotka_volterra() -> Benchmark:
    """Lotka–Volterra x' = p1 x - p2 x y, y' = -p3 y + p4 x y (Bortz et al. 2023; p* = (3, 1, 6, 1))."""
    model = ODEModel(
        _lotka_volterra_rhs, ["x", "y"], ["p1", "p2", "p3", "p4"], bounds=([0.0] * 4, [10.0] * 4), name="lotka_volterra"
    )
    return Benchmark(
        model,
        jnp.array([3.0, 1.0, 6.0, 1.0]),
        jnp.array([1.0, 1.0]),
        jnp.linspace(0.0, 5.0, 1025),
        AdditiveGaussian(0.05),
        diffrax.Tsit5(),
        "Bortz et al. 2023, Table 1 (MATLAB get_ode_features)",
    )


def _lorenz_rhs(u, p, t):
    x, y, z = u
    return jnp.stack([p[0] * (y - x), x * (p[1] - z) - y, x * y - p[2] * z])


def lorenz() -> Benchmark:
    """Lorenz (Rummel et al. 2025, eq. 23): p* = (10, 28, 8/3), u0 = (2, 1, 1), t ∈ [0, 10], 10 % additive."""
    model = ODEModel(
        _lorenz_rhs,
        ["x", "y", "z"],
        ["sigma", "rho", "beta"],
        bounds=([0.0, 0.0, 0.0], [20.0, 35.0, 5.0]),
        name="lorenz",
    )
    return Benchmark(
        model,
        jnp.array([10.0, 28.0, 8.0 / 3.0]),
        jnp.array([2.0, 1.0, 1.0]),
        _grid(10.0),
        AdditiveGaussian(0.1),
        diffrax.Tsit5(),
        "Rummel et al. 2025, Table 2",
    )


def _fitzhugh_nagumo_rhs(u, p, t):
    x, y = u
    return jnp.stack([p[0] * x + p[1] * x**3 + p[2] * y, p[3] * x + p[4] + p[5] * y])


def fitzhugh_nagumo() -> Benchmark:
    """FitzHugh–Nagumo as coded for Bortz et al. 2023: x' = p1 x + p2 x³ + p3 y, y' = p4 x + p5 + p6 y with
    p* = (3, -3, 3, -1/3, 0.34/3, 0.2/3), u0 = (0, 0.1), t ∈ [0, 25].

    The sign of p6* is that of the authors' MATLAB code (get_ode_features), which produced
    Bortz et al. 2023's figures; the textbook model y' = -(x - a + b y)/c has -0.2/3. Both oscillate."""
    model = ODEModel(_fitzhugh_nagumo_rhs, ["x", "y"], [f"p{i}" for i in range(1, 7)], name="fitzhugh_nagumo")
    p = jnp.array([3.0, -3.0, 3.0, -1.0 / 3.0, 0.34 / 3.0, 0.2 / 3.0])
    return Benchmark(
        model,
        p,
        jnp.array([0.0, 0.1]),
        jnp.linspace(0.0, 25.0, 1025),
        AdditiveGaussian(0.05),
        diffrax.Tsit5(),
        "Bortz et al. 2023, Table 1 (MATLAB get_ode_features)",
    )


def _goodwin_2d_rhs(u, p, t):
    return jnp.stack([p[0] / (36.0 + p[1] * u[1]) - p[2], p[3] * u[0] - p[4]])


def goodwin_2d() -> Benchmark:
    """Goodwin 2-D (Rummel et al. 2025, eq. 24): u1' = p1/(36 + p2 u2) - p3, u2' = p4 u1 - p5; NiP."""
    model = ODEModel(
        _goodwin_2d_rhs,
        ["u1", "u2"],
        [f"p{i}" for i in range(1, 6)],
        bounds=([60.0, 1.0, 0.5, 0.5, 0.5], [80.0, 3.0, 3.0, 3.0, 3.0]),
        name="goodwin_2d",
    )
    return Benchmark(
        model,
        jnp.array([72.0, 1.0, 2.0, 1.0, 1.0]),
        jnp.array([7.0, -10.0]),
        _grid(60.0),
        AdditiveGaussian(0.1),
        diffrax.Tsit5(),
        "Rummel et al. 2025, Table 2",
    )


def _goodwin_3d_rhs(u, p, t):
    return jnp.stack(
        [
            p[0] / (2.15 + p[2] * u[2] ** p[3]) - p[1] * u[0],
            p[4] * u[0] - p[5] * u[1],
            p[6] * u[1] - p[7] * u[2],
        ]
    )


def goodwin_3d() -> Benchmark:
    """Goodwin 3-D (Rummel et al. 2025, eq. 25): u1' = p1/(2.15 + p3 u3^p4) - p2 u1, u2' = p5 u1 - p6 u2,
    u3' = p7 u2 - p8 u3; NiP, log-normal noise.

    Table 2 lists seven values for eight parameters; WENDy.jl's example writes the
    denominator as w3 + u3^w4 with w3 = 2.15, which in this form is p3* = 1."""
    model = ODEModel(
        _goodwin_3d_rhs,
        ["u1", "u2", "u3"],
        [f"p{i}" for i in range(1, 9)],
        bounds=([1.0, 0.0, 0.0, 5.0, 0.0, 0.0, 0.0, 0.0], [5.0, 0.2, 2.0, 15.0, 0.2, 0.2, 0.2, 0.2]),
        name="goodwin_3d",
        noise="lognormal",
    )
    p = jnp.array([3.4884, 0.0969, 1.0, 10.0, 0.0969, 0.0581, 0.0969, 0.0775])
    return Benchmark(
        model,
        p,
        jnp.array([0.3617, 0.9137, 1.3934]),
        _grid(80.0),
        LogNormal(0.05),
        diffrax.Kvaerno5(),
        "Rummel et al. 2025, Table 2; WENDy.jl examples/odes/goodwin.jl",
    )


def _hindmarsh_rose_rhs(u, p, t):
    x, y, z = u
    return jnp.stack(
        [
            p[0] * y - p[1] * x**3 + p[2] * x**2 - p[3] * z,
            p[4] - p[5] * x**2 - p[6] * y,
            p[7] * x + p[8] - p[9] * z,
        ]
    )


def hindmarsh_rose() -> Benchmark:
    """Hindmarsh–Rose (Rummel et al. 2025, eq. 22, signs as in Bortz et al. 2023's code): LiP, 10 parameters."""
    model = ODEModel(
        _hindmarsh_rose_rhs,
        ["x", "y", "z"],
        [f"p{i}" for i in range(1, 11)],
        bounds=([0.0] * 10, [20, 20, 60, 20, 20, 100, 20, 1, 1, 1]),
        name="hindmarsh_rose",
    )
    p = jnp.array([10.0, 10.0, 30.0, 10.0, 10.0, 50.0, 10.0, 0.04, 0.0319, 0.01])
    return Benchmark(
        model,
        p,
        jnp.array([-1.31, -7.6, -0.2]),
        _grid(10.0),
        AdditiveGaussian(0.1),
        diffrax.Tsit5(),
        "Rummel et al. 2025, Table 2",
    )


def _sir_tdi_rhs(u, p, t):
    e = jnp.exp(-p[0] * p[1])
    beta = p[0] * e / (1.0 - e)
    waning = p[3] * (1.0 - jnp.exp(-p[4] * t**2)) * u[1]
    return jnp.stack(
        [
            -p[0] * u[0] + p[2] * u[1] + beta * u[2],
            p[0] * u[0] - p[2] * u[1] - waning,
            waning - beta * u[2],
        ]
    )


def sir_tdi() -> Benchmark:
    r"""SIR with time-delayed immunity (Rummel et al. 2025, eq. 26): NiP, 10 % log-normal noise, bounded.

    $\beta(p) = p_1 e^{-p_1 p_2}/(1 - e^{-p_1 p_2})$;
    $u_1' = -p_1u_1 + p_3u_2 + \beta u_3$,
    $u_2' = p_1u_1 - p_3u_2 - p_4(1 - e^{-p_5t^2})u_2$,
    $u_3' = p_4(1 - e^{-p_5t^2})u_2 - \beta u_3$.
    Rummel et al. 2025, Table 2 prints $p_1^* = 1.99$, outside its own box $[10^{-4}, 1]$; the paper's
    scripts (nrummel/rummelWENDy2025, odes/sir.jl) and WENDy.jl's example use
    $p_1^* = 0.2$, which is used here."""
    model = ODEModel(
        _sir_tdi_rhs,
        ["S", "I", "R"],
        ["h", "tau", "rho", "R0", "v"],
        bounds=([1e-4] * 5, [1.0, 2.0, 1.0, 1.0, 1.0]),
        name="sir_tdi",
        noise="lognormal",
    )
    p = jnp.array([0.2, 1.5, 0.074, 0.113, 0.0024])
    return Benchmark(
        model,
        p,
        jnp.array([1.0, 0.0, 0.0]),
        _grid(50.0),
        LogNormal(0.1),
        diffrax.Kvaerno5(),
        "Rummel et al. 2025, eq. 26, Table 2 (p1* from the paper's scripts)",
    )


_PTB_KM = 0.3  # K_m, fixed in Bortz et al. 2023's MATLAB code


def _ptb_rhs(u, p, t):
    s, ds, r, rs, rpp = u
    mm = rpp / (_PTB_KM + rpp)
    return jnp.stack(
        [
            -p[0] * s - p[1] * s * r + p[2] * rs,
            p[3] * s,
            -p[4] * s * r + p[5] * rs + p[6] * mm,
            p[7] * s * r - p[8] * rs,
            p[9] * rs - p[10] * mm,
        ]
    )


def ptb() -> Benchmark:
    r"""PTB signalling model of Bortz et al. 2023 ("biochemM1" in the MATLAB code, $K_m = 0.3$ fixed):
    $S' = -p_1S - p_2SR + p_3RS$, $dS' = p_4S$,
    $R' = -p_5SR + p_6RS + p_7R_{pp}/(K_m + R_{pp})$, $RS' = p_8SR - p_9RS$,
    $R_{pp}' = p_{10}RS - p_{11}R_{pp}/(K_m + R_{pp})$; LiP with 11 parameters."""
    model = ODEModel(_ptb_rhs, ["S", "dS", "R", "RS", "Rpp"], [f"p{i}" for i in range(1, 12)], name="ptb")
    p = jnp.array([0.07, 0.6, 0.35, 0.07, 0.6, 0.05, 0.017, 0.6, 0.35, 0.3, 0.017])
    return Benchmark(
        model,
        p,
        jnp.array([1.0, 0.0, 1.0, 0.0, 1.0]),
        jnp.linspace(0.0, 25.0, 1025),
        AdditiveGaussian(0.05),
        diffrax.Kvaerno5(),
        "Bortz et al. 2023 (MATLAB get_ode_features, biochemM1)",
    )


def _rossler_rhs(u, p, t):
    x, y, z = u
    return jnp.stack([-y - z, x + p[0] * y, p[1] + z * x - p[2] * z])


def rossler() -> Benchmark:
    """Rössler (1976): x' = -y - z, y' = x + a y, z' = b + z (x - c), (a, b, c) = (0.2, 0.2, 5.7);
    t ∈ [0, 40] with Δt = 0.01 as in Anonymous 2025, §4 (which states no parameters or initial
    condition: the classical chaotic values and u0 = (1, 1, 1) are used)."""
    model = ODEModel(
        _rossler_rhs, ["x", "y", "z"], ["a", "b", "c"], bounds=([0.0, 0.0, 0.0], [1.0, 1.0, 10.0]), name="rossler"
    )
    return Benchmark(
        model,
        jnp.array([0.2, 0.2, 5.7]),
        jnp.array([1.0, 1.0, 1.0]),
        _grid(40.0, 4001),
        AdditiveGaussian(0.05),
        diffrax.Tsit5(),
        "Anonymous 2025, §4 (classical parameters)",
    )


def _duffing_rhs(u, p, t):
    x, y = u
    return jnp.stack([y, -p[0] * y - p[1] * x - p[2] * x**3])


def duffing() -> Benchmark:
    """Unforced damped Duffing oscillator x' = y, y' = -δ y - α x - β x³ with
    (δ, α, β) = (0.1, 1, 5) and u0 = (1, 0) (Anonymous 2025, §4 gives no values; degree-3 polynomial
    dynamics as there); t ∈ [0, 40], Δt = 0.01."""
    model = ODEModel(
        _duffing_rhs, ["x", "y"], ["delta", "alpha", "beta"], bounds=([0.0, 0.0, 0.0], [1.0, 5.0, 20.0]), name="duffing"
    )
    return Benchmark(
        model,
        jnp.array([0.1, 1.0, 5.0]),
        jnp.array([1.0, 0.0]),
        _grid(40.0, 4001),
        AdditiveGaussian(0.05),
        diffrax.Tsit5(),
        "Anonymous 2025, §4 (values chosen here)",
    )


def _lorenz96_rhs(u, p, t):
    return (jnp.roll(u, -1) - jnp.roll(u, 2)) * jnp.roll(u, 1) - u + p[0]


def lorenz96(n: int = 6, forcing: float = 8.0, t1: float = 10.0) -> Benchmark:
    """Lorenz-96 with `n` ≥ 4 states, x_i' = (x_{i+1} - x_{i-2}) x_{i-1} - x_i + F (cyclic);
    the parameter is F. u0 = F·1 with x_1 += 0.01 (the usual perturbation); Δt = 0.01.
    Bortz et al. 2023's MATLAB code uses n = 6, F = 8; Anonymous 2025, App. C uses F ∈ {8, 16, 32}."""
    if not isinstance(n, int) or n < 4:
        raise ValueError(f"Lorenz-96 needs an integer n >= 4 states, got {n!r}.")
    if not forcing > 0 or not t1 > 0:
        raise ValueError(f"forcing and t1 must be positive, got {forcing} and {t1}.")
    model = ODEModel(
        _lorenz96_rhs, [f"x{i}" for i in range(1, n + 1)], ["F"], bounds=([0.0], [4.0 * forcing]), name=f"lorenz96_{n}"
    )
    u0 = jnp.full(n, forcing).at[0].add(0.01)
    return Benchmark(
        model,
        jnp.array([forcing]),
        u0,
        _grid(t1, int(round(t1 / 0.01)) + 1),
        AdditiveGaussian(0.05),
        diffrax.Tsit5(),
        "Bortz et al. 2023, MATLAB code; Anonymous 2025, App. C",
    )


def _spiral_rhs(u, p, t):
    return (u**3) @ p.reshape(2, 2)


def spiral() -> Benchmark:
    """The damped spiral oscillator of Chen et al. (2018) (neural-ODE demo, Anonymous 2025, Fig. 1):
    u' = (u³) A (row vector times matrix) with A = [[-0.1, 2], [-2, -0.1]], parameters the
    entries of A row by row, u0 = (2, 0), 1000 samples on [0, 25]."""
    model = ODEModel(
        _spiral_rhs, ["x", "y"], ["a11", "a12", "a21", "a22"], bounds=([-3.0] * 4, [3.0] * 4), name="spiral"
    )
    return Benchmark(
        model,
        jnp.array([-0.1, 2.0, -2.0, -0.1]),
        jnp.array([2.0, 0.0]),
        _grid(25.0, 1000),
        AdditiveGaussian(0.05),
        diffrax.Tsit5(),
        "Chen et al. 2018 (torchdiffeq ode_demo)",
    )


def _van_der_pol_rhs(u, p, t):
    x, y = u
    return jnp.stack([y, p[0] * (1.0 - x**2) * y - x])


def van_der_pol() -> Benchmark:
    """Van der Pol x' = y, y' = μ(1 - x²) y - x with μ = 2, u0 = (0, 2), t ∈ [0, 10],
    Δt = 0.02 (Meissner & Glasner 2024, §5.1.1)."""
    model = ODEModel(_van_der_pol_rhs, ["x", "y"], ["mu"], bounds=([0.0], [10.0]), name="van_der_pol")
    return Benchmark(
        model,
        jnp.array([2.0]),
        jnp.array([0.0, 2.0]),
        _grid(10.0, 501),
        AdditiveGaussian(0.05),
        diffrax.Tsit5(),
        "Meissner & Glasner 2024, §5.1.1",
    )

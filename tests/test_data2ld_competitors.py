"""The SA and SFT competitors of the Carey & Ramsay 2021 §5 benchmark (benchmarks/_data2ld_competitors.py)."""

import importlib.util
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.integrate import solve_ivp

from wendyjax import datasets as ds, linear as L

# the benchmark's module, loaded from its file (it imports only the package and jax)
_SPEC = importlib.util.spec_from_file_location(
    "_data2ld_competitors", Path(__file__).resolve().parents[1] / "benchmarks" / "_data2ld_competitors.py"
)
assert _SPEC is not None and _SPEC.loader is not None
C = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(C)

T = np.linspace(0.0, 60.0, 51)


@pytest.mark.parametrize("theta", [(-0.05, -0.15, 0.39), (-0.01, -1.0, 0.4), (0.02, -0.1, 0.3), (0.0, 0.0, 0.4)])
def test_pulse_response_matches_the_ode(theta):
    """Under-, over-damped, unstable and β = 0 (singular A): the closed form against RK45."""

    def rhs(t, z):
        u = 1.0 if 14.0 <= t < 15.0 else 0.0
        return [z[1], theta[0] * z[0] + theta[1] * z[1] + theta[2] * u]

    ref = solve_ivp(rhs, (0, 60), [0.0, 0.0], t_eval=T, rtol=1e-11, atol=1e-13, max_step=0.05).y[0]
    got = np.asarray(C.pulse_response(jnp.asarray(theta), T))
    np.testing.assert_allclose(got, ref, atol=1e-7 * max(1.0, np.abs(ref).max()))
    if theta == (-0.05, -0.15, 0.39):
        np.testing.assert_allclose(got, ds.head_impact_solution(T), atol=1e-13)


def _problem(y):
    return L.data2ld_problem(ds.head_impact_model(), ds.head_impact_basis(0.0, 60.0, order=5), T, y)


def test_penalty_form_is_the_data2ld_penalty():
    """vᵀM(c)v with v = v₀ + Eθ equals cᵀR(θ)c + 2S(θ)ᵀc + ∫(Σλu)² from `penalty_matrices`."""
    problem = _problem(ds.head_impact_solution(T))
    rng = np.random.default_rng(0)
    for _ in range(3):
        c, theta = jnp.asarray(rng.standard_normal(problem.phi.shape[1])), jnp.asarray(rng.standard_normal(3))
        R, S, F = L.penalty_matrices(problem, theta)
        np.testing.assert_allclose(C._penalty(problem, theta, c), c @ R @ c + 2 * S @ c + F, rtol=1e-12)


def test_simulated_annealing_finds_the_least_squares_fit():
    """From the exterior start 0.01 on low-noise data, the best point visited is within a
    few standard errors of the truth and better than the start."""
    x = ds.head_impact_solution(T)
    y = jnp.asarray(x + 0.01 * np.random.default_rng(1).standard_normal(T.size))
    theta, sse, acc = C.simulated_annealing(jax.random.PRNGKey(0), T, y, jnp.full(3, 0.01), 1e-4, 3000)
    assert 0.2 < float(acc) < 0.7
    assert float(sse) < float(jnp.sum((y - C.pulse_response(jnp.full(3, 0.01), T)) ** 2))
    np.testing.assert_allclose(theta, ds.SIMULATION_THETA, atol=0.02)


def test_smooth_functional_tempering_posterior_covers_the_truth():
    """Noise-free data: the coldest chain's posterior mean is near θ and its 95 % interval
    contains it; every output is finite."""
    y = jnp.asarray(ds.head_impact_solution(T) + 0.01 * np.random.default_rng(2).standard_normal(T.size))
    mean, lower, upper, coef, swaps = C.smooth_functional_tempering(
        jax.random.PRNGKey(0), _problem(np.asarray(y)), y, jnp.full(3, 0.01), (10.0, 1e2, 1e3, 1e4), 600, 200
    )
    truth = np.array(ds.SIMULATION_THETA)
    assert np.all(np.isfinite(np.asarray(coef))) and 0 <= float(swaps) <= 1
    np.testing.assert_allclose(mean, truth, atol=0.03)
    assert np.all((np.asarray(lower) <= truth) & (truth <= np.asarray(upper)))

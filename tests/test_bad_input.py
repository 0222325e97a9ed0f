"""Bad-input paths not covered by the feature tests: each raises a clear error early."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from _zoo import zoo

import wendyjax as wj
from wendyjax.weak import build_test_functions


def _rhs(u, p, t):
    return p[0] * u


def test_model_names_and_bounds_shapes():
    with pytest.raises(ValueError, match="state_names must be a positive count"):
        wj.ODEModel(_rhs, 0, 1)
    with pytest.raises(ValueError, match="param_names must not be empty"):
        wj.ODEModel(_rhs, 1, [])
    with pytest.raises(ValueError, match=r"bounds must be a pair \(lower, upper\)"):
        wj.ODEModel(_rhs, 1, 1, bounds=([0.0], [1.0], [2.0]))


def test_trajectory_needs_two_finite_times():
    with pytest.raises(ValueError, match="at least 2 samples"):
        wj.Trajectory([0.0], [[1.0]])
    with pytest.raises(ValueError, match="t contains NaN"):
        wj.Trajectory([0.0, np.nan, 2.0], np.ones(3))


def test_noise_estimate_shape():
    with pytest.raises(ValueError, match=r"u must have shape \(M\+1, D\)"):
        wj.estimate_noise_std(np.ones((20, 2, 2)))


def test_radius_search_needs_room():
    t = np.linspace(0, 1, 7)
    with pytest.raises(ValueError, match="too few samples \\(7\\) to search for a test-function radius"):
        build_test_functions(t, np.sin(t)[:, None])


def test_prebuilt_test_functions_must_match_the_data():
    b = zoo("logistic")
    d1 = b.simulate(jax.random.key(0), subsample=8)
    d2 = b.simulate(jax.random.key(1), subsample=4)
    tf = build_test_functions(d1.t, d1.u)
    with pytest.raises(ValueError, match="got 1 sets of test functions for 2 trajectories"):
        wj.weak_likelihood(b.model, [d1, d2], test_functions=[tf])
    with pytest.raises(ValueError, match="test functions have 129 columns but the trajectory has 257"):
        wj.weak_likelihood(b.model, d2, test_functions=tf)


def test_diag_reg_range():
    b = zoo("logistic")
    d = b.simulate(jax.random.key(0), subsample=8)
    with pytest.raises(ValueError, match=r"diag_reg must lie in \[0, 1\)"):
        wj.weak_likelihood(b.model, d, diag_reg=1.0)
    assert jnp.isfinite(wj.weak_likelihood(b.model, d, diag_reg=0.0)(b.p_true))


@pytest.mark.parametrize("make, error, match", [
    (lambda: wj.MLE(solver="trust_region"), TypeError, r"MLE: solver must be a solver object such as "
                                                      r"wendyjax.estimators.TrustRegion"),
    (lambda: wj.IRLS(solver=wj.Gradient()), TypeError, "IRLS: solver must be a solver object"),
    (lambda: wj.WLS(max_steps=0), ValueError, "WLS: max_steps must be a positive integer, got 0"),
    (lambda: wj.MLE(max_steps=2.5), ValueError, "MLE: max_steps must be a positive integer, got 2.5"),
    (lambda: wj.TrustRegion(atol=float("nan")), ValueError, "TrustRegion: atol must be a finite number >= 0"),
    (lambda: wj.IntegralMatching(solver=wj.estimators.TrustRegion, max_steps=5), TypeError,
     r"solver must be LeastSquares\(\), TrustRegion\(\) or Gradient\(\)"),  # the class, not an instance
    (lambda: wj.Gradient(rtol=1.0), ValueError, r"Gradient: rtol must lie in \[0, 1\)"),
    (lambda: wj.LeastSquares(max_threshold_iter=0), ValueError, "LeastSquares: max_threshold_iter must be"),
])
def test_solver_objects_and_step_limits_are_checked_when_built(make, error, match):
    with pytest.raises(error, match=match):
        make()

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


@pytest.mark.parametrize("make, error, match", [
    # options validated when the estimator is built (negative tolerances used to run to the step limit)
    (lambda: wj.IRLS(step_tol=-1.0), ValueError, "IRLS: step_tol must be a positive number"),
    (lambda: wj.IRLS(max_iters=0), ValueError, "IRLS: max_iters must be a positive integer"),
    (lambda: wj.IRLS(shapiro_wilk=True, sw_tol=1.5), ValueError, r"IRLS: sw_tol .* must lie in \(0, 1\)"),
    (lambda: wj.MLE(solver=wj.TrustRegion(rtol=-1.0, atol=-1.0)), ValueError, "TrustRegion: rtol must be"),
    (lambda: wj.MLE(max_steps=-5), ValueError, "MLE: max_steps must be a positive integer, got -5"),
    (lambda: wj.OutputError(ode_rtol=-1.0), ValueError, r"OutputError: ode_rtol \(the ODE solver's step-size"),
    (lambda: wj.OutputError(ode_atol=float("inf")), ValueError, "OutputError: ode_atol"),
    (lambda: wj.OutputError(ode_max_steps=0), ValueError, "OutputError: ode_max_steps .* positive integer, got 0"),
    # non-real data and non-boolean masks (they used to be read as real / as "all observed")
    (lambda: wj.Trajectory(np.arange(4.0), np.ones(4) * (1 + 1j)), TypeError, "u must be real, got complex"),
    (lambda: wj.Trajectory(np.arange(4.0) + 0j, np.ones(4)), TypeError, "t must be real"),
    (lambda: wj.Trajectory(np.arange(4.0), np.ones(4), ["yes"] * 4), TypeError, "mask must be boolean"),
    (lambda: wj.Trajectory(np.arange(4.0), np.ones(4), np.full(4, 0.5)), TypeError, "hold only 0 and 1"),
    (lambda: wj.Trajectory(np.arange(4.0), np.ones(4), np.full(4, np.nan)), TypeError, "hold only 0 and 1"),
    (lambda: wj.Field(np.arange(3.0), np.ones((3, 4, 1)) * 1j), TypeError, "u must be real"),
])
def test_options_data_and_masks_are_refused_when_built(make, error, match):
    with pytest.raises(error, match=match):
        make()


def test_zero_one_masks_are_accepted():
    t = np.arange(4.0)
    assert np.array_equal(wj.Trajectory(t, np.ones(4), [1, 0, 1, 1]).mask.ravel(), [True, False, True, True])
    assert np.array_equal(wj.Trajectory(t, np.ones(4), np.array([1.0, 1, 0, 1])).mask.ravel(),
                          [True, True, False, True])


def test_a_file_that_is_not_a_saved_study_is_named(tmp_path):
    (tmp_path / "empty.json").write_text("{}")
    (tmp_path / "text.json").write_text("not json")
    with pytest.raises(ValueError, match=r"empty.json is not a saved study: it lacks model, params, cells, runs, "
                                         r"settings \(write one with Study.to_json\)"):
        wj.studies.Study.load(tmp_path / "empty.json")
    with pytest.raises(ValueError, match="text.json is not a saved study .not JSON"):
        wj.studies.Study.load(tmp_path / "text.json")


def test_k_beyond_the_samples_is_refused_before_the_solve():
    """k=5000 on 257 samples used to run the jitted solve for minutes (k=100000: a 74.5 GiB
    allocation); there cannot be more independent test functions than samples."""
    bench = zoo("lotka_volterra")
    data = bench.simulate(jax.random.key(0), 0.05, subsample=4)
    with pytest.raises(ValueError, match=r"k=5000 exceeds the 257 samples of the longest trajectory"):
        wj.MLE().fit(bench.model, data, bench.p_true, k=5000)


def test_a_failed_simulation_says_how_far_it_got_and_every_remedy():
    """u' = 5u² from 1 blows up at t = 0.2: the old message suggested only a stiff solver."""
    model = wj.ODEModel(lambda u, p, t: p[0] * u**2, ["u"], ["p"], name="blow_up")
    with pytest.raises(RuntimeError, match=r"blow_up' on \[0.0, 1.0\].*got past t = 0.1 only.*blows up in finite "
                                           r"time.*stiff.*Kvaerno5.*max_steps"):
        wj.solve(model, [5.0], [1.0], np.linspace(0, 1, 11))

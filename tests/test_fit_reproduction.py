"""A bootstrap or profile of a fit works on the fit's own problem: its data (checked by their
fingerprint), its options (reused when left out, refused when changed) and, where nothing
was recorded, the fit's objective at the estimate (checked before any refit)."""

import dataclasses
import time
import warnings

import jax
import numpy as np
import pytest
from _zoo import logistic_small_data_fixture, logistic_small_fit_fixture, zoo  # noqa: F401  (fixtures data, mle_fit)
from hypothesis import given, settings, strategies as st

import wendyjax as wj

BENCH = zoo("logistic")


@pytest.fixture(scope="module")
def other():
    return BENCH.simulate(jax.random.key(1), 0.05, subsample=16)  # the same grid, other noise


def _quick(make, error, match):
    clock = time.perf_counter()
    with pytest.raises(error, match=match):
        make()
    assert time.perf_counter() - clock < 5.0  # refused before the refits (a profile compiles for seconds)


def test_a_fit_records_its_options_and_data(data, mle_fit, other):
    fit = wj.MLE().fit(BENCH.model, data, sigma=[0.03])
    assert set(fit.options) == {"sigma"} and np.array_equal(fit.options["sigma"], [0.03])
    assert fit.data_fingerprint == wj.data.fingerprint(data) == wj.data.fingerprint([data])
    assert wj.data.fingerprint(other) != fit.data_fingerprint
    assert mle_fit.options == {}


def test_other_data_are_refused(mle_fit, other):
    for make in (
        lambda: wj.studies.bootstrap(wj.MLE(), mle_fit, other, 20, key=0, progress=False),
        lambda: wj.studies.profile(wj.MLE(), mle_fit, other, n_points=5),
        lambda: wj.studies.BootstrapOrProfile(wj.studies.BootstrapIntervals(20, kind="normal"))(
            wj.MLE(), mle_fit, other
        ),
    ):
        _quick(make, ValueError, "data are not the data the fit was made on")


def test_changed_options_are_refused_and_left_out_ones_reused(data):
    fit = wj.MLE().fit(BENCH.model, data, covariance="hessian", sigma=[0.01])
    _quick(
        lambda: wj.studies.profile(wj.MLE(), fit, data, sigma=None, n_points=5),
        ValueError,
        r"got sigma=None but the fit was made with sigma=\[0.01\]",
    )
    _quick(
        lambda: wj.studies.bootstrap(wj.MLE(), fit, data, 20, key=0, sigma=[0.02], progress=False),
        ValueError,
        r"got sigma=\[0.02\] but the fit was made with sigma=\[0.01\]",
    )
    _quick(lambda: wj.studies.profile(wj.MLE(), fit, data, kk=3), TypeError, "unknown keyword")
    _quick(
        lambda: wj.studies.profile(wj.MLE(), fit, data, noise="lognormal"),
        ValueError,
        "got noise='lognormal' but the fit was made with noise=None",
    )
    # the model's own noise named explicitly is the same option as leaving it to the model
    assert wj.studies.profile(wj.MLE(), fit, data, "p1", n_points=5, noise="gaussian")["p1"].verdict == "identifiable"
    # left out, the fit's sigma is reused: the same profile as with it repeated
    reused = wj.studies.profile(wj.MLE(), fit, data, "p1", n_points=5)["p1"]
    repeated = wj.studies.profile(wj.MLE(), fit, data, "p1", n_points=5, sigma=[0.01])["p1"]
    np.testing.assert_array_equal(reused.statistic, repeated.statistic)
    assert reused.verdict == "identifiable" and np.all(np.isfinite(reused.interval))


def _radius(fit) -> float:
    info = fit.test_functions[0]
    assert info is not None  # searched, not given
    return info.radius


def test_a_fixed_radius_is_reused(data, mle_fit):
    config = wj.TestFunctionConfig(radius=2 * _radius(mle_fit))  # a fixed radius
    fit = wj.MLE().fit(BENCH.model, data, covariance="hessian", test_functions=config)
    assert _radius(fit) != _radius(mle_fit)  # the default search picks another
    reused = wj.studies.profile(wj.MLE(), fit, data, "p1", n_points=5)["p1"]
    repeated = wj.studies.profile(wj.MLE(), fit, data, "p1", n_points=5, test_functions=config)["p1"]
    np.testing.assert_array_equal(reused.statistic, repeated.statistic)
    assert reused.statistic[reused.grid == reused.estimate] == pytest.approx(0.0, abs=1e-9)


def test_without_records_the_objective_is_checked(data, mle_fit, other):
    bare = dataclasses.replace(mle_fit, options=None, data_fingerprint=None)  # a fit not made by estimator.fit
    for make in (
        lambda: wj.studies.profile(wj.MLE(), bare, other, n_points=5),
        lambda: wj.studies.bootstrap(wj.MLE(), bare, other, 20, key=0, progress=False),
        lambda: wj.studies.profile(wj.MLE(), bare, data, n_points=5, sigma=[0.3]),
    ):
        _quick(make, ValueError, r"has objective .* at the estimate, but the fit's is")
    assert np.isfinite(wj.studies.profile(wj.MLE(), bare, data, "p1", n_points=5)["p1"].interval).all()


def test_output_error_profiles_check_their_objective(data, mle_fit, other):
    oe = wj.OutputError().fit(BENCH.model, data, mle_fit.params)
    assert oe.options == {}
    bare = dataclasses.replace(oe, options=None, data_fingerprint=None)
    _quick(
        lambda: wj.studies.profile(wj.OutputError(), bare, other, n_points=5),
        ValueError,
        "has objective .* at the estimate",
    )
    _quick(
        lambda: wj.studies.profile(wj.OutputError(), oe, data, weighted=False, n_points=5),
        ValueError,
        "got weighted=False but the fit was made with weighted=True",
    )


# --- profiles of estimates that do not minimise the profiled objective ------------------------


def test_profiles_of_wls_and_irls_are_refused(data):
    wls = wj.WLS().fit(BENCH.model, data)
    _quick(lambda: wj.studies.profile(wj.WLS(), wls, data), TypeError, "the WLS estimate does not")
    _quick(lambda: wj.studies.ProfileIntervals()(wj.WLS(), wls, data), TypeError, "Profile an MLE fit")
    _quick(
        lambda: wj.studies.monte_carlo(
            BENCH, "irls", n_runs=2, intervals=[wj.studies.ProfileIntervals()], progress=False
        ),
        TypeError,
        "the IRLS estimate does not",
    )


def test_a_fit_that_stopped_short_gives_a_warned_re_centred_profile(data, mle_fit):
    shift = 0.6 * mle_fit.stderr[0]  # p1 moved off the optimum by 0.6 standard errors, the others refitted
    v = mle_fit.params[0] + shift
    with pytest.warns(RuntimeWarning, match="lies on the box's bound"):  # held there
        held = wj.MLE().fit(
            BENCH.model, data, np.r_[v, mle_fit.params[1]], bounds=(np.r_[v, -np.inf], np.r_[v, np.inf])
        )
    short = dataclasses.replace(mle_fit, params=held.params, objective=held.objective)  # "converged" off the optimum
    grid = {"p1": np.linspace(mle_fit.params[0] - 4 * mle_fit.stderr[0], mle_fit.params[0] + 4 * mle_fit.stderr[0], 17)}
    grid["p1"] = np.sort(np.r_[grid["p1"], held.params[0]])
    with pytest.warns(RuntimeWarning, match="the profile of p1 goes below the fit's objective"):
        prof = wj.studies.profile(wj.MLE(), short, data, "p1", grid=grid)["p1"]
    proper_grid = {"p1": grid["p1"][grid["p1"] != held.params[0]]}
    proper = wj.studies.profile(wj.MLE(), mle_fit, data, "p1", grid=proper_grid)["p1"]
    assert prof.estimate == held.params[0] and abs(prof.centre - mle_fit.params[0]) <= np.diff(grid["p1"]).max()
    assert np.min(prof.statistic) == 0.0 and prof.verdict == "identifiable"
    # the re-centred interval is the proper fit's (both grids have the optimum's neighbours)
    np.testing.assert_allclose(prof.interval, proper.interval, atol=0.1 * mle_fit.stderr[0])


# --- bootstrap sizes and bounds ---------------------------------------------------------------


def _boot(draws, estimate, lower=None, upper=None):
    draws = np.asarray(draws, float)
    return wj.studies.Bootstrap(
        names=("a", "b")[: draws.shape[1]],
        estimate=np.asarray(estimate, float),
        draws=draws,
        status=np.full(len(draws), "successful"),
        u0=np.zeros((1, 1)),
        sigma=np.ones(1),
        noise="gaussian",
        seconds=0.0,
        lower=lower,
        upper=upper,
    )


def test_quantile_intervals_need_enough_refits(data, mle_fit):
    assert [wj.studies.min_refits(c) for c in (0.95, 0.9, 0.8, 0.5)] == [40, 20, 10, 4]
    few = _boot([[1.0], [1.2]], [1.1])
    for kind in ("percentile", "basic", "bias_corrected"):
        with pytest.warns(
            RuntimeWarning,
            match=f"bootstrap {kind.replace('_', '-')} intervals at level 0.95 need at least 40 successful refits",
        ):
            lo, hi = getattr(few, kind)(0.95)
        assert np.isnan(lo).all() and np.isnan(hi).all()
    assert np.isfinite(few.normal(0.95)).all()  # Student's t: any B >= 2
    rng = np.random.default_rng(0)
    enough = _boot(rng.normal(1.0, 0.1, (40, 1)), [1.0])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert np.isfinite(enough.percentile(0.95)).all() and np.isfinite(enough.basic(0.95)).all()
    _quick(
        lambda: wj.studies.BootstrapIntervals(2, kind="basic")(wj.MLE(), mle_fit, data),
        ValueError,
        r"BootstrapIntervals\(n_boot=2, kind='basic'\) cannot give 0.95 intervals: its quantiles need n_boot >= 40",
    )
    _quick(
        lambda: wj.studies.monte_carlo(
            BENCH, "mle", n_runs=2, progress=False, intervals=[wj.studies.BootstrapIntervals(20, kind="percentile")]
        ),
        ValueError,
        "need n_boot >= 40",
    )


def test_intervals_at_an_estimate_on_a_bound_are_open_to_it():
    rng = np.random.default_rng(1)
    draws = np.minimum(rng.normal(0.85, 0.05, (200, 1)), 0.9)  # refits held below the bound 0.9
    boot = _boot(draws, [0.9], lower=np.array([0.0]), upper=np.array([0.9]))
    p_lo, _ = boot.percentile(0.95)
    for kind in ("basic", "normal"):
        lo, hi = getattr(boot, kind)(0.95)
        assert hi[0] == 0.9 and lo[0] <= p_lo[0] < 0.9  # not [0.9, 0.9]
    low = _boot(1.0 - draws, [0.1], lower=np.array([0.1]), upper=np.array([1.0]))
    lo, hi = low.basic(0.95)
    assert lo[0] == 0.1 and hi[0] > 0.1


def test_interval_methods_check_level_and_estimator_before_work(data, mle_fit):
    _quick(lambda: wj.studies.BootstrapOrProfile()(wj.MLE(), mle_fit, data, level=1.5), ValueError, "level must lie")
    wls = wj.WLS().fit(BENCH.model, data)
    _quick(lambda: wj.studies.BootstrapOrProfile()(wj.WLS(), wls, data), TypeError, "Profile an MLE fit")


def test_coverage_refuses_a_meaningless_z():
    for z in (-2.0, 0.0, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="z must be a positive finite number"):
            wj.studies.coverage(np.ones((3, 1)), np.ones(1), np.ones(1), z=z)


# --- parameters on a ridge, profile grids near a bound, and sizes beyond memory ----------------


def _product_fit():
    """du/dt = a·b·u(1 − u): only the product a·b is determined (truth a = 1, b = 2)."""
    model = wj.ODEModel(
        lambda u, p, t: p[0] * p[1] * u * (1 - u), ["u"], ["a", "b"], bounds=([0.1, 0.1], [10.0, 10.0]), name="product"
    )
    t = np.linspace(0.0, 5.0, 201)
    data = wj.simulate(model, [1.0, 2.0], [0.1], t, wj.AdditiveGaussian(0.05), jax.random.key(3))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the fit says that it barely determines a and b
        return model, data, wj.MLE().fit(model, data, p0=[1.5, 1.5], covariance="hessian")


@pytest.mark.slow  # 9 s: a bootstrap of 40 refits
def test_parameters_on_a_ridge_get_no_bootstrap_interval():
    model, data, fit = _product_fit()
    assert any(set(w) == {"a", "b"} for _, w in fit.weak_directions)
    with pytest.warns(RuntimeWarning, match=r"does not determine a \(only weakly, with b\), b \(only weakly, with a\)"):
        boot = wj.studies.bootstrap(wj.MLE(), fit, data, 40, key=0, progress=False)
    assert boot.undetermined == ("a", "b")
    for kind in ("basic", "normal", "percentile", "bias_corrected"):
        assert np.isnan(getattr(boot, kind)(0.95)).all()
    assert "only weakly together" in boot.table()


def test_profile_grids_have_points_on_both_sides_within_the_box():
    model, data, fit = _product_fit()
    prof = wj.studies.profile(wj.MLE(), fit, data, "a", n_points=9)["a"]
    below, above = prof.grid[prof.grid < prof.estimate], prof.grid[prof.grid > prof.estimate]
    assert len(below) == len(above) == 4 and below.min() >= 0.1 and above.max() <= 10.0
    # the ridge: a = 1 (the truth, with b = 2) is as likely as the estimate, so the interval contains it
    assert prof.interval[0] <= 1.0 <= prof.interval[1] or prof.verdict != "identifiable"
    assert np.interp(1.0, prof.grid, prof.statistic) < prof.threshold


def test_a_bootstrap_beyond_the_hosts_memory_is_refused_before_work(data, mle_fit):
    _quick(
        lambda: wj.studies.bootstrap(wj.MLE(), mle_fit, data, 10**9, key=0, progress=False),
        ValueError,
        r"a bootstrap of 1000000000 refits would hold about .* GB of data on the host .* use fewer refits",
    )


@pytest.mark.slow  # over 7 s: the quick loop stays under 5 minutes
def test_a_bootstrap_in_blocks_draws_and_fits_what_one_block_would(monkeypatch, data, mle_fit):
    """Refits' data are drawn block by block so that memory does not grow with n_boot
    (10**6 refits were still being drawn after 90 s); each refit's draw comes from its own
    key, so blocks of 3 refits (the last one short) give the same bootstrap as one block."""
    whole = wj.studies.bootstrap(wj.MLE(), mle_fit, data, 8, key=0, progress=False)
    monkeypatch.setattr(wj.studies._bootstrap, "BLOCK_VALUES", 3 * data.u.size)
    blocks = wj.studies.bootstrap(wj.MLE(), mle_fit, data, 8, key=0, progress=False)
    assert whole.n_failed == 0 and np.ptp(whole.draws[:, 0]) > 0
    np.testing.assert_allclose(blocks.draws, whole.draws, rtol=1e-10)
    assert np.array_equal(blocks.status, whole.status)


@pytest.mark.slow
def test_a_two_trajectory_fit_is_bootstrapped_with_its_own_test_functions(data, other):
    """It failed after 12.9 s with "got 1 sets of test functions for 2 trajectories"."""
    two = [data, other]
    fit = wj.MLE().fit(BENCH.model, two, p0=[0.9, -0.9])
    boot = wj.studies.bootstrap(wj.MLE(), fit, two, 4, key=0, progress=False)
    assert boot.draws.shape == (4, 2) and boot.n_failed == 0 and boot.u0.shape == (2, 1)


# --- the bootstrap's interval rules over families of draws (hypothesis) -------------------------

_PROPERTY = settings(derandomize=True, database=None, deadline=None, max_examples=100)


@_PROPERTY
@given(b=st.integers(2, 250), level=st.sampled_from([0.5, 0.8, 0.9, 0.95, 0.99]), seed=st.integers(0, 2**16))
def test_quantile_intervals_exist_exactly_from_min_refits(b, level, seed):
    boot = _boot(np.random.default_rng(seed).normal(1.0, 0.1, (b, 2)), [1.0, 1.0])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ends = [getattr(boot, kind)(level) for kind in ("percentile", "basic", "bias_corrected")]
    for lo, hi in ends:
        assert np.all(np.isnan(lo) == (b < wj.studies.min_refits(level)))
        assert np.all(np.isnan(lo) | (lo < hi))
    assert np.all(np.isfinite(boot.normal(level)))  # any B >= 2


@_PROPERTY
@given(seed=st.integers(0, 2**16), spread=st.floats(1e-3, 1.0), upper=st.booleans())
def test_basic_and_normal_intervals_at_a_bound_never_shrink_onto_it(seed, spread, upper):
    bound, est = (0.9, 0.9) if upper else (0.1, 0.1)
    side = -1.0 if upper else 1.0
    draws = est + side * np.abs(np.random.default_rng(seed).normal(0.0, spread, (60, 1)))  # refits on one side
    boot = _boot(draws, [est], lower=np.array([0.1 if not upper else -10.0]), upper=np.array([0.9 if upper else 10.0]))
    for kind in ("basic", "normal"):
        lo, hi = getattr(boot, kind)(0.95)
        assert (hi[0] if upper else lo[0]) == bound and hi[0] - lo[0] > 0

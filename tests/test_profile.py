"""Profile likelihood (`wj.studies.profile`): intervals, verdicts and bad input."""

import dataclasses
import time
import warnings

import numpy as np
import pytest
from _typecheck import unchecked
from _zoo import logistic_small_data_fixture, logistic_small_fit_fixture, zoo  # noqa: F401  (fixtures data, mle_fit)

import wendyjax as wj

BENCH = zoo("logistic")


@pytest.mark.slow
def test_near_quadratic_profiles_give_the_wald_intervals(mle_fit, data):
    """On a well-determined fit the weak likelihood is nearly quadratic: its profile
    intervals lie within 10 % of a half-width of the inverse-Hessian ones, and output
    error's within 10 % of its Gauss-Newton ones."""
    lo, hi = mle_fit.ci()
    for j, (name, prof) in enumerate(wj.studies.profile(wj.MLE(), mle_fit, data).items()):
        assert prof.verdict == "identifiable" and prof.threshold == pytest.approx(3.841, abs=1e-3)
        half = (hi[j] - lo[j]) / 2
        assert abs(prof.interval[0] - lo[j]) < 0.1 * half and abs(prof.interval[1] - hi[j]) < 0.1 * half, name
        assert np.all(np.isin(prof.status, ("successful", "max_steps_reached")))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        oe = wj.OutputError().fit(BENCH.model, data, p0=mle_fit.params, u0=[0.01])
    lo, hi = oe.ci()
    for j, prof in enumerate(wj.studies.profile(wj.OutputError(), oe, data).values()):
        half = (hi[j] - lo[j]) / 2
        assert abs(prof.interval[0] - lo[j]) < 0.1 * half and abs(prof.interval[1] - hi[j]) < 0.1 * half


@pytest.mark.slow
def test_a_product_of_parameters_is_structurally_non_identifiable(data):
    """u' = a·b·u + c·u²: along a (b refitted) the likelihood does not change at all."""
    model = wj.ODEModel(lambda u, p, t: p[0] * p[1] * u + p[2] * u**2, ["u"], ["a", "b", "c"], name="product")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = wj.MLE().fit(model, data, [1.0, 1.0, -1.0], bounds=([0.1, 0.1, -5.0], [10.0, 10.0, 0.0]))
    profiles = wj.studies.profile(wj.MLE(), fit, data)
    assert [p.verdict for p in profiles.values()] == ["structurally non-identifiable"] * 2 + ["identifiable"]
    assert np.nanmax(profiles["a"].statistic) < 1e-6 and profiles["a"].interval == (-np.inf, np.inf)
    # a box whose low end of a needs b beyond its box: the profile rises at the edge only,
    # and is still flat over most of the grid
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = wj.MLE().fit(model, data, [1.0, 1.0, -1.0], bounds=([0.01, 0.1, -5.0], [10.0, 10.0, 0.0]))
    prof = wj.studies.profile(wj.MLE(), fit, data, "a", n_points=9)["a"]
    assert prof.statistic[0] > prof.threshold and prof.verdict == "structurally non-identifiable"


def test_a_profile_that_stays_low_within_the_box_is_practically_non_identifiable(mle_fit, data):
    """The box ends half a standard error above p̂1: on that side the profile cannot reach
    the threshold, so the upper end of the interval is unknown."""
    assert BENCH.model.bounds is not None
    lo, hi = (np.asarray(b, float) for b in BENCH.model.bounds)
    top = float(mle_fit.params[0] + 0.5 * mle_fit.stderr[0])
    held = dataclasses.replace(mle_fit, lower=lo, upper=np.r_[top, hi[1]])
    prof = wj.studies.profile(wj.MLE(), held, data, "p1")["p1"]
    assert prof.verdict == "practically non-identifiable"
    assert np.isfinite(prof.interval[0]) and prof.interval[1] == np.inf and prof.grid.max() == pytest.approx(top)


def test_an_estimate_on_a_bound_is_reported_as_such(mle_fit, data):
    assert BENCH.model.bounds is not None
    lo, hi = (np.asarray(b, float) for b in BENCH.model.bounds)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        held = wj.MLE().fit(BENCH.model, data, [0.8, -1.0], bounds=(lo, np.r_[0.9, hi[1]]), covariance="hessian")
    assert held.params[0] == 0.9
    prof = wj.studies.profile(wj.MLE(), held, data, "p1", n_points=7)["p1"]
    assert prof.verdict == "on a bound" and prof.grid.max() == 0.9 and prof.interval[1] == np.inf


def test_a_failed_refit_leaves_its_side_unknown():
    from wendyjax.studies._profile import _crossings, _verdict

    g, stat = np.array([-2.0, -1.0, 0.0, 1.0, 2.0]), np.array([8.0, 2.0, 0.0, np.nan, 8.0])
    ends = _crossings(g, stat, 0.0, 3.84)
    assert np.isfinite(ends[0]) and np.isnan(ends[1]) and _verdict(g, stat, 0.0, 3.84, ends, False) == "refits failed"


@unchecked()  # profile's own messages for wrong types (level="0.9")
def test_bad_input_is_refused_before_any_work(mle_fit, data):
    failed = dataclasses.replace(mle_fit, status=wj.RESULTS.nonlinear_divergence)
    cases = [
        (lambda: wj.studies.profile(wj.MLE(), failed, data), ValueError, "the fit did not succeed"),
        (lambda: wj.studies.profile(wj.MLE(), mle_fit, data, "k"), ValueError, r"unknown parameter\(s\) \['k'\]"),
        (
            lambda: wj.studies.profile(wj.MLE(), mle_fit, data, grid={"p1": [0.5, 20.0]}),
            ValueError,
            "grid\\['p1'\\] leaves the box",
        ),
        (lambda: wj.studies.profile(wj.MLE(), mle_fit, data, grid={"p1": [1.0]}), ValueError, "at least two"),
        (lambda: wj.studies.profile(wj.IntegralMatching(), mle_fit, data), TypeError, "profiles are for"),
        (lambda: wj.studies.profile(wj.MLE(), mle_fit, data, level=1.5), ValueError, "level must lie"),
        (lambda: wj.studies.profile(wj.MLE(), mle_fit, data, level="0.9"), ValueError, "level must be a number"),  # pyright: ignore[reportArgumentType]  # the wrong input under test
        (lambda: wj.studies.profile(wj.MLE(), mle_fit, data, width=-1.0), ValueError, "width must be"),
        (lambda: wj.studies.profile(wj.MLE(), mle_fit, data, 0), TypeError, "params must be a parameter name"),
        (
            lambda: wj.studies.profile(wj.MLE(), mle_fit, data, grid={"p9": [0.5, 1.5]}),
            ValueError,
            "grid must be a dict from the profiled parameters",
        ),
        (
            lambda: wj.studies.profile(wj.MLE(), mle_fit, data, grid={"p1": [0.5, 0.6, 0.7]}),
            ValueError,
            "has no value above the estimate",
        ),
        (
            lambda: wj.studies.profile(wj.OutputError(), mle_fit, data),
            ValueError,
            "the fit was made by WENDy-MLE but the estimator is OutputError",
        ),
    ]
    for make, error, match in cases:
        clock = time.perf_counter()
        with pytest.raises(error, match=match):
            make()
        assert time.perf_counter() - clock < 2.0

"""wendyjax.plot: every plot runs headless and draws what it says (counted artists)."""

import jax
import matplotlib
import matplotlib.pyplot as plt
import numpy as np
import pytest
from _typecheck import unchecked
from _zoo import zoo

import wendyjax as wj

matplotlib.use("Agg")


@pytest.fixture(scope="module")
def logistic():
    bench = zoo("logistic")
    data = bench.simulate(jax.random.key(0), 0.05, subsample=4)
    mle = wj.MLE().fit(bench.model, data, [0.5, -0.5])
    wls = wj.WLS().fit(bench.model, data)
    return bench, data, mle, wls


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


def test_fit_plot_draws_data_fit_and_truth_per_state(logistic):
    bench, data, mle, _ = logistic
    truth = bench.simulate(None, 0.0, subsample=4)
    fig, axes = wj.plot.fit(mle, data, truth=truth)
    assert len(axes) == bench.model.n_states == 1
    # By default the simulation starts at the (noisy) first sample.
    assert axes[0].get_lines()[1].get_ydata()[0] == pytest.approx(float(data.u[0, 0]))
    plt.close(fig)
    fig, axes = wj.plot.fit(mle, data, bench.u0, truth=truth)
    lines = axes[0].get_lines()
    assert [ln.get_label() for ln in lines] == ["data", "fit", "truth"]
    assert len(lines[0].get_xdata()) == data.n_samples
    # From the true initial state the fitted model follows the truth.
    fitted = np.interp(np.asarray(truth.t), lines[1].get_xdata(), lines[1].get_ydata())
    assert np.max(np.abs(fitted - np.asarray(truth.u)[:, 0])) < 0.1 * np.ptp(np.asarray(truth.u))
    assert axes[0].get_ylabel() == bench.model.state_names[0]


def test_fit_plot_leaves_out_missing_entries_and_takes_integral_matching_fits():
    bench = zoo("lotka_volterra")
    data = bench.simulate(jax.random.key(1), 0.02, subsample=4)
    mask = np.ones((data.n_samples, 2), bool)
    mask[5:40, 1] = False
    gappy = wj.Trajectory(data.t, data.u, mask)
    lib = wj.PolynomialLibrary(bench.model.state_names, 2)
    # A library "fit" holding the true coefficients: the plot only needs its simulate().
    theta = np.asarray(lib.coefficients(bench.model, bench.p_true))
    fit = wj.IntegralMatchingFit(
        model=lib,
        params=theta,
        covariance=None,
        covariance_method=None,
        p0=np.zeros_like(theta),
        num_steps=0,
        status=wj.RESULTS.successful,
        method="integral_matching",
        objective=0.0,
        noise=None,
        seconds=0.0,
        solver="least squares",
        history=np.zeros(0),
        rhs=lib.rhs,
    )
    _, axes = wj.plot.fit(fit, gappy, bench.u0)
    assert len(axes[1].get_lines()[0].get_xdata()) == data.n_samples - 35
    assert len(axes[0].get_lines()[0].get_xdata()) == data.n_samples
    line = axes[0].get_lines()[1]
    clean = np.asarray(bench.simulate(None, 0.0, subsample=4).u)
    assert np.allclose(
        np.interp(np.asarray(data.t), line.get_xdata(), line.get_ydata()), clean[:, 0], atol=1e-2 * np.ptp(clean)
    )  # linear interpolation of the line
    with pytest.raises(ValueError, match="first sample"):
        wj.plot.fit(fit, wj.Trajectory(data.t, data.u, np.r_[[[False, True]], mask[1:]]))
    with pytest.raises(ValueError, match="u0 must have shape"):
        wj.plot.fit(fit, data, [1.0])


def test_forest_has_one_interval_per_fit_and_parameter(logistic):
    bench, _, mle, wls = logistic
    fig, axes = wj.plot.forest([mle, wls], truth=bench.p_true, level=0.9)
    assert len(axes) == bench.model.n_params
    for j, ax in enumerate(axes):
        assert len(ax.containers) == 2  # one errorbar per fit
        assert [t.get_text() for t in ax.get_yticklabels()] == ["mle", "wls"]
        x = ax.containers[0].lines[0].get_xdata()[0]
        assert x == pytest.approx(mle.params[j])
        assert ax.get_lines()[-1].get_xdata()[0] == pytest.approx(bench.p_true[j])  # the truth line
    with pytest.raises(ValueError, match="truth must have shape"):
        wj.plot.forest(mle, truth=[1.0])
    with pytest.raises(ValueError, match="labels"):
        wj.plot.forest([mle, wls], labels=["a"])
    with pytest.raises(TypeError, match="fits must be"):
        wj.plot.forest([])


def _synthetic_study(rng, noise=(0.02, 0.1), ms=(256, 128), n_runs=5):
    """A Study with made-up runs: the plot reads only its metric rows."""
    p_true = np.array([1.0, -1.0])
    cells, runs = [], []
    for nr in noise:
        for m in ms:
            cells.append(wj.studies.Cell(p_true, np.array([0.01]), nr, 1024 // m))
            params = p_true * (1 + nr * rng.standard_normal((n_runs, 2)))
            runs.append(
                wj.studies.CellRuns(
                    m,
                    params,
                    params,
                    np.tile(np.diag([nr**2, nr**2]), (n_runs, 1, 1)),
                    np.array(["successful"] * n_runs),
                    np.ones(n_runs, int),
                    np.zeros(n_runs),
                    np.zeros(n_runs),
                    np.ones(n_runs, bool),
                    np.full(n_runs, 10),
                    np.full(n_runs, 0.5),
                )
            )
    settings = {
        "kind": "monte_carlo",
        "level": 0.95,
        "estimator": "test",
        "n_runs": n_runs,
        "seed": [0],
        "covariance": "sandwich",
    }
    return wj.studies.Study(
        "logistic", ("p1", "p2"), tuple(cells), tuple(runs), settings, tuple(np.full(n_runs, np.nan) for _ in cells)
    )


def test_study_plot_one_line_per_parameter_and_m(rng):
    study = _synthetic_study(rng)
    fig, axes = wj.plot.study(study)
    assert len(axes) == 4
    rows = study.rows()
    for ax, metric in zip(axes, ["rel_sq_bias", "rel_variance", "rel_mse", "coverage_2se"]):
        data_lines = [ln for ln in ax.get_lines() if ln.get_marker() == "o"]
        assert len(data_lines) == 2 * 2  # parameters × M
        assert list(data_lines[0].get_xdata()) == [0.02, 0.1]
        want = [r[metric] for r in rows if r["param"] == "p1" and r["M"] == 128]  # M ascending
        assert np.allclose(data_lines[0].get_ydata(), want)
    assert axes[0].get_yscale() == "log"
    assert len(axes[3].get_lines()) == 4 + 1  # and the nominal 2-se coverage line
    with pytest.raises(ValueError, match="unknown metric"):
        wj.plot.study(study, metrics=["bias"])
    with pytest.raises(TypeError, match="Study"):
        wj.plot.study(rows)


def test_radius_and_test_function_plots(logistic):
    _, data, mle, _ = logistic
    fig, ax = wj.plot.radius(mle)
    sel = mle.test_functions[0].selection
    assert len(ax.get_lines()[0].get_xdata()) == len(sel.radii)
    assert ax.get_lines()[1].get_xdata()[0] == pytest.approx(sel.radius)
    fig, axes = wj.plot.test_functions(mle, n=4)
    assert len(axes) == 2 and len(axes[0].get_lines()) == 4
    assert axes[1].get_lines()[1].get_xdata()[0] == mle.test_functions[0].k
    tf = wj.weak.build_test_functions(data.t, data.u)
    with pytest.raises(ValueError, match="time grid"):
        wj.plot.test_functions(tf)
    _, axes = wj.plot.test_functions(tf, data.t, n=3)
    assert len(axes[0].get_lines()) == 3
    given = wj.weak.build_test_functions(data.t, data.u, wj.TestFunctionConfig(radius=1.0))
    with pytest.raises(ValueError, match="no selection curve"):
        wj.plot.radius(given.info)


def test_likelihood_contours_are_lowest_near_the_estimate(logistic):
    bench, _, mle, _ = logistic
    fig, ax = wj.plot.likelihood(mle, span=0.3, n=15, truth=bench.p_true)
    (cs,) = [c for c in ax.collections if hasattr(c, "levels")] or [None]
    assert cs is not None
    lik = mle.likelihood
    at = lambda p: float(lik(np.asarray(p)))  # noqa: E731
    assert at(mle.params) < at(mle.params * 1.3)
    with pytest.raises(ValueError, match="two different indices"):
        wj.plot.likelihood(mle, params=(0, 0))
    with pytest.raises(ValueError, match="centre must have shape"):
        wj.plot.likelihood(lik, [1.0])


def test_loss_curves():
    fig, ax = wj.plot.loss_curves(
        {"a": ([0, 1, 2], [3.0, 2.0, 1.0]), "b": ([0, 2], [3.0, 0.5])}, xlabel="evaluations", logx=True
    )
    assert [ln.get_label() for ln in ax.get_lines()] == ["a", "b"]
    assert ax.get_xlabel() == "evaluations" and ax.get_xscale() == "log"
    with pytest.raises(ValueError, match="equal length"):
        wj.plot.loss_curves({"a": ([0, 1], [1.0])})
    with pytest.raises(TypeError, match="non-empty mapping"):
        wj.plot.loss_curves({})


def test_plot_bad_input_is_named(logistic):
    bench, data, mle, wls = logistic
    lv = zoo("lotka_volterra")
    lv_fit = wj.WLS().fit(lv.model, lv.simulate(jax.random.key(0), 0.02, subsample=8))
    cases = [
        (TypeError, "result must be a fit result", lambda: wj.plot.fit(data, data)),
        (ValueError, "one trajectory per data trajectory", lambda: wj.plot.fit(mle, data, truth=[data, data])),
        (ValueError, "need 1 axes", lambda: wj.plot.fit(mle, data, axes=plt.subplots(2)[1])),
        (ValueError, "same parameters", lambda: wj.plot.forest([mle, lv_fit])),
        (TypeError, "TestFunctions or a WENDyFit", lambda: wj.plot.test_functions(data)),
        (
            ValueError,
            "columns",
            lambda: wj.plot.test_functions(wj.weak.build_test_functions(data.t, data.u), np.asarray(data.t)[:-1]),
        ),
        (TypeError, "RadiusSelection", lambda: wj.plot.radius(data)),
        (TypeError, "WeakLikelihood or WENDyFit", lambda: wj.plot.likelihood(data)),
        (ValueError, "centre: give", lambda: wj.plot.likelihood(mle.likelihood)),
        (ValueError, "span > 0", lambda: wj.plot.likelihood(mle, span=0.0)),
        (ValueError, "must be a pair", lambda: wj.plot.loss_curves({"a": ([0, 1], [1, 2], [3, 4])})),
    ]
    for exc, match, call in cases:
        with pytest.raises(exc, match=match), unchecked():  # the plots' own messages (data are no fit result)
            call()


@pytest.mark.slow
def test_profile_and_bootstrap_plots_draw_every_parameter():
    """Profiles: one panel per parameter with its threshold, estimate and two interval ends;
    the bootstrap: a corner of histograms (with the estimate and two interval ends) and
    one scatter per pair; bad input named."""
    from _zoo import logistic_small

    _, data, fit = logistic_small()
    profiles = wj.studies.profile(wj.MLE(), fit, data, n_points=7)
    fig, axes = wj.plot.profiles(profiles)
    assert len(axes) == 2
    for ax, prof in zip(axes, profiles.values()):
        assert ax.get_title().startswith(f"{prof.name}: identifiable")
        vertical = [ln for ln in ax.lines if np.ptp(ln.get_xdata()) == 0 and len(ln.get_xdata()) == 2]
        assert sorted(ln.get_xdata()[0] for ln in vertical) == pytest.approx(sorted(prof.interval))
        assert any(np.allclose(ln.get_ydata(), prof.threshold) for ln in ax.lines)
    boot = wj.studies.bootstrap(wj.MLE(), fit, data, 40, key=0, progress=False)  # 40: basic 95 % intervals
    fig, axes = wj.plot.bootstrap(boot, truth=[1.0, -1.0])
    assert axes.shape == (2, 2) and not axes[0, 1].get_visible()
    assert len(axes[0, 0].patches) > 0 and len(axes[1, 0].lines[0].get_xdata()) == 40
    lo, hi = boot.basic()
    ends = [ln.get_xdata()[0] for ln in axes[0, 0].lines[1:3]]
    assert ends == pytest.approx([lo[0], hi[0]])
    for exc, match, call in [
        (TypeError, "dict that wj.studies.profile returns", lambda: wj.plot.profiles(boot)),
        (TypeError, "wj.studies.Bootstrap", lambda: wj.plot.bootstrap(profiles)),
        (ValueError, "one value per parameter", lambda: wj.plot.bootstrap(boot, truth=[1.0])),
        (ValueError, r"\(2, 2\) array of axes", lambda: wj.plot.bootstrap(boot, axes=plt.subplots(1, 2)[1])),
        (ValueError, "ncols must be an integer >= 1", lambda: wj.plot.profiles(profiles, ncols=0)),
        (ValueError, "max_params must be an integer >= 1", lambda: wj.plot.bootstrap(boot, max_params=0)),
    ]:
        with pytest.raises(exc, match=match), unchecked():  # the library's own messages
            call()

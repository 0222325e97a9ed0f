"""Problems as users have them: parameters held fixed without rewriting the model, the
boarding-school influenza data, partly observed data in the bootstrap."""

import functools
import warnings
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from _typecheck import unchecked
from _zoo import zoo

import wendyjax as wj


def _logistic(u, p, t):
    return p[0] * u * (1 - u / p[1])


def _logistic_k10(u, p, t):  # the same model with K = 10 written in by hand
    return p[0] * u * (1 - u / 10.0)


FULL = wj.ODEModel(_logistic, ["N"], ["r", "K"], bounds=([0.0, 1.0], [5.0, 50.0]), name="logistic")
BY_HAND = wj.ODEModel(_logistic_k10, ["N"], ["r"], bounds=([0.0], [5.0]), name="logistic")


@functools.cache
def _logistic_data() -> wj.Trajectory:
    """FULL's data, simulated once per process by the first test that needs them."""
    return wj.simulate(
        FULL, [0.8, 10.0], [0.5], np.linspace(0.0, 20.0, 201), wj.AdditiveGaussian(0.05), jax.random.key(1)
    )


def test_a_held_model_is_the_model_without_those_parameters():
    held = FULL.fix(K=10.0)
    assert held.param_names == ("r",) and held.fixed == {"K": 10.0}
    np.testing.assert_array_equal(np.asarray(held.bounds), [[0.0], [5.0]])
    assert held.linear_in_params and not FULL.linear_in_params  # r u (1 - u/10) is linear in r
    u = jnp.array([3.0])
    assert held.rhs(u, jnp.array([0.7]), 0.0) == BY_HAND.rhs(u, jnp.array([0.7]), 0.0)
    assert FULL.fix({"K": 10.0}).rhs == held.rhs  # compared by value: fits share compiled code
    lv = zoo("lotka_volterra").model
    twice = lv.fix(p2=1.0).fix(p4=2.0)
    assert twice.param_names == ("p1", "p3") and twice.fixed == {"p2": 1.0, "p4": 2.0}
    assert twice.rhs == lv.fix(p2=1.0, p4=2.0).rhs


@pytest.mark.parametrize(
    "estimator",
    [
        wj.MLE(),
        wj.WLS(),
        pytest.param(wj.OutputError(), marks=pytest.mark.slow),
        pytest.param(wj.Hybrid(), marks=pytest.mark.slow),
    ],
    ids=["mle", "wls", "output_error", "hybrid"],
)
def test_fixed_parameters_give_the_fit_of_the_model_written_without_them(estimator):
    options: dict[str, Any] = {"u0": [0.5]} if isinstance(estimator, (wj.OutputError, wj.Hybrid)) else {}
    held = estimator.fit(FULL, _logistic_data(), p0=[1.0, 10.0], fixed={"K": 10.0}, **options)
    hand = estimator.fit(BY_HAND, _logistic_data(), p0=[1.0], **options)
    assert held.model.param_names == ("r",) and held.successful
    np.testing.assert_allclose(held.params, hand.params, rtol=1e-9)
    np.testing.assert_allclose(held.stderr, hand.stderr, rtol=1e-7)
    assert "held, not fitted: K = 10" in held.table()


@pytest.mark.slow  # over 7 s: the quick loop stays under 5 minutes
def test_a_mask_holds_parameters_at_their_start_and_bounds_may_be_given_in_full():
    bench = zoo("lotka_volterra")
    data = bench.simulate(jax.random.key(0), 0.05, subsample=4)
    start = np.array([3.0, 1.0, 6.0, 1.0])
    fit = wj.MLE().fit(bench.model, data, start, fixed=[False, True, True, False], bounds=([0.0] * 4, [20.0] * 4))
    rhs = lambda u, p, t: jnp.stack([p[0] * u[0] - u[0] * u[1], -6.0 * u[1] + p[1] * u[0] * u[1]])  # noqa: E731
    hand = wj.MLE().fit(wj.ODEModel(rhs, ["x", "y"], ["p1", "p4"]), data, [3.0, 1.0], bounds=([0.0] * 2, [20.0] * 2))
    assert fit.model.param_names == ("p1", "p4") and fit.model.fixed == {"p2": 1.0, "p3": 6.0}
    np.testing.assert_allclose(fit.params, hand.params, rtol=1e-9)
    np.testing.assert_array_equal(fit.upper, [20.0, 20.0])


@pytest.mark.slow  # over 7 s: the quick loop stays under 5 minutes
def test_bootstraps_and_profiles_hold_what_the_fit_held():
    fit = wj.MLE().fit(FULL, _logistic_data(), p0=[1.0], fixed={"K": 10.0}, covariance="hessian")
    boot = wj.studies.bootstrap(wj.MLE(), fit, _logistic_data(), 8, key=0, progress=False)
    prof = wj.studies.profile(wj.MLE(), fit, _logistic_data(), n_points=7)
    assert boot.draws.shape == (8, 1) and boot.n_failed == 0
    assert list(prof) == ["r"] and prof["r"].interval[0] < fit.params[0] < prof["r"].interval[1]


@pytest.mark.parametrize(
    "call, error, match",
    [
        (
            lambda: FULL.fix(k=10.0),
            ValueError,
            r"fix: model 'logistic' has no parameter\(s\) 'k'; its parameters are r, K",
        ),
        (lambda: FULL.fix(), ValueError, "fix needs at least one parameter to hold"),
        (lambda: FULL.fix(r=1.0, K=10.0), ValueError, "fix would hold every parameter of model 'logistic'"),
        (lambda: FULL.fix(K=float("nan")), ValueError, "fix: held values must be finite, got K = nan"),
        (
            lambda: wj.MLE().fit(FULL, _logistic_data(), fixed=[False, True]),
            ValueError,
            "fixed as a mask holds parameters at their p0: pass p0 with all 2 parameters",
        ),
        (
            lambda: wj.MLE().fit(FULL, _logistic_data(), [1.0, 10.0], fixed=[0, 1]),
            ValueError,
            r"fixed must be a dict \{name: value\} or a boolean mask of shape \(2,\)",
        ),
        (
            lambda: wj.MLE().fit(FULL, _logistic_data(), [1.0, 10.0, 3.0], fixed={"K": 10.0}),
            ValueError,
            r"p0 must have shape \(1,\) for model 'logistic' \(parameters r\)",
        ),
        (
            lambda: wj.IntegralMatching().fit(
                wj.neural.MLPField(1, 4, key=jax.random.key(0)), _logistic_data(), fixed={"K": 1.0}
            ),
            TypeError,
            "fixed holds parameters of an ODEModel; MLPField has no named parameter vector",
        ),
    ],
)
def test_bad_fixed_parameters_are_refused_before_work(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_the_boarding_school_outbreak_ships_with_its_sources():
    data = wj.datasets.boarding_school()
    assert data.t.tolist() == list(range(1, 15)) and data.u.shape == (14, 3)
    assert np.isnan(data.u[:, [0, 2]]).all() and data.u[:, 1].max() == 298 and data.u[0, 1] == 3
    assert wj.datasets.BOARDING_SCHOOL_N == 763
    assert wj.datasets.BOARDING_SCHOOL_PUBLISHED["murray_least_squares"]["R0"] == 3.8


def _sir(u, p, t):
    s, i, _ = u
    infection = p[0] * s * i / wj.datasets.BOARDING_SCHOOL_N
    return jnp.stack([-infection, infection - p[1] * i, p[1] * i])


SIR = wj.ODEModel(_sir, ["S", "I", "R"], ["beta", "gamma"], bounds=([0.1, 0.05], [5.0, 2.0]), name="flu")


@pytest.mark.slow  # over 7 s: the quick loop stays under 5 minutes
def test_a_bootstrap_of_partly_observed_data_says_which_states_are_not_observed():
    """It printed numpy's "invalid value encountered in divide" and σ = (nan, 16.6, nan)."""
    data = wj.datasets.boarding_school()
    fit = wj.OutputError().fit(SIR, data, [1.5, 0.5], u0=[760.0, 3.0, 0.0], weighted=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        boot = wj.studies.bootstrap(wj.OutputError(), fit, data, 8, key=0, progress=False)
    assert np.isnan(boot.sigma[[0, 2]]).all() and boot.sigma[1] > 0
    assert "σ = (not observed, " in boot.table(0.5) and ", not observed)" in boot.table(0.5)


N_BOYS = wj.datasets.BOARDING_SCHOOL_N
SIR_I0 = wj.ODEModel(
    _sir, ["S", "I", "R"], ["beta", "gamma", "I0"], bounds=([0.1, 0.05, 0.5], [5.0, 2.0, 20.0]), name="flu"
)


def _tied(p):  # S0 = N - I0, I0 a parameter, R0 = 0
    return jnp.stack([N_BOYS - p[2], p[2], 0.0])


@pytest.mark.slow
def test_initial_states_tied_to_a_parameter_are_fitted_through_it():
    """With fit_u0=True S0 went to 801.9 (> 763 boys); tied, S0 = N - I0 with I0 in its box.
    At the optimum, β and γ are those of a fit with I0 held at its estimate and the initial
    states held at the tied values (the sensitivities carry ∂u0/∂I0 into the fit)."""
    data = wj.datasets.boarding_school()
    fit = wj.OutputError().fit(SIR_I0, data, [1.5, 0.5, 3.0], u0=_tied, weighted=False)
    assert fit.successful and 0.5 < fit.params[2] < 20.0
    np.testing.assert_allclose(fit.u0[0], _tied(fit.params), rtol=1e-12)
    held = wj.OutputError(fit_u0=False).fit(
        SIR_I0, data, fit.params, u0=fit.u0[0], weighted=False, fixed={"I0": float(fit.params[2])}
    )
    np.testing.assert_allclose(held.params, fit.params[:2], rtol=1e-5)
    assert "u0(p̂) = (" in fit.table()
    # the Gauss–Newton covariance counts the three parameters as the only unknowns
    assert np.all(np.isfinite(fit.stderr)) and fit.covariance.shape == (3, 3)


@pytest.mark.slow  # over 7 s: the quick loop stays under 5 minutes
def test_the_recommended_interval_reuses_tied_initial_states_and_takes_options():
    data = wj.datasets.boarding_school()
    fit = wj.OutputError().fit(SIR_I0, data, [1.5, 0.5, 3.0], u0=_tied, weighted=False)
    method = wj.studies.BootstrapOrProfile(
        wj.studies.BootstrapIntervals(30, kind="normal"), wj.studies.ProfileIntervals(9)
    )
    lo, hi = method(wj.OutputError(), fit, data, weighted=False)  # repeating a fit's option is allowed
    assert SIR_I0.bounds is not None
    assert np.all(lo < fit.params) and np.all(fit.params < hi) and np.all(lo >= SIR_I0.bounds[0])
    with pytest.raises(ValueError, match=r"got weighted=True but the fit was made with weighted=False"):
        method(wj.OutputError(), fit, data, weighted=True)


def test_a_bad_tied_initial_state_is_refused_before_work():
    data = wj.datasets.boarding_school()
    with pytest.raises(ValueError, match=r"u0\(p\) must return the 3 initial states \(S, I, R\) of shape \(3,\)"):
        wj.OutputError().fit(SIR_I0, data, [1.5, 0.5, 3.0], u0=lambda p: p[:2], weighted=False)
    with pytest.raises(ValueError, match=r"u0 as a function u0\(p\) of the 3 parameters \(beta, gamma, I0\) failed"):
        wj.OutputError().fit(SIR_I0, data, [1.5, 0.5, 3.0], u0=lambda p: p["I0"], weighted=False)


@pytest.mark.slow
def test_derived_quantities_by_the_delta_method_and_from_the_bootstrap():
    """R0 = β/γ of the outbreak: the delta method's standard error is the gradient rule by
    hand, and the bootstrap's draws of R0 are R0 of its draws."""
    data = wj.datasets.boarding_school()
    fit = wj.OutputError().fit(SIR_I0, data, [1.5, 0.5, 3.0], u0=_tied, weighted=False)
    r0 = fit.derived(lambda p: p[0] / p[1], names="R0")
    beta, gamma, _ = fit.params
    grad = np.array([1 / gamma, -beta / gamma**2, 0.0])
    assert r0.names == ("R0",) and r0.estimate[0] == pytest.approx(beta / gamma, rel=1e-12)
    assert r0.stderr[0] == pytest.approx(np.sqrt(grad @ fit.covariance @ grad), rel=1e-10)
    assert 3.5 < r0.estimate[0] < 4.5 and "R0 " in r0.table() and "delta method from the gauss_newton" in r0.table()
    assert str(r0) == r0.table()  # print(fit.derived(...)) shows the table
    both = fit.derived(lambda p: jnp.stack([p[0] / p[1], p[0] - p[1]]))
    assert both.names == ("g1", "g2") and both.covariance.shape == (2, 2)
    boot = wj.studies.bootstrap(wj.OutputError(), fit, data, 12, key=0, progress=False)
    b0 = boot.derived(lambda p: p[0] / p[1], "R0")
    ok = ~np.isnan(boot.draws[:, 0])
    np.testing.assert_allclose(b0.draws[ok, 0], boot.draws[ok, 0] / boot.draws[ok, 1], rtol=1e-12)
    lo, hi = b0.normal(0.95)
    assert lo[0] < r0.estimate[0] < hi[0]


def test_a_derived_quantity_of_an_undetermined_parameter_has_no_standard_error():
    cov = np.array([[0.01, np.nan], [np.nan, np.nan]])
    value, out = wj.inference.delta_method(lambda p: jnp.stack([2 * p[0], p[0] * p[1]]), [1.0, 2.0], cov)
    assert out[0, 0] == pytest.approx(0.04) and np.isnan(out[1, 1]) and np.isnan(out[0, 1])


def test_a_fit_without_a_covariance_points_derived_quantities_to_the_bootstrap():
    fit = wj.IntegralMatching(order=10, length=4.0).fit(FULL, _logistic_data(), [1.0, 10.0], key=0)
    assert fit.covariance is None
    with pytest.raises(
        ValueError,
        match=r"has no covariance, so the delta method has nothing to propagate; derive "
        r"from a bootstrap instead",
    ):
        fit.derived(lambda p: p[0] / p[1])
    with pytest.raises(TypeError, match="model must be an ODEModel, got MLPField"), unchecked():  # its own message
        wj.Experiments(wj.neural.MLPField(1, 4, key=jax.random.key(0)), [_logistic_data(), _logistic_data()])  # pyright: ignore[reportArgumentType]  # the wrong input under test


@pytest.mark.parametrize(
    "fn, names, match",
    [
        (lambda p: jnp.outer(p, p), None, r"fn\(p\) must return a number or a vector, got shape \(3, 3\)"),
        (lambda p: p[0] / 0.0, None, r"fn\(p\) is not finite at the estimate"),
        (lambda p: p["beta"], None, r"fn\(p\) failed on the 3 parameters p \(a vector in the model's order\)"),
        (lambda p: p[:2], ["R0"], r"names: fn returns 2 value\(s\), got 1 name\(s\)"),
    ],
)
def test_bad_derived_quantities_are_refused(fn, names, match):
    fit = wj.OutputError().fit(SIR_I0, wj.datasets.boarding_school(), [1.5, 0.5, 3.0], u0=_tied, weighted=False)
    with pytest.raises(ValueError, match=match):
        fit.derived(fn, names)


# --- several experiments: shared and per-trajectory parameters ----------------------------------


def _two_logistics(u, p, t):  # by hand: r shared, K per experiment
    return jnp.stack([p[0] * u[0] * (1 - u[0] / p[1]), p[0] * u[1] * (1 - u[1] / p[2])])


def _experiment_data(grids):
    truths = [(0.8, 10.0), (0.8, 6.0)]
    return [
        wj.simulate(FULL, p, [0.5], g, wj.AdditiveGaussian(0.05), jax.random.key(i))
        for i, (p, g) in enumerate(zip(truths, grids))
    ]


@pytest.mark.slow  # over 7 s: the quick loop stays under 5 minutes
def test_per_trajectory_parameters_give_the_fit_of_the_model_written_for_both():
    grid = np.linspace(0.0, 20.0, 201)
    data = _experiment_data([grid, grid])
    both = wj.Experiments(FULL, data, per_trajectory=["K"])
    assert both.model.param_names == ("r", "K[0]", "K[1]") and both.model.state_names == ("N[0]", "N[1]")
    by_hand = wj.ODEModel(_two_logistics, ["N0", "N1"], ["r", "K0", "K1"], bounds=([0.0, 1.0, 1.0], [5.0, 50.0, 50.0]))
    side = wj.Trajectory(grid, np.c_[data[0].u, data[1].u])
    for est, options in [(wj.MLE(), {}), (wj.OutputError(), {"u0": [0.5, 0.5]})]:
        fit = est.fit(both.model, both.data, [1.0, 8.0, 8.0], **options)
        hand = est.fit(by_hand, side, [1.0, 8.0, 8.0], **options)
        np.testing.assert_allclose(fit.params, hand.params, rtol=1e-9)
        np.testing.assert_allclose(fit.stderr, hand.stderr, rtol=1e-7)
    np.testing.assert_allclose(
        both.params(fit.params), [[fit.params[0], fit.params[1]], [fit.params[0], fit.params[2]]]
    )
    boot = wj.studies.bootstrap(wj.OutputError(), fit, both.data, 6, key=0, progress=False)
    assert boot.draws.shape == (6, 3) and boot.n_failed == 0


@pytest.mark.slow  # over 7 s: the quick loop stays under 5 minutes
def test_experiments_on_their_own_grids_with_conditions_and_tied_initial_states():
    """Different sample times (output error on the union grid), K known per experiment
    (conditions), the initial state a parameter per experiment tied through initial()."""
    data = _experiment_data([np.linspace(0.0, 20.0, 81), np.linspace(0.0, 20.0, 41)])
    model = wj.ODEModel(_logistic, ["N"], ["r", "K", "N0"], bounds=([0.0, 1.0, 0.1], [5.0, 50.0, 2.0]))
    exp = wj.Experiments(model, data, per_trajectory=["N0"], conditions=[{"K": 10.0}, {"K": 6.0}])
    assert exp.model.param_names == ("r", "N0[0]", "N0[1]") and np.isnan(exp.data.u).any()
    u0 = exp.initial(lambda p: p[2:3])
    fit = wj.OutputError().fit(exp.model, exp.data, [1.0, 0.4, 0.6], u0=u0)
    assert fit.successful and abs(fit.params[0] - 0.8) < 4 * fit.stderr[0]
    np.testing.assert_allclose(fit.u0[0], fit.params[1:], rtol=1e-12)
    np.testing.assert_allclose(exp.params(fit.params)[:, 1], [10.0, 6.0])


@pytest.mark.parametrize(
    "make, match",
    [
        (lambda d: wj.Experiments(FULL, d[:1]), "needs at least two trajectories"),
        (lambda d: wj.Experiments(FULL, d, per_trajectory=["k"]), r"per_trajectory: model 'logistic' has no parameter"),
        (lambda d: wj.Experiments(FULL, d, conditions=[{"K": 1.0}]), r"conditions: one mapping per trajectory \(2\)"),
        (lambda d: wj.Experiments(FULL, d, conditions=[{"K": 1.0}, {}]), "K must be given for every trajectory"),
        (
            lambda d: wj.Experiments(FULL, d, per_trajectory=["K"], conditions=[{"K": 1.0}, {"K": 2.0}]),
            "K cannot be both held by conditions and fitted per trajectory",
        ),
        (
            lambda d: wj.Experiments(FULL, [d[0], wj.Trajectory(d[1].t + 1.0, d[1].u)]),
            r"the experiments start at different times \[0.0, 1.0\]",
        ),
        (lambda d: wj.Experiments(FULL, d).initial(np.ones((3, 1))), r"u0: one row of 1 initial states per experiment"),
        (
            lambda d: wj.Experiments(FULL, [d[0], wj.Trajectory(np.r_[d[1].t[:1], d[1].t], np.r_[d[1].u[:1], d[1].u])]),
            r"Experiments \(the trajectories side by side on one grid\) needs distinct sample times, but trajectory 1",
        ),
    ],
)
def test_bad_experiments_are_refused(make, match):
    grid = np.linspace(0.0, 20.0, 41)
    with pytest.raises(ValueError, match=match):
        make(_experiment_data([grid, grid]))


@pytest.mark.slow  # over 7 s: the quick loop stays under 5 minutes
def test_a_study_of_a_held_benchmark_is_the_study_of_the_model_written_without_them():
    bench = zoo("logistic")  # u' = p1 u + p2 u², p* = (1, -1)
    held = bench.fix(p2=-1.0)
    hand = wj.models.Benchmark(
        wj.ODEModel(lambda u, p, t: p[0] * u - u**2, ["u"], ["p1"], bounds=([0.0], [10.0]), name="logistic"),
        bench.p_true[:1],
        bench.u0,
        bench.t,
        bench.noise,
        bench.solver,
        "by hand",
    )
    assert held.model.param_names == ("p1",) and held.model.fixed == {"p2": -1.0}
    kwargs: dict[str, Any] = dict(noise_levels=0.05, subsamples=16, n_runs=6, key=0, progress=False, batch_size=6)
    a = wj.studies.monte_carlo(held, "mle", **kwargs)
    b = wj.studies.monte_carlo(hand, "mle", **kwargs)
    np.testing.assert_allclose(a.runs[0].params, b.runs[0].params, rtol=1e-9)


def test_a_study_of_counts_is_refused_before_work():
    bench = zoo("logistic")
    counts = wj.models.Benchmark(bench.model, bench.p_true, bench.u0, bench.t, wj.Poisson(), bench.solver, "counts")
    with pytest.raises(ValueError, match="a study of counts is not supported"):
        wj.studies.monte_carlo(counts, "output_error", n_runs=4, progress=False)
    with pytest.raises(ValueError, match="noise_ratio scales additive or log-normal noise"):
        counts.simulate(0, noise_ratio=0.1)

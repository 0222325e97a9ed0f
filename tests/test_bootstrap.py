"""The parametric bootstrap of a fit (`wj.studies.bootstrap`): bad input refused before any
work, refits that agree with the fit's own uncertainty, and intervals that cover."""

import dataclasses
import time
import warnings

import jax
import numpy as np
import pytest
from _typecheck import unchecked
from _zoo import logistic_small_data_fixture, logistic_small_fit_fixture, zoo  # noqa: F401  (fixtures data, mle_fit)

import wendyjax as wj

BENCH = zoo("logistic")


def test_bad_input_is_refused_before_any_work(mle_fit, data):
    failed = dataclasses.replace(mle_fit, status=wj.RESULTS.nonlinear_divergence)
    cases = [
        (lambda: wj.studies.bootstrap(wj.MLE(), mle_fit, data, 1, key=0), ValueError, "n_boot must be an integer >= 2"),
        (lambda: wj.studies.bootstrap(wj.MLE(), failed, data, 10, key=0), ValueError, "the fit did not succeed"),
        (lambda: wj.studies.bootstrap("mle", mle_fit, data, 10, key=0), TypeError, "estimator must be a wendyjax"),  # pyright: ignore[reportArgumentType]  # the wrong input under test
        (lambda: wj.studies.bootstrap(wj.MLE(), mle_fit.to_dict(), data, 10, key=0), TypeError, "fit must be"),
        (
            lambda: wj.studies.bootstrap(wj.MLE(), mle_fit, wj.Trajectory(data.t, np.c_[data.u, data.u]), 10, key=0),
            ValueError,
            "data have 2 states but model 'logistic' has 1",
        ),
        (
            lambda: wj.studies.bootstrap(wj.MLE(), mle_fit, data, 10, key=0, u0=[1.0, 2.0]),
            ValueError,
            r"u0 must have shape \(1,\) or \(1, 1\)",
        ),
        (
            lambda: wj.studies.bootstrap(wj.OutputError(), mle_fit, data, 10, key=0),
            ValueError,
            "the fit was made by WENDy-MLE but the estimator is OutputError",
        ),
        (
            lambda: wj.studies.bootstrap(wj.MLE(), mle_fit, data, 10, key=0, foo=1),
            TypeError,
            "bootstrap got unknown keyword\\(s\\) foo; MLE's options are",
        ),
        (
            lambda: wj.studies.bootstrap(wj.MLE(), mle_fit, data, 10, key=0, batch_size=0),
            ValueError,
            "batch_size must be an integer >= 1",
        ),
    ]
    for make, error, match in cases:
        clock = time.perf_counter()
        with pytest.raises(error, match=match), unchecked():  # bootstrap's own messages ('mle' is no estimator)
            make()
        assert time.perf_counter() - clock < 2.0


@pytest.mark.slow
def test_the_bootstrap_agrees_with_the_fits_own_uncertainty(mle_fit, data):
    """On the logistic at 5 % noise the inverse Hessian's width matches the Monte Carlo
    spread (benchmarks/results/interval_coverage.md); the bootstrap's standard errors
    come from 40 refits, whose sample standard deviation is within ±35 % of the truth with
    probability > 0.99 (chi-square with 39 degrees of freedom)."""
    boot = wj.studies.bootstrap(wj.MLE(), mle_fit, data, 40, key=1, progress=False)
    assert boot.draws.shape == (40, 2) and boot.n_failed == 0
    assert np.all(np.abs(boot.stderr / mle_fit.stderr - 1) < 0.35)
    assert boot.sigma == pytest.approx(0.05 * np.sqrt(np.mean(np.asarray(data.u) ** 2)), rel=0.3)
    for lo, hi in (boot.percentile(), boot.bias_corrected(), boot.percentile(0.5)):
        assert np.all(lo < mle_fit.params) and np.all(mle_fit.params < hi)
    assert np.all(np.diff(boot.percentile(0.5), axis=0) < np.diff(boot.percentile(0.95), axis=0))
    # the normal intervals: centred on p̂ − bias, ±t₃₉(0.975)·√(1 + 1/40) bootstrap standard errors
    lo, hi = boot.normal()
    assert np.allclose((lo + hi) / 2, mle_fit.params - boot.bias)
    assert np.allclose(hi - lo, 2 * 2.022691 * np.sqrt(1 + 1 / 40) * boot.stderr)
    assert "40 refits, 0 failed" in boot.table()
    lower, upper = boot.lower, boot.upper
    assert lower is not None and upper is not None and mle_fit.lower is not None and mle_fit.upper is not None
    assert np.array_equal(lower, mle_fit.lower) and np.array_equal(upper, mle_fit.upper)
    with pytest.raises(ValueError, match="level must lie strictly between 0 and 1, got 95"):
        boot.basic(95)
    # WENDy fits no initial state: output error fitted it with the parameters held
    assert boot.u0.shape == (1, 1) and abs(boot.u0[0, 0] - float(BENCH.u0[0])) < 0.005


@pytest.mark.slow  # 9 s on 2 cores
def test_the_bootstrap_of_several_trajectories_keeps_their_grids_and_gaps(data):
    # two trajectories on different grids, one with a missing row: every refit's data keep
    # both grids and the gap (one batched build of all refits), and every stage is timed
    t1, t2 = np.asarray(data.t), np.asarray(data.t)[::2]
    u2 = np.asarray(data.u)[::2].copy()
    u2[5] = np.nan
    two = [wj.Trajectory(t1, data.u), wj.Trajectory(t2, u2)]
    fit = wj.MLE().fit(BENCH.model, two, p0=[0.9, -0.9], test_functions=wj.TestFunctionConfig(radius=0.5))
    boot = wj.studies.bootstrap(
        wj.MLE(), fit, two, 6, key=0, progress=False, test_functions=wj.TestFunctionConfig(radius=0.5)
    )
    assert boot.draws.shape == (6, 2) and boot.n_failed == 0 and boot.u0.shape == (2, 1)
    assert set(boot.timings) == {"initial_states_s", "simulate_s", "build_s", "fit_s", "total_s"}
    assert boot.seconds == boot.timings["total_s"] >= boot.timings["fit_s"]
    assert "time: initial states" in boot.table()


@pytest.mark.slow
def test_output_error_refits_start_from_the_simulated_initial_state(data):
    """The logistic's first observations lie near 0: refits whose initial state started
    from a noisy first sample below 0 blew up (21 of 50 failed)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        oe = wj.OutputError().fit(BENCH.model, data, p0=BENCH.p_true)
    boot = wj.studies.bootstrap(wj.OutputError(), oe, data, 24, key=2, progress=False)
    assert boot.n_failed == 0 and np.array_equal(boot.u0, oe.u0)
    assert np.all(np.abs(boot.stderr / oe.stderr - 1) < 0.45)  # 24 refits: ±45 % at > 0.99


@pytest.mark.slow
def test_the_data_are_simulated_with_the_estimators_own_ode_solver(data, monkeypatch):
    # output error with an implicit solver (as a stiff model needs, e.g. a PEtab problem's):
    # the bootstrap simulates with it unless told otherwise, and a failed simulation names
    # the bootstrap's argument
    import diffrax

    from wendyjax.studies import _bootstrap

    used, real = [], _bootstrap.solve

    def recording(*args, solver, **kwargs):
        used.append(type(solver).__name__)
        return real(*args, solver=solver, **kwargs)

    monkeypatch.setattr(_bootstrap, "solve", recording)
    estimator = wj.OutputError(ode_solver=diffrax.Kvaerno5())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        oe = estimator.fit(BENCH.model, data, p0=BENCH.p_true)
    boot = wj.studies.bootstrap(estimator, oe, data, 2, key=0, progress=False)
    assert boot.n_failed == 0 and used == ["Kvaerno5"]
    used.clear()
    wj.studies.bootstrap(estimator, oe, data, 2, key=0, progress=False, ode_solver=diffrax.Tsit5())
    assert used == ["Tsit5"]

    def failing(*args, solver, **kwargs):
        raise RuntimeError("diffrax failed to solve (use an implicit solver, solver=diffrax.Kvaerno5())")

    monkeypatch.setattr(_bootstrap, "solve", failing)
    with pytest.raises(RuntimeError, match=r"cannot simulate data from the fit with ode_solver=Tsit5\(\).*ode_solver="):
        wj.studies.bootstrap(wj.OutputError(), oe, data, 2, key=0, progress=False)


@pytest.mark.slow
def test_a_known_noise_level_is_the_one_the_refits_data_are_drawn_with(data):
    # sigma given to the fit (e.g. a PEtab problem's noise formulas): drawn with it, not with the residuals' RMS
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        oe = wj.OutputError().fit(BENCH.model, data, p0=BENCH.p_true, sigma=0.2)
    boot = wj.studies.bootstrap(wj.OutputError(), oe, data, 4, key=0, progress=False)
    assert boot.n_failed == 0 and np.array_equal(boot.sigma, [0.2])


@pytest.mark.slow
def test_basic_intervals_cover_where_the_weak_form_is_biased():
    """40 logistic datasets (65 samples, 5 % noise), each fitted by WLS and bootstrapped
    with 60 refits. WLS is biased here by about 0.6 of its spread (p1 −0.026, sd 0.043),
    which the percentile intervals inherit (measured: 29/40 cover each parameter) and the
    basic intervals subtract (37/40). Under a true 95 %, 34 or more of 40 cover with
    probability 0.99; the mean bootstrap bias estimates the Monte Carlo bias within 3 of
    its standard errors."""
    cover, est, bias = [], [], []
    for i in range(40):
        data = BENCH.simulate(jax.random.key(1000 + i), 0.05, subsample=16)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fit = wj.WLS().fit(BENCH.model, data)
        boot = wj.studies.bootstrap(wj.WLS(), fit, data, 60, key=i, progress=False)
        lo, hi = boot.basic()
        cover.append((lo <= BENCH.p_true) & (BENCH.p_true <= hi))
        est.append(fit.params)
        bias.append(boot.bias)
    assert np.all(np.sum(cover, axis=0) >= 34), np.sum(cover, axis=0)
    mc_bias, mc_se = np.mean(est, axis=0) - BENCH.p_true, np.std(est, axis=0) / np.sqrt(40)
    assert np.all(np.abs(np.mean(bias, axis=0) - mc_bias) < 3 * mc_se)


@pytest.mark.slow
def test_parameters_the_fit_does_not_determine_get_no_interval(data):
    """u' = a·b·u + c·u²: the refits of a and b stay near p̂ along the flat ridge, which
    would look like ±1 % precision; they get NaN, with a warning, and c keeps its interval."""
    model = wj.ODEModel(lambda u, p, t: p[0] * p[1] * u + p[2] * u**2, ["u"], ["a", "b", "c"], name="product")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = wj.MLE().fit(model, data, [1.0, 1.0, -1.0], bounds=([0.1, 0.1, -5.0], [10.0, 10.0, 0.0]))
    with pytest.warns(RuntimeWarning, match=r"does not determine a \(.*\), b \("):
        boot = wj.studies.bootstrap(wj.MLE(), fit, data, 40, key=0, progress=False)  # 40: 95 % quantiles
    assert boot.undetermined == ("a", "b") and "get no interval" in boot.table()
    for lo, hi in (boot.basic(), boot.normal(), boot.percentile(), boot.bias_corrected()):
        assert np.all(np.isnan(lo[:2])) and np.all(np.isnan(hi[:2])) and lo[2] < fit.params[2] < hi[2]


@pytest.mark.slow
def test_too_few_successful_refits_give_nan_not_an_error(mle_fit, data):
    boot = wj.studies.bootstrap(wj.MLE(), mle_fit, data, 4, key=0, progress=False)
    none = dataclasses.replace(boot, draws=np.full_like(boot.draws, np.nan), status=np.full(4, "nonlinear_divergence"))
    for lo, hi in (none.basic(), none.normal(), none.percentile(), none.bias_corrected()):
        assert np.all(np.isnan(lo)) and np.all(np.isnan(hi))
    assert none.n_failed == 4 and np.all(np.isnan(none.bias))


@pytest.mark.slow
def test_a_log_normal_fit_skips_initial_states_that_are_not_positive(monkeypatch):
    """Starts for the initial states solved back from later data can leave the positive
    orthant; under log-normal noise output error refuses them, and the bootstrap used to
    fail with it (Goodwin-3D, SIR-TDI): such starts are skipped."""
    from wendyjax.studies import _bootstrap

    data = BENCH.simulate(jax.random.key(4), 0.05, subsample=16)
    data = wj.Trajectory(data.t, np.abs(np.asarray(data.u)) + 1e-3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = wj.MLE().fit(BENCH.model, data, noise="lognormal", covariance="hessian")
    good = np.asarray(data.u)[:1]
    monkeypatch.setattr(_bootstrap, "_starts", lambda *a: [[-good, good]])
    boot = wj.studies.bootstrap(wj.MLE(), fit, data, 4, key=0, progress=False)
    assert boot.noise == "lognormal" and np.all(boot.u0 > 0) and boot.n_failed == 0


def test_initial_states_stop_at_the_first_start_at_the_noise_level(monkeypatch):
    """Lorenz's initial states fitted from its first observation are at the noise level: no
    state is solved back (chaotic solves blow up backwards) and no other start is fitted,
    and they are those of every start's fit (the held fits stop at rtol 1e-8 in the
    objective, which leaves the states to about 1e-4 relative; they agree to 2e-6)."""
    from wendyjax.studies import _bootstrap

    bench = zoo("lorenz")
    data = wj.data.as_dataset(bench.simulate(jax.random.key(7), 0.05, subsample=4))
    fit = wj.MLE().fit(bench.model, data, p0=[8.0, 25.0, 2.0])
    with monkeypatch.context() as m:
        m.setattr(_bootstrap, "_solved_back", lambda *a: pytest.fail("a state was solved back"))
        first = _bootstrap._initial_states(fit, data, None, bench.solver)
    level = _bootstrap._noise_objective(fit, data)
    assert level > 0
    monkeypatch.setattr(_bootstrap, "NOISE_LEVEL_FIT", 0.0)
    every = _bootstrap._initial_states(fit, data, None, bench.solver)
    np.testing.assert_allclose(first, every, rtol=1e-5, atol=1e-8)


@pytest.mark.parametrize("n_boot", [5, 30])
def test_normal_intervals_are_exact_for_a_normal_estimator_and_few_refits(n_boot):
    """An estimator p̂ ~ N(p + β, 1) whose refits are N(p̂ + β, 1): the bias-corrected normal
    interval covers p at its level for any B (with z in place of t_{B−1}·√(1 + 1/B) it would
    cover 0.85 at B = 5 and 0.936 at B = 30). 40 000 independent replicates, one per column:
    the binomial standard error of a 0.95 coverage is 0.0011, the tolerance four of them."""
    rng = np.random.default_rng(n_boot)
    n, truth, bias = 40_000, 1.0, 0.7
    estimate = truth + bias + rng.normal(size=n)
    draws = estimate + bias + rng.normal(size=(n_boot, n))
    boot = wj.studies.Bootstrap(
        names=tuple(f"p{i}" for i in range(n)),
        estimate=estimate,
        draws=draws,
        status=np.full(n_boot, "successful"),
        u0=np.zeros((1, 1)),
        sigma=np.ones(1),
        noise="gaussian",
        seconds=0.0,
    )
    for level in (0.95, 0.8):
        lo, hi = boot.normal(level)
        assert abs(np.mean((lo <= truth) & (truth <= hi)) - level) < 4 * np.sqrt(level * (1 - level) / n)


def test_basic_and_normal_intervals_end_at_the_box():
    """The basic intervals reflect the draws through p̂ and the normal ones shift them by the
    bias: either can pass a bound the refits were held to, and they end there, as the
    profile's do. A parameter without usable draws stays NaN."""
    rng = np.random.default_rng(0)
    draws = np.c_[0.02 + 0.5 * rng.random(200), rng.normal(5.0, 1.0, 200), np.full(200, np.nan)]
    box = dict(lower=np.array([0.0, -np.inf, 0.0]), upper=np.array([1.0, 5.5, 1.0]))
    free = wj.studies.Bootstrap(
        names=("a", "b", "c"),
        estimate=np.array([0.05, 5.0, 0.5]),
        draws=draws,
        status=np.full(200, "successful"),
        u0=np.zeros((1, 1)),
        sigma=np.ones(1),
        noise="gaussian",
        seconds=0.0,
    )
    held = dataclasses.replace(free, **box)
    for method in ("basic", "normal"):
        (flo, fhi), (lo, hi) = getattr(free, method)(), getattr(held, method)()
        assert flo[0] < 0.0 and lo[0] == 0.0 and hi[0] == fhi[0]  # a: reflected below its lower bound, cut there
        assert fhi[1] > 5.5 and hi[1] == 5.5 and lo[1] == flo[1]  # b: past its upper bound, cut there
        assert np.isnan(lo[2]) and np.isnan(hi[2])
    assert np.array_equal(free.percentile(), held.percentile(), equal_nan=True)


@pytest.mark.slow
def test_cheap_backward_starts_give_the_initial_states_of_accurate_ones(monkeypatch):
    """The initial states solved back from later data are only starts of the held-parameter
    output-error fit: at rtol 1e-8 with at most 10⁴ steps the fitted initial states equal
    those from backward solves at rtol 1e-10 with up to 10⁶ steps (what the bootstrap did
    before; those took about a second per chaotic trajectory and blew up anyway)."""
    from wendyjax.studies import _bootstrap

    accurate_integrate = _bootstrap.integrate

    def accurate(*args, **kwargs):
        return accurate_integrate(*args, **{**kwargs, "rtol": 1e-10, "atol": 1e-10, "max_steps": 1_000_000})

    monkeypatch.setattr(_bootstrap, "NOISE_LEVEL_FIT", 0.0)  # every stage of starts, the backward ones too
    for name, sub in (("fitzhugh_nagumo", 2), ("goodwin_2d", 4)):
        bench = zoo(name)
        data = wj.data.as_dataset(bench.simulate(jax.random.key(1), 0.05, subsample=sub))
        fit = wj.MLE().fit(bench.model, data, p0=np.asarray(bench.p_true) * 1.05)
        cheap = _bootstrap._initial_states(fit, data, None, bench.solver)
        assert sum(map(len, _bootstrap._starts(fit, data, bench.solver))) >= 3  # a backward start is among them
        with monkeypatch.context() as m:
            m.setattr(_bootstrap, "integrate", accurate)
            reference = _bootstrap._initial_states(fit, data, None, bench.solver)
        np.testing.assert_allclose(cheap, reference, rtol=1e-6, atol=1e-9)

"""Bad-input paths not covered by the feature tests: each raises a clear error early."""

import dataclasses
import json
import time
import warnings

import diffrax
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from _typecheck import unchecked
from _zoo import logistic_small, zoo

import wendyjax as wj
from wendyjax.weak import build_test_functions


def _rhs(u, p, t):
    return p[0] * u


def test_model_names_and_bounds_shapes():
    with pytest.raises(ValueError, match="state_names must be a positive count"):
        wj.ODEModel(_rhs, 0, 1)
    with pytest.raises(ValueError, match="param_names must not be empty"):
        wj.ODEModel(_rhs, 1, [])
    with pytest.raises(ValueError, match=r"bounds must be a pair \(lower, upper\)"), unchecked():
        wj.ODEModel(_rhs, 1, 1, bounds=([0.0], [1.0], [2.0]))


def test_trajectory_needs_two_finite_times():
    with pytest.raises(ValueError, match="at least 2 samples"):
        wj.Trajectory([0.0], [[1.0]])
    with pytest.raises(ValueError, match="t contains NaN"):
        wj.Trajectory([0.0, np.nan, 2.0], np.ones(3))


_LOGISTIC = wj.models.logistic()
_TAKE_A_SOLVER = {
    "solve": (lambda s: wj.solve(_LOGISTIC.model, _LOGISTIC.p_true, _LOGISTIC.u0, _LOGISTIC.t, solver=s), "solver"),
    "integrate": (
        lambda s: wj.integrate(_LOGISTIC.model.rhs, _LOGISTIC.p_true, _LOGISTIC.u0, _LOGISTIC.t, solver=s),
        "solver",
    ),
    "OutputError": (lambda s: wj.OutputError(ode_solver=s), "ode_solver"),
    "BootstrapIntervals": (lambda s: wj.studies.BootstrapIntervals(50, ode_solver=s), "ode_solver"),
    "forward_simulation_error": (
        lambda s: wj.inference.forward_simulation_error(
            _LOGISTIC.model, _LOGISTIC.p_true, _LOGISTIC.u0, _LOGISTIC.t, jnp.ones((len(_LOGISTIC.t), 1)), s
        ),
        "solver",
    ),
    "Benchmark": (lambda s: dataclasses.replace(_LOGISTIC, solver=s), "solver"),
}


@pytest.mark.parametrize("solver", [diffrax.KenCarp4(), diffrax.SemiImplicitEuler()], ids=lambda s: type(s).__name__)
@pytest.mark.parametrize("where", list(_TAKE_A_SOLVER))
def test_a_solver_of_several_terms_is_refused_where_a_solver_is_taken(where, solver):
    """IMEX (KenCarp4) and partitioned (SemiImplicitEuler) solvers need several terms: refused,
    naming the argument, before any tracing (diffrax's own error came from inside the compiled
    solve, after the whole problem was printed)."""
    call, argname = _TAKE_A_SOLVER[where]
    name = type(solver).__name__
    with pytest.raises(TypeError, match=rf"{argname}: {name} solves equations of several terms .* use a solver of one"):
        call(solver)
    call(diffrax.Tsit5())  # a solver of one term is taken


def test_noise_estimate_shape():
    with pytest.raises(ValueError, match=r"u must have shape \(M\+1, D\)"):
        wj.estimate_noise_std(np.ones((20, 2, 2)))


def test_radius_search_needs_room():
    t = np.linspace(0, 1, 9)
    with pytest.raises(ValueError, match="got 9, need at least 10 \\(the radius search"):
        build_test_functions(t, np.sin(t)[:, None])
    t = np.linspace(0, 1, 10)  # the floor is truthful: 10 samples build, without numpy warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert build_test_functions(t, np.sin(t)[:, None]).k >= 1


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


@pytest.mark.parametrize(
    "make, error, match",
    [
        (
            lambda: wj.MLE(solver="trust_region"),  # pyright: ignore[reportArgumentType]  # the wrong input under test
            TypeError,
            r"MLE: solver must be a solver object such as "
            r"wendyjax.estimators.TrustRegion",
        ),
        (lambda: wj.IRLS(solver=wj.Gradient()), TypeError, "IRLS: solver must be a solver object"),  # pyright: ignore[reportArgumentType]  # the wrong input under test
        (lambda: wj.WLS(max_steps=0), ValueError, "WLS: max_steps must be a positive integer, got 0"),
        (lambda: wj.MLE(max_steps=2.5), ValueError, "MLE: max_steps must be a positive integer, got 2.5"),  # pyright: ignore[reportArgumentType]  # the wrong input under test
        (lambda: wj.TrustRegion(atol=float("nan")), ValueError, r"TrustRegion: atol must lie in \[0, 1\)"),
        (
            lambda: wj.IntegralMatching(solver=wj.estimators.TrustRegion, max_steps=5),  # pyright: ignore[reportArgumentType]  # the wrong input under test
            TypeError,
            r"solver must be LeastSquares\(\), TrustRegion\(\) or Gradient\(\)",
        ),  # the class, not an instance
        (lambda: wj.Gradient(rtol=1.0), ValueError, r"Gradient: rtol must lie in \[0, 1\)"),
        (lambda: wj.LeastSquares(max_threshold_iter=0), ValueError, "LeastSquares: max_threshold_iter must be"),
    ],
)
def test_solver_objects_and_step_limits_are_checked_when_built(make, error, match):
    with pytest.raises(error, match=match), unchecked():  # the estimators' own messages (a str is no solver)
        make()


@pytest.mark.parametrize(
    "make, error, match",
    [
        # options validated when the estimator is built (negative tolerances used to run to the step limit)
        (lambda: wj.IRLS(step_tol=-1.0), ValueError, "IRLS: step_tol must be a positive number"),
        (lambda: wj.IRLS(max_iters=0), ValueError, "IRLS: max_iters must be a positive integer"),
        (lambda: wj.IRLS(shapiro_wilk=True, sw_tol=1.5), ValueError, r"IRLS: sw_tol .* must lie in \(0, 1\)"),
        (lambda: wj.MLE(solver=wj.TrustRegion(rtol=-1.0, atol=-1.0)), ValueError, "TrustRegion: rtol must lie"),
        # huge tolerances "converged" at the start in 0 steps, with an interval
        (
            lambda: wj.MLE(solver=wj.TrustRegion(rtol=1e6, atol=1e6)),
            ValueError,
            r"TrustRegion: rtol must lie in \[0, 1\) .* declares any start converged",
        ),
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
    ],
)
def test_options_data_and_masks_are_refused_when_built(make, error, match):
    with pytest.raises(error, match=match), unchecked():  # the constructors' own messages (strings are no mask)
        make()


def test_zero_one_masks_are_accepted():
    t = np.arange(4.0)
    masks = [wj.Trajectory(t, np.ones(4), m).mask for m in ([1, 0, 1, 1], np.array([1.0, 1, 0, 1]))]
    assert masks[0] is not None and np.array_equal(masks[0].ravel(), [True, False, True, True])
    assert masks[1] is not None and np.array_equal(masks[1].ravel(), [True, True, False, True])


def test_a_file_that_is_not_a_saved_study_is_named(tmp_path):
    (tmp_path / "empty.json").write_text("{}")
    (tmp_path / "text.json").write_text("not json")
    with pytest.raises(
        ValueError,
        match=r"empty.json is not a saved study: it lacks model, params, cells, runs, "
        r"settings \(write one with Study.to_json\)",
    ):
        wj.studies.Study.load(tmp_path / "empty.json")
    with pytest.raises(ValueError, match="text.json is not a saved study .not JSON"):
        wj.studies.Study.load(tmp_path / "text.json")
    (tmp_path / "binary.json").write_bytes(bytes(range(256)))  # used to raise a raw UnicodeDecodeError
    with pytest.raises(ValueError, match="binary.json is not a saved study .not JSON text"):
        wj.studies.Study.load(tmp_path / "binary.json")
    # a study edited by hand used to load and fail later, in .table()
    study = wj.studies.monte_carlo(wj.models.logistic(), "wls", subsamples=[16], n_runs=2, progress=False)
    study.to_json(tmp_path / "study.json")
    saved = json.loads((tmp_path / "study.json").read_text())
    saved["settings"]["level"] = "high"
    (tmp_path / "edited.json").write_text(json.dumps(saved))
    with pytest.raises(ValueError, match="edited.json does not hold a consistent saved study"):
        wj.studies.Study.load(tmp_path / "edited.json")
    assert wj.studies.Study.load(tmp_path / "study.json").table() == study.table()


@pytest.mark.slow
def test_late_failures_of_the_second_fuzz_are_refused_first():
    bench, data, fit = logistic_small()
    cases = [
        (
            lambda: wj.studies.bootstrap(wj.MLE(), fit, data, 40, key=0, ode_solver="tsit5"),  # pyright: ignore[reportArgumentType]  # the wrong input under test
            TypeError,
            r"ode_solver must be a diffrax solver \(e.g. diffrax.Tsit5\(\) or diffrax.Kvaerno5\(\)\), got 'tsit5'",
        ),
        (
            lambda: wj.studies.bootstrap(wj.MLE(), fit, data, 40, key=0, ode_solver=diffrax.KenCarp4()),
            TypeError,
            r"ode_solver: KenCarp4 solves equations of several terms",
        ),
        (
            lambda: wj.studies.sweep(bench, "wls", p_true=[[20.0, -1.0]], n_runs=2, progress=False),
            ValueError,
            r"p_true of setting\(s\) \[0\] .* lies outside the box the fits are held to",
        ),
        (
            lambda: wj.ODEModel(lambda u, p, t: p[0] * jnp.log(-(u**2) - 1.0), ["u"], ["a"]),
            ValueError,
            "rhs\\(u, p, t\\) is not finite at any of 8 random points",
        ),
        (
            lambda: wj.MLE().fit(bench.model, data, p0=[1.0 + 2j, -1.0]),
            TypeError,
            r"p0 must be real numbers, got complex values",
        ),
        (
            lambda: wj.studies.monte_carlo(bench, "wls", n_runs=10**9, progress=False),
            ValueError,
            r"a study of 1000000000 runs per setting would hold about .* GB of data on the host",
        ),
    ]
    for make, error, match in cases:
        clock = time.perf_counter()
        with pytest.raises(error, match=match), unchecked():  # the functions' own messages ('tsit5' is no solver)
            make()
        assert time.perf_counter() - clock < 2.0
    boot = wj.studies.bootstrap(wj.MLE(), fit, data, 4, key=0, progress=False)
    with pytest.raises(ValueError, match="level must be a number"), unchecked():  # was "Unknown format code 'g'"
        boot.table("0.95")  # pyright: ignore[reportArgumentType]  # the wrong input under test


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
    with pytest.raises(
        RuntimeError,
        match=r"blow_up' on \[0.0, 1.0\].*got past t = 0.1 only.*blows up in finite "
        r"time.*stiff.*Kvaerno5.*max_steps",
    ):
        wj.solve(model, [5.0], [1.0], np.linspace(0, 1, 11))


def _logistic_data(n, noise=0.01, seed=0):
    b = zoo("logistic")
    t = np.linspace(0.0, 10.0, n)
    u = np.asarray(wj.solve(b.model, b.p_true, b.u0, t))
    return b, wj.Trajectory(t, u * (1 + noise * np.random.default_rng(seed).standard_normal(u.shape)))


def test_one_sample_floor_for_the_weak_form_is_checked_first():
    """It used to say 7; then 8 samples failed on the radius (with numpy warnings) and 12 on
    the noise estimate ("needs 15")."""
    b, d14 = _logistic_data(14)
    with pytest.raises(
        ValueError,
        match=r"needs at least 15 observed samples per trajectory, but the trajectory "
        r"has 14: the noise estimate's 15-point stencil.*pass sigma=",
    ):
        wj.MLE().fit(b.model, d14)
    _, d9 = _logistic_data(9)
    with pytest.raises(
        ValueError,
        match=r"at least 10 observed samples .* has 9: the radius search.*radius=...\) "
        r"needs 8",
    ):
        wj.WLS().fit(b.model, d9, sigma=0.01)
    _, d7 = _logistic_data(7)
    with pytest.raises(ValueError, match=r"at least 8 observed samples .* has 7: the smallest bump"):
        wj.WLS().fit(b.model, d7, sigma=0.01, test_functions=wj.TestFunctionConfig(radius=1.0))
    _, d10 = _logistic_data(10)
    with warnings.catch_warnings():  # the floor is truthful: 10 samples with a known sigma build
        warnings.simplefilter("error")
        assert wj.weak_likelihood(b.model, d10, sigma=0.01).problem.u.shape[1] == 10


def test_data_whose_squares_overflow_are_refused_when_built():
    """Data scaled by 1e300 used to fail seconds later with "objective not finite" and 16
    numpy overflow warnings."""
    with pytest.raises(
        ValueError,
        match=r"u's largest magnitude is 1e\+300: its square overflows float64.*"
        r"Rescale u to order one",
    ):
        wj.Trajectory(np.arange(3.0), [1.0, 1e300, 2.0])
    with pytest.raises(ValueError, match=r"u's largest magnitude is 1e-300: its square underflows"):
        wj.Trajectory(np.arange(3.0), [1e-300, 0.0, -1e-300])
    with pytest.raises(ValueError, match=r"t's largest magnitude is 1e\+200"):
        wj.Trajectory([0.0, 1e200], [1.0, 2.0])
    with pytest.raises(ValueError, match=r"u's largest magnitude"):
        wj.Field(np.arange(3.0), np.full((3, 4, 1), 1e160))
    assert wj.Trajectory(np.arange(3.0), [1.0, np.nan, 2.0], [True, False, True]).u.shape == (3, 1)
    assert wj.Trajectory(np.arange(3.0), np.zeros(3)).u.shape == (3, 1)  # all zero is fine


def test_a_fit_that_overflows_names_the_data_scale():
    b, d = _logistic_data(257)
    big = wj.Trajectory(d.t, d.u * 1e150)  # squarable, but the model's u² term overflows
    with pytest.raises(RuntimeError, match=r"The data's largest magnitude is 1.*e\+150.*rescale the data"):
        wj.WLS().fit(b.model, big)


def test_weakly_determined_parameters_are_named():
    """Near-constant data (u ≈ 0.5 on the logistic) fix only p1 + 0.5 p2: the fit used to
    be "successful" without a word."""
    b, _ = _logistic_data(2)
    t = np.linspace(0.0, 10.0, 257)
    flat = wj.Trajectory(t, 0.5 + 0.005 * np.random.default_rng(0).standard_normal(257))
    with pytest.warns(
        RuntimeWarning,
        match=r"the data barely determine the combination .*p1.*p2.*relative "
        r"standard error .*95% interval contains 0.*practically non-identifiable",
    ):
        fit = wj.WLS().fit(b.model, flat, bounds=None)
    rel, weights = fit.weak_directions[0]  # the weakest first
    assert rel > 100 and set(weights) == {"p1", "p2"}
    assert "note: the data barely determine" in fit.table()


def test_weak_directions_of_a_covariance():
    p = np.array([1.0, 2.0, -4.0])
    assert wj.inference.weak_directions(p, np.diag([0.01, 0.04, 0.16])) == []  # 10 % each
    assert wj.inference.weak_directions(p, np.diag([0.01, 1.0, 0.16])) == []  # p2: 50 % (interval misses 0)
    ((rel, w),) = wj.inference.weak_directions(p, np.diag([0.01, 1.1, 0.16]))  # p2: 52 % > 1/1.96
    assert rel == pytest.approx(np.sqrt(1.1) / 2) and np.allclose(w, [0, 1, 0])
    assert wj.inference.weak_directions(p, np.diag([0.01, 1.1, 0.16]), level=0.9) == []
    # two that only enter together: a large variance along their relative sum
    v = np.array([1.0, 1.0]) / np.sqrt(2)
    cov = np.diag([1.0, 2.0]) @ (9.0 * np.outer(v, v) + 1e-4 * np.eye(2)) @ np.diag([1.0, 2.0])
    ((rel, w),) = wj.inference.weak_directions([1.0, 2.0], cov)
    assert rel == pytest.approx(3.0, rel=1e-4) and np.allclose(w, v)
    assert wj.inference.weak_directions([1.0, 0.0], np.diag([0.01, 9.0])) == []  # a zero estimate has no scale


def test_the_pseudo_inverse_keeps_weak_directions():
    """Output error's covariance took pinv(JᵀJ): at a condition number of 1e9, JᵀJ's
    small eigenvalue fell below pinv's cut, so the weakest direction got variance 0 and a
    standard error of 7e-10 where the truth is ~1e9 times larger."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal(200)
    jac = np.c_[a, a + 1e-9 * rng.standard_normal(200)]
    cov = np.asarray(wj.inference.determined_pinv(jac) @ wj.inference.determined_pinv(jac).T)
    q, r = np.linalg.qr(jac)
    exact = np.linalg.inv(r) @ np.linalg.inv(r).T
    assert np.allclose(cov, exact, rtol=1e-6)
    assert np.isnan(wj.inference.determined_pinv(np.c_[a, 2 * a])).all()  # exactly collinear


@pytest.mark.slow
def test_an_output_error_fit_that_fails_at_its_start_says_so():
    """Robertson with Tsit5 said "the forward simulation at the estimate failed": it was the
    start. Here u' = p u² from u(0) = 1 blows up before t = 1 for p ≥ 1."""
    model = wj.ODEModel(lambda u, p, t: p[0] * u**2, ["u"], ["p"], name="blow_up")
    t = np.linspace(0.0, 1.0, 21)
    data = wj.Trajectory(t, np.asarray(wj.solve(model, [-1.0], [1.0], t)))
    with pytest.raises(
        RuntimeError,
        match=r"forward simulation of the ODE failed.*implicit solver.*It fails at the "
        r"start already \(the estimate never left p0\)",
    ):
        wj.OutputError(fit_u0=False).fit(model, data, [5.0], bounds=None, u0=[1.0])


def test_data_far_below_order_one_get_a_warning_on_their_scale():
    """Data at 1e-11 used to end with a warning that blamed the data (K "barely determined"),
    not their scale against the solvers' absolute tolerances."""
    model = wj.ODEModel(lambda u, p, t: p[0] * u * (1 - u / p[1]), ["u"], ["r", "K"], name="logistic")
    data = wj.simulate(
        model, [1.0, 1e-12], [1e-13], np.linspace(0.0, 10.0, 201), wj.AdditiveGaussian(0.05), jax.random.key(0)
    )
    with pytest.warns(
        RuntimeWarning,
        match=r"the data's largest magnitude is 2.2\de-11: the solvers' absolute "
        r"tolerances .* Rescale the data to order one",
    ):
        wj.MLE().fit(model, data, p0=[0.5, 2e-12])

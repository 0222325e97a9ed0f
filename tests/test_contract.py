"""One contract for every estimator: the same call, the same result fields, failures by
status, and a `solve` that jit and vmap apply to."""

import io
import logging

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from _typecheck import unchecked
from _zoo import zoo

import wendyjax as wj

NAMES = sorted(wj.estimators.ESTIMATORS)
# The hybrid is WENDy-MLE followed by output error, both checked here on their own: its
# cases (the slowest to compile) run with the slow tests.
CASES = [pytest.param(n, marks=pytest.mark.slow) if n == "hybrid" else n for n in NAMES]


@pytest.fixture(scope="module")
def lv():
    """Lotka–Volterra at 5 % noise on 257 samples (not the logistic benchmark: its first
    sample, 0.01, is negative in many noisy draws, which output error cannot start from)."""
    bench = zoo("lotka_volterra")
    return bench, [bench.simulate(jax.random.key(i), 0.05, subsample=4) for i in range(2)]


def _p0(bench):
    return np.asarray(bench.p_true) * 0.9


@pytest.mark.parametrize("name", CASES)
def test_common_call_and_result_fields(lv, name):
    bench, (data, _) = lv
    est = wj.estimators.get_estimator(name)
    assert isinstance(est, wj.AbstractEstimator) and est.method == name
    fit = est.fit(bench.model, data, _p0(bench), bounds="model", key=None, throw=True)
    assert isinstance(fit, wj.AbstractFit) and fit.successful and fit.message == ""
    assert fit.status == wj.RESULTS.successful and fit.method == name
    assert np.linalg.norm(fit.params - bench.p_true) < 0.1 * np.linalg.norm(bench.p_true)
    assert np.isfinite(fit.objective) and fit.num_steps >= 0
    lo, hi = fit.ci(0.9)
    d = fit.to_dict()
    assert set(d["params"]) == {"p1", "p2", "p3", "p4"} and d["method"] == name
    # a notebook shows one line for repr (not every test function's arrays) and the table for display
    assert len(repr(fit)) < 300 and repr(fit).startswith(f"{type(fit).__name__}({fit.title} of 'lotka_volterra'")
    shown = []
    fit._repr_pretty_(type("Printer", (), {"text": lambda self, s: shown.append(s)})(), cycle=False)  # IPython's hook
    assert shown == [fit.table()]
    if est.covariances:  # a likelihood method: noise model, covariance, intervals
        assert fit.noise == d["noise"] == "gaussian" and "noise: gaussian" in fit.table()
        assert (
            fit.covariance is not None
            and fit.covariance.shape == (4, 4)
            and fit.covariance_method == est.covariances[0]
        )
        assert np.all(fit.stderr > 0) and np.all(lo < fit.params) and np.all(fit.params < hi)
    else:  # integral matching: no sampling theory, so no intervals, said in the summary
        assert fit.covariance is None and np.all(np.isnan(fit.stderr)) and np.all(np.isnan(lo))
        assert "no covariance" in fit.table()


def _nan_model():
    """Lotka–Volterra with f NaN wherever p2 < 0, so a start there fails in every estimator."""

    def rhs(u, p, t):
        x, y = u
        return jnp.stack([p[0] * x - jnp.sqrt(p[1]) ** 2 * x * y, -p[2] * y + p[3] * x * y])

    return wj.ODEModel(rhs, ["x", "y"], ["p1", "p2", "p3", "p4"], name="sqrt_model")


@pytest.mark.parametrize("name", CASES)
def test_failure_is_a_status_with_throw_false(lv, name):
    _, (data, _) = lv
    model, est = _nan_model(), wj.estimators.get_estimator(name)
    with pytest.raises(RuntimeError, match="failed on model 'sqrt_model'"):
        est.fit(model, data, [3.0, -1.0, 6.0, 1.0])
    with pytest.warns(RuntimeWarning, match="failed on model 'sqrt_model'") as caught:
        fit = est.fit(model, data, [3.0, -1.0, 6.0, 1.0], throw=False)
    assert any(w.filename == __file__ for w in caught)  # the warning points at the caller's line
    assert not fit.successful and fit.status != wj.RESULTS.successful and fit.message


@pytest.mark.parametrize(
    "name", [pytest.param(n, marks=pytest.mark.slow) if n == "output_error" else n for n in CASES]
)  # output error: 12 s on 2 cores
def test_solve_is_jit_and_vmap_able(lv, name):
    bench, datasets = lv
    est = wj.estimators.get_estimator(name)
    make, notes = est.batch_problems(bench.model, datasets)
    assert len(notes) == 2
    lo, hi = (jnp.asarray(b) for b in bench.model.bounds)
    p0s = jnp.asarray(np.stack([_p0(bench)] * 2))
    sols = jax.jit(jax.vmap(est.solve, in_axes=(0, 0, None, None)))(make([0, 1]), p0s, lo, hi)
    assert isinstance(sols, wj.Solution) and sols.params.shape == (2, 4)
    assert np.all(np.asarray(sols.successful))
    for i, data in enumerate(datasets):
        one = est.fit(bench.model, data, _p0(bench))
        np.testing.assert_allclose(sols.params[i], one.params, rtol=1e-6)
    covs = jax.vmap(est.covariance, in_axes=(0, 0))(make([0, 1]), sols)
    assert covs.shape == (2, 4, 4) and np.all(np.isfinite(np.asarray(covs)) == bool(est.covariances))


def test_output_error_needs_a_start_and_a_model(lv):
    bench, (data, _) = lv
    goodwin = zoo("goodwin_3d").model  # nonlinear in its parameters: no default start anywhere
    for name in ("mle", "irls", "wls", "output_error", "hybrid", "integral_matching"):
        est = wj.estimators.get_estimator(name)
        assert est.start_required(goodwin)
        # said before any work: the data (here not even data) are not looked at
        with pytest.raises(ValueError, match="p0 is required: .*goodwin"):
            est.fit(goodwin, "no data yet", None)
    assert wj.MLE().start_required(bench.model) is None  # linear in p: the WLS estimate starts it
    with pytest.raises(TypeError, match="model must be an ODEModel"), unchecked():  # its message, not the annotation's
        wj.OutputError().fit(lambda u, p, t: -u, data, [1.0], bounds=([0.0], [2.0]))


def test_unknown_option_is_named(lv):
    bench, (data, _) = lv
    with pytest.raises(TypeError, match="OutputError.fit got unknown keyword.*test_functions"):
        wj.OutputError().fit(bench.model, data, _p0(bench), test_functions=wj.TestFunctionConfig())
    with pytest.raises(ValueError, match="covariance must be one of"):
        wj.OutputError().fit(bench.model, data, _p0(bench), covariance="sandwich")


def _compile_log(fn) -> list[str]:
    """The JAX compilation log lines printed while `fn()` runs."""
    buf = io.StringIO()
    handler = logging.StreamHandler(buf)
    logger = logging.getLogger("jax")
    logger.addHandler(handler)
    old = logger.level
    logger.setLevel(logging.WARNING)
    jax.config.update("jax_log_compiles", True)
    try:
        fn()
    finally:
        jax.config.update("jax_log_compiles", False)
        logger.removeHandler(handler)
        logger.setLevel(old)
    return [line for line in buf.getvalue().splitlines() if "Compiling" in line]


def test_zoo_models_reuse_their_compiled_programs():
    """Two calls of `wj.models.logistic()` give models whose fits share one compiled solve;
    a copy of the model with a new (equal) right-hand side compiles again (the check can fail)."""
    first = wj.models.logistic()
    data = first.simulate(0, 0.05, subsample=4)
    wj.MLE().fit(first.model, data, [0.5, -0.5])
    again = wj.models.logistic()
    assert _compile_log(lambda: wj.MLE().fit(again.model, data, [0.5, -0.5])) == []
    twin = wj.ODEModel(
        lambda u, p, t: p[0] * u + p[1] * u**2, ["u"], ["p1", "p2"], bounds=first.model.bounds, name="logistic"
    )
    assert _compile_log(lambda: wj.MLE().fit(twin, data, [0.5, -0.5]))


@pytest.mark.slow
def test_the_model_noise_is_the_default_and_is_reported():
    bench = zoo("goodwin_3d")
    assert bench.model.noise == "lognormal" and zoo("lorenz").model.noise == "gaussian"
    data = bench.simulate(jax.random.key(0), subsample=4)
    fit = wj.MLE().fit(bench.model, data, np.asarray(bench.p_true) * 1.02)
    assert fit.noise == "lognormal" and "noise: lognormal" in fit.table()
    gaussian = wj.MLE().fit(bench.model, data, np.asarray(bench.p_true) * 1.02, noise="gaussian")
    assert gaussian.noise == "gaussian" and not np.allclose(gaussian.params, fit.params)
    with pytest.raises(ValueError, match="noise must be 'gaussian' or 'lognormal'"):
        wj.ODEModel(lambda u, p, t: -p[0] * u, ["u"], ["k"], noise="poisson")


def test_import_leaves_the_process_alone():
    """Importing wendyjax sets no XLA flag; its own CPU programs get the safe scheduler per
    compilation (and fall back to the caller's when traced inside another jit)."""
    import os
    import subprocess
    import sys

    code = "import os; import wendyjax; print(os.environ.get('XLA_FLAGS', ''))"
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert out.stdout.strip() == ""
    f = wj._compile.cpu_safe_jit(lambda x: jnp.linalg.cholesky(x))
    eye = jnp.eye(3)
    np.testing.assert_array_equal(f(eye), eye)
    np.testing.assert_array_equal(jax.jit(lambda x: f(x) + 0.0)(eye), eye)


@pytest.mark.slow
def test_integral_matching_runs_in_a_study():
    """Any estimator of the contract runs in `monte_carlo`; one without a covariance has no
    coverage (NaN, not 0) and its runs do not fail for the missing covariance."""
    study = wj.studies.monte_carlo(
        zoo("lotka_volterra"),
        wj.IntegralMatching(order=10, length=0.5),
        n_runs=2,
        batch_size=2,
        subsamples=[4],
        p0=[3.0, 1.0, 6.0, 1.0],
        progress=False,
    )
    assert study.settings["covariance"] is None
    for row in study.rows():
        assert row["failure_rate"] == 0.0 and np.isnan(row["coverage_2se"]) and row["rel_mse"] < 1e-3
    # the gradient algorithm draws its subintervals with a key per run, from the study's key
    gradient = wj.IntegralMatching(order=10, length=0.5, solver=wj.Gradient(chunk=100), max_steps=200)
    study = wj.studies.monte_carlo(
        zoo("lotka_volterra"), gradient, n_runs=2, batch_size=2, subsamples=[4], p0=[3.0, 1.0, 6.0, 1.0], progress=False
    )
    assert np.all(np.isfinite(study.runs[0].params)) and study.rows()[0]["failure_rate"] == 0.0


def test_an_estimate_on_the_box_is_said_and_warned(lv):
    """A box that cuts off the optimum: the estimate ends on the bound, and the fit says so
    (warning with the remedy, a note in the summary, `at_bound`) instead of only "successful"."""
    bench, (data, _) = lv
    lo, hi = (np.asarray(b, float) for b in bench.model.bounds)
    hi = hi.copy()
    hi[0] = 0.8 * bench.p_true[0]
    with pytest.warns(
        RuntimeWarning,
        match=r"estimate of p1 on model 'lotka_volterra' lies on the box's bound.*"
        r"wider box",
    ):
        fit = wj.MLE().fit(bench.model, data, _p0(bench) * np.r_[0.8, 1, 1, 1], bounds=(lo, hi))
    assert fit.successful and fit.at_bound == ["p1"] and fit.params[0] == pytest.approx(hi[0])
    assert "estimate of p1 lies on the box's bound" in fit.table()
    inside = wj.MLE().fit(bench.model, data, _p0(bench))
    assert inside.at_bound == [] and "box's bound" not in inside.table()


@pytest.mark.slow
def test_a_parameter_the_data_do_not_determine_gets_no_standard_error():
    """c does not enter the model: it used to be "successful" with standard error 0.0 (a
    pseudo-inverse's answer in its null direction), and the inverse Hessian NaN for all
    three; now NaN for c only, with a warning naming c."""
    bench = zoo("logistic")
    data = bench.simulate(jax.random.key(0), 0.05, subsample=4)
    model = wj.ODEModel(lambda u, p, t: p[0] * u + p[1] * u**2, ["u"], ["a", "b", "c"], name="unused_c")
    for est, kind in ((wj.MLE(), None), (wj.MLE(), "hessian"), (wj.OutputError(), None)):
        with pytest.warns(RuntimeWarning, match="standard errors of c are NaN .the data do not determine them"):
            fit = est.fit(model, data, [1.0, -1.0, 0.5], covariance=kind)
        assert fit.successful and np.isnan(fit.stderr[2]) and np.all(np.isfinite(fit.stderr[:2]))
    assert not np.any(wj.inference.undetermined(np.diag([1e-6, 1.0, 1e6])))  # scale alone is not undetermined

"""WENDy estimators on the papers' systems: recovery, coverage, vmapped batches, statuses.

Monte Carlo tolerances: with n intervals of nominal coverage 0.95, the pooled coverage has
standard error √(0.95·0.05/n); the tests assert it is above 0.95 − 3 standard errors.
"""

import dataclasses
import math

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from _typecheck import unchecked
from _zoo import zoo

import wendyjax as wj
from wendyjax.estimators import RESULTS
from wendyjax.inference import hessian_covariance, sandwich_covariance

# (noise ratio, subsample, number of seeds) per zoo system
PROTOCOLS = {
    "logistic": (0.10, 1, 12),
    "lorenz": (0.10, 1, 12),
    "goodwin_3d": (0.05, 8, 8),
    "sir_tdi": (0.10, 8, 8),
}


@eqx.filter_jit
def _solve(est, lik, p0, lo, hi):
    """The fits of stacked likelihoods, one after another in one compiled loop: under
    vmap every while-loop pass runs all seeds until the slowest is done (Goodwin-3D's 8
    MLE fits: 46 s vmapped, 30–36 s mapped, in the suite on 2 cores)."""
    arrays, static = eqx.partition(lik, eqx.is_array)
    return jax.lax.map(lambda a: est.solve(eqx.combine(a[0], static), a[1], lo, hi), (arrays, p0))


def _noise(bench):
    return "lognormal" if bench.noise.log_space else "gaussian"


def _box_starts(bench, n, seed=99):
    lo, hi = (np.asarray(b) for b in bench.model.bounds)
    return lo + np.random.default_rng(seed).uniform(size=(n, lo.size)) * (hi - lo)


class Study(eqx.Module):
    bench: wj.models.Benchmark
    lik: wj.WeakLikelihood
    p0: jax.Array


_STUDIES = {}


def _study(name) -> Study:
    """Stacked likelihoods of the protocol's seeds (built once per test session)."""
    if name not in _STUDIES:
        nr, sub, n = PROTOCOLS[name]
        b = zoo(name)
        liks = [
            wj.weak_likelihood(b.model, b.simulate(jax.random.key(s), nr, subsample=sub), _noise(b)) for s in range(n)
        ]
        _STUDIES[name] = Study(b, wj.weak.stack_likelihoods(liks), jnp.asarray(_box_starts(b, n)))
    return _STUDIES[name]


_FITS = {}


def _fit_all(study: Study, est):
    """The vmapped fits of every seed of `study` by `est`, computed once per test session:
    several tests check different properties of the same fits (Lorenz's MLE fits, run by
    three tests, took ~25 s each time)."""
    key = (id(study), est)
    if key not in _FITS:
        assert study.bench.model.bounds is not None
        lo, hi = (jnp.asarray(x) for x in study.bench.model.bounds)
        _FITS[key] = _solve(est, study.lik, study.p0, lo, hi)
    return _FITS[key]


def _rel_err(p, truth):
    return np.linalg.norm(np.asarray(p) - np.asarray(truth), axis=-1) / np.linalg.norm(truth)


# --- recovery and coverage on the papers' systems (Rummel et al. 2025 Table 2) --------------------------


@pytest.mark.parametrize(
    "name, max_median_err", [("logistic", 0.05), ("lorenz", 0.02), ("goodwin_3d", 0.25), ("sir_tdi", 0.15)]
)
@pytest.mark.slow
def test_mle_recovers_truth_with_covering_intervals(name, max_median_err):
    study = _study(name)
    b = study.bench
    sol = _fit_all(study, wj.MLE())
    assert bool(jnp.all(sol.successful)), np.asarray(sol.result._value)
    p = np.asarray(sol.params)
    assert b.model.bounds is not None
    lo, hi = (np.asarray(x) for x in b.model.bounds)
    assert np.all(p >= lo) and np.all(p <= hi)
    assert np.median(_rel_err(p, b.p_true)) < max_median_err
    cov = np.asarray(eqx.filter_jit(jax.vmap(sandwich_covariance))(study.lik, sol.params))
    se = np.sqrt(np.diagonal(cov, axis1=1, axis2=2))
    covered = np.abs(p - np.asarray(b.p_true)) <= 1.959964 * se
    n = covered.size
    assert covered.mean() >= 0.95 - 3 * math.sqrt(0.95 * 0.05 / n), covered.mean(0)


@pytest.mark.slow
def test_hessian_standard_errors_match_monte_carlo_spread():
    """Lorenz, 10 % noise: the inverse-Hessian standard error matches the spread of the
    estimates across seeds (ratio of SDs within ±3 × its sampling error √(1/(2(n-1))))."""
    study = _study("lorenz")
    sol = _fit_all(study, wj.MLE())
    p = np.asarray(sol.params)
    se = np.sqrt(
        np.diagonal(np.asarray(eqx.filter_jit(jax.vmap(hessian_covariance))(study.lik, sol.params)), axis1=1, axis2=2)
    )
    n = p.shape[0]
    ratio = p.std(0, ddof=1) / se.mean(0)
    tol = 3 * math.sqrt(1 / (2 * (n - 1)))
    assert np.all(np.abs(ratio - 1) < tol), ratio


@pytest.mark.slow
def test_wls_biased_at_high_noise_and_irls_mle_reduce_error():
    """Logistic at 10 % noise (Rummel et al. 2025 Table 4, Bortz et al. 2023 Fig. 6): WLS is biased; IRLS and MLE cut
    the mean coefficient error substantially (Bortz et al. 2023 reports 60-90 %)."""
    study = _study("logistic")
    err = {
        name: _rel_err(_fit_all(study, est).params, study.bench.p_true).mean()
        for name, est in (("wls", wj.WLS()), ("irls", wj.IRLS()), ("mle", wj.MLE()))
    }
    assert err["irls"] < 0.6 * err["wls"] and err["mle"] < 0.6 * err["wls"], err


@pytest.mark.slow
def test_irls_and_mle_agree_on_a_linear_model():
    study = _study("lorenz")
    irls, mle = _fit_all(study, wj.IRLS()), _fit_all(study, wj.MLE())
    assert bool(jnp.all(irls.successful))
    se = np.sqrt(np.diagonal(np.asarray(jax.vmap(sandwich_covariance)(study.lik, mle.params)), axis1=1, axis2=2))
    diff = np.abs(np.asarray(irls.params - mle.params)) / se
    assert np.all(diff < 0.5) and np.all(diff.mean(0) < 0.15), diff


@pytest.mark.slow
def test_vmapped_fits_equal_single_fits():
    study = _study("logistic")
    assert study.bench.model.bounds is not None
    lo, hi = (jnp.asarray(x) for x in study.bench.model.bounds)
    batched = _fit_all(study, wj.MLE())
    single = eqx.filter_jit(lambda lik, p0: wj.MLE().solve(lik, p0, lo, hi))
    for i in range(study.p0.shape[0]):
        lik_i = jax.tree_util.tree_map(lambda x, i=i: x[i], study.lik)
        s = single(lik_i, study.p0[i])
        # batched and single products round differently; both runs stop once a step is
        # below the solver's tolerances (1e-8), so they agree to that order, not to 1e-16
        np.testing.assert_allclose(np.asarray(s.params), np.asarray(batched.params[i]), rtol=1e-7)
        assert abs(int(s.num_steps) - int(batched.num_steps[i])) <= 1


# --- the user-facing fit ----------------------------------------------------------------


@pytest.fixture(scope="module")
def lorenz_data():
    b = zoo("lorenz")
    return b, b.simulate(jax.random.key(3), 0.05, subsample=2)


def test_fit_result_object(lorenz_data, capsys):
    b, data = lorenz_data
    fit = wj.MLE().fit(b.model, data, _box_starts(b, 1)[0])
    assert fit.successful and fit.method == "mle" and fit.num_steps > 0
    lo90, hi90 = fit.ci(0.90)
    lo99, hi99 = fit.ci(0.99)
    assert np.all(lo99 < lo90) and np.all(hi90 < hi99)
    np.testing.assert_allclose(hi90 - fit.params, 1.644854 * fit.stderr, rtol=1e-6)
    d = fit.to_dict()
    assert set(d["params"]) == {"sigma", "rho", "beta"} and d["status"] == "successful"
    fit.summary(truth=b.p_true)
    out = capsys.readouterr().out
    assert "WENDy-MLE fit of 'lorenz': converged" in out and "rho" in out
    assert "note:" not in out  # 1 % intervals well inside the box
    # the summary says what its Wald intervals assume and where calibrated ones are
    assert "intervals: Wald, from the sandwich covariance" in out and "wj.studies.BootstrapOrProfile()" in out
    assert "from the inverse Hessian: local" in dataclasses.replace(fit, covariance_method="hessian").table()
    wide = dataclasses.replace(fit, covariance=fit.covariance * np.array([1.0, 1e8, 1.0]))  # rho's only
    assert "note: the 95% intervals of rho reach outside the model's parameter box" in wide.table()
    assert fit.objective == pytest.approx(float(wj.weak.nll(fit.likelihood, fit.params)))
    clean = b.simulate(None, 0.0, subsample=2)
    assert fit.forward_error(b.u0, clean.t, clean.u) < 0.2


def test_mle_starts_from_p0_or_the_wls_estimate(lorenz_data):
    """`start` on Lorenz (a unique optimum): from a box start and from the WLS estimate the
    MLE reaches it, from the latter in fewer Newton steps ("best" and "both", which choose
    between or run both solves: the Hindmarsh-Rose test below)."""
    b, data = lorenz_data
    lik = wj.weak_likelihood(b.model, data)
    lo, hi = (jnp.asarray(x) for x in b.model.bounds)
    p0 = jnp.asarray(_box_starts(b, 1)[0])
    solve = eqx.filter_jit(lambda est, lik, p0: est.solve(lik, p0, lo, hi))
    sols = {start: solve(wj.MLE(start=start), lik, p0) for start in ("p0", "wls")}
    assert all(bool(sol.successful) for sol in sols.values())
    np.testing.assert_allclose(np.asarray(sols["wls"].params), np.asarray(sols["p0"].params), rtol=1e-6)
    assert int(sols["wls"].num_steps) < int(sols["p0"].num_steps)
    with pytest.raises(ValueError, match="start must be one of 'p0', 'wls', 'best', 'both'"):
        wj.MLE(start="random")


def test_the_mles_hessian_covariance_is_its_trust_regions_last_hessian(lorenz_data):
    """The MLE's solve ends with ∇²ℓ at the estimate (`extras["nll_hessian"]`), so the
    "hessian" covariance inverts it without differentiating ℓ again: the same matrix as
    `hessian_covariance`. WLS's trust region minimises another objective: no such extra."""
    b, data = lorenz_data
    lik = wj.weak_likelihood(b.model, data)
    lo, hi = (jnp.asarray(x) for x in b.model.bounds)
    solve = eqx.filter_jit(lambda est, lik, p0: est.solve(lik, p0, lo, hi))
    sol = solve(wj.MLE(), lik, jnp.asarray(_box_starts(b, 1)[0]))
    assert bool(sol.successful) and int(sol.num_steps) > 2
    kept = np.asarray(eqx.filter_jit(wj.MLE().covariance)(lik, sol, "hessian"))
    afresh = np.asarray(hessian_covariance(lik, sol.params))
    assert np.all(np.isfinite(kept))
    np.testing.assert_allclose(kept, afresh, rtol=1e-9, atol=0)
    assert "nll_hessian" not in solve(wj.WLS(), lik, sol.params).extras


@pytest.mark.slow
def test_mle_start_both_keeps_the_lower_local_minimum():
    """Hindmarsh-Rose at 20 % noise (M = 256): from the WLS estimate, shrunk towards 0, the
    MLE ends at a local minimum with a higher ℓ than from this box start; "both" keeps the
    box start's."""
    b = zoo("hindmarsh_rose")
    lik = wj.weak_likelihood(b.model, b.simulate(jax.random.key(0), 0.2, subsample=4))
    assert b.model.bounds is not None
    lo, hi = (jnp.asarray(x) for x in b.model.bounds)
    p0 = lo + np.random.default_rng(0).uniform(size=lo.size) * (hi - lo)
    solve = eqx.filter_jit(lambda est, lik, p0: est.solve(lik, p0, lo, hi))
    given, best, both = (solve(wj.MLE(start=s), lik, p0) for s in ("p0", "best", "both"))
    assert bool(given.successful) and bool(best.successful) and bool(both.successful)
    assert float(best.objective) > float(given.objective) + 50, (float(best.objective), float(given.objective))
    np.testing.assert_array_equal(np.asarray(both.params), np.asarray(given.params))
    assert int(both.num_steps) == int(given.num_steps) + int(best.num_steps)


@pytest.mark.slow
def test_several_trajectories_in_one_fit():
    b = zoo("lotka_volterra")
    one = b.simulate(jax.random.key(0), 0.05, subsample=2)
    two = [one, b.simulate(jax.random.key(1), 0.05, subsample=2)]
    f1 = wj.IRLS().fit(b.model, one)
    f2 = wj.IRLS().fit(b.model, two)
    assert f2.successful
    assert _rel_err(f2.params, b.p_true) < 0.05
    # twice the data: standard errors shrink by about √2
    np.testing.assert_allclose(f2.stderr / f1.stderr, 1 / math.sqrt(2), rtol=0.25)


def test_noiseless_data_switch_to_wls_with_warning():
    b = zoo("logistic")
    data = b.simulate(None, 0.0, subsample=2)
    with pytest.warns(UserWarning, match="noiseless") as caught:
        fit = wj.MLE().fit(b.model, data)
    assert any(w.filename == __file__ for w in caught)  # points at the caller's line
    assert fit.method == "wls"
    assert _rel_err(fit.params, b.p_true) < 1e-3


@pytest.mark.slow
def test_irls_shapiro_wilk_option(lorenz_data):
    b, data = lorenz_data
    plain = wj.IRLS().fit(b.model, data)
    sw = wj.IRLS(shapiro_wilk=True).fit(b.model, data)
    assert sw.status in (RESULTS.successful, RESULTS.shapiro_wilk_stop)
    np.testing.assert_allclose(sw.params, plain.params, rtol=1e-4)
    # the test runs inside the compiled solve (a host callback), so it is jit- and vmap-able
    lik = wj.weak.stack_likelihoods([plain.likelihood, plain.likelihood])
    lo, hi = -jnp.inf * jnp.ones(3), jnp.inf * jnp.ones(3)
    sols = jax.jit(jax.vmap(lambda lik: wj.IRLS(shapiro_wilk=True).solve(lik, jnp.asarray(plain.params), lo, hi)))(lik)
    np.testing.assert_allclose(sols.params[0], sw.params, rtol=1e-10)
    assert int(sols.num_steps[1]) == sw.num_steps


def test_step_limit_warns_and_reports_status(lorenz_data):
    b, data = lorenz_data
    with pytest.warns(RuntimeWarning, match="step limit"):
        fit = wj.MLE(max_steps=1).fit(b.model, data, _box_starts(b, 1)[0])
    assert fit.status == RESULTS.max_steps_reached and not fit.successful
    assert "NOT CONVERGED" in str(fit)


def test_stalled_solve_warns_and_reports_status(lorenz_data, monkeypatch):
    """`fit`'s branch for a trust region that collapsed away from stationarity (the stall
    itself is tested in test_trust_region.py): the solve's status is replaced by `stalled`."""
    from wendyjax.estimators import _base

    solve = _base._solve
    monkeypatch.setattr(_base, "_solve", lambda *a: eqx.tree_at(lambda s: s.result, solve(*a), RESULTS.stalled))
    b, data = lorenz_data
    with pytest.warns(RuntimeWarning, match="stalled on model 'lorenz': The solver stopped without converging"):
        fit = wj.MLE(max_steps=3).fit(b.model, data, _box_starts(b, 1)[0])
    assert fit.status == RESULTS.stalled and not fit.successful
    assert "NOT CONVERGED" in str(fit)


def _nan_model():
    # ℓ is NaN wherever p2 <= 0 (log of a negative number)
    return wj.ODEModel(lambda u, p, t: -p[0] * u + jnp.log(p[1]) * 0.0 * u, 1, 2, name="nan_model")


def test_nonfinite_start_raises_or_reports():
    model = _nan_model()
    data = zoo("logistic").simulate(jax.random.key(0), 0.05, subsample=4)
    data = wj.Trajectory(data.t, np.asarray(data.u))
    with pytest.raises(RuntimeError, match="failed on model 'nan_model'"):
        wj.MLE().fit(model, data, [1.0, -1.0])
    with pytest.warns(RuntimeWarning):
        fit = wj.MLE().fit(model, data, [1.0, -1.0], throw=False)
    assert fit.status == RESULTS.nonfinite


def test_bounds_are_respected():
    """Logistic with p1 capped below its true value 1: the estimate sits on the bound."""
    b = zoo("logistic")
    data = b.simulate(jax.random.key(0), 0.05, subsample=2)
    fit = wj.MLE().fit(b.model, data, [0.5, -0.5], bounds=([0.0, -10.0], [0.8, 0.0]))
    assert fit.successful and fit.params[0] == pytest.approx(0.8)


# --- bad input --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(p0=[1.0, 28.0]), r"p0 must have shape \(3,\)"),
        (dict(p0=[10.0, np.nan, 2.0]), "p0 contains NaN"),
        (dict(p0=[30.0, 28.0, 2.0]), r"p0 lies outside the bounds: sigma = 30"),
        (dict(p0=[10.0, 28.0, 2.0], bounds=([0, 0], [1, 1])), r"bounds must be two arrays of shape \(3,\)"),
        (dict(p0=[10.0, 28.0, 2.0], bounds=([0, 0, 5], [20, 35, 1])), "lower <= upper"),
        (dict(p0=[10.0, 28.0, 2.0], bounds=([0, 0, 0],)), "bounds must be 'model', None or a pair"),
        (dict(p0=[10.0, 28.0, 2.0], method="newton"), "estimator must be one of"),
        (dict(p0=[10.0, 28.0, 2.0], covariance="bootstrap"), "covariance must be one of"),
    ],
)
def test_fit_rejects_bad_input(lorenz_data, kwargs, match):
    b, data = lorenz_data
    with pytest.raises(ValueError, match=match):
        wj.estimators.get_estimator(kwargs.pop("method", "mle")).fit(b.model, data, **kwargs)


def test_p0_required_for_nonlinear_models():
    b = zoo("goodwin_3d")
    data = b.simulate(jax.random.key(0), 0.05, subsample=4)
    with pytest.raises(ValueError, match="p0 is required"):
        wj.MLE().fit(b.model, data, noise="lognormal")


def test_stack_likelihoods_rejects_mismatched_grids():
    b = zoo("logistic")
    a = wj.weak_likelihood(b.model, b.simulate(jax.random.key(0), 0.05, subsample=2))
    c = wj.weak_likelihood(b.model, b.simulate(jax.random.key(0), 0.05, subsample=4))
    with pytest.raises(ValueError, match="equal grid lengths"):
        wj.weak.stack_likelihoods([a, c])


def test_confidence_level_must_lie_in_unit_interval(lorenz_data):
    b, data = lorenz_data
    fit = wj.WLS().fit(b.model, data)
    for level in (0.0, 1.0, 95):  # an int is never a level: 95 is refused by `level: float` under the type checks
        with pytest.raises(ValueError, match="level must lie strictly between 0 and 1"), unchecked():
            fit.ci(level)

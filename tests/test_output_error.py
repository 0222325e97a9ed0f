"""Output error (Rummel et al. 2025 eq. 11), its multistart, the WENDy → output-error hybrid, and their
use in studies."""

import diffrax
import jax
import jax.numpy as jnp
import numpy as np
import optimistix as optx
import pytest
import scipy.stats
from _typecheck import unchecked
from _zoo import zoo

import wendyjax as wj
from wendyjax.estimators import OutputError, output_error_problem
from wendyjax.estimators._output_error import _Box

_LM = optx.LevenbergMarquardt(rtol=1e-8, atol=1e-8)  # optimistix's, the alternative to our trust region


@pytest.fixture(scope="module")
def lv():
    bench = zoo("lotka_volterra")
    data = bench.simulate(jax.random.key(7), noise_ratio=0.05, subsample=4)
    return bench, data


def test_box_transform_round_trip_and_feasibility():
    lo = jnp.array([0.0, -jnp.inf, 1.0, -jnp.inf])
    hi = jnp.array([2.0, 3.0, jnp.inf, jnp.inf])
    box = _Box(lo, hi)
    p = jnp.array([0.7, -4.0, 2.5, 1.3])
    assert np.allclose(box.to_box(box.to_free(p)), p, rtol=1e-12)
    # any free value maps inside the box (finite sides), including extreme ones
    for z in (jnp.full(4, -40.0), jnp.full(4, 40.0), jnp.zeros(4)):
        q = np.asarray(box.to_box(z))
        assert np.all(q >= np.where(np.isfinite(lo), lo, -np.inf))
        assert np.all(q <= np.where(np.isfinite(hi), hi, np.inf))
    # a start on a bound gets a finite free value
    assert np.all(np.isfinite(box.to_free(jnp.array([0.0, 3.0, 1.0, 0.0]))))


@pytest.mark.slow
def test_output_error_recovers_lotka_volterra_and_initial_state(lv):
    bench, data = lv
    fit = OutputError().fit(bench.model, data, np.asarray(bench.p_true) * 1.3)
    assert fit.successful and fit.method == "output_error"
    rel = np.linalg.norm(fit.params - bench.p_true) / np.linalg.norm(bench.p_true)
    assert rel < 0.02, rel  # 5 % noise, 257 samples: the Gauss-Newton s.e. are ~0.5 %
    assert np.allclose(fit.u0[0], bench.u0, rtol=0.05)
    lo, hi = fit.ci(0.999)
    assert np.all((lo < bench.p_true) & (bench.p_true < hi))
    # the whitened loss is ≈ n/2 when σ is estimated well (χ² with n − 6 dof)
    n = data.u.size
    assert abs(2 * fit.objective - n) < 5 * np.sqrt(2 * n)
    assert "Output-error fit of 'lotka_volterra': converged" in fit.table()
    assert "intervals: Wald, from the Gauss–Newton covariance" in fit.table()


@pytest.mark.slow
def test_gauss_newton_covariance_is_calibrated_over_seeds():
    """Coverage of the 95 % Gauss-Newton intervals of output error on Lotka-Volterra at 5 %
    noise (near starts, so every fit reaches the global minimum) over 40 datasets. (Not the
    logistic model: its first observation, the start of u(0), is negative in ~40 % of the
    datasets at 5 % noise and the forward solve from it blows up; those fits fail.)"""
    bench = zoo("lotka_volterra")
    study = wj.studies.monte_carlo(
        bench,
        "output_error",
        noise_levels=(0.05,),
        subsamples=(8,),
        n_runs=40,
        key=jax.random.key(11),
        p0=np.asarray(bench.p_true) * 1.2,
        progress=False,
    )
    assert study.settings["covariance"] == "gauss_newton"
    r = study.runs[0]
    assert r.params.shape == (40, 4) and np.all(r.status == "successful")
    assert np.allclose(np.median(r.params, axis=0), bench.p_true, rtol=0.05)
    assert r.covariance.shape == (40, 4, 4) and np.all(np.isfinite(r.covariance))
    # binomial(40, 0.95) per parameter at level 1 %/4 (Bonferroni over the 4 parameters):
    # a calibrated interval passes with probability ≥ 99 % (measured 0.925, 0.925, 0.975, 0.975)
    floor = scipy.stats.binom.ppf(0.01 / 4, 40, 0.95) / 40
    rows = [r for r in study.rows()]
    assert all(r["failure_rate"] == 0 for r in rows)
    for r in rows:
        assert r["coverage_0.95"] >= floor, r


@pytest.mark.slow
def test_lognormal_output_error_fits_log_states():
    bench = zoo("lotka_volterra")
    clean = wj.simulate(bench.model, bench.p_true, bench.u0, np.asarray(bench.t)[::4], None)
    data = wj.Trajectory(clean.t, np.asarray(wj.LogNormal(0.05).sample(clean.u, jax.random.key(2))))
    fit = OutputError().fit(bench.model, data, np.asarray(bench.p_true) * 0.9, noise="lognormal")
    assert fit.successful
    assert np.allclose(fit.params, bench.p_true, rtol=0.03)
    assert np.all(fit.u0 > 0)
    bad = wj.Trajectory(data.t, np.asarray(data.u).copy())
    u = np.asarray(bad.u).copy()
    u[5, 1] = -1.0
    with pytest.raises(ValueError, match="strictly positive"):
        output_error_problem(bench.model, wj.Trajectory(data.t, u), "lognormal")


def test_masked_entries_are_ignored(lv):
    bench, data = lv
    u = np.asarray(data.u).copy()
    rng = np.random.default_rng(0)
    mask = rng.uniform(size=u.shape) > 0.2
    mask[0] = True
    garbage = np.where(mask, u, 1e6)
    est = OutputError()
    p0 = np.asarray(bench.p_true) * 1.2
    a = est.fit(bench.model, wj.Trajectory(data.t, u, mask), p0, sigma=0.1)
    b = est.fit(bench.model, wj.Trajectory(data.t, garbage, mask), p0, sigma=0.1)
    assert a.successful and b.successful
    assert np.allclose(a.params, b.params, rtol=1e-10)
    assert np.allclose(a.params, bench.p_true, rtol=0.05)


@pytest.mark.parametrize("fit_u0", [True, False])
def test_the_covariance_from_the_trust_regions_jacobian_is_the_one_computed_afresh(lv, fit_u0):
    """`solve` keeps the trust region's Jacobian at the estimate (`extras["jacobian"]`), so
    `covariance` needs no second solve; without it (`on_host`, optimistix's solvers) the
    covariance recomputes the Jacobian there: the same matrix."""
    bench, data = lv
    est = OutputError(fit_u0=fit_u0)
    problem = output_error_problem(bench.model, data)
    lo, hi = (jnp.asarray(b) for b in bench.model.bounds)
    sol = jax.jit(est.solve)(problem, jnp.asarray(bench.p_true) * 1.2, lo, hi)
    assert bool(sol.successful) and int(sol.num_steps) > 2
    n_theta = len(bench.p_true) + (data.u.shape[1] if fit_u0 else 0)
    assert sol.extras["jacobian"].shape == (data.u.size, n_theta)
    assert "jacobian" not in sol.on_host().extras and "u0" in sol.on_host().extras
    covariance = jax.jit(est.covariance, static_argnums=2)
    kept, afresh = (np.asarray(covariance(problem, s, None)) for s in (sol, sol.on_host()))
    assert np.all(np.isfinite(kept))
    np.testing.assert_allclose(kept, afresh, rtol=1e-9, atol=0)


@pytest.mark.slow
def test_several_trajectories_of_different_lengths():
    bench = zoo("lotka_volterra")
    t = np.asarray(bench.t)[::4]
    trajs = []
    for i, (u0, n) in enumerate((([1.0, 1.0], len(t)), ([2.0, 0.5], 180))):
        clean = wj.simulate(bench.model, bench.p_true, u0, t[:n], None)
        noisy = wj.AdditiveGaussian(0.03).sample(clean.u, jax.random.key(i))
        trajs.append(wj.Trajectory(clean.t, noisy))
    fit = OutputError().fit(bench.model, trajs, np.asarray(bench.p_true) * 1.2)
    assert fit.successful and fit.u0.shape == (2, 2)
    assert np.allclose(fit.params, bench.p_true, rtol=0.02)
    assert np.allclose(fit.u0, [[1.0, 1.0], [2.0, 0.5]], rtol=0.05)


@pytest.mark.slow
def test_bounds_are_honoured(lv):
    bench, data = lv
    # a box that excludes p3* = 6: the trust region ends on the bound (active set) ...
    lower, upper = np.zeros(4), np.array([10.0, 10.0, 5.0, 10.0])
    fit = OutputError().fit(bench.model, data, [2.5, 1.2, 4.0, 1.2], bounds=(lower, upper))
    assert fit.successful
    assert np.all(fit.params >= lower) and np.all(fit.params <= upper)
    assert fit.params[2] == 5.0
    # ... optimistix's LM with the sigmoid change of variables stays strictly inside,
    # approaching the bound without meeting its step tolerance (forward-mode Jacobian: the
    # estimator compiled for the optimiser comparison below; the sensitivity Jacobian
    # equals it to 1e-10, and optimistix with sensitivities runs in the blow-up test)
    with pytest.warns(RuntimeWarning, match="step limit"):
        fit = OutputError(solver=_LM, jacobian="forward_mode").fit(
            bench.model, data, [2.5, 1.2, 4.0, 1.2], bounds=(lower, upper)
        )
    assert np.all(fit.params >= lower) and np.all(fit.params <= upper) and fit.params[2] > 4.99


@pytest.mark.slow
def test_sensitivities_equal_forward_mode_and_optimizers_agree(lv):
    bench, data = lv
    problem = output_error_problem(bench.model, data)
    p, x0 = jnp.asarray(bench.p_true) * 1.1, problem.x0

    def jac(jacobian):
        est = OutputError(jacobian=jacobian)
        return jax.jit(jax.jacfwd(lambda p, x: est.residuals(problem, p, x)[0], argnums=(0, 1)))(p, x0)

    for a, b in zip(jac("sensitivity"), jac("forward_mode")):
        assert np.max(np.abs(a - b)) < 1e-10 * np.max(np.abs(b))
    p0 = np.asarray(bench.p_true) * 1.2
    tr = OutputError().fit(bench.model, data, p0)
    ox = OutputError(solver=_LM, jacobian="forward_mode").fit(bench.model, data, p0)
    assert tr.successful and ox.successful
    assert np.allclose(tr.params, ox.params, rtol=1e-5)
    with (
        pytest.raises(TypeError, match=r"solver must be a solver object such as wendyjax.estimators.TrustRegion\(\)"),
        unchecked(),
    ):
        OutputError(solver="optimistix")  # pyright: ignore[reportArgumentType]  # the wrong input under test
    with pytest.raises(TypeError, match="solver must be a solver object"), unchecked():
        OutputError(solver=optx.BFGS(rtol=1e-8, atol=1e-8))  # a minimiser, not a least-squares solver  # pyright: ignore[reportArgumentType]  # the wrong input under test
    with pytest.raises(ValueError, match="OutputError: max_steps must be a positive integer"):
        OutputError(max_steps=-5)
    with pytest.raises(ValueError, match="jacobian must be"):
        OutputError(jacobian="fd")


@pytest.mark.slow
def test_failed_forward_solves_are_reported(lv):
    bench, data = lv
    est = OutputError(ode_max_steps=3)  # too few steps to reach the last sample
    with pytest.raises(RuntimeError, match="forward simulation"):
        est.fit(bench.model, data, bench.p_true)
    # the status of the jitted solve: `fit` returns `est.solve`'s result unchanged
    with pytest.warns(RuntimeWarning, match="forward simulation"):
        fit = est.fit(bench.model, data, bench.p_true, throw=False)
    assert fit.status == wj.RESULTS.forward_failed and not fit.successful


@pytest.mark.slow
def test_multistart_keeps_the_best_successful_fit(lv):
    bench, data = lv
    problem = output_error_problem(bench.model, data)
    lo, hi = (jnp.asarray(b) for b in bench.model.bounds)
    p0s = jax.random.uniform(jax.random.key(5), (6, 4), minval=lo, maxval=hi)
    best, every = jax.jit(OutputError().solve_multistart)(problem, p0s, lo, hi)
    ok = np.asarray(every.successful)
    assert ok.any()
    loss = np.where(ok, np.asarray(every.objective), np.inf)
    assert float(best.objective) == pytest.approx(loss.min())
    # each vmapped start equals its single solve (through `fit`, the same jitted solve as
    # the other fits of `data` in this module, so it is not compiled again)
    single = OutputError().fit(bench.model, data, p0s[1], throw=False)
    assert np.allclose(every.params[1], single.params, rtol=1e-7)


@pytest.mark.slow
def test_hybrid_refines_the_wendy_estimate(lv):
    bench, data = lv
    p0 = np.asarray(bench.p_true) * 1.3
    hybrid = wj.Hybrid().fit(bench.model, data, p0)
    assert hybrid.method == "hybrid" and hybrid.wendy_status == wj.RESULTS.successful
    direct = OutputError().fit(bench.model, data, hybrid.wendy_params)
    assert np.allclose(hybrid.params, direct.params, rtol=1e-8)
    # its objective at given parameters (from the fit's initial states) is the loss the fit reports
    problem = wj.Hybrid().problem(bench.model, wj.data.as_dataset(data), u0=hybrid.u0)
    assert float(wj.Hybrid().objective(problem, jnp.asarray(hybrid.params))) == pytest.approx(
        hybrid.objective, rel=1e-8
    )
    assert "hybrid" in hybrid.table()


@pytest.mark.slow
def test_hybrid_in_studies():
    """The hybrid estimator in a study (output error alone: the calibration test above)."""
    bench = zoo("lotka_volterra")
    study = wj.studies.monte_carlo(
        bench,
        wj.Hybrid(output_error=OutputError(ode_solver=diffrax.Tsit5())),
        noise_levels=(0.05,),
        subsamples=(8,),
        n_runs=3,
        key=jax.random.key(1),
        p0=np.asarray(bench.p_true) * 1.2,
        progress=False,
    )
    r = study.runs[0]
    assert r.params.shape == (3, 4) and np.all(r.status == "successful")
    assert np.allclose(np.median(r.params, axis=0), bench.p_true, rtol=0.05)
    assert r.covariance.shape == (3, 4, 4) and np.all(np.isfinite(r.covariance))
    with pytest.raises(ValueError, match="gauss_newton"):
        wj.studies.monte_carlo(bench, "output_error", n_runs=2, covariance="sandwich", progress=False)
    with pytest.raises(ValueError, match="estimator must be one of"):
        wj.studies.monte_carlo(bench, "adjoint", n_runs=2, progress=False)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"u0": [1.0, 2.0, 3.0]}, "u0 must be 2 finite initial states"),
        ({"u0": [np.nan, 1.0]}, "u0 must be 2 finite initial states"),
        ({"sigma": [0.1, -1.0]}, "sigma must be a finite positive"),
        ({"noise": "poisson"}, "noise must be"),
        ({"bounds": ([0.0] * 4, [1.0] * 4)}, "p0 lies outside the bounds"),
    ],
)
def test_bad_input_is_refused(lv, kwargs, match):
    bench, data = lv
    with pytest.raises(ValueError, match=match):
        OutputError().fit(bench.model, data, bench.p_true, **kwargs)


def test_bad_data_is_refused(lv):
    bench, data = lv
    with pytest.raises(ValueError, match="state columns"):
        output_error_problem(bench.model, wj.Trajectory(data.t, np.asarray(data.u)[:, :1]))
    mask = np.ones(data.u.shape, bool)
    mask[:, 1] = False
    with pytest.raises(ValueError, match="never observed"):
        output_error_problem(bench.model, wj.Trajectory(data.t, data.u, mask), weighted=False)
    short = wj.Trajectory(data.t[:10], data.u[:10])
    with pytest.raises(ValueError, match="cannot estimate the noise level"):
        output_error_problem(bench.model, short)
    with pytest.raises(ValueError, match="wrong length|p0"):
        OutputError().fit(bench.model, data, [1.0, 2.0])
    positive = wj.Trajectory(data.t, np.abs(np.asarray(data.u)) + 0.1)
    with pytest.raises(ValueError, match="u0 must be positive"):
        OutputError().fit(bench.model, positive, bench.p_true, u0=[-1.0, 1.0], noise="lognormal")
    with pytest.raises(TypeError, match="ODEModel"):
        OutputError().fit(lambda u, p, t: u, data, bench.p_true)
    with pytest.raises(TypeError, match="ODEModel"):
        output_error_problem("lorenz", data)  # pyright: ignore[reportArgumentType, reportUnusedExpression]  # the wrong input under test
    with pytest.raises(ValueError, match="u0 must be 2 finite initial states"):  # the hybrid takes u0= too
        wj.Hybrid().fit(bench.model, data, bench.p_true, u0=[1.0, 1.0, 1.0])


@pytest.mark.slow
def test_exploding_parameters_give_a_status_not_an_exception():
    """u' = p1 u + p2 u² with u(0) = 0.01 and p2 > 0 blows up before t = 5 for every p in
    the box (u(0) held fixed: a fitted u(0) ≤ 0 would escape the blow-up): the fit ends
    with `forward_failed`, under jit and vmap, for both optimisers."""
    bench = zoo("logistic")
    data = bench.simulate(jax.random.key(0), subsample=8)
    problem = output_error_problem(bench.model, data, u0=[0.01])
    lo, hi = jnp.array([0.5, 1.0]), jnp.array([2.0, 2.0])
    p0s = jnp.array([[1.0, 1.5], [1.9, 1.1]])
    for optimizer in (wj.TrustRegion(), _LM):
        est = OutputError(max_steps=20, fit_u0=False, solver=optimizer, ode_max_steps=1024)
        sols = jax.jit(jax.vmap(est.solve, in_axes=(None, 0, None, None)))(problem, p0s, lo, hi)
        assert np.all(np.asarray(sols.result == wj.RESULTS.forward_failed)), optimizer
        assert np.all(np.isinf(np.asarray(sols.objective))), optimizer
    # `fit` passes the status on (warning or exception): test_failed_forward_solves_are_reported

import math
import warnings

import diffrax
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from _typecheck import unchecked
from _zoo import zoo

import wendyjax as wj


def test_logistic_matches_exact_solution():
    b = zoo("logistic")
    u = np.asarray(wj.solve(b.model, b.p_true, b.u0, b.t))[:, 0]
    t = np.asarray(b.t)
    exact = 0.01 * np.exp(t) / (1 - 0.01 + 0.01 * np.exp(t))
    assert np.max(np.abs(u - exact) / exact) < 1e-8


def test_stiff_solver_agrees_with_explicit():
    b = zoo("goodwin_3d")
    t = np.asarray(b.t)[::8]
    a = wj.solve(b.model, b.p_true, b.u0, t, solver=diffrax.Kvaerno5())
    c = wj.solve(b.model, b.p_true, b.u0, t, solver=diffrax.Tsit5())
    assert np.max(np.abs(np.asarray(a) - np.asarray(c))) < 1e-7


@unchecked()  # simulate's own messages for wrong types (subsample=2.5)
def test_simulate_bad_input():
    b = zoo("lorenz")
    with pytest.raises(ValueError, match=r"u0 must have shape \(3,\)"):
        wj.simulate(b.model, b.p_true, [1.0, 2.0], b.t, None)
    with pytest.raises(ValueError, match=r"p must have shape \(3,\)"):
        wj.simulate(b.model, [1.0, 2.0], b.u0, b.t, None)
    with pytest.raises(ValueError, match="PRNG key"):
        wj.simulate(b.model, b.p_true, b.u0, b.t, wj.AdditiveGaussian(0.1))
    with pytest.raises(ValueError, match="strictly increasing"):
        wj.simulate(b.model, b.p_true, b.u0, np.asarray(b.t)[::-1], None)
    with pytest.raises(ValueError, match="non-negative"):
        wj.AdditiveGaussian(-0.1)
    with pytest.raises(ValueError, match="non-negative"):
        wj.LogNormal(-1.0)
    with pytest.raises(ValueError, match="subsample"):
        b.simulate(jax.random.key(0), subsample=0)
    with pytest.raises(ValueError, match="subsample must be an integer >= 1, got 2.5"):
        b.simulate(jax.random.key(0), subsample=2.5)  # pyright: ignore[reportArgumentType]  # the wrong input under test
    # a noise ratio that would flip the noise's sign, and keys that are not keys
    with pytest.raises(ValueError, match="noise_ratio must be a finite number >= 0, got -0.1"):
        b.simulate(jax.random.key(0), -0.1)
    with pytest.raises(TypeError, match="key must be one PRNG key .* or an integer seed below 2..63, got str"):
        b.simulate("0", 0.1)  # pyright: ignore[reportArgumentType]  # the wrong input under test
    with pytest.raises(TypeError, match="key must be one PRNG key"):
        b.simulate(0.1, jax.random.key(0))  # arguments swapped  # pyright: ignore[reportArgumentType]  # the wrong input under test
    with pytest.raises(TypeError, match="key must be one PRNG key"):
        b.simulate(jax.random.split(jax.random.key(0), 3), 0.1)  # several keys
    with pytest.raises(TypeError, match="key must be one PRNG key .* below 2..63, got int"):
        b.simulate(2**64, 0.1)
    with pytest.raises(TypeError, match="key must be one PRNG key"):
        b.simulate(np.zeros(5, np.uint32), 0.1)  # raw key data of no generator's length  # pyright: ignore[reportArgumentType]  # the wrong input under test
    with pytest.raises(ValueError, match=r"noise_ratio must be a number, got \[0.1\]"):
        b.simulate(0, [0.1])  # pyright: ignore[reportArgumentType]  # the wrong input under test


def test_an_integer_seed_is_the_key_it_names():
    b = zoo("logistic")
    a, c = b.simulate(3, 0.05, subsample=8), b.simulate(jax.random.key(3), 0.05, subsample=8)
    np.testing.assert_array_equal(np.asarray(a.u), np.asarray(c.u))
    # NumPy and 0-d JAX integers, 0-d noise ratios and NumPy raw keys work as well
    for seed, ratio in (
        (np.int64(3), np.array(0.05)),
        (jnp.asarray(3), jnp.asarray(0.05)),
        (np.asarray(jax.random.PRNGKey(3)), 0.05),
    ):
        np.testing.assert_array_equal(np.asarray(b.simulate(seed, ratio, subsample=np.int64(8)).u), np.asarray(a.u))
    assert not np.array_equal(np.asarray(a.u), np.asarray(b.simulate(4, 0.05, subsample=8).u))


@pytest.mark.slow
def test_solver_failure_is_reported():
    blowup = wj.ODEModel(lambda u, p, t: p[0] * u**2, 1, 1)
    with pytest.raises(RuntimeError, match="failed to solve"):
        wj.solve(blowup, [1.0], [1.0], np.linspace(0, 2, 11))


def _noise_draws(noise, clean, n_keys=40):
    keys = jax.random.split(jax.random.key(7), n_keys)
    return np.asarray(jax.vmap(noise.sample, in_axes=(None, 0))(clean, keys))


def test_additive_gaussian_scale():
    b = zoo("lorenz")
    clean = wj.solve(b.model, b.p_true, b.u0, np.asarray(b.t)[::4])
    rms = math.sqrt(float(jnp.mean(clean**2)))
    eps = _noise_draws(wj.AdditiveGaussian(0.1), clean) - np.asarray(clean)
    n = eps.size
    # sample std of n Gaussians has relative standard error 1/sqrt(2n) (~0.16 % here)
    assert abs(eps.std() / (0.1 * rms) - 1) < 5 / math.sqrt(2 * n)
    assert abs(eps.mean()) < 5 * 0.1 * rms / math.sqrt(n)
    # per-state scale: each column has its own RMS
    eps = _noise_draws(wj.AdditiveGaussian(0.1, per_state=True), clean) - np.asarray(clean)
    col_rms = np.sqrt(np.mean(np.asarray(clean) ** 2, axis=0))
    n_col = eps.shape[0] * eps.shape[1]
    for d in range(3):
        assert abs(eps[..., d].std() / (0.1 * col_rms[d]) - 1) < 5 / math.sqrt(2 * n_col)
    # centred per-state scale: each column's standard deviation (Lorenz's z has mean ~23,
    # so its std is well below its RMS and the two scales are told apart)
    eps = _noise_draws(wj.AdditiveGaussian(0.1, per_state=True, centred=True), clean) - np.asarray(clean)
    col_std = np.asarray(clean).std(axis=0)
    assert col_std[2] < 0.5 * col_rms[2]
    for d in range(3):
        assert abs(eps[..., d].std() / (0.1 * col_std[d]) - 1) < 5 / math.sqrt(2 * n_col)


def test_lognormal_scale():
    b = zoo("goodwin_3d")
    clean = wj.solve(b.model, b.p_true, b.u0, np.asarray(b.t)[::4])
    z = np.log(_noise_draws(wj.LogNormal(0.05), clean) / np.asarray(clean))
    assert abs(z.std() / 0.05 - 1) < 5 / math.sqrt(2 * z.size)
    assert abs(z.mean()) < 5 * 0.05 / math.sqrt(z.size)


def _fornberg_exact(order, half_width):
    # independent construction: solve the moment equations Σ c_j x_j^i = i! δ_{i,order}
    x = np.arange(-half_width, half_width + 1) / half_width
    n = len(x)
    v = np.vander(x, n, increasing=True).T
    rhs = np.zeros(n)
    rhs[order] = math.factorial(order)
    c = np.linalg.solve(v, rhs)
    return c / np.linalg.norm(c)


def test_noise_filter_is_the_order6_finite_difference_stencil():
    from wendyjax.noise import _noise_filter

    f = _noise_filter(6, 15)
    assert np.allclose(f, _fornberg_exact(6, 7), atol=1e-9)
    assert np.isclose(np.linalg.norm(f), 1.0)
    # annihilates polynomials up to degree 5
    j = np.arange(-7, 8)
    for deg in range(6):
        assert abs(f @ j.astype(float) ** deg) < 1e-9 * 7.0**deg


def test_noise_estimate_recovers_sigma():
    t = np.linspace(0, 10, 4001)
    clean = np.stack([np.sin(t), 3 + np.cos(2 * t)], axis=1)
    sigma = np.array([0.05, 0.2])
    noisy = clean + sigma * np.asarray(jax.random.normal(jax.random.key(3), clean.shape))
    est = np.asarray(wj.estimate_noise_std(noisy))
    # ~3987 filtered values per state (correlated over 15 lags): 6 % is > 4 standard errors
    assert np.all(np.abs(est / sigma - 1) < 0.06)
    # noiseless smooth data: the estimate is tiny
    assert np.all(np.asarray(wj.estimate_noise_std(clean)) < 1e-6)
    with pytest.raises(ValueError, match="at least 15 samples"):
        wj.estimate_noise_std(clean[:10])


def test_integrate_any_rhs_with_nan_rows_after_a_failure():
    bench = zoo("lotka_volterra")
    t = np.linspace(0.0, 2.0, 21)
    ys = wj.integrate(bench.model.rhs, bench.p_true, bench.u0, t)
    np.testing.assert_allclose(ys, wj.solve(bench.model, bench.p_true, bench.u0, t), rtol=1e-6)
    # u' = u² from u0 = 1 blows up at t = 1: rows from the failure on are NaN, no exception
    blow = wj.integrate(lambda u, p, t: u**2, None, [1.0], np.linspace(0.0, 2.0, 21), max_steps=200)
    assert np.all(np.isfinite(blow[:10])) and np.all(np.isnan(blow[-5:]))
    # a decreasing grid integrates backwards: back from the end state to the initial one
    back = wj.integrate(bench.model.rhs, bench.p_true, ys[-1], t[::-1])
    np.testing.assert_allclose(back[::-1], ys, rtol=1e-5)
    with pytest.raises(ValueError, match="strictly monotone"):
        wj.integrate(bench.model.rhs, bench.p_true, bench.u0, np.r_[t[:3], t[1]])
    with pytest.raises(ValueError, match="strictly increasing"):
        wj.solve(bench.model, bench.p_true, bench.u0, t[::-1])


def test_setting_up_a_fit_in_float32_is_warned_about():
    b = zoo("logistic")
    data = b.simulate(0, 0.05, subsample=8)
    jax.config.update("jax_enable_x64", False)
    try:
        with warnings.catch_warnings(record=True) as caught:  # JAX's own dtype warnings too
            warnings.simplefilter("always")
            wj.weak_likelihood(b.model, data)
            wj.estimators.output_error_problem(b.model, data)
    finally:
        jax.config.update("jax_enable_x64", True)
    ours = [w for w in caught if "JAX is in float32" in str(w.message)]
    assert [str(w.message).split(":")[0] for w in ours] == ["weak likelihood", "output-error problem"]
    assert "(jax_enable_x64 is off)" in str(ours[0].message)
    assert all(w.filename == __file__ for w in ours)  # attributed to the caller, not the library

"""The weak residual and likelihood against the papers' formulas, finite differences and
Monte Carlo."""

import math
import warnings

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from _typecheck import unchecked
from _zoo import zoo
from scipy import stats

import wendyjax as wj
from wendyjax.weak import TestFunctionConfig, log_space_rhs
from wendyjax.weak._general import sensitivity_pattern


def _lik(bench, data, **kw):
    noise = "lognormal" if bench.noise.log_space else "gaussian"
    return wj.weak_likelihood(bench.model, data, noise, **kw)


# --- noiseless data: only integration error remains (Rummel et al. 2025 Prop. 1) -----------------------


@pytest.mark.slow
@pytest.mark.parametrize("name", ["logistic", "lorenz", "goodwin_2d", "goodwin_3d"])
def test_noiseless_residual_is_integration_error_only(name):
    b = zoo(name)
    data = b.simulate(None, noise_ratio=0.0)
    lik = _lik(b, data, sigma=1.0)
    r_true = np.asarray(wj.weak.residual(lik, b.p_true))
    bvec = np.asarray(lik.problem.b)
    rel = np.linalg.norm(r_true) / np.linalg.norm(bvec)
    assert rel < 1e-5, rel
    # and the residual does see a 10 % parameter change
    r_off = np.asarray(wj.weak.residual(lik, 1.1 * b.p_true))
    assert np.linalg.norm(r_off) / np.linalg.norm(bvec) > 1e3 * rel


# --- derivatives -------------------------------------------------------------------------


def _small_case(name):
    b = zoo(name)
    data = b.simulate(jax.random.key(2), subsample=8)
    lik = _lik(b, data, test_functions=TestFunctionConfig(k_max=15), linear=False)
    p = b.p_true * (1 + 0.05 * np.cos(np.arange(b.model.n_params)))
    return b, lik, jnp.asarray(p)


def _dense_pieces(lik, p):
    """Residual, dense linearisation L = ∂r/∂vec(U) and their p-derivatives, by autodiff
    of the plain residual (no block structure), for trajectory 0."""
    prob = lik.problem
    phi, dphi, u, t = prob.phi[0], prob.dphi[0], prob.u[0], prob.t[0]
    rhs = log_space_rhs(lik.model.rhs) if prob.log_space else lik.model.rhs
    n, d = u.shape

    def resid(p, uu):  # r = vec(Φ F) + vec(Φ̇ U), column-major
        f = jax.vmap(rhs, in_axes=(0, None, 0))(uu, p, t)
        return (phi @ f + dphi @ uu).T.reshape(-1)

    def lin(p):  # columns ordered (m, e) → index m*d + e
        return jax.jacfwd(resid, argnums=1)(p, u).reshape(-1, n * d)

    r = resid(p, u)
    dg = jax.jacfwd(resid, argnums=0)(p, u)  # (DK, J)
    d2g = jax.jacfwd(jax.jacfwd(resid, argnums=0), argnums=0)(p, u)  # (DK, J, J)
    L = lin(p)
    dL = jax.jacfwd(lin)(p)  # (DK, ND, J)
    d2L = jax.jacfwd(jax.jacfwd(lin))(p)  # (DK, ND, J, J)
    var = jnp.tile(prob.sigma[0] ** 2, n)
    return [np.asarray(x) for x in (r, dg, d2g, L, dL, d2L, var)]


def _analytic_grad_hess(lik, p):
    r"""Rummel et al. 2025 eqs. (7)–(8) with dense matrices.

    Two misprints of the paper are corrected: ∂_j S needs both ∂_jL Σ Lᵀ and its
    transpose, and the Hessian has the cross term 2 ∂_j gᵀ (∂_i S⁻¹) r for (i, j) and for
    (j, i). The regularisation (1-α)S + αI scales every derivative of S by 1-α.
    """
    r, dg, d2g, L, dL, d2L, var = _dense_pieces(lik, p)
    a = lik.diag_reg
    J = dg.shape[1]
    Sig = np.diag(var)
    S = (1 - a) * L @ Sig @ L.T + a * np.eye(len(r))
    Si = np.linalg.inv(S)
    dS = [(1 - a) * (dL[..., j] @ Sig @ L.T + L @ Sig @ dL[..., j].T) for j in range(J)]
    dSi = [-Si @ dS[j] @ Si for j in range(J)]
    grad = np.array([0.5 * (np.trace(Si @ dS[j]) + 2 * dg[:, j] @ Si @ r + r @ dSi[j] @ r) for j in range(J)])
    H = np.empty((J, J))
    for i in range(J):
        for j in range(J):
            d2S = (1 - a) * (
                d2L[..., i, j] @ Sig @ L.T
                + dL[..., i] @ Sig @ dL[..., j].T
                + dL[..., j] @ Sig @ dL[..., i].T
                + L @ Sig @ d2L[..., i, j].T
            )
            d2Si = Si @ dS[i] @ Si @ dS[j] @ Si - Si @ d2S @ Si + Si @ dS[j] @ Si @ dS[i] @ Si
            H[i, j] = 0.5 * (
                np.trace(dSi[i] @ dS[j] + Si @ d2S)
                + 2 * dg[:, j] @ dSi[i] @ r
                + 2 * dg[:, i] @ dSi[j] @ r
                + 2 * dg[:, j] @ Si @ dg[:, i]
                + 2 * d2g[:, i, j] @ Si @ r
                + r @ d2Si @ r
            )
    nll = 0.5 * (np.linalg.slogdet(S)[1] + r @ Si @ r + len(r) * math.log(2 * math.pi))
    return nll, grad, H


@pytest.mark.slow
@pytest.mark.parametrize("name", ["lorenz", "goodwin_2d", "goodwin_3d"])
def test_likelihood_matches_analytic_formulas(name):
    b, lik, p = _small_case(name)
    nll_a, grad_a, hess_a = _analytic_grad_hess(lik, p)
    assert np.isclose(float(lik(p)), nll_a, rtol=1e-10, atol=1e-10 * abs(nll_a))
    np.testing.assert_allclose(np.asarray(lik.grad(p)), grad_a, rtol=1e-7, atol=1e-9 * np.abs(grad_a).max())
    np.testing.assert_allclose(np.asarray(lik.hessian(p)), hess_a, rtol=1e-7, atol=1e-9 * np.abs(hess_a).max())


@pytest.mark.parametrize("name", ["lorenz", "goodwin_2d", pytest.param("goodwin_3d", marks=pytest.mark.slow)])
def test_derivatives_match_finite_differences(name, central_difference):
    b, lik, p = _small_case(name)
    p = np.asarray(p)
    h = 1e-5 * np.maximum(np.abs(p), 1e-2)
    g = np.asarray(lik.grad(p))
    g_fd = central_difference(lambda q: float(lik(q)), p, h)
    np.testing.assert_allclose(g, g_fd, rtol=1e-5, atol=1e-6 * np.abs(g).max())
    H = np.asarray(lik.hessian(p))
    H_fd = central_difference(lambda q: np.asarray(lik.grad(q)), p, h)
    np.testing.assert_allclose(H, H_fd, rtol=1e-5, atol=1e-6 * np.abs(H).max())
    assert np.allclose(H, H.T, rtol=1e-10, atol=1e-12 * np.abs(H).max())


# --- fast path for models linear in the parameters (Rummel et al. 2025 App. B) -------------------------


@pytest.mark.parametrize(
    "name",
    ["logistic", "lorenz", "lotka_volterra", "hindmarsh_rose", "ptb", "fitzhugh_nagumo", "lotka_volterra_lognormal"],
)
@pytest.mark.slow
def test_linear_fast_path_agrees_with_general_path(name):
    lognormal = name.endswith("_lognormal")
    b = zoo(name.removesuffix("_lognormal"))
    if lognormal:
        b = eqx.tree_at(lambda b: b.noise, b, wj.LogNormal(0.05))
    data = b.simulate(jax.random.key(4), subsample=4)
    fast = _lik(b, data)
    general = _lik(b, data, linear=False)
    assert fast.problem.log_space == lognormal
    assert fast.linear is not None and general.linear is None
    p = b.p_true * 0.9
    fs = (wj.weak.nll, wj.weak.nll_grad, wj.weak.nll_hessian, wj.weak.residual, wj.weak.covariance)
    every = eqx.filter_jit(lambda lik, p: [f(lik, p) for f in fs])  # one compiled program per path
    for f, a, c in zip(fs, every(fast, p), every(general, p)):
        a, c = np.asarray(a), np.asarray(c)
        assert np.max(np.abs(a - c)) <= 1e-10 * np.max(np.abs(c)), f.__name__


def test_linear_path_forms_only_structurally_nonzero_grams():
    # Lorenz: f = (p1 (y - x), x (p2 - z) - y, x y - p3 z); at p = 0 the state Jacobian
    # has rows (0, 0, 0), (-z, -1, -x), (y, x, 0); ∂²f/∂u∂p_j are (-1, 1, 0) in row 1,
    # 1 at (2, 1) and -1 at (3, 3)
    from wendyjax.weak._linear import jacobian_pattern, model_structure, term_structure

    b = zoo("lorenz")
    pattern = jacobian_pattern(b.model.rhs, 3, 3)
    expected = np.zeros((4, 3, 3), bool)
    expected[0, 1] = True
    expected[0, 2, :2] = True
    expected[1, 0, :2] = True
    expected[2, 1, 0] = True
    expected[3, 2, 2] = True
    np.testing.assert_array_equal(pattern, expected)
    every = term_structure(pattern)  # every entry its own weight function
    assert len(every.entries) == 9 and len(every.singles) == 9
    # pairs of entries sharing a column: column 0 holds 4 entries, column 1 holds 3, column 2 holds 2
    assert len(every.pairs) == 4 * 5 // 2 + 3 * 4 // 2 + 2 * 3 // 2
    # the weights are products of 1, z, y and x (the entries -z, y, ±x and constants): 8 distinct
    # products for the Φ-Φ Grams (1, z, x, y, z², zx, x², y²), 4 for the Φ̇-Φ ones
    s = model_structure(b.model.rhs, False, 3, 3)
    assert [s.entries[n] for n in range(9) if s.entry_class[n] < 0] == [
        (0, 1, 1),
        (1, 0, 0),
        (1, 0, 1),
        (2, 1, 0),
        (3, 2, 2),
    ]
    assert [s.entry_scale[n] for n in range(9) if s.entry_class[n] < 0] == [-1.0, -1.0, 1.0, 1.0, -1.0]
    x_entries = [n for n, e in enumerate(s.entries) if e in ((0, 1, 2), (0, 2, 1))]  # -x and x: one class
    assert s.entry_class[x_entries[0]] == s.entry_class[x_entries[1]] >= 0
    assert sorted((s.entry_scale[n] for n in x_entries)) == [-1.0, 1.0]
    assert len(s.classes) == 3 and len(s.pairs) == 8 and len(s.singles) == 4
    lik = _lik(b, b.simulate(jax.random.key(4), subsample=4))
    assert lik.linear is not None and lik.linear.grams.shape[1] == len(s.pairs) + len(s.singles) + 1 == 13
    # ∂S/∂p_i lives in block row and column of the equations p_i enters (with their
    # Jacobian columns): σ and ρ touch 5 of the 9 blocks, β 3 (the Hessian multiplies only these)
    blocks = {i: {(e, f) for j, e, f in lik.linear.derivative_pattern() if j == i} for i in range(3)}
    assert blocks[0] == {(0, 0), (0, 1), (0, 2), (1, 0), (2, 0)}
    assert blocks[1] == {(1, 1), (1, 0), (1, 2), (0, 1), (2, 1)}
    assert blocks[2] == {(2, 2), (1, 2), (2, 1)}


@pytest.mark.slow
def test_shared_grams_assemble_the_same_covariance():
    # Grams shared by entries that are constant multiples of one function of the state (and
    # the test functions' own Grams for constant weights) give the same S(p) as one Gram per
    # pair of entries, every one formed from the data
    from wendyjax.weak._linear import basis_grams, jacobian_pattern, linear_blocks, model_structure, term_structure

    for name, noise in (("lorenz", "gaussian"), ("logistic", "gaussian"), ("lotka_volterra", "lognormal")):
        bench = zoo(name)
        data = wj.simulate(
            bench.model,
            bench.p_true,
            bench.u0,
            bench.t[::4],
            wj.LogNormal(0.05) if noise == "lognormal" else bench.noise,
            jax.random.key(5),
        )
        lik = wj.weak_likelihood(bench.model, data, noise)
        prob, model = lik.problem, bench.model
        log_space = prob.log_space
        rhs = wj.weak.log_space_rhs(model.rhs) if log_space else model.rhs
        s = model_structure(model.rhs, log_space, model.n_states, model.n_params)
        every = term_structure(jacobian_pattern(rhs, model.n_states, model.n_params))
        formed = lambda x: sum(c != (-1, -1) for c in x.pairs) + sum(c != -1 for c in x.singles)  # noqa: E731
        if noise == "gaussian":
            assert formed(s) < formed(every)  # Grams formed from the data
        else:  # x' = p1 - p2 e^y, y' = -p3 + p4 e^x: two entries, no rounding-level ones of f(e^x)/e^x
            assert len(s.entries) == 2 and formed(s) == formed(every)
        bases = (prob.phi, prob.dphi, jax.vmap(basis_grams)(prob.phi, prob.dphi))
        one = jnp.arange(prob.phi.shape[0])
        shared, plain = (linear_blocks(model, x, log_space, bases, one, prob.u, prob.t, prob.sigma) for x in (s, every))
        for p in np.random.default_rng(0).normal(size=(3, model.n_params)):
            a, c = (np.asarray(x.assemble(x.term_coefficients(jnp.asarray(p)))) for x in (shared, plain))
            np.testing.assert_allclose(a, c, rtol=0, atol=1e-12 * np.max(np.abs(c)))


@pytest.mark.slow
def test_linear_path_refuses_a_structure_the_random_probes_missed():
    # the rate p1 is switched on at t = 5: at the probe times t in [0.5, 1.5] its Jacobian
    # entry is zero, so the Gram it weights would be dropped from S; the data reveal it
    def rhs(u, p, t):
        return jnp.array([-p[0] * u[0] + jnp.where(t > 5.0, p[1], 0.0) * u[0] + 1.0])

    model = wj.ODEModel(rhs, ["x"], ["a", "b"], name="switched")
    assert model.linear_in_params
    t = jnp.linspace(0.0, 10.0, 257)
    data = wj.simulate(model, jnp.array([1.0, 0.5]), jnp.array([2.0]), t, wj.AdditiveGaussian(0.05), jax.random.key(2))
    with pytest.warns(RuntimeWarning, match="does not hold on the data"):
        lik = wj.weak_likelihood(model, data, "gaussian")
    assert lik.linear is None
    general = wj.weak_likelihood(model, data, "gaussian", linear=False)
    assert float(wj.weak.nll(lik, jnp.array([1.0, 0.5]))) == float(wj.weak.nll(general, jnp.array([1.0, 0.5])))
    with pytest.raises(ValueError, match="linear=True"):
        wj.weak_likelihood(model, data, "gaussian", linear=True)
    # without the switch the fast path is taken, silently
    plain = wj.ODEModel(lambda u, p, t: jnp.array([-p[0] * u[0] + p[1] * u[0] + 1.0]), ["x"], ["a", "b"])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert wj.weak_likelihood(plain, data, "gaussian").linear is not None


@pytest.mark.slow
def test_linear_path_with_a_parameter_in_several_equations():
    # p0 enters all three equations, p2 none of the state Jacobian (a constant forcing):
    # the block pattern of ∂S/∂p_i must cover every equation p_i touches
    def rhs(u, p, t):
        x, y, z = u
        return jnp.array([p[0] * (y - x), -p[0] * y + p[1] * x * z, p[0] * x - p[1] * z + p[2]])

    model = wj.ODEModel(rhs, ["x", "y", "z"], ["a", "b", "c"], name="shared")
    p_true = jnp.array([0.8, 0.5, 0.3])
    t = jnp.linspace(0.0, 10.0, 257)
    data = wj.simulate(model, p_true, jnp.array([1.0, 0.5, 2.0]), t, wj.AdditiveGaussian(0.05), jax.random.key(0))
    fast = wj.weak_likelihood(model, data, "gaussian")
    general = wj.weak_likelihood(model, data, "gaussian", linear=False)
    assert fast.linear is not None
    assert {e for i, e, f in fast.linear.derivative_pattern() if i == 0} == {0, 1, 2}
    assert not any(i == 2 for i, _, _ in fast.linear.derivative_pattern())
    p = p_true * 1.1
    for f in (wj.weak.nll, wj.weak.nll_grad, wj.weak.nll_hessian):
        a, c = np.asarray(f(fast, p)), np.asarray(f(general, p))
        assert np.max(np.abs(a - c)) <= 1e-10 * np.max(np.abs(c)), f.__name__
    # a parameter that is pure forcing never enters S: no block of ∂S/∂p at all
    forced = wj.ODEModel(lambda u, p, t: -u + p[0], ["x"], ["a"], name="forced")
    data = wj.simulate(forced, jnp.array([1.0]), jnp.array([2.0]), t, wj.AdditiveGaussian(0.05), jax.random.key(1))
    fast = wj.weak_likelihood(forced, data, "gaussian")
    general = wj.weak_likelihood(forced, data, "gaussian", linear=False)
    assert fast.linear is not None and fast.linear.derivative_pattern() == ()
    for f in (wj.weak.nll, wj.weak.nll_grad, wj.weak.nll_hessian):
        a, c = np.asarray(f(fast, jnp.array([1.1]))), np.asarray(f(general, jnp.array([1.1])))
        assert np.max(np.abs(a - c)) <= 1e-10 * np.max(np.abs(c)), f.__name__


def _autodiff_hessian(lik, p):
    return np.asarray(jax.jacfwd(jax.grad(wj.weak.nll, argnums=1), argnums=1)(lik, p))


@pytest.mark.slow
def test_general_hessian_forms_only_the_nonzero_sensitivities_and_equals_autodiff():
    # Goodwin-3D in log space: the degradation rates p2, p6, p8 leave ∂f̃/∂x (up to the
    # rounding of f(eˣ)/eˣ), so their ∂S vanish; two trajectories of different lengths,
    # padded to a common K, exercise the padding of the per-trajectory pieces
    b = zoo("goodwin_3d")
    data = [b.simulate(jax.random.key(5), subsample=8), b.simulate(jax.random.key(6), subsample=16)]
    lik = _lik(b, data, test_functions=TestFunctionConfig(k_max=15), k=18)
    assert lik.sensitivity is not None and lik.sensitivity.active == (0, 2, 3, 4, 6)
    p = jnp.asarray(b.p_true * (1 + 0.05 * np.cos(np.arange(b.model.n_params))))
    value, grad, hess = wj.weak.nll_derivatives(lik, p)
    H = _autodiff_hessian(lik, p)
    np.testing.assert_allclose(np.asarray(hess), H, rtol=1e-9, atol=1e-11 * np.abs(H).max())
    assert np.isclose(float(value), float(wj.weak.nll(lik, p)), rtol=1e-13)
    np.testing.assert_allclose(
        np.asarray(grad), np.asarray(wj.weak.nll_grad(lik, p)), rtol=1e-10, atol=1e-12 * np.abs(np.asarray(grad)).max()
    )


@pytest.mark.slow
def test_general_hessian_falls_back_to_every_gram_when_the_data_reveal_a_missed_sensitivity():
    # b² switches a rate on at t = 5: at the probe times t in [0.5, 1.5] it never enters J,
    # so the probes alone would drop its ∂S; the data reveal it and every Gram is formed
    def rhs(u, p, t):
        return jnp.array([-(p[0] ** 2) * u[0] + jnp.where(t > 5.0, p[1] ** 2, 0.0) * u[0] + 1.0])

    model = wj.ODEModel(rhs, ["x"], ["a", "b"], name="switched_nonlinear")
    t = jnp.linspace(0.0, 10.0, 129)
    data = wj.simulate(model, jnp.array([1.0, 0.7]), jnp.array([2.0]), t, wj.AdditiveGaussian(0.05), jax.random.key(2))
    lik = wj.weak_likelihood(model, data, "gaussian")
    assert lik.linear is None and lik.sensitivity is not None and lik.sensitivity.active == (0, 1)
    p = jnp.array([1.1, 0.6])
    H = _autodiff_hessian(lik, p)
    np.testing.assert_allclose(np.asarray(wj.weak.nll_hessian(lik, p)), H, rtol=1e-9)
    # the probes' pattern alone misses b, and its Hessian is wrong
    probed = sensitivity_pattern(model.rhs, False, 1, 2)
    assert probed.tolist() == [[[True]], [[False]]]
    blind = eqx.tree_at(lambda m: m.sensitivity, lik, wj.weak.SensitivityStructure.from_pattern(probed))
    assert np.max(np.abs(np.asarray(wj.weak.nll_hessian(blind, p)) - H)) > 1e-3 * np.abs(H).max()


def test_forcing_the_linear_path_on_a_nonlinear_model_raises():
    b = zoo("goodwin_2d")
    with pytest.raises(ValueError, match="not linear in its parameters"):
        _lik(b, b.simulate(jax.random.key(0), subsample=8), linear=True)


# --- statistics at the truth (Rummel et al. 2025 Lemma 1, Bortz et al. 2023 Fig. 4) ----------------------------------


def _monte_carlo_whitened(bench, noise, n_runs, subsample, key):
    t = np.asarray(bench.t)[::subsample]
    clean = wj.solve(bench.model, bench.p_true, bench.u0, t, solver=bench.solver)
    sigma = np.asarray(noise.std(clean))
    keys = jax.random.split(key, n_runs)
    draws = np.asarray(jax.vmap(noise.sample, in_axes=(None, 0))(clean, keys))
    # the test functions depend on the data only through the selected radius: build once
    u0 = np.log(draws[0]) if noise.log_space else draws[0]
    tf = wj.weak.build_test_functions(t, u0)
    lik = wj.weak_likelihood(
        bench.model, [wj.Trajectory(t, u) for u in draws], noise, sigma=sigma, test_functions=[tf] * n_runs
    )
    return np.asarray(wj.weak.whitened_residual(lik, bench.p_true))


@pytest.mark.slow
def test_whitened_residual_is_standard_normal_lotka_volterra():
    b = zoo("lotka_volterra")
    w = _monte_carlo_whitened(b, wj.AdditiveGaussian(0.05), 100, 4, jax.random.key(11))
    n_runs, n = w.shape
    # per-run mean and second moment; across independent runs their Monte Carlo standard
    # errors are sd/√R. 4 standard errors: a false alarm has probability < 1e-4.
    m, v = w.mean(axis=1), (w**2).mean(axis=1)
    assert abs(m.mean()) < 4 * m.std(ddof=1) / math.sqrt(n_runs)
    assert abs(v.mean() - 1) < 4 * v.std(ddof=1) / math.sqrt(n_runs)
    # the pooled distribution: skewness and excess kurtosis near 0 (standard errors
    # √(6/N) and √(24/N) for N independent normals), and a Kolmogorov–Smirnov check
    z = w.ravel()
    assert abs(stats.skew(z)) < 4 * math.sqrt(6 / z.size)
    assert abs(stats.kurtosis(z)) < 4 * math.sqrt(24 / z.size)
    assert stats.kstest(z, "norm").pvalue > 1e-3


def test_whitened_residual_lognormal_goodwin_3d():
    b = zoo("goodwin_3d")
    w = _monte_carlo_whitened(b, wj.LogNormal(0.02), 40, 4, jax.random.key(12))
    m, v = w.mean(axis=1), (w**2).mean(axis=1)
    assert abs(m.mean()) < 4 * m.std(ddof=1) / math.sqrt(len(m))
    assert abs(v.mean() - 1) < 4 * v.std(ddof=1) / math.sqrt(len(v))


# --- batching: padding, several trajectories, vmap --------------------------------------


@pytest.mark.slow
def test_padding_and_several_trajectories_of_different_lengths():
    b = zoo("lorenz")
    d1 = b.simulate(jax.random.key(5), subsample=4)
    d2 = b.simulate(jax.random.key(6), subsample=8)
    p = b.p_true * 1.05
    l1, l2 = _lik(b, d1), _lik(b, d2)
    both = _lik(b, [d1, d2])
    assert both.problem.phi.shape[0] == 2
    assert np.isclose(float(both(p)), float(l1(p)) + float(l2(p)), rtol=1e-12)
    np.testing.assert_allclose(np.asarray(both.grad(p)), np.asarray(l1.grad(p) + l2.grad(p)), rtol=1e-10)
    padded = _lik(b, d1, k=l1.problem.n_test_functions + 13)
    assert np.isclose(float(padded(p)), float(l1(p)), rtol=1e-12)
    np.testing.assert_allclose(np.asarray(padded.hessian(p)), np.asarray(l1.hessian(p)), rtol=1e-10)
    with pytest.raises(ValueError, match="smaller than"):
        _lik(b, d1, k=3)


def test_vmap_over_parameters_and_over_datasets():
    b = zoo("goodwin_2d")
    ps = b.p_true * (1 + 0.05 * jax.random.normal(jax.random.key(0), (4, 5)))
    data = [b.simulate(jax.random.key(i), subsample=8) for i in range(3)]
    liks = [_lik(b, d, k=100) for d in data]
    lik = liks[0]
    batched = jax.jit(jax.vmap(wj.weak.nll, in_axes=(None, 0)))(lik, ps)
    np.testing.assert_allclose(np.asarray(batched), [float(lik(p)) for p in ps], rtol=1e-12)
    stacked = jax.tree.map(lambda *x: jnp.stack(x), *liks)
    over_data = eqx.filter_jit(eqx.filter_vmap(wj.weak.nll_grad, in_axes=(eqx.if_array(0), None)))(stacked, b.p_true)
    for i, single in enumerate(liks):
        np.testing.assert_allclose(np.asarray(over_data[i]), np.asarray(single.grad(b.p_true)), rtol=1e-10)


# --- non-uniform grids and missing values -------------------------------------------------


def test_nonuniform_grid_and_missing_rows():
    b = zoo("logistic")
    full = b.simulate(None, noise_ratio=0.0)
    t, u = np.asarray(full.t), np.asarray(full.u)
    mask = np.ones_like(u, bool)
    mask[np.random.default_rng(0).choice(np.arange(5, len(t) - 5), 100, replace=False)] = False
    data = wj.Trajectory(t, np.where(mask, u, np.nan), mask=mask)
    with pytest.raises(ValueError, match="requires a uniform time grid"):
        _lik(b, data)
    lik = _lik(b, data, sigma=1.0, test_functions=TestFunctionConfig(radius=1.0))
    assert lik.problem.t.shape[1] == len(t) - 100
    rel = np.linalg.norm(wj.weak.residual(lik, b.p_true)) / np.linalg.norm(lik.problem.b)
    off = np.linalg.norm(wj.weak.residual(lik, 1.1 * b.p_true)) / np.linalg.norm(lik.problem.b)
    assert rel < 5e-3  # O(h²) trapezoid error across the gaps
    assert off > 10 * rel


# --- bad input -----------------------------------------------------------------------------


def test_bad_input_is_refused_before_work():
    b = zoo("lorenz")
    data = b.simulate(jax.random.key(0), subsample=8)
    with pytest.raises(ValueError, match="3 state columns but model .logistic. has 1"):
        wj.weak_likelihood(zoo("logistic").model, data)
    with pytest.raises(ValueError, match="strictly positive"):
        wj.weak_likelihood(b.model, data, "lognormal")
    with pytest.raises(ValueError, match="noise must be"):
        wj.weak_likelihood(b.model, data, "poisson")
    with pytest.raises(ValueError, match=r"sigma must be a finite non-negative scalar or have shape \(3,\)"):
        wj.weak_likelihood(b.model, data, sigma=[1.0, 2.0])
    with pytest.raises(ValueError, match="sigma must be a finite non-negative"):
        wj.weak_likelihood(b.model, data, sigma=[1.0, np.nan, 1.0])
    with pytest.raises(ValueError, match="needs at least 15 observed samples per trajectory, but the trajectory has 5"):
        wj.weak_likelihood(b.model, wj.Trajectory(np.arange(5.0), np.ones((5, 3))))
    with pytest.raises(TypeError, match="must be a Trajectory"), unchecked():  # its own message, not the annotation's
        wj.weak_likelihood(b.model, np.ones((10, 3)))  # pyright: ignore[reportArgumentType]  # the wrong input under test
    with pytest.raises(TypeError, match="ODEModel"), unchecked():
        wj.weak_likelihood(b.model.rhs, data)  # pyright: ignore[reportArgumentType]  # the wrong input under test
    lik = wj.weak_likelihood(b.model, data)
    for f in (lik, lik.grad, lik.hessian):
        with pytest.raises(ValueError, match=r"p must have shape \(3,\).*sigma, rho, beta"):
            f([1.0, 2.0])


def test_symmetric_grams_equal_the_full_products(rng):
    from wendyjax.weak._covariance import symmetric_grams, weighted_grams

    for k in (7, 8):  # halves of odd and even K
        phi, w = jnp.asarray(rng.normal(size=(k, 40))), jnp.asarray(rng.normal(size=(40, 3)))
        full = weighted_grams(phi, phi, w)
        np.testing.assert_allclose(symmetric_grams(phi, w), full, rtol=0, atol=1e-13)
        np.testing.assert_allclose(full, np.einsum("kn,nq,ln->qkl", phi, w, phi), rtol=0, atol=1e-13)

import jax
import numpy as np
import pytest
from _typecheck import unchecked
from _zoo import zoo

import wendyjax as wj
from wendyjax.weak import (
    TestFunctionConfig,
    TestFunctionInfo,
    TestFunctions,
    build_test_functions,
    bump,
    bump_derivative,
    select_radius,
)
from wendyjax.weak._test_functions import _full_matrices, _secant_corner


def test_bump_derivative_matches_finite_differences():
    x = np.linspace(-0.95, 0.95, 41)
    h = 1e-6
    fd = (bump(x + h) - bump(x - h)) / (2 * h)
    assert np.allclose(bump_derivative(x), fd, rtol=1e-6, atol=1e-12)
    assert np.all(bump(np.array([-1.0, 1.0, 1.5, -3.0])) == 0)
    assert np.isclose(bump(0.0), np.exp(-9.0))


def _info(tf: TestFunctions) -> TestFunctionInfo:
    assert tf.info is not None  # built test functions carry their info
    return tf.info


@pytest.fixture(scope="module")
def logistic_data():
    return zoo("logistic").simulate(jax.random.key(0), noise_ratio=0.05, subsample=4)


def test_orthonormal_basis_and_weak_derivative(logistic_data):
    t, u = np.asarray(logistic_data.t), np.asarray(logistic_data.u)
    tf = build_test_functions(t, u)
    phi, dphi = np.asarray(tf.phi), np.asarray(tf.dphi)
    k = tf.k
    assert phi.shape == (k, len(t)) and 1 <= k <= 200
    assert np.allclose(phi @ phi.T, np.eye(k), atol=1e-10)  # rows of Vᵀ
    # integration by parts: -Φ̇ y ≈ Φ y' for a smooth y (compact support, trapezoid rule)
    y, dy = np.sin(3 * t), 3 * np.cos(3 * t)
    assert np.max(np.abs(-dphi @ y - phi @ dy)) < 1e-3 * np.max(np.abs(phi @ dy))
    info = _info(tf)
    assert info.k == k and info.k_full > k
    s = info.singular_values
    assert s[0] / s[k - 1] <= 1e4
    assert np.sum(s[:k]) / np.sum(s) <= 0.95 or k == 200
    assert np.allclose(info.radii, np.array([1, 2, 4, 8])[: len(info.radii)] * info.radius)


def test_k_max_cap_is_recorded(logistic_data):
    # K = min(criteria, k_max); k_criteria is what the condition and information rules keep
    t, u = np.asarray(logistic_data.t), np.asarray(logistic_data.u)
    free = _info(build_test_functions(t, u))
    s = free.singular_values
    k_cond = int(np.sum(s / s[0] >= 1e-4))
    k_info = int(np.sum(np.cumsum(s) / np.sum(s) <= 0.95))
    assert free.k_criteria == min(k_cond, k_info) and free.k == free.k_criteria and not free.capped
    capped = _info(build_test_functions(t, u, TestFunctionConfig(k_max=free.k - 5)))
    assert capped.k == free.k - 5 and capped.k_criteria == free.k and capped.capped
    model = zoo("logistic").model
    fit = wj.MLE().fit(model, logistic_data, [0.5, -0.5], test_functions=TestFunctionConfig(k_max=free.k - 5))
    assert f"K = {free.k - 5} (capped by k_max; the criteria keep {free.k})" in str(fit)
    assert f"K = {free.k}\n" in str(wj.MLE().fit(model, logistic_data, [0.5, -0.5]))


def test_gram_eigendecomposition_matches_a_dense_svd(logistic_data):
    # the basis comes from eigh(Φᵀ Φ); it must span what the SVD of the stacked rows gives
    t, u = np.asarray(logistic_data.t), np.asarray(logistic_data.u)
    tf = build_test_functions(t, u)
    w = np.asarray(wj.data.trapezoid_weights(t))
    blocks = [_full_matrices(t, w, r, 9.0) for r in _info(tf).radii]
    full = np.concatenate([b[0].toarray() for b in blocks])
    dfull = np.concatenate([b[1].toarray() for b in blocks])
    q, s, vt = np.linalg.svd(full, full_matrices=False)
    k = tf.k
    assert np.allclose(_info(tf).singular_values, s, rtol=0, atol=1e-10 * s[0])
    rot = np.asarray(tf.phi) @ vt[:k].T  # orthogonal iff the spans agree
    assert np.allclose(rot @ rot.T, np.eye(k), atol=1e-10)
    dphi_svd = (q[:, :k].T @ dfull) / s[:k, None]
    assert np.allclose(rot @ dphi_svd, tf.dphi, rtol=0, atol=1e-9 * np.abs(dphi_svd).max())


def test_trapezoid_rule_is_spectrally_accurate_for_wide_bumps(logistic_data):
    t = np.asarray(logistic_data.t)
    tf = build_test_functions(t, logistic_data.u, TestFunctionConfig(radius=1.0))
    phi, dphi = np.asarray(tf.phi), np.asarray(tf.dphi)
    y, dy = np.sin(3 * t), 3 * np.cos(3 * t)
    assert np.max(np.abs(-dphi @ y - phi @ dy)) < 1e-8 * np.max(np.abs(phi @ dy))


def test_radius_selection_curve_is_exposed(logistic_data):
    t, u = np.asarray(logistic_data.t), np.asarray(logistic_data.u)
    sel = select_radius(t, u)
    assert sel.radii.shape == sel.errors.shape and len(sel.radii) >= 3
    assert 0 < sel.index < len(sel.radii) - 1
    assert np.isclose(sel.radius, sel.radii[sel.index])
    # integration error dominates at the smallest radius and drops to the noise floor
    assert sel.errors[0] > 10 * np.median(sel.errors)


def test_minimum_radius_grows_as_noise_drops():
    # Bortz et al. 2023 Fig. 2: for low noise the selected minimum radius increases
    b = zoo("logistic")
    radii = []
    for nr in (1e-1, 1e-6):
        d = b.simulate(jax.random.key(1), noise_ratio=nr, subsample=2)
        radii.append(select_radius(d.t, d.u).radius)
    assert radii[1] > radii[0]


def _jittered_grid(rng, n, t1=10.0):
    t = np.linspace(0, t1, n)
    t[1:-1] += rng.uniform(-0.3, 0.3, n - 2) * t1 / n
    return t


@pytest.mark.slow
def test_nonuniform_grid_requires_a_fixed_radius(rng):
    t = _jittered_grid(rng, 1000)
    u = np.sin(t)[:, None]
    with pytest.raises(ValueError, match="requires a uniform time grid"):
        build_test_functions(t, u)
    errs = []
    for n in (1000, 2000):
        t = _jittered_grid(rng, n)
        tf = build_test_functions(t, np.sin(t)[:, None], TestFunctionConfig(radius=0.5))
        phi, dphi = np.asarray(tf.phi), np.asarray(tf.dphi)
        # trapezoid weights are folded in: integration by parts holds to O(h²)
        y, dy = np.cos(2 * t), -2 * np.sin(2 * t)
        errs.append(np.max(np.abs(-dphi @ y - phi @ dy)) / np.max(np.abs(phi @ dy)))
    assert errs[0] < 1e-3
    assert errs[1] < errs[0] / 3  # second-order convergence


def test_padding_adds_masked_zero_rows(logistic_data):
    tf = build_test_functions(logistic_data.t, logistic_data.u)
    padded = tf.pad(tf.k + 7)
    assert padded.k == tf.k + 7
    assert np.all(np.asarray(padded.phi[tf.k :]) == 0) and np.all(np.asarray(padded.dphi[tf.k :]) == 0)
    assert np.asarray(padded.mask).sum() == tf.k
    with pytest.raises(ValueError, match="cannot pad"):
        tf.pad(tf.k - 1)


def test_too_few_samples():
    t = np.linspace(0, 1, 6)
    with pytest.raises(ValueError, match="too few samples for test functions: got 6, need at least 8"):
        build_test_functions(t, np.ones((6, 1)), TestFunctionConfig(radius=0.2))
    t = np.linspace(0, 1, 12)
    with pytest.raises(ValueError, match="fits in the time span"):
        build_test_functions(t, np.ones((12, 1)), TestFunctionConfig(radius=5.0))


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(eta=0),
        dict(radius=-1.0),
        dict(sub_rate=2.0),
        dict(sub_rate=4.0),
        dict(radii_factors=()),
        dict(max_cond=1.0),
        dict(min_info=0.0),
        dict(radius_min_time=2.0, radius_max_time=1.0),
        dict(rule="wendy"),
        dict(k_min=0),
    ],
)
@unchecked()  # the config's own checks (eta=0: beartype refuses an int where `float` is annotated)
def test_config_validation(kwargs):
    with pytest.raises(ValueError):
        TestFunctionConfig(**kwargs)


def test_secant_corner_finds_the_kink():
    x = np.arange(1.0, 21.0)
    y = np.where(x <= 6, 20 - 2 * x, 8.0)  # falls to x = 6, then flat
    assert x[_secant_corner(x, y, 2)] == 6 and x[_secant_corner(x, y, 1)] == 6
    assert x[_secant_corner(x, np.log(y), 2)] == 6  # the radius rule reads log ê


def test_matlab_rule_searches_every_radius_up_to_its_cap(logistic_data):
    t, u = np.asarray(logistic_data.t), np.asarray(logistic_data.u)
    dt, n = t[1] - t[0], len(t)
    cfg = TestFunctionConfig.matlab(k_min=4)
    assert cfg.rule == "matlab" and cfg.sub_rate == 3.0 and cfg.k_min == 4
    sel = select_radius(t, u, cfg)
    assert np.allclose(sel.radii / dt, np.arange(2, (n - 1) // 2 - 4 + 1))
    assert 0 < sel.index < len(sel.radii) - 1
    assert sel.errors[0] > 10 * np.median(sel.errors)  # integration error at the smallest radius
    b = zoo("logistic")  # and the minimum radius grows as the noise drops (Bortz et al. 2023 Fig. 2)
    radii = [
        select_radius(d.t, d.u, cfg).radius
        for d in (b.simulate(jax.random.key(1), noise_ratio=nr, subsample=4) for nr in (1e-1, 1e-6))
    ]
    assert radii[1] > radii[0]


def test_matlab_rule_basis_caps_radii_and_cuts_at_the_singular_value_corner(logistic_data):
    t, u = np.asarray(logistic_data.t), np.asarray(logistic_data.u)
    dt, n = t[1] - t[0], len(t)
    cap = ((n - 1) // 2 - 4) * dt
    tf = build_test_functions(t, u, TestFunctionConfig.matlab(k_min=4, radius=cap / 3))
    # 1×, 2× stay; 4× and 8× are capped to the search maximum (one radius, not dropped)
    assert np.allclose(_info(tf).radii, [cap / 3, 2 * cap / 3, cap])
    phi, dphi = np.asarray(tf.phi), np.asarray(tf.dphi)
    assert np.allclose(phi @ phi.T, np.eye(tf.k), atol=1e-10)
    y, dy = np.sin(3 * t), 3 * np.cos(3 * t)
    assert np.max(np.abs(-dphi @ y - phi @ dy)) < 1e-3 * np.max(np.abs(phi @ dy))
    # reference: dense SVD of the unnormalised rows ψ·Δt at every admissible shift, K at
    # the corner (relative ℓ1 secant misfit) of the cumulative singular values
    rows = []
    for r in _info(tf).radii:
        c = np.arange(n)[(t - r >= t[1] - 1e-9) & (t + r <= t[-2] + 1e-9)]
        rows += [bump((t - t[j]) / r) * dt for j in c]
    s = np.linalg.svd(np.array(rows), compute_uv=False)
    # from eigh of the Gram matrix: σ to ~√eps·σ₁ absolute
    assert np.allclose(_info(tf).singular_values[: len(s)], s, rtol=0, atol=1e-7 * s[0])
    cum = np.cumsum(s) / s.sum()
    y = cum / cum.max() * len(cum)
    x = np.arange(1.0, len(cum) + 1)
    cost = [
        np.sum(np.abs((y[0] + (y[k] - y[0]) * (x[: k + 1] - x[0]) / (x[k] - x[0]) - y[: k + 1]) / y[: k + 1]))
        + np.sum(np.abs((y[k] + (y[-1] - y[k]) * (x[k:] - x[k]) / (x[-1] - x[k]) - y[k:]) / y[k:]))
        for k in range(1, len(y) - 1)
    ]
    assert tf.k == max(4, int(np.argmin(cost)) + 2)


def test_matlab_rule_needs_room_to_search():
    t = np.linspace(0, 1, 20)
    with pytest.raises(ValueError, match="too few samples .* 'matlab' radius search"):
        select_radius(t, np.sin(t)[:, None], TestFunctionConfig.matlab(k_min=8))

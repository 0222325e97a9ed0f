"""The batched build of weak likelihoods (`wj.weak.build_batch`): the same selected radius and
the same likelihood as the per-dataset build it replaced (tests/_old_build.py), the same as
single builds, and the single fit's clear errors on bad input."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from _old_build import select_radius as old_select_radius, weak_problem as old_weak_problem
from _zoo import zoo

import wendyjax as wj
from wendyjax.weak import SensitivityStructure, WeakLikelihood, build_batch, select_radii

# (system, noise ratio, subsample): the settings of the paper suites (Rummel et al. 2025's M = 256
# and 1024 at 5 and 10 %; Bortz et al. 2023's systems at 1 to 20 %) and of the test suite
CASES = [
    ("logistic", 0.05, 4),
    ("logistic", 0.2, 16),
    ("lotka_volterra", 0.05, 4),
    ("lotka_volterra", 0.01, 1),
    ("lorenz", 0.05, 1),
    ("lorenz", 0.1, 4),
    ("fitzhugh_nagumo", 0.05, 2),
    ("goodwin_2d", 0.1, 4),
    ("goodwin_3d", 0.05, 4),
    ("hindmarsh_rose", 0.1, 4),
    ("sir_tdi", 0.1, 4),
]


def _datasets(name, noise, subsample, n):
    bench = zoo(name)
    return bench, [bench.simulate(jax.random.key(s), noise, subsample=subsample) for s in range(n)]


def _log_data(bench, data):
    u = np.asarray(data.u)
    return np.log(u) if bench.noise.log_space else u


@pytest.mark.parametrize("rule", ["wendy.jl", "matlab"])
@pytest.mark.parametrize("name, noise, subsample", CASES)
def test_radius_search_equals_the_per_dataset_search(name, noise, subsample, rule):
    bench, datasets = _datasets(name, noise, subsample, 3)
    config = wj.TestFunctionConfig() if rule == "wendy.jl" else wj.TestFunctionConfig.matlab(k_min=2 * 3)
    t = np.asarray(datasets[0].t)
    u = np.stack([_log_data(bench, d) for d in datasets])
    radii, errors, index = select_radii(t, u, config)  # one compiled search for the three datasets
    for r in range(len(datasets)):
        old_radii, old_errors, old_index = old_select_radius(t, u[r], config)
        np.testing.assert_array_equal(radii, old_radii)
        np.testing.assert_allclose(errors[r], old_errors, rtol=1e-10)
        assert index[r] == old_index


@pytest.mark.parametrize(
    "name, noise, subsample",
    [
        pytest.param(*c, marks=pytest.mark.slow) if c[0] == "sir_tdi" else c  # SIR-TDI (general path): 10 s on 2 cores
        for c in CASES
        if c[0] in ("lorenz", "lotka_volterra", "goodwin_2d", "sir_tdi")
    ],
)
def test_batched_likelihood_equals_the_per_dataset_build(name, noise, subsample):
    bench, datasets = _datasets(name, noise, subsample, 3)
    model, log = bench.model, bench.noise.log_space
    noise_kind = "lognormal" if log else "gaussian"
    batch = build_batch(model, datasets, noise_kind)
    liks = batch.likelihoods()
    rng = np.random.default_rng(1)
    for r, d in enumerate(datasets):
        old = old_weak_problem(d.t, d.u, log)
        one = jax.tree.map(lambda x, r=r: x[r], liks)
        np.testing.assert_allclose(one.problem.phi[0, : old.phi.shape[1]], old.phi[0], rtol=0, atol=1e-14)
        np.testing.assert_allclose(one.problem.b[0], old.b[0], rtol=1e-12, atol=1e-12 * float(jnp.max(abs(old.b))))
        np.testing.assert_allclose(one.problem.sigma, old.sigma, rtol=1e-12)
        # the old problem through the general path (no precomputed blocks): ℓ, ∇ℓ, ∇²ℓ to 1e-10
        reference = WeakLikelihood(model, old, None, 1e-10, SensitivityStructure.dense(model.n_states, model.n_params))
        for scale in (1.0, *rng.uniform(0.8, 1.2, size=2)):
            p = jnp.asarray(bench.p_true) * scale
            for f in (wj.weak.nll, wj.weak.nll_grad, wj.weak.nll_hessian):
                a, c = np.asarray(f(one, p)), np.asarray(f(reference, p))
                assert np.max(np.abs(a - c)) <= 1e-10 * np.max(np.abs(c)), (f.__name__, scale)
    # and a batch of one is the single fit's likelihood
    single = wj.weak_likelihood(model, datasets[1], noise_kind)
    p = jnp.asarray(bench.p_true)
    assert float(wj.weak.nll(single, p)) == pytest.approx(
        float(wj.weak.nll(jax.tree.map(lambda x: x[1], liks), p)), rel=1e-12
    )


def test_bases_are_kept_once_per_selected_radius():
    # datasets at very different noise select different radii: one basis each, shared by every
    # dataset that selects it, and every likelihood padded to the largest K
    bench = zoo("logistic")
    datasets = [bench.simulate(jax.random.key(s), nr, subsample=4) for s, nr in enumerate((0.2, 0.2, 1e-4, 1e-4))]
    batch = build_batch(bench.model, datasets)
    radii = [n["radius"] for n in batch.notes()]
    assert radii[0] == radii[1] and radii[2] == radii[3] and radii[0] < radii[2]
    phi = batch._tables[0]
    assert phi.shape[:2] == (1, 2)  # one trajectory, two bases
    ks = [n["k"] for n in batch.notes()]
    liks = batch.likelihoods([0, 2])
    assert liks.problem.phi.shape[2] == batch.n_test_functions == max(ks)
    assert [int(m.sum()) for m in np.asarray(liks.problem.kmask)[:, 0]] == [ks[0], ks[2]]


@pytest.mark.parametrize("table_rows", [None, 1])
def test_batch_of_several_trajectories_matches_single_fits(monkeypatch, table_rows):
    # table_rows=1: the pairs' Grams of every trajectory from its basis' product table
    if table_rows is not None:
        monkeypatch.setattr("wendyjax.weak._batch.TABLE_ROWS", table_rows)
    bench = zoo("lotka_volterra")
    sets = [
        [
            bench.simulate(jax.random.key(2 * s), 0.05, subsample=4),
            bench.simulate(jax.random.key(2 * s + 1), 0.05, subsample=8),
        ]
        for s in range(2)
    ]
    batch = build_batch(bench.model, sets)
    liks = batch.likelihoods()
    assert liks.problem.phi.shape[:2] == (2, 2) and batch.linear  # Lotka–Volterra: linear in its parameters
    assert all(np.unique(batch._index[:, s]).size == 1 for s in range(2))  # one basis per trajectory
    assert jax.tree.map(lambda x: x[0], liks).problem.n_trajectories == 2
    p = jnp.asarray(bench.p_true) * 1.05
    for r, ds in enumerate(sets):
        single = wj.weak_likelihood(bench.model, ds)
        one = jax.tree.map(lambda x, r=r: x[r], liks)
        for f in (wj.weak.nll, wj.weak.nll_grad):
            a, c = np.asarray(f(one, p)), np.asarray(f(single, p))
            assert np.max(np.abs(a - c)) <= 1e-10 * np.max(np.abs(c))


def test_batch_bad_input_gets_the_single_fits_errors():
    bench = zoo("logistic")
    data = bench.simulate(jax.random.key(0), 0.05, subsample=4)
    t, u = np.asarray(data.t), np.asarray(data.u)
    model = bench.model
    # datasets on different grids
    other = bench.simulate(jax.random.key(1), 0.05, subsample=8)
    with pytest.raises(ValueError, match="datasets on different grids: dataset 1 has 129 samples"):
        build_batch(model, [data, other])
    with pytest.raises(ValueError, match="datasets on different grids: dataset 1 has 257 samples from t = 0.1"):
        build_batch(model, [data, wj.Trajectory(t + 0.1, u)])
    # too few samples for the radius search, as a single fit says it
    short = wj.Batch(t[:9], np.stack([u[:9]] * 2))
    for sigma, need in ((None, "15 observed samples .* noise estimate"), (0.1, "10 observed samples .* radius search")):
        with pytest.raises(ValueError, match=f"needs at least {need}") as single:
            wj.weak_likelihood(model, wj.Trajectory(t[:9], u[:9]), sigma=sigma)
        with pytest.raises(ValueError) as batched:
            build_batch(model, short, sigma=sigma)
        assert str(batched.value) == str(single.value)
    # a row missing in one dataset only: different grids; a row with some states missing: the single fit's error
    nan_row = u.copy()
    nan_row[10] = np.nan
    with pytest.raises(ValueError, match="datasets on different grids: dataset 1 of the batch is missing other"):
        build_batch(model, wj.Batch(t, np.stack([u, nan_row])))
    fixed = wj.TestFunctionConfig(radius=1.0)  # the grid without the row is not uniform: no radius search
    gapped = build_batch(model, wj.Batch(t, np.stack([nan_row] * 2)), test_functions=fixed)
    assert gapped.likelihoods().problem.phi.shape[-1] == 256
    lv = zoo("lotka_volterra")
    d2 = lv.simulate(jax.random.key(0), 0.05, subsample=4)
    partial = np.stack([np.asarray(d2.u)] * 2)
    partial[1, 7, 0] = np.nan
    with pytest.raises(ValueError, match="1 sample times of dataset 1 \\(first at t=0.136719\\) have only some states"):
        build_batch(lv.model, wj.Batch(np.asarray(d2.t), partial))
    # inf is never a missing value; log-normal data must be positive
    bad = np.stack([u, u])
    bad[1, 3, 0] = np.inf
    with pytest.raises(ValueError, match="u contains inf at 1 observed entries \\(first at dataset 1, row 3, column 0"):
        wj.Batch(t, bad)
    neg = np.stack([np.abs(u), -np.abs(u)])
    with pytest.raises(ValueError, match="log-normal noise needs strictly positive data, but dataset 1: u\\[0, 0\\]"):
        build_batch(model, wj.Batch(t, neg), "lognormal")
    # noiseless and noisy datasets fit differently (weak least squares for the noiseless)
    clean = bench.simulate(None, 0.0, subsample=4)
    with pytest.raises(ValueError, match="look noiseless .* and the others do not"):
        build_batch(model, [data, clean])
    with pytest.raises(ValueError, match="u must have shape \\(R, len\\(t\\), D\\) = \\(R, 257, D\\)"):
        wj.Batch(t, u)


def test_blocks_are_equal_vmapped_sequential_and_from_the_product_table():
    # accelerators form the linear path's blocks vmapped over the datasets, CPUs one after
    # another; with one basis for all (`shared`) the pairs' Grams come from one product table
    from wendyjax.weak._batch import _blocks
    from wendyjax.weak._covariance import table_grams

    bench, datasets = _datasets("lorenz", 0.05, 4, 3)
    batch = build_batch(bench.model, datasets)
    liks = batch.likelihoods()
    assert np.unique(batch._index).size == 1
    phi, dphi, _, grams0 = batch._tables
    args = (
        bench.model,
        batch._structure,
        False,
        phi,
        dphi,
        grams0,
        jnp.asarray(batch._index),
        jnp.asarray(batch._u),
        liks.problem.t,
        jnp.asarray(batch._sigma),
    )
    reference = jax.tree.leaves(_blocks(*args, True, False))
    for sequential, shared in ((False, False), (True, True), (False, True)):
        for a, b in zip(jax.tree.leaves(_blocks(*args, sequential, shared)), reference):
            np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-14 * float(jnp.max(jnp.abs(b))))
    w = jnp.asarray(np.random.default_rng(0).normal(size=(5, phi.shape[-1])))
    full = jnp.einsum("kn,rn,ln->rkl", phi[0, 0], w, phi[0, 0])
    np.testing.assert_allclose(table_grams(phi[0, 0], w), full, rtol=0, atol=1e-13 * float(jnp.max(jnp.abs(full))))


def test_many_datasets_are_searched_in_chunks(monkeypatch):
    from wendyjax.weak import _test_functions

    bench, datasets = _datasets("logistic", 0.05, 4, 5)
    t, u = np.asarray(datasets[0].t), np.stack([np.asarray(d.u) for d in datasets])
    whole = select_radii(t, u)
    monkeypatch.setattr(_test_functions, "_SEARCH_CHUNK", 2)  # chunks of 2, 2 and 1 (padded to 2)
    chunked = select_radii(t, u)
    np.testing.assert_array_equal(chunked[2], whole[2])
    np.testing.assert_allclose(chunked[1], whole[1], rtol=1e-13)


def test_probe_matrices_formed_per_search_equal_the_cached_ones(monkeypatch):
    from wendyjax.weak import _test_functions

    bench, datasets = _datasets("lorenz", 0.05, 4, 3)
    t, u = np.asarray(datasets[0].t), np.stack([np.asarray(d.u) for d in datasets])
    _test_functions._cached_probes.cache_clear()
    assert _test_functions._cached_probes(t.tobytes(), wj.TestFunctionConfig()) is not None  # small: cached
    cached = select_radii(t, u)
    monkeypatch.setattr(_test_functions, "_PROBE_CACHE", 0)  # none cached: every search forms its probes
    monkeypatch.setattr(_test_functions, "_PROBE_BLOCK", 2**14)  # in several blocks
    _test_functions._cached_probes.cache_clear()
    try:
        assert _test_functions._cached_probes(t.tobytes(), wj.TestFunctionConfig()) is None
        formed = select_radii(t, u)
    finally:
        _test_functions._cached_probes.cache_clear()
    np.testing.assert_array_equal(formed[2], cached[2])
    np.testing.assert_allclose(formed[1], cached[1], rtol=1e-12)

import dataclasses
import json
import os
import subprocess
import sys
import textwrap
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from _typecheck import unchecked
from _zoo import zoo

import wendyjax as wj
from wendyjax.studies import (
    _engine,
    coverage,
    on_bound,
    relative_coefficient_error,
    relative_mse,
    relative_squared_bias,
    relative_variance,
)
from wendyjax.studies._engine import _cell_data
from wendyjax.studies._study import _failed


def test_metrics_against_hand_computed_values():
    p_true = np.array([2.0, -1.0])
    p_hat = np.array([[2.2, -1.0], [1.8, -0.5], [2.3, -1.5]])
    # eq. 12: ‖p̂ - p*‖ / ‖p*‖ with ‖p*‖ = √5
    expected = np.array([0.2, np.hypot(0.2, 0.5), np.hypot(0.3, 0.5)]) / np.sqrt(5)
    assert np.allclose(relative_coefficient_error(p_hat, p_true), expected)
    # eq. 15: mean errors (0.1, 0) → (0.1/2)², 0
    assert np.allclose(relative_squared_bias(p_hat, p_true), [0.0025, 0.0])
    # eq. 16: population variance / p*²: p1 values 2.2, 1.8, 2.3 (mean 2.1) → 0.14/3/4
    assert np.allclose(relative_variance(p_hat, p_true), [0.14 / 3 / 4, (0 + 0.25 + 0.25) / 3])
    # eq. 17: mean squared error / p*², = bias² + variance
    mse = relative_mse(p_hat, p_true)
    assert np.allclose(mse, [(0.04 + 0.04 + 0.09) / 3 / 4, (0 + 0.25 + 0.25) / 3])
    assert np.allclose(mse, relative_squared_bias(p_hat, p_true) + relative_variance(p_hat, p_true))
    # eq. 18: |p̂ - p*| < z·se; NaN standard errors never cover
    se = np.array([[0.15, 0.1], [0.05, np.nan], [0.2, 0.3]])
    assert np.allclose(coverage(p_hat, p_true, se), [2 / 3, 2 / 3])
    assert np.allclose(coverage(p_hat, p_true, se, z=1.0), [0.0, 1 / 3])
    # on a finite bound within 1e-6·max(1, |bound|); infinite bounds are never reached
    lower, upper = np.array([1.8, -np.inf]), np.array([2.3, -0.5])
    np.testing.assert_array_equal(on_bound(p_hat, lower, upper), [[False, False], [True, True], [True, False]])
    np.testing.assert_array_equal(on_bound(p_hat + 1e-7, lower, upper)[:, 0], [False, True, True])
    np.testing.assert_array_equal(on_bound(p_hat + 1e-5, lower, upper)[:, 0], [False, False, False])
    # one estimate's coefficient error is a scalar
    assert np.isclose(relative_coefficient_error(p_hat[0], p_true), expected[0])
    # a zero truth is measured absolutely, as the relative forms of zero parameters are
    assert np.allclose(relative_coefficient_error(p_hat, np.zeros(2)), np.linalg.norm(p_hat, axis=1))


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda p, t: relative_mse(p[0], t), r"p_hat must have shape \(runs, parameters\), got shape \(2,\)"),
        (lambda p, t: relative_squared_bias(p, t[:1]), r"p_true must have shape \(2,\) .* got shape \(1,\)"),
        (lambda p, t: relative_coefficient_error(p, 1.0), r"p_true must have shape \(2,\) .* got shape \(\)"),
        (
            lambda p, t: coverage(p, t, np.ones((2, 2))),
            r"stderr must have shape \(3, 2\) or \(2,\) .* got shape \(2, 2\)",
        ),
        (lambda p, t: on_bound(p, np.zeros(3), np.inf), r"lower must have shape \(2,\) or \(\) .* got shape \(3,\)"),
        # a z or standard errors no interval has: coverage 0 looked like a result
        (lambda p, t: coverage(p, t, np.ones(2), z=-2.0), "z must be a positive finite number of standard errors"),
        (lambda p, t: coverage(p, t, np.ones(2), z=float("nan")), "z must be a positive finite number"),
        (lambda p, t: coverage(p, t, -np.ones(2)), "stderr must be non-negative"),
        (lambda p, t: on_bound(p, 0.0, np.ones((2, 1))), r"upper must have shape .* got shape \(2, 1\)"),
    ],
)
def test_metrics_refuse_mismatched_shapes(call, message):
    p_hat = np.array([[2.2, -1.0], [1.8, -0.5], [2.3, -1.5]])
    with pytest.raises(ValueError, match=message):
        call(p_hat, np.array([2.0, -1.0]))


def test_a_failed_forward_solve_is_a_failed_run():
    """A run fails on non-finite estimates or covariances, a failed forward simulation of
    the estimate, or the estimator's own `forward_failed` (an output-error start whose
    solve blows up ends at p0 with finite numbers: it must not enter the coverage)."""
    n = 4
    params = np.tile([1.0, -1.0], (n, 1))
    cov = np.tile(np.eye(2), (n, 1, 1))
    cov[1, 0, 0] = np.inf
    forward_ok = np.array([True, True, False, True])
    status = np.array(["successful", "successful", "successful", "forward_failed"])
    runs = wj.studies.CellRuns(
        256,
        params,
        params,
        cov,
        status,
        np.ones(n, int),
        np.zeros(n),
        np.zeros(n),
        forward_ok,
        np.full(n, 10),
        np.full(n, 0.5),
    )
    assert list(_failed(runs)) == [False, True, True, True]


def test_estimates_on_the_box_are_counted_and_flagged():
    # 3 runs of a 2-parameter model in the box [0, 2] x [-2, 0]: run 0 interior, run 1 on
    # p2's upper bound, run 2 on both lower bounds, run 3 failed (on the box too: not counted)
    params = np.array([[1.0, -1.0], [1.2, 0.0], [0.0, -2.0], [0.0, -2.0]])
    n = len(params)
    runs = wj.studies.CellRuns(
        256,
        params,
        params,
        np.tile(0.01 * np.eye(2), (n, 1, 1)),
        np.array(["successful"] * n),
        np.ones(n, int),
        np.zeros(n),
        np.zeros(n),
        np.array([True, True, True, False]),
        np.full(n, 10),
        np.full(n, 0.5),
    )
    cell = wj.studies.Cell(np.array([1.0, -1.0]), np.array([0.5]), 0.05, 1)
    settings = {
        "level": 0.95,
        "bounds": [[0.0, -2.0], [2.0, 0.0]],
        "estimator": "MLE()",
        "n_runs": n,
        "seed": [0],
        "covariance": "hessian",
    }
    study = wj.studies.Study("toy", ("p1", "p2"), (cell,), (runs,), settings, (np.zeros(n),))
    rows = study.rows()
    assert [r["at_bound"] for r in rows] == [1 / 3, 2 / 3]
    assert all(r["n_at_bound"] == 2 and r["n_ok"] == 3 for r in rows)
    assert "2 run(s) that did not fail ended with an estimate on the parameter box's bounds" in study.table()
    assert "solver status other than successful" not in study.table()
    # a run that stopped at its step limit but simulates counts in the metrics: the table says so
    stopped = dataclasses.replace(
        runs, status=np.array(["successful", "max_steps_reached", "successful", "max_steps_reached"])
    )
    table = dataclasses.replace(study, runs=(stopped,)).table()
    assert "1 run(s) that did not fail stopped with a solver status other than successful (max_steps_reached)" in table
    del settings["bounds"]  # a study built without a recorded box has nothing on it
    assert all(r["at_bound"] == 0 and r["n_at_bound"] == 0 for r in study.rows())


def test_failed_runs_take_their_starts_errors_and_survive_a_round_trip(tmp_path):
    # run 2's forward simulation failed and run 3's covariance is infinite: both failed, so
    # their coefficient and forward errors are those of their starts p0 (Rummel et al. 2025 §3.3), and
    # bias, variance, MSE and coverage are over runs 0 and 1 only
    p_true = np.array([1.0, -1.0])
    params = np.array([[1.1, -1.0], [0.9, -1.0], [5.0, 5.0], [1.0, -1.2]])
    p0 = np.array([[2.0, -1.0], [2.0, -1.0], [1.0, -3.0], [1.0, 2.0]])
    cov = np.tile(0.01 * np.eye(2), (4, 1, 1))
    cov[3, 1, 1] = np.inf
    runs = wj.studies.CellRuns(
        256,
        params,
        p0,
        cov,
        np.array(["successful"] * 4),
        np.array([3, 4, 5, 6]),
        np.zeros(4),
        np.array([0.01, 0.03, np.nan, 0.02]),
        np.array([True, True, False, True]),
        np.full(4, 10.0),
        np.full(4, 0.5),
    )
    cell = wj.studies.Cell(p_true, np.array([0.5]), 0.05, 1)
    settings = {
        "level": 0.95,
        "bounds": [[-10.0, -np.inf], [10.0, np.inf]],
        "estimator": "MLE()",
        "n_runs": 4,
        "seed": [0, 1],
        "covariance": "sandwich",
        "kind": "monte_carlo",
        "radius": None,
    }
    p0_err = np.array([np.nan, np.nan, 0.7, 0.9])
    study = wj.studies.Study("toy", ("p1", "p2"), (cell,), (runs,), settings, (p0_err,), ("u",))
    row = study.rows()[0]
    assert row["n_ok"] == 2 and row["failure_rate"] == 0.5
    # coefficient errors 0.1/√2, 0.1/√2, ‖(0, -2)‖/√2 (p0 of run 2), ‖(0, 3)‖/√2 (p0 of run 3)
    assert np.isclose(row["median_coef_error"], (0.1 + 2.0) / 2 / np.sqrt(2))
    assert np.isclose(row["median_forward_error"], np.median([0.01, 0.03, 0.7, 0.9]))
    assert np.isclose(row["rel_variance"], 0.01) and np.isclose(row["rel_sq_bias"], 0.0)
    assert row["coverage_2se"] == 1.0 and row["cell"] == 0 and row["u0_u"] == 0.5
    text = study.to_json(tmp_path / "toy.json")
    json.loads(text, parse_constant=lambda c: pytest.fail(f"non-standard JSON constant {c}"))
    back = wj.studies.Study.load(tmp_path / "toy.json")
    assert back.rows() == study.rows() and back.table() == study.table()
    np.testing.assert_array_equal(back.p0_forward_error[0], p0_err)
    for name in ("params", "p0", "num_steps", "forward_ok", "status", "forward_error", "covariance"):
        np.testing.assert_array_equal(getattr(back.runs[0], name), getattr(runs, name))  # inf, NaN kept
    assert back.runs[0].num_steps.dtype.kind == "i" and back.runs[0].forward_ok.dtype == bool
    assert back.settings == settings and list(back.failed(0)) == [False, False, True, True]
    # a file from before p0_forward_error was saved reads with those errors unknown
    old = json.loads(text)
    del old["p0_forward_error"]
    assert np.all(np.isnan(wj.studies.Study.from_dict(old).p0_forward_error[0]))


@pytest.fixture(scope="module")
def small_study():
    bench = zoo("logistic")
    study = wj.studies.monte_carlo(
        bench,
        wj.MLE(),
        noise_levels=[0.05],
        subsamples=[4],
        n_runs=7,
        key=jax.random.key(3),
        batch_size=4,
        vectorize=True,
        progress=False,
    )
    return bench, study


@pytest.mark.slow
def test_small_study_end_to_end(small_study):
    bench, study = small_study
    (cell,), (runs,) = study.cells, study.runs
    assert runs.params.shape == (7, 2) and runs.covariance.shape == (7, 2, 2) and runs.m == 256
    assert np.all(runs.status == "successful") and np.all(runs.forward_ok)
    lo, hi = (np.asarray(b) for b in bench.model.bounds)
    assert np.all((runs.p0 >= lo) & (runs.p0 <= hi))  # starts drawn from the box
    assert len(np.unique(runs.p0[:, 0])) == 7
    rows = study.rows()
    assert [r["param"] for r in rows] == ["p1", "p2"]
    for j, row in enumerate(rows):
        assert row["n_runs"] == 7 and row["n_ok"] == 7 and row["failure_rate"] == 0
        assert np.isclose(row["rel_mse"], row["rel_sq_bias"] + row["rel_variance"])
        assert np.isclose(row["rel_mse"], np.mean((runs.params[:, j] - cell.p_true[j]) ** 2) / cell.p_true[j] ** 2)
        assert row["median_coef_error"] < 0.05
        assert row["at_bound"] == 0 and row["n_at_bound"] == 0  # interior estimates
    assert "rel_sq_bias" in study.to_csv().splitlines()[0]
    back = json.loads(study.to_json())
    assert back["settings"]["n_runs"] == 7 and len(back["runs"][0]["params"]) == 7
    settings = study.settings
    assert settings["key_impl"] == "threefry2x32" and settings["x64"] is True and settings["seed"] == [0, 3]
    assert settings["chunk_size"] == 4 and settings["n_chunks"] == 2  # 7 runs in two chunks of 4
    assert settings["grid"] == {"t0": 0.0, "t1": 10.0, "n": 1025} and settings["noise"].startswith("AdditiveGaussian")
    again = wj.studies.Study.from_dict(back)
    assert again.rows() == study.rows()
    np.testing.assert_array_equal(again.runs[0].covariance, runs.covariance)
    assert "p1" in str(study) and "logistic" in str(study) and "on box" in str(study)
    assert "box's bounds" not in str(study)  # no estimate on the box: no warning


def test_study_runs_equal_single_fits(small_study):
    # the chunked (4 + 3 padded to 4), vmapped study reproduces single fits of the same data
    bench, study = small_study
    (cell,), (runs,) = study.cells, study.runs
    k_data, _ = jax.random.split(jax.random.fold_in(jax.random.key(3), 0))
    t, _, keep, noisy = _cell_data(bench, cell, 7, k_data)
    for i in (0, 6):
        fit = wj.MLE().fit(bench.model, wj.Trajectory(t[keep], noisy[i]), p0=runs.p0[i])
        assert np.allclose(fit.params, runs.params[i], rtol=1e-7)  # solver tolerance 1e-8
        assert np.allclose(fit.covariance, runs.covariance[i], rtol=1e-6)


def test_sequential_study_equals_vmapped(small_study):
    # vectorize=False (lax.map inside the compiled chunk, the CPU default) gives the same fits
    bench, study = small_study
    seq = wj.studies.monte_carlo(
        bench,
        wj.MLE(),
        noise_levels=[0.05],
        subsamples=[4],
        n_runs=7,
        key=jax.random.key(3),
        batch_size=4,
        vectorize=False,
        progress=False,
    )
    assert study.settings["vectorize"] is True and seq.settings["vectorize"] is False
    a, b = study.runs[0], seq.runs[0]
    # batched and unbatched products round differently; both stop within the solver's
    # tolerances (1e-8), so the fits agree to that order
    assert np.allclose(a.params, b.params, rtol=1e-7, atol=0)
    assert np.allclose(a.covariance, b.covariance, rtol=1e-5, atol=0)
    assert np.all(np.abs(a.num_steps - b.num_steps) <= 1) and np.array_equal(a.status, b.status)


@pytest.mark.slow
def test_sweep_over_true_parameters():
    bench = zoo("logistic")
    grid = np.array([[1.0, -1.0], [0.8, -0.8]])
    study = wj.studies.sweep(
        bench, "wls", p_true=grid, noise_level=0.02, subsample=4, n_runs=3, key=jax.random.key(0), progress=False
    )
    assert len(study.cells) == 2
    for cell, runs, p in zip(study.cells, study.runs, grid):
        assert np.array_equal(cell.p_true, p)
        assert np.all(np.abs(runs.params - p) < 0.05 * np.abs(p))
    # the rows say which grid point they belong to
    body = study.table().splitlines()[3:-1]  # the last line: the stage timings
    assert [line.split()[:2] for line in body] == [["0", "0.02"], ["0", "0.02"], ["1", "0.02"], ["1", "0.02"]]
    assert [float(line.split()[4]) for line in body] == [1.0, -1.0, 0.8, -0.8]
    assert [r["cell"] for r in study.rows()] == [0, 0, 1, 1]
    # the saved key data and generator rebuild the key: the same study again (an integer
    # seed and a scalar noise level are accepted as well)
    key = jax.random.wrap_key_data(jnp.asarray(study.settings["seed"], jnp.uint32), impl=study.settings["key_impl"])
    again = wj.studies.sweep(
        bench, "wls", p_true=grid, noise_level=0.02, subsample=4, n_runs=3, key=key, progress=False
    )
    by_seed = wj.studies.monte_carlo(bench, "wls", noise_levels=0.02, subsamples=4, n_runs=3, key=0, progress=False)
    for a, b in zip(again.runs, study.runs):
        np.testing.assert_array_equal(a.params, b.params)
    np.testing.assert_array_equal(by_seed.runs[0].params, study.runs[0].params)  # key 0, setting 0, same truth


@pytest.mark.slow  # 9 s on 2 cores
def test_sweep_settings_share_chunks_and_every_stage_is_timed():
    # three settings of three runs on one grid: one chunk of nine (settings pooled), the same
    # estimates as chunks of three (one setting each), and the seconds of every stage recorded
    bench = zoo("logistic")
    grid = np.array([[1.0, -1.0], [0.9, -0.9], [1.1, -1.1]])
    kw: dict[str, Any] = dict(p_true=grid, noise_level=0.05, subsample=4, n_runs=3, key=2, progress=False)
    pooled = wj.studies.sweep(bench, "mle", batch_size=9, **kw)
    apart = wj.studies.sweep(bench, "mle", batch_size=3, **kw)
    assert pooled.settings["n_chunks"] == 1 and apart.settings["n_chunks"] == 3
    for a, b in zip(pooled.runs, apart.runs):
        np.testing.assert_allclose(a.params, b.params, rtol=1e-10)
        np.testing.assert_allclose(a.forward_error, b.forward_error, rtol=1e-8)
    timings = pooled.timings
    assert set(timings) == {"simulate_s", "build_s", "fit_s", "diagnostics_s", "total_s"}
    assert all(v >= 0 for v in timings.values()) and timings["total_s"] >= timings["fit_s"] + timings["build_s"]
    assert "time: simulate" in pooled.table() and "total" in pooled.table().splitlines()[-1]
    back = wj.studies.Study.from_dict(json.loads(pooled.to_json()))
    assert back.timings == pytest.approx(timings)


def test_auto_chunks_fill_half_an_accelerators_memory():
    # "auto": 64 runs per chunk on CPU; on an accelerator as many as keep 8 times their
    # problems' bytes (from their shapes, not built) within half of the device's memory
    from wendyjax.studies._engine import CPU_CHUNK, chunk_size

    bench = zoo("logistic")
    datasets = [bench.simulate(jax.random.key(s), 0.05, subsample=4) for s in range(3)]
    make, _ = wj.MLE().batch_problems(bench.model, datasets)
    one = jax.tree_util.tree_leaves(eqx.filter(make([0]), eqx.is_array))
    per_run = 8 * sum(x.size * x.dtype.itemsize for x in one)

    class Accelerator:
        platform = "gpu"

        def memory_stats(self):
            return {"bytes_limit": 100 * per_run}

    assert chunk_size("auto", make, 1000, jax.devices()) == CPU_CHUNK
    assert chunk_size("auto", make, 1000, [Accelerator()]) == 50
    assert chunk_size("auto", make, 1000, [Accelerator(), Accelerator()]) == 100  # per device
    assert chunk_size("auto", make, 30, [Accelerator()]) == 30  # all runs where they fit
    assert chunk_size(7, make, 1000, [Accelerator()]) == 7


@unchecked()  # the studies' own messages for wrong types (noise_levels=["high"])
def test_study_bad_input(monkeypatch):
    bench = zoo("logistic")
    mc = wj.studies.monte_carlo
    with pytest.raises(TypeError, match="Benchmark"):
        mc(bench.model)  # pyright: ignore[reportArgumentType]  # the wrong input under test
    with pytest.raises(ValueError, match="n_runs"):
        mc(bench, n_runs=1)
    with pytest.raises(ValueError, match="noise_levels must be a finite number > 0, got 0.0"):
        mc(bench, noise_levels=[0.0])
    with pytest.raises(ValueError, match="subsample"):
        mc(bench, subsamples=[0])
    with pytest.raises(ValueError, match="batch_size"):
        mc(bench, batch_size=0)
    with pytest.raises(ValueError, match="covariance"):
        mc(bench, covariance="fisher")
    with pytest.raises(ValueError, match="level"):
        mc(bench, level=1.5)
    with pytest.raises(ValueError, match="vectorize"):
        mc(bench, vectorize="yes")
    with pytest.raises(ValueError, match="no finite box"):
        mc(zoo("fitzhugh_nagumo"))
    with pytest.raises(ValueError, match="outside the bounds"):
        mc(bench, p0=[20.0, -1.0])
    with pytest.raises(ValueError, match="estimator must be one of"):
        mc(bench, "newton")
    with pytest.raises(ValueError, match="needs a grid"):
        wj.studies.sweep(bench)
    with pytest.raises(ValueError, match="shape"):
        wj.studies.sweep(bench, p_true=[1.0, -1.0])
    with pytest.raises(ValueError, match="same length"):
        wj.studies.sweep(bench, p_true=[[1.0, -1.0]], u0=[[0.01], [0.02]])
    # refused before any fitting, naming the argument
    with pytest.raises(ValueError, match="noise_levels must be a finite number > 0, got inf"):
        mc(bench, noise_levels=[0.05, np.inf])
    with pytest.raises(ValueError, match="noise_levels must be a number, got 'high'"):
        mc(bench, noise_levels=["high"])  # pyright: ignore[reportArgumentType]  # the wrong input under test
    with pytest.raises(ValueError, match="subsamples must be an integer >= 1, got 2.5"):
        mc(bench, subsamples=[2.5])  # pyright: ignore[reportArgumentType]  # the wrong input under test
    with pytest.raises(ValueError, match="batch_size must be an integer >= 1, got True"):
        mc(bench, batch_size=True)
    with pytest.raises(TypeError, match="test_functions must be a TestFunctionConfig"):
        mc(bench, "output_error", test_functions=None)  # pyright: ignore[reportArgumentType]  # the wrong input under test
    with pytest.raises(ValueError, match="p0 must be 'box'"):
        mc(bench, p0="random")
    with pytest.raises(TypeError, match="key must be one PRNG key"):
        mc(bench, key="0")  # pyright: ignore[reportArgumentType]  # the wrong input under test
    with pytest.raises(ValueError, match="noise_level must be a finite number > 0"):
        wj.studies.sweep(bench, p_true=[[1.0, -1.0]], noise_level=-0.1)
    with pytest.raises(ValueError, match="subsample must be an integer >= 1"):
        wj.studies.sweep(bench, p_true=[[1.0, -1.0]], subsample=0)
    # a setting whose subsampling leaves too few samples names itself, before the first
    # setting's fits (which would be fine) run
    fits = []
    monkeypatch.setattr(_engine, "_fit_chunk", lambda *a, **k: fits.append(a))
    with pytest.raises(
        ValueError,
        match=r"setting 1 \(noise ratio 0.05, subsample 600: 2 of the benchmark's "
        r"1025 samples\) cannot be set up: the weak form \(WENDy\) needs at least 15 "
        r"observed samples per trajectory, but the trajectory has 2",
    ):
        mc(bench, subsamples=[4, 600], n_runs=2, progress=False)
    assert fits == []


# Two CPU devices: a chunk of 8 runs is one program in which each device fits a shard of 4;
# the single-device study runs the same 8 runs in two chunks of 4, the shard shape, so what
# is compared is the sharding itself (which run goes to which device, the order the results
# come back in).
_SHARDED = textwrap.dedent("""
    import threading
    import jax
    jax.config.update("jax_num_cpu_devices", 2)
    jax.config.update("jax_enable_x64", True)
    import numpy as np
    import wendyjax as wj
    from wendyjax.studies import _engine
    assert len(jax.devices()) == 2
    bench = wj.models.logistic()
    kw = dict(noise_levels=[0.05], subsamples=[4], n_runs=8, key=jax.random.key(1), progress=False)
    # the shards of a chunk are fitted at the same time: each device's program waits in a
    # callback until the other device's has reached it (a barrier that breaks after 120 s
    # if the devices run one after another)
    barrier, fit_runs, calls = threading.Barrier(2, timeout=120), _engine._fit_runs, []
    def meeting(estimator, liks, p0s, *args):
        jax.debug.callback(lambda p: (calls.append(p.shape), barrier.wait()), p0s)
        return fit_runs(estimator, liks, p0s, *args)
    _engine._fit_runs = meeting
    sharded = wj.studies.monte_carlo(bench, wj.MLE(), batch_size=8, **kw)
    assert calls == [(4, 2), (4, 2)] and not barrier.broken, calls
    _engine._fit_runs = fit_runs
    single = wj.studies.monte_carlo(bench, wj.MLE(), devices=jax.devices()[:1], batch_size=4, **kw)
    a, b = sharded.runs[0], single.runs[0]
    assert sharded.settings["devices"] != single.settings["devices"]
    assert np.allclose(a.params, b.params, rtol=1e-10, atol=0), (a.params, b.params)
    assert np.allclose(a.covariance, b.covariance, rtol=1e-8, atol=0)
    assert np.array_equal(a.status, b.status)
    assert sharded.settings["n_chunks"] == 1 and single.settings["n_chunks"] == 2
    # a vmapped chunk on several CPU devices would deadlock jaxlib's batched LAPACK: refused
    try:
        wj.studies.monte_carlo(bench, wj.MLE(), vectorize=True, **kw)
    except ValueError as e:
        assert "several CPU devices" in str(e), e
    else:
        raise AssertionError("vectorize=True on two CPU devices was not refused")
    print("OK")
""")


@pytest.mark.slow
def test_sharded_study_equals_unsharded():
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    out = subprocess.run([sys.executable, "-c", _SHARDED], capture_output=True, text=True, env=env, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.strip().endswith("OK")


# Two processes joined by `jax.distributed` (gloo collectives on CPU), one CPU device each:
# each fits its device's shard, and both return every run, equal to the single-process
# study with the same shard shape (a study on a process's own devices stays local). A
# study on another process's devices only is refused.
_DISTRIBUTED = textwrap.dedent("""
    import sys
    import jax
    port, pid = sys.argv[1], int(sys.argv[2])
    jax.config.update("jax_enable_x64", True)
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(coordinator_address=f"localhost:{port}", num_processes=2, process_id=pid)
    import numpy as np
    import wendyjax as wj
    assert len(jax.devices()) == 2 and len(jax.local_devices()) == 1
    bench = wj.models.logistic()
    kw = dict(noise_levels=[0.05], subsamples=[4], n_runs=8, key=jax.random.key(1), progress=False)
    both = wj.studies.monte_carlo(bench, wj.MLE(), batch_size=8, **kw)
    alone = wj.studies.monte_carlo(bench, wj.MLE(), devices=jax.local_devices(), batch_size=4, **kw)
    a, b = both.runs[0], alone.runs[0]
    assert np.allclose(a.params, b.params, rtol=1e-10, atol=0), (a.params, b.params)
    assert np.allclose(a.covariance, b.covariance, rtol=1e-8, atol=0)
    assert np.array_equal(a.status, b.status) and np.array_equal(a.num_steps, b.num_steps)
    try:
        wj.studies.monte_carlo(bench, wj.MLE(), devices=[d for d in jax.devices() if d.process_index != pid], **kw)
    except ValueError as e:
        assert "this process's own or hold the same number of devices" in str(e), e
    else:
        raise AssertionError("a study on another process's devices only was not refused")
    print("OK")
    """)


@pytest.mark.slow
def test_distributed_study_equals_single_process():
    import socket

    with socket.socket() as s:
        s.bind(("localhost", 0))
        port = str(s.getsockname()[1])
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _DISTRIBUTED, port, str(pid)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for pid in (0, 1)
    ]
    outs = [p.communicate(timeout=600) for p in procs]
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0, err[-3000:]
        assert out.strip().endswith("OK")


@pytest.fixture(scope="module")
def lv_studies():
    bench = zoo("lotka_volterra")
    # M = 128 (every 8th sample): the 2 × 40 fits run in ~5 s instead of ~25 s at M = 256
    # (compilation, ~30 s, is the same at both sizes), and the intervals are as well
    # calibrated: inverse-Hessian coverage averaged over the 4 parameters 0.944 for this
    # seed and 0.90-0.96 for seeds 1-4 (0.906 for this seed at M = 256)
    kw: dict[str, Any] = dict(noise_levels=[0.05], subsamples=[8], n_runs=40, key=jax.random.key(7), progress=False)
    return {cov: wj.studies.monte_carlo(bench, wj.MLE(), covariance=cov, **kw) for cov in ("sandwich", "hessian")}


@pytest.mark.slow
def test_lotka_volterra_coverage_is_calibrated(lv_studies):
    # 40 runs at 5 % noise, M = 128. Binomial sd of a 95 % coverage estimate from 40 runs is
    # √(0.95·0.05/40) = 0.034. The inverse-Hessian intervals must cover within 3 sd of the
    # nominal 95 % (mean over the 4 parameters, which share the runs); the sandwich
    # covariance of Rummel et al. 2025 eq. 9 is conservative, as Rummel et al. 2025 reports (coverage 100 % for most
    # systems): at least nominal - 3 sd for every parameter.
    sd = np.sqrt(0.95 * 0.05 / 40)
    hess = np.array([r["coverage_0.95"] for r in lv_studies["hessian"].rows()])
    sand = np.array([r["coverage_2se"] for r in lv_studies["sandwich"].rows()])
    assert abs(hess.mean() - 0.95) <= 3 * sd, hess
    assert np.all(sand >= 0.95 - 3 * sd), sand
    # both studies fit the same data from the same starts: only the covariance differs. The
    # fits are compiled into two programs (each with its covariance), which XLA need not round
    # alike: 4e-11 relative at most, measured with the tests' XLA flags (conftest)
    a, b = lv_studies["hessian"].runs[0], lv_studies["sandwich"].runs[0]
    assert np.array_equal(a.p0, b.p0)
    np.testing.assert_allclose(a.params, b.params, rtol=1e-8)


@pytest.mark.slow
def test_a_study_of_a_stiff_benchmark_runs():
    """Goodwin-3D's forward errors use the benchmark's implicit solver (Kvaerno5), whose
    root finds jax 0.10's shard_map could not trace ("pytree does not match out_structure"):
    on one device the study runs without it."""
    bench = zoo("goodwin_3d")
    assert type(bench.solver).__name__ == "Kvaerno5"
    study = wj.studies.monte_carlo(
        bench, "mle", noise_levels=[0.05], subsamples=[4], n_runs=2, batch_size=2, key=jax.random.key(0), progress=False
    )
    assert np.all(np.isfinite(study.runs[0].forward_error)) and not np.any(study.failed(0))

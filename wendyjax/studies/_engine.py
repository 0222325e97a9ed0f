"""The engine of a study: simulate every cell's datasets (vmapped), build their problems
together (one batched build per grid: `estimator.batch_problems`), then per chunk of runs
assemble the chunk's problems on the devices, fit them and compute their diagnostics
(covariances, forward-simulation errors) in jit-compiled calls (vmapped on GPU/TPU,
`lax.map` on CPU) sharded over the devices, timing every stage."""

import collections
import dataclasses
import os
import time

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import threadpoolctl
from jax.experimental import multihost_utils
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

from .._checks import as_count
from .._compile import cpu_safe_jit, per_run
from .._progress import progress_bar
from .._results import status_names
from ..data import Batch
from ..estimators import AbstractEstimator
from ..inference import forward_simulation_error
from ..models import Benchmark
from ..simulate import solve
from ..weak import TestFunctionConfig


@dataclasses.dataclass(frozen=True)
class Cell:
    """One setting of a study: truth, initial condition, noise level and subsampling."""

    p_true: np.ndarray
    u0: np.ndarray
    noise_ratio: float
    subsample: int


@dataclasses.dataclass(frozen=True)
class CellRuns:
    """Per-run outputs of one cell (leading axis: runs)."""

    m: int  # number of samples minus one (M) of the grid the data live on
    params: np.ndarray
    p0: np.ndarray
    covariance: np.ndarray
    status: np.ndarray
    num_steps: np.ndarray
    objective: np.ndarray  # ℓ (WENDy) or the output-error loss at the estimate
    forward_error: np.ndarray
    forward_ok: np.ndarray
    k: np.ndarray
    radius: np.ndarray
    #: interval method name -> (runs, 2, j) lower and upper ends (NaN where not computed)
    intervals: dict = dataclasses.field(default_factory=dict)


def _cell_data(bench: Benchmark, cell: Cell, n_runs: int, key) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(t, clean, kept rows, noisy data (runs, n_kept, d)) of one cell, noise drawn vmapped."""
    t = np.asarray(bench.t)[:: cell.subsample]
    clean = np.asarray(solve(bench.model, cell.p_true, cell.u0, t, solver=bench.solver))
    noise = eqx.tree_at(lambda n: n.noise_ratio, bench.noise, cell.noise_ratio)
    # under log-normal noise rows with a non-positive state carry no information (as in
    # Benchmark.simulate); multiplicative noise keeps signs, so the rows are the same per run
    keep = np.all(clean > 0, axis=1) if noise.log_space else np.ones(len(t), bool)
    keys = jax.random.split(key, n_runs)
    noisy = jax.vmap(noise.sample, in_axes=(None, 0))(jnp.asarray(clean[keep]), keys)
    return t, clean, keep, np.asarray(noisy)


def _fit_runs(estimator, liks, p0s, lower, upper, vectorize):
    """The solutions of a chunk's stacked problems from their starts (per run)."""
    return per_run(vectorize, lambda lik, p0: estimator.solve(lik, p0, lower, upper), liks, p0s)


def _diagnose_runs(estimator, liks, sols, u0s, references, covariances, model, solver, t, vectorize):
    """The covariances (one per kind in `covariances`, stacked: (runs, kinds, j, j)) and the
    forward-simulation errors of a chunk's solutions, each run from its own initial state
    and against its own noiseless trajectory on the grid `t`."""

    def one(lik, sol, u0, reference):
        cov = jnp.stack([estimator.covariance(lik, sol, kind) for kind in covariances])
        err, ok = forward_simulation_error(model, sol.params, u0, t, reference, solver, max_steps=50_000)
        return cov, err, ok

    return per_run(vectorize, one, liks, sols, u0s, references)


_RUNS = P("runs")  # a chunk's arrays are split over the devices along their leading (runs) axis


def _on_mesh(mesh, fn, sharded, replicated):
    """`fn(*sharded, *replicated)` as one SPMD program in which every device of `mesh` works
    on its own shard of `sharded` (split along the runs); `replicated` is the same on every
    device. The runs are independent, so the devices never communicate."""
    sharded, sharded_static = eqx.partition(sharded, eqx.is_array)
    replicated, replicated_static = eqx.partition(replicated, eqx.is_array)

    def body(sharded, replicated):
        return fn(*eqx.combine(sharded, sharded_static), *eqx.combine(replicated, replicated_static))

    if mesh.devices.size == 1:  # nothing to shard; and shard_map (jax 0.10) fails to trace the implicit
        return body(sharded, replicated)  # solvers' root finds (Kvaerno5: "pytree does not match")
    # check_vma=False: the fits' while loops carry values that differ per device in
    # some leaves and not in others, which the check would reject as a type mismatch
    return jax.shard_map(body, mesh=mesh, in_specs=(_RUNS, P()), out_specs=_RUNS, check_vma=False)(sharded, replicated)


@cpu_safe_jit
def _fit_chunk(mesh, estimator, liks, p0s, box, vectorize):
    """[`_fit_runs`][] of a chunk whose runs are sharded over `mesh`'s axis "runs"."""

    def fit(liks, p0s, estimator, lower, upper):
        return _fit_runs(estimator, liks, p0s, lower, upper, vectorize)

    return _on_mesh(mesh, fit, (liks, p0s), (estimator, *box))


@cpu_safe_jit
def _diagnose_chunk(mesh, estimator, liks, sols, starts, kinds, model, solver, t, vectorize):
    """[`_diagnose_runs`][] of a chunk whose runs are sharded over `mesh`'s axis "runs"."""

    def diagnose(liks, sols, u0s, references, estimator, model, solver, t):
        return _diagnose_runs(estimator, liks, sols, u0s, references, kinds, model, solver, t, vectorize)

    return _on_mesh(mesh, diagnose, (liks, sols, *starts), (estimator, model, solver, t))


def _sharded(mesh, local_shards: dict):
    """One global array per array leaf, split over `mesh`'s devices along the runs, from
    this process's shards (`{device index: stacked pytree}`; with `jax.distributed` the
    other processes hold the rest). Other leaves are the same in every shard."""
    devices = list(mesh.devices.flat)
    dynamic, static = eqx.partition(next(iter(local_shards.values())), eqx.is_array)
    leaves = {g: jax.tree_util.tree_leaves(eqx.filter(tree, eqx.is_array)) for g, tree in local_shards.items()}
    sharding = NamedSharding(mesh, _RUNS)
    arrays = [
        jax.make_array_from_single_device_arrays(
            (leaf.shape[0] * len(devices), *leaf.shape[1:]),
            sharding,
            [jax.device_put(leaves[g][i], devices[g]) for g in local_shards],
        )
        for i, leaf in enumerate(jax.tree_util.tree_leaves(dynamic))
    ]
    return eqx.combine(jax.tree_util.tree_unflatten(jax.tree_util.tree_structure(dynamic), arrays), static)


def _replicated(mesh, tree):
    """`tree`'s arrays (the same in every process) on every device of `mesh`."""
    sharding = NamedSharding(mesh, P())
    return jax.tree_util.tree_map(
        lambda x: jax.make_array_from_callback(np.shape(x), sharding, lambda index: np.asarray(x)[index]), tree
    )


def _gathered(tree):
    """A chunk's outputs as host arrays in every process (`jax.distributed`: the processes
    exchange their shards)."""
    if all(leaf.is_fully_addressable for leaf in jax.tree_util.tree_leaves(tree)):
        return jax.device_get(tree)
    return multihost_utils.process_allgather(tree, tiled=True)


def check_processes(devices) -> None:
    """The devices of a study are this process's own, or (`jax.distributed`) the same
    number of every process's; the processes then run the same study together."""
    counts = collections.Counter(d.process_index for d in devices)
    if set(counts) == {jax.process_index()}:
        return
    if len(counts) != jax.process_count() or len(set(counts.values())) != 1:
        raise ValueError(
            "devices must be this process's own or hold the same number of devices of every process "
            f"(jax.distributed), got {dict(sorted(counts.items()))} devices per process of "
            f"{jax.process_count()}."
        )


def _single_threaded_blas():
    """The LAPACK calls of CPU fits (Cholesky, triangular solves) use the host's OpenBLAS;
    its threads contend with XLA's own and slow the factorisations of the covariances
    down on a machine with few cores."""
    return threadpoolctl.threadpool_limits(limits=1, user_api="blas")


#: runs per chunk on CPU, where the fits of a chunk run one after another (its size only
#: bounds memory), and the least on an accelerator
CPU_CHUNK = 64
#: the share of an accelerator's memory a chunk's problems may take, counted at WORKING
#: times their own size (the fits' factorisations and derivatives of S come on top)
MEMORY_SHARE, WORKING = 0.5, 8


#: copies of every dataset a study or bootstrap holds on the host at once (the draws, their
#: masked copy, and the build's prepared and stacked data)
HOST_COPIES = 4


def host_memory() -> int | None:
    """This machine's physical memory in bytes (None where the OS does not say)."""
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):
        return None


def check_host_memory(n_datasets: int, values: int, what: str, fix: str) -> None:
    """Refuse, before any work, `n_datasets` datasets of `values` float64 numbers each whose
    `HOST_COPIES` copies would take more than `MEMORY_SHARE` of the host's memory."""
    need, have = HOST_COPIES * 8 * n_datasets * values, host_memory()
    if have is not None and need > MEMORY_SHARE * have:
        raise ValueError(
            f"{what} would hold about {need / 1e9:.3g} GB of data on the host ({HOST_COPIES} copies of "
            f"{n_datasets} datasets of {values} values), more than half of this machine's "
            f"{have / 1e9:.3g} GB: {fix}"
        )


def chunk_size(batch_size, make, n_runs: int, devices) -> int:
    """Runs per chunk: `batch_size`, or for "auto" `CPU_CHUNK` on CPU and on an accelerator
    as many as keep `WORKING` times their problems' bytes (from the shapes `make` builds,
    not built) within `MEMORY_SHARE` of the smallest device's memory, per device."""
    if batch_size != "auto":
        return as_count("batch_size", batch_size, 1)
    limits = [(d.memory_stats() or {}).get("bytes_limit") if d.platform != "cpu" else None for d in devices]
    if any(limit is None for limit in limits):
        return CPU_CHUNK
    one = jax.eval_shape(lambda: eqx.filter(make(np.zeros(1, int)), eqx.is_array))
    per_run = WORKING * sum(x.size * x.dtype.itemsize for x in jax.tree_util.tree_leaves(one))
    per_device = max(int(MEMORY_SHARE * min(x for x in limits if x is not None) // max(per_run, 1)), 1)
    return max(min(per_device * len(devices), n_runs), 1)


def chunking(n_runs: int, batch_size: int, n_devices: int) -> tuple[int, int]:
    """(number of chunks, runs per chunk): as few chunks as `batch_size` allows, of equal
    size (a multiple of the device count) so that padding the last one wastes as little
    as possible."""
    n_chunks = -(-n_runs // max(batch_size, n_devices))
    per_chunk = -(-n_runs // n_chunks)
    return n_chunks, -(-per_chunk // n_devices) * n_devices


def fit_batches(
    estimator, model, make, p0s, box, *, diagnostics=None, solver=None, batch_size, devices, vectorize, bar, timings
) -> tuple:
    """Fit the `len(p0s)` problems `make(indices)` builds, from the starts `p0s`, within
    `box` = (lower, upper), in compiled chunks of `batch_size` runs sharded over `devices`.
    With `diagnostics` = (covariance kinds, t, u0s (runs, D), references (runs, n, D)) also
    each run's covariances and forward-simulation error (solved with `solver` on the grid
    `t`). Returns the runs' solutions and (with `diagnostics`) covariances (runs, kinds, j,
    j), forward errors and forward ok as host arrays; adds the seconds of each stage to
    `timings` (`build_s`, `fit_s`, `diagnostics_s`, compilation included)."""
    n_runs, n_dev = len(p0s), len(devices)
    local = [g for g, d in enumerate(devices) if d.process_index == jax.process_index()]
    mesh = Mesh(np.asarray(devices), ("runs",))
    box = _replicated(mesh, box)
    if diagnostics is not None:
        kinds, t, u0s, references = diagnostics
        t = _replicated(mesh, t)
    sols, diags = [], []
    with _single_threaded_blas():
        for i in range(-(-n_runs // batch_size)):
            idx = np.arange(i * batch_size, (i + 1) * batch_size)
            idx = np.minimum(idx, n_runs - 1)  # the last chunk repeats its last run: fixed shapes
            # one shard of runs per device; with several processes (`jax.distributed`)
            # each builds the shards of its own devices, and the fitted shards are
            # exchanged so that every process returns them all
            start = time.perf_counter()
            parts = np.split(idx, n_dev)
            liks = _sharded(mesh, {g: make(parts[g]) for g in local})
            p0_chunk = _sharded(mesh, {g: p0s[parts[g]] for g in local})
            jax.block_until_ready(liks)
            built = time.perf_counter()
            timings["build_s"] += built - start
            sol = jax.block_until_ready(_fit_chunk(mesh, estimator, liks, p0_chunk, box, vectorize))
            fitted = time.perf_counter()
            timings["fit_s"] += fitted - built
            sols.append(_gathered(sol.on_host()))
            if diagnostics is not None:
                starts = _sharded(mesh, {g: (u0s[parts[g]], references[parts[g]]) for g in local})
                diags.append(
                    _gathered(_diagnose_chunk(mesh, estimator, liks, sol, starts, kinds, model, solver, t, vectorize))
                )
                timings["diagnostics_s"] += time.perf_counter() - fitted
            if bar is not None:
                bar.update()
    joined = lambda chunks: jax.tree_util.tree_map(lambda *x: np.concatenate(x)[:n_runs], *chunks)  # noqa: E731
    return joined(sols), *(tuple(joined(c) for c in zip(*diags)) or (None, None, None))


def _groups(cells: list[Cell], prepared: list) -> dict:
    """The cells whose runs can share chunks: same grid (subsampling, and under log-normal
    noise the same rows kept) and noisy or noiseless alike (their fits differ)."""
    groups = {}
    for c, cell in enumerate(cells):
        groups.setdefault((cell.subsample, prepared[c][2].tobytes(), cell.noise_ratio == 0), []).append(c)
    return groups


def _setting_text(bench, cells, which) -> str:
    def one(c):
        n = len(np.asarray(bench.t)[:: cells[c].subsample])
        return (
            f"{c} (noise ratio {cells[c].noise_ratio:g}, subsample {cells[c].subsample}: {n} of the benchmark's "
            f"{len(bench.t)} samples)"
        )

    return "setting " + one(which[0]) if len(which) == 1 else "settings " + ", ".join(one(c) for c in which)


def run_cells(
    bench: Benchmark,
    estimator: AbstractEstimator,
    cells: list[Cell],
    n_runs: int,
    key,
    *,
    p0,
    lower: np.ndarray,
    upper: np.ndarray,
    covariances: tuple,
    test_functions: TestFunctionConfig,
    batch_size,
    devices,
    progress: bool,
    vectorize: bool,
) -> tuple[list[CellRuns], dict, list[tuple[Batch, dict]]]:
    """Run every cell; return their per-run outputs (`covariance` by the first of
    `covariances`), the chunking and the seconds of each stage (`vectorize` as
    `resolve_vectorize` returns it), and per cell its datasets and `{kind: (runs, j, j)}`
    of the other covariances.

    Cells on one grid share chunks: their runs are pooled, built together (one batched
    build) and fitted in chunks that may hold runs of several cells, so a sweep over many
    settings of few runs each fills its chunks. Every cell's data and problems are prepared
    before the first fit, so that a setting they cannot be built for (e.g. too few samples
    left by its subsampling) fails before any fitting."""
    model = bench.model
    noise_kind = "lognormal" if bench.noise.log_space else "gaussian"
    timings = {"simulate_s": 0.0, "build_s": 0.0, "fit_s": 0.0, "diagnostics_s": 0.0}
    prepared = []
    start = time.perf_counter()
    for c, cell in enumerate(cells):
        k_data, k_p0 = jax.random.split(jax.random.fold_in(key, c))
        t, clean, keep, noisy = _cell_data(bench, cell, n_runs, k_data)
        p0s = np.asarray(p0(k_p0, n_runs)) if callable(p0) else np.broadcast_to(p0, (n_runs, model.n_params))
        # the estimator's keys, one per run: folded from the setting's, so the data and starts keep their streams
        keys = jax.random.split(jax.random.fold_in(jax.random.fold_in(key, c), 2**31 - 1), n_runs)
        prepared.append((t, clean, keep, noisy, p0s, keys))
    timings["simulate_s"] += time.perf_counter() - start
    options = {
        k: v for k, v in {"noise": noise_kind, "test_functions": test_functions}.items() if k in estimator.options()
    }
    built = []
    for which in _groups(cells, prepared).values():
        start = time.perf_counter()
        t, _, keep, _, _, _ = prepared[which[0]]
        try:
            batch = Batch(t[keep], np.concatenate([prepared[c][3] for c in which]))
            make, notes = estimator.batch_problems(
                model, batch, key=jnp.concatenate([prepared[c][5] for c in which]), **options
            )
        except ValueError as e:
            raise ValueError(f"{_setting_text(bench, cells, which)} cannot be set up: {e}") from e
        timings["build_s"] += time.perf_counter() - start
        built.append((which, batch, make, notes))
    size = chunk_size(batch_size, built[0][2], n_runs * max(len(w) for w, _, _, _ in built), devices)
    chunks = [chunking(n_runs * len(which), size, len(devices)) for which, _, _, _ in built]
    bar = progress_bar(
        total=sum(n for n, _ in chunks),
        desc=f"{model.name} study",
        unit="chunk",
        disable=not progress or jax.process_index() != 0,
    )
    out: list = [None] * len(cells)
    extras: list = [None] * len(cells)
    for (which, batch, make, notes), (_, per_chunk) in zip(built, chunks):
        p0s = np.concatenate([prepared[c][4] for c in which])
        u0s = np.concatenate([np.broadcast_to(np.asarray(cells[c].u0, float), (n_runs, model.n_states)) for c in which])
        references = np.concatenate([np.broadcast_to(prepared[c][1], (n_runs, *prepared[c][1].shape)) for c in which])
        t = prepared[which[0]][0]
        sols, covs, errs, oks = fit_batches(
            estimator,
            model,
            make,
            p0s,
            (np.asarray(lower), np.asarray(upper)),
            diagnostics=(tuple(covariances), np.asarray(t), u0s, references),
            solver=bench.solver,
            batch_size=per_chunk,
            devices=devices,
            vectorize=vectorize,
            bar=bar,
            timings=timings,
        )
        for g, c in enumerate(which):
            runs = slice(g * n_runs, (g + 1) * n_runs)
            sol = jax.tree_util.tree_map(lambda x, runs=runs: x[runs], sols)
            out[c] = CellRuns(
                m=len(t) - 1,
                params=sol.params,
                p0=np.array(p0s[runs]),
                covariance=covs[runs, 0],
                status=status_names(sol.result),
                num_steps=sol.num_steps,
                objective=sol.objective,
                forward_error=errs[runs],
                forward_ok=oks[runs],
                k=np.array([note.get("k", np.nan) for note in notes[runs]], float),
                radius=np.array([note.get("radius", np.nan) for note in notes[runs]], float),
            )
            extras[c] = (
                batch.take(np.arange(runs.start, runs.stop)),
                {kind: covs[runs, i] for i, kind in enumerate(covariances[1:], 1)},
            )
    bar.close()
    info = {"chunk_size": chunks[0][1], "n_chunks": sum(n for n, _ in chunks), "timings": timings}
    return out, info, extras


def forward_errors(bench: Benchmark, cell: Cell, params: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Forward-simulation errors (Rummel et al. 2025, eq. 13) of several parameter vectors on a cell's grid."""
    t = np.asarray(bench.t)[:: cell.subsample]
    clean = solve(bench.model, cell.p_true, cell.u0, t, solver=bench.solver)
    err, ok = jax.vmap(
        lambda p: forward_simulation_error(
            bench.model, p, jnp.asarray(cell.u0, float), jnp.asarray(t), clean, bench.solver, max_steps=50_000
        )
    )(jnp.asarray(params))
    return np.asarray(err), np.asarray(ok)

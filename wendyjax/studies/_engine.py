"""The engine of a study: simulate every cell's datasets, build their likelihoods (test
functions cached, padded to a common K) on the host CPU, fit them in jit-compiled chunks
(vmapped on GPU/TPU, `lax.map` on CPU) sharded over the devices, forward-simulate the fits."""

import collections
import contextlib
import dataclasses
import time

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import threadpoolctl
from jax.experimental import multihost_utils
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
from tqdm.auto import tqdm

from .._compile import cpu_safe_jit
from .._results import status_names
from ..data import Trajectory
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


def _problem_builder(estimator: AbstractEstimator, model, trajs, noise_kind, test_functions, key):
    """`estimator.batch_problems` of a cell's runs, with the study's options that the
    estimator takes (its noise model; test functions where it has them) and `key` for an
    estimator that draws random numbers (split over the runs by the estimator)."""
    options = {"noise": noise_kind, "test_functions": test_functions}
    options = {k: v for k, v in options.items() if k in estimator.options()}
    return estimator.batch_problems(model, trajs, key=key, **options)


def _fit_runs(estimator, liks, p0s, shared, covariances, model, solver, vectorize, diagnostics):
    """Fit stacked likelihoods and, with `diagnostics`, their covariances (one per kind in
    `covariances`, stacked: (runs, kinds, j, j)) and forward-simulation errors (`None`
    without); `shared` = (lower, upper, u0, t, reference) is the same for every run.

    `vectorize=True` vmaps the fits (every run steps until the slowest has converged);
    `False` runs them one after another inside the same compiled call (`lax.map`), which
    is faster on CPU, where batched small matrix products and factorisations are slower
    per run than unbatched ones."""
    lower, upper, u0, t, reference = shared

    def one(lik, p0):
        sol = estimator.solve(lik, p0, lower, upper)
        if not diagnostics:
            return sol, None, None, None
        cov = jnp.stack([estimator.covariance(lik, sol, kind) for kind in covariances])
        err, ok = forward_simulation_error(model, sol.params, u0, t, reference, solver, max_steps=50_000)
        return sol, cov, err, ok

    if vectorize:
        return jax.vmap(one)(liks, p0s)
    return jax.lax.map(lambda args: one(*args), (liks, p0s))


_RUNS = P("runs")  # a chunk's arrays are split over the devices along their leading (runs) axis


@cpu_safe_jit
def _fit_chunk(mesh, estimator, liks, p0s, shared, covariances, model, solver, vectorize, diagnostics):
    """`_fit_runs` of a chunk whose runs are sharded over `mesh`'s axis "runs": one SPMD
    program in which every device fits its own shard; the runs are independent, so the
    devices never communicate."""
    consts, static = eqx.partition((estimator, model, solver), eqx.is_array)
    liks, liks_static = eqx.partition(liks, eqx.is_array)

    def shard(liks, p0s, shared, consts):
        estimator, model, solver = eqx.combine(consts, static)
        return _fit_runs(estimator, eqx.combine(liks, liks_static), p0s, shared, covariances, model, solver,
                         vectorize, diagnostics)

    # check_vma=False: the fits' while loops carry values that differ per device in
    # some leaves and not in others, which the check would reject as a type mismatch
    if mesh.devices.size == 1:  # nothing to shard; and shard_map (jax 0.10) fails to trace the implicit
        return shard(liks, p0s, shared, consts)  # solvers' root finds (Kvaerno5: "pytree does not match")
    return jax.shard_map(shard, mesh=mesh, in_specs=(_RUNS, _RUNS, P(), P()), out_specs=_RUNS,
                         check_vma=False)(liks, p0s, shared, consts)


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
            (leaf.shape[0] * len(devices), *leaf.shape[1:]), sharding,
            [jax.device_put(leaves[g][i], devices[g]) for g in local_shards])
        for i, leaf in enumerate(jax.tree_util.tree_leaves(dynamic))
    ]
    return eqx.combine(jax.tree_util.tree_unflatten(jax.tree_util.tree_structure(dynamic), arrays), static)


def _replicated(mesh, tree):
    """`tree`'s arrays (the same in every process) on every device of `mesh`."""
    sharding = NamedSharding(mesh, P())
    return jax.tree_util.tree_map(
        lambda x: jax.make_array_from_callback(np.shape(x), sharding, lambda index: np.asarray(x)[index]), tree)


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
        raise ValueError("devices must be this process's own or hold the same number of devices of every process "
                         f"(jax.distributed), got {dict(sorted(counts.items()))} devices per process of "
                         f"{jax.process_count()}.")


def _single_threaded_blas():
    """The LAPACK calls of CPU fits (Cholesky, triangular solves) use the host's OpenBLAS;
    its threads contend with XLA's own and slow the factorisations of the covariances
    down on a machine with few cores."""
    return threadpoolctl.threadpool_limits(limits=1, user_api="blas")


@contextlib.contextmanager
def _on_host():
    """Run a study's preparation on the host CPU.

    Simulating a cell, selecting its test functions (SVDs) and building likelihoods are
    many small eager operations and host syncs (structure checks, radius selection); on
    an accelerator each is a kernel launch or a transfer, and these stages can take most
    of a GPU study's time. Only the stacked chunks go to the devices (`_sharded`): the
    compiled fit runs where its arrays are committed."""
    try:
        cpu = jax.local_devices(backend="cpu")[0]
    except RuntimeError:  # JAX_PLATFORMS excludes the CPU
        yield
        return
    with jax.default_device(cpu):
        yield


def resolve_vectorize(vectorize, devices) -> bool:
    if vectorize == "auto":
        return any(d.platform != "cpu" for d in devices)
    if not isinstance(vectorize, bool):
        raise ValueError(f"vectorize must be 'auto', True or False, got {vectorize!r}.")
    if vectorize and sum(d.platform == "cpu" for d in devices) > 1:
        # jaxlib 0.10's batched LAPACK kernels (a vmapped Cholesky) split the batch over
        # XLA:CPU's thread pool and wait for the pieces; with every pool thread running one
        # device's shard, all of them wait forever (measured: 2 CPU devices on 2 cores)
        raise ValueError("vectorize=True with several CPU devices deadlocks XLA:CPU's batched LAPACK kernels; "
                         "use vectorize=False (the CPU default) or one CPU device.")
    return vectorize


@_on_host()
def chunking(n_runs: int, batch_size: int, n_devices: int) -> tuple[int, int]:
    """(number of chunks, runs per chunk): as few chunks as `batch_size` allows, of equal
    size (a multiple of the device count) so that padding the last one wastes as little
    as possible."""
    n_chunks = -(-n_runs // max(batch_size, n_devices))
    per_chunk = -(-n_runs // n_chunks)
    return n_chunks, -(-per_chunk // n_devices) * n_devices


def fit_batches(estimator, model, make, p0s, shared, *, covariances=(), solver, batch_size, devices, vectorize, bar,
                info, diagnostics=True):
    """Fit the `len(p0s)` problems `make(indices)` builds, from the starts `p0s`, in compiled
    chunks of `batch_size` runs sharded over `devices`; `shared` = (lower, upper, u0, t,
    reference) for the forward-simulation errors. Returns the runs' (solutions, covariances
    (runs, len(covariances), j, j), forward errors, forward ok) as host arrays (the last
    three `None` without `diagnostics`), adding the time spent to `info`."""
    n_runs, n_dev = len(p0s), len(devices)
    local = [g for g, d in enumerate(devices) if d.process_index == jax.process_index()]
    mesh = Mesh(np.asarray(devices), ("runs",))
    shared = _replicated(mesh, shared)
    chunks = []
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
            chunk_start = time.perf_counter()
            info["build_s"] += chunk_start - start
            chunks.append(_gathered(_fit_chunk(mesh, estimator, liks, p0_chunk, shared, tuple(covariances), model,
                                               solver, vectorize, diagnostics)))
            info["fit_s"] += time.perf_counter() - chunk_start  # incl. compilation
            if bar is not None:
                bar.update()
    return tuple(jax.tree_util.tree_map(lambda *x: np.concatenate(x)[:n_runs], *parts) for parts in zip(*chunks))


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
    batch_size: int,
    devices,
    progress: bool,
    vectorize: bool,
) -> tuple[list[CellRuns], dict, list[tuple[list[Trajectory], dict]]]:
    """Run every cell; return their per-run outputs (`covariance` by the first of
    `covariances`), the timings and chunking (`vectorize` as `resolve_vectorize` returns
    it), and per cell its datasets and `{kind: (runs, j, j)}` of the other covariances.
    Every cell's data and problems are
    prepared before the first fit, so that a setting they cannot be built for (e.g. too
    few samples left by its subsampling) fails before any fitting."""
    model = bench.model
    noise_kind = "lognormal" if bench.noise.log_space else "gaussian"
    n_chunks, batch_size = chunking(n_runs, batch_size, len(devices))
    info = {"simulate_s": 0.0, "build_s": 0.0, "fit_s": 0.0, "chunk_size": batch_size, "n_chunks": n_chunks}
    prepared = []
    for c, cell in enumerate(cells):
        k_data, k_p0 = jax.random.split(jax.random.fold_in(key, c))
        try:
            start = time.perf_counter()
            t, clean, keep, noisy = _cell_data(bench, cell, n_runs, k_data)
            trajs = [Trajectory(t[keep], u) for u in noisy]
            info["simulate_s"] += time.perf_counter() - start
            start = time.perf_counter()
            # the estimator's own key: folded from the setting's, so the data and starts keep their streams
            k_estimator = jax.random.fold_in(jax.random.fold_in(key, c), 2**31 - 1)
            make, notes = _problem_builder(estimator, model, trajs, noise_kind, test_functions, k_estimator)
            info["build_s"] += time.perf_counter() - start
        except ValueError as e:
            n = len(np.asarray(bench.t)[:: cell.subsample])
            raise ValueError(f"setting {c} (noise ratio {cell.noise_ratio:g}, subsample {cell.subsample}: {n} of the "
                             f"benchmark's {len(bench.t)} samples) cannot be set up: {e}") from e
        p0s = np.asarray(p0(k_p0, n_runs)) if callable(p0) else np.broadcast_to(p0, (n_runs, model.n_params))
        prepared.append((t, clean, p0s, make, notes, trajs))
    bar = tqdm(total=len(cells) * n_chunks, desc=f"{model.name} study", unit="chunk",
               disable=not progress or jax.process_index() != 0)
    out = []
    extras = []
    for cell, (t, clean, p0s, make, notes, trajs) in zip(cells, prepared):
        shared = (np.asarray(lower), np.asarray(upper), np.asarray(cell.u0, float), np.asarray(t), np.asarray(clean))
        sols, covs, errs, oks = fit_batches(estimator, model, make, p0s, shared, covariances=covariances,
                                            solver=bench.solver, batch_size=batch_size, devices=devices,
                                            vectorize=vectorize, bar=bar, info=info)
        out.append(CellRuns(
            m=len(t) - 1, params=sols.params, p0=np.array(p0s), covariance=covs[:, 0],
            status=status_names(sols.result), num_steps=sols.num_steps, objective=sols.objective,
            forward_error=errs, forward_ok=oks,
            k=np.array([note.get("k", np.nan) for note in notes], float),
            radius=np.array([note.get("radius", np.nan) for note in notes], float),
        ))
        extras.append((trajs, {kind: covs[:, i] for i, kind in enumerate(covariances[1:], 1)}))
    bar.close()
    return out, info, extras


def forward_errors(bench: Benchmark, cell: Cell, params: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Forward-simulation errors (Rummel et al. 2025, eq. 13) of several parameter vectors on a cell's grid."""
    t = np.asarray(bench.t)[:: cell.subsample]
    clean = solve(bench.model, cell.p_true, cell.u0, t, solver=bench.solver)
    err, ok = jax.vmap(
        lambda p: forward_simulation_error(bench.model, p, jnp.asarray(cell.u0, float), jnp.asarray(t), clean,
                                           bench.solver, max_steps=50_000)
    )(jnp.asarray(params))
    return np.asarray(err), np.asarray(ok)


"""Batched throughput of a study: vmapped chunk fits vs a Python loop over the same jitted single fit.

Run from the repository root::

    OPENBLAS_THREAD_TIMEOUT=4 python benchmarks/study_throughput.py            # logistic + lorenz
    OPENBLAS_THREAD_TIMEOUT=4 python benchmarks/study_throughput.py --runs 64
    python benchmarks/study_throughput.py --runs 64 --devices 2 --name study_throughput_2dev

For each model, `--runs` noisy datasets (Rummel et al. 2025 protocol, 5 % noise, M = 256) are simulated
and their likelihoods built (outside the timing, padded to a common K). Then, side by
side in one process, the same WENDy-MLE fits from the same box-drawn starts are timed

1. vmap: one jit-compiled `vmap` of `MLE().solve` over the stacked likelihoods
   (what `wendyjax.studies.monte_carlo(..., vectorize=True)` runs per chunk);
2. map: one jit-compiled `lax.map` of the same solve, fits one after another inside the
   compiled call (`vectorize=False`, the CPU default of the studies);
3. loop: a Python loop calling the jitted single-fit `MLE().solve` once per dataset;
4. with `--devices N` (N XLA CPU devices, `jax_num_cpu_devices`; the loop, vmap and map run
   on the first): sharded, the `lax.map` of 2. inside a `shard_map` over all N devices, as
   the studies shard a chunk (every device fits its share of the runs at the same time).

Each is timed `--repeats` times after a compile call; medians are reported as fits per
second, with the ratios to the loop. The issue-4 target is vmap/loop >= 3. Host BLAS
(OpenBLAS, used by XLA:CPU for Cholesky and triangular solves) is limited to one thread
as in the studies. Results go to
`benchmarks/results/study_throughput.{json,md}` (`--name` for another stem, e.g. a GPU run).
"""

import argparse
import statistics
import time

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import threadpoolctl
from _common import command, machine_info, machine_line, write_results
from jax.sharding import Mesh, PartitionSpec as P

import wendyjax as wj
from wendyjax.weak import stack_likelihoods


def _timed(fn, repeats):
    jax.block_until_ready(fn())  # compile
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(fn())
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def run(name, n_runs, subsample, repeats):
    bench = getattr(wj.models, name)()
    keys = jax.random.split(jax.random.key(0), n_runs)
    liks = []
    for key in keys:
        data = bench.simulate(key, noise_ratio=0.05, subsample=subsample)
        liks.append(wj.weak_likelihood(bench.model, data))
    stacked = stack_likelihoods(liks)
    singles = [stack_likelihoods([lik]) for lik in liks]  # the same K padding as the batch
    singles = [jax.tree_util.tree_map(lambda x: x[0] if eqx.is_array(x) else x, s) for s in singles]
    lo, hi = (jnp.asarray(b, float) for b in bench.model.bounds)
    p0 = jax.random.uniform(jax.random.key(1), (n_runs, bench.model.n_params), minval=lo, maxval=hi)
    est = wj.MLE()
    vmapped = eqx.filter_jit(jax.vmap(lambda lik, p: est.solve(lik, p, lo, hi)))
    single = eqx.filter_jit(lambda lik, p: est.solve(lik, p, lo, hi))
    mapped = eqx.filter_jit(lambda liks, ps: jax.lax.map(lambda a: est.solve(a[0], a[1], lo, hi), (liks, ps)))
    t_vmap = _timed(lambda: vmapped(stacked, p0), repeats)
    t_map = _timed(lambda: mapped(stacked, p0), repeats)
    t_loop = _timed(lambda: [single(lik, p) for lik, p in zip(singles, p0)], repeats)
    sol = vmapped(stacked, p0)
    loop_params = np.stack([np.asarray(single(lik, p).params) for lik, p in zip(singles, p0)])
    sharded = {}
    if jax.device_count() > 1:
        mesh = Mesh(np.asarray(jax.devices()), ("runs",))
        lik_arrays, lik_static = eqx.partition(stacked, eqx.is_array)
        inner = lambda arrays, ps: jax.lax.map(  # noqa: E731
            lambda a: est.solve(eqx.combine(a[0], lik_static), a[1], lo, hi), (arrays, ps))
        fit = eqx.filter_jit(jax.shard_map(inner, mesh=mesh, in_specs=P("runs"), out_specs=P("runs"),
                                           check_vma=False))
        t_shard = _timed(lambda: fit(lik_arrays, p0), repeats)
        diff = np.max(np.abs(np.asarray(fit(lik_arrays, p0).params) - loop_params))
        sharded = {"devices": jax.device_count(), "sharded_s": t_shard, "sharded_fits_per_s": n_runs / t_shard,
                   "sharded_ratio": t_loop / t_shard, "sharded_max_param_diff": float(diff)}
    return {
        "model": name, "runs": n_runs, "M": len(np.asarray(bench.t)[::subsample]) - 1,
        "K": int(stacked.problem.phi.shape[2]),
        "successful": int(np.sum(np.asarray(sol.successful))),
        "steps_median": float(np.median(np.asarray(sol.num_steps))),
        "steps_max": int(np.max(np.asarray(sol.num_steps))),
        "vmap_s": t_vmap, "map_s": t_map, "loop_s": t_loop,
        "vmap_fits_per_s": n_runs / t_vmap, "map_fits_per_s": n_runs / t_map, "loop_fits_per_s": n_runs / t_loop,
        "vmap_ratio": t_loop / t_vmap, "map_ratio": t_loop / t_map,
        "max_param_diff": float(np.max(np.abs(np.asarray(sol.params) - loop_params))),
        **sharded,
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="+", default=["logistic", "lorenz"])
    ap.add_argument("--runs", type=int, default=32)
    ap.add_argument("--subsample", type=int, default=4)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--name", default="study_throughput",
                    help="results file stem under benchmarks/results/ (default: study_throughput)")
    ap.add_argument("--devices", type=int, default=1,
                    help="XLA CPU devices (jax_num_cpu_devices); with more than one, also time the sharded fits")
    args = ap.parse_args()
    if args.devices > 1:
        jax.config.update("jax_num_cpu_devices", args.devices)
    info = machine_info()
    rows = []
    with threadpoolctl.threadpool_limits(1, user_api="blas"):  # host BLAS on one thread, as in the studies
        for name in args.models:
            row = run(name, args.runs, args.subsample, args.repeats)
            rows.append(row)
            print(f"{name:10s} K={row['K']:3d} vmap {row['vmap_fits_per_s']:7.1f}  map {row['map_fits_per_s']:7.1f}  "
                  f"loop {row['loop_fits_per_s']:7.1f} fits/s  vmap/loop {row['vmap_ratio']:.2f}  "
                  f"map/loop {row['map_ratio']:.2f}  steps median {row['steps_median']:.0f} max {row['steps_max']}  "
                  f"(max |Δp| {row['max_param_diff']:.1e}, {row['successful']}/{row['runs']} successful)"
                  + (f"; sharded over {row['devices']} devices {row['sharded_fits_per_s']:.1f} fits/s, "
                     f"sharded/loop {row['sharded_ratio']:.2f}" if "devices" in row else ""))
    cmd = command()
    blas = "1 thread"
    write_results(args.name, {"command": cmd, "machine": info, "blas_threads": blas, "rows": rows}, indent=2,
                  default=float)
    lines = ["# Study throughput: vmapped and sequential chunks vs a Python loop of jitted single fits", "",
             f"Command: `{cmd}`; machine: {machine_line(info)}, devices {info.get('devices', '?')}; host BLAS {blas}. "
             f"Medians of {args.repeats} repeats.", "",
             "| model | runs | M | K | steps median / max | vmap fits/s | map fits/s | loop fits/s "
             "| vmap/loop | map/loop | max abs param diff |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['model']} | {r['runs']} | {r['M']} | {r['K']} | {r['steps_median']:.0f} / {r['steps_max']} "
                     f"| {r['vmap_fits_per_s']:.1f} | {r['map_fits_per_s']:.1f} | {r['loop_fits_per_s']:.1f} "
                     f"| {r['vmap_ratio']:.2f} | {r['map_ratio']:.2f} | {r['max_param_diff']:.1e} |")
    if any("devices" in r for r in rows):
        lines += ["", f"Sharded over {args.devices} CPU devices (`lax.map` per device inside one `shard_map`), "
                  "against the same loop:", "",
                  "| model | sharded fits/s | loop fits/s | sharded/loop | max abs param diff |",
                  "|---|---|---|---|---|"]
        lines += [f"| {r['model']} | {r['sharded_fits_per_s']:.1f} | {r['loop_fits_per_s']:.1f} "
                  f"| {r['sharded_ratio']:.2f} | {r['sharded_max_param_diff']:.1e} |" for r in rows]
    write_results(args.name, markdown=lines)


if __name__ == "__main__":
    main()

"""Batched studies: a whole study and bootstrap by stage, and (`--throughput`) vmapped fits against a loop.

    python benchmarks/study_pipeline.py [--throughput --runs 64 [--devices 2]]

Default: Lorenz, M = 1024, 5 % noise, WENDy-MLE studies and bootstraps with their stage seconds, and the batched
build of the likelihoods against one `weak_likelihood` per dataset (`study_pipeline`).
`--throughput`: the same fits alone (M = 256) by `vmap`, `lax.map`, a Python loop of the jitted solve and with
`--devices N` sharded over N CPU devices (`study_throughput`).
"""

import statistics
import time

import _common as cm
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import threadpoolctl
from jax.sharding import Mesh, PartitionSpec as P

import wendyjax as wj
from wendyjax.weak import stack_likelihoods


def _repeat(run, repeats: int) -> tuple[float, dict, object]:
    """(first call's seconds, median stage timings of the next `repeats` calls, the last result);
    `run(key)` returns a result with `timings`."""
    start = time.perf_counter()
    run(0)
    first = time.perf_counter() - start
    results = [run(rep + 1) for rep in range(repeats)]
    return first, {k: statistics.median(r.timings[k] for r in results) for k in results[0].timings}, results[-1]


def study_row(zoo, n_runs: int, repeats: int) -> dict:
    options = dict(noise_levels=(0.05,), n_runs=n_runs, batch_size=64, progress=False)
    first, t, study = _repeat(lambda key: wj.studies.monte_carlo(zoo, "mle", key=key, **options), repeats)
    row = {"kind": "study", "runs": n_runs, "first_call_s": first, **t, "fits_per_s": n_runs / t["total_s"]}
    row |= {"build_ms_per_run": 1e3 * t["build_s"] / n_runs, "build_share": t["build_s"] / t["total_s"]}
    return row | {"successful": int(np.sum(study.runs[0].status == "successful"))}


def build_row(zoo, n_runs: int, repeats: int) -> dict:
    datasets = [zoo.simulate(jax.random.key(100 + i), 0.05) for i in range(n_runs)]
    per_dataset = lambda: stack_likelihoods([wj.weak_likelihood(zoo.model, d) for d in datasets])  # noqa: E731
    batched = lambda: wj.weak.build_batch(zoo.model, datasets).likelihoods()  # noqa: E731
    (a, ta), (b, tb) = (cm.bench(fn, cfg=(repeats, 0.0, 0.0, repeats)) for fn in (batched, per_dataset))
    p, diff = jnp.asarray(zoo.p_true), 0.0
    for f in (wj.weak.nll, wj.weak.nll_grad, wj.weak.nll_hessian):
        x, y = (np.asarray(jax.vmap(f, in_axes=(0, None))(lik, p)) for lik in (a, b))
        diff = max(diff, float(np.max(np.abs(x - y)) / np.max(np.abs(y))))
    ms = [1e3 * t["median_s"] / n_runs for t in (ta, tb)]
    row = {"kind": "build", "runs": n_runs, "batched_ms_per_run": ms[0], "per_dataset_ms_per_run": ms[1]}
    return row | {"speedup": ms[1] / ms[0], "max_rel_diff": diff}


def bootstrap_row(zoo, n_boot: int, repeats: int) -> dict:
    data = zoo.simulate(jax.random.key(7), 0.05)
    fit = wj.MLE().fit(zoo.model, data, p0=[8.0, 25.0, 2.0])
    first, t, boot = _repeat(
        lambda key: wj.studies.bootstrap(wj.MLE(), fit, data, n_boot, key=key, progress=False), repeats
    )
    row = {"kind": "bootstrap", "runs": n_boot, "first_call_s": first, **t, "refits_per_s": n_boot / t["total_s"]}
    return row | {"outside_fits_share": (t["total_s"] - t["fit_s"]) / t["total_s"], "failed": int(boot.n_failed)}


def pipeline_markdown(rows, info, repeats) -> list[str]:
    g = lambda r, *keys: [f"{r[k]:.3g}" for k in keys]  # noqa: E731
    kinds = {kind: [r for r in rows if r["kind"] == kind] for kind in ("study", "build", "bootstrap")}
    blocks = [
        "# A study and a bootstrap end to end, by stage (Lorenz, M = 1024, 5 % noise, WENDy-MLE)",
        f"Command: `{cm.command()}`; machine: {cm.machine_line(info)}; {cm.utc_now()}. Medians of {repeats} warm calls "
        f"(after one that compiles); seconds.",
    ]
    if kinds["study"]:
        blocks.append(
            cm.markdown_table(
                "runs | total | simulate | build | fit | diagnostics | fits/s | build ms/run | build share "
                "| first call",
                [
                    [r["runs"], *g(r, "total_s", "simulate_s", "build_s", "fit_s", "diagnostics_s")]
                    + [f"{r['fits_per_s']:.1f}", f"{r['build_ms_per_run']:.1f}", f"{100 * r['build_share']:.1f} %"]
                    + [f"{r['first_call_s']:.1f}"]
                    for r in kinds["study"]
                ],
            )
        )
    if kinds["build"]:
        cols = ("batched_ms_per_run", "per_dataset_ms_per_run", "speedup", "max_rel_diff")
        head = "datasets | batched ms/dataset | per dataset ms/dataset | speed-up | max rel. diff of ℓ, ∇ℓ, ∇²ℓ"
        table = cm.markdown_table(head, [[r["runs"], *g(r, *cols)] for r in kinds["build"]])
        blocks += ["The build alone, batched against one build per dataset (stacked):", table]
    if kinds["bootstrap"]:
        blocks += [
            "Parametric bootstrap of one fit:",
            cm.markdown_table(
                "B | total | initial states | simulate | build | fit | outside the fits | first call",
                [
                    [r["runs"], *g(r, "total_s", "initial_states_s", "simulate_s", "build_s", "fit_s")]
                    + [f"{100 * r['outside_fits_share']:.1f} %", f"{r['first_call_s']:.1f}"]
                    for r in kinds["bootstrap"]
                ],
            ),
        ]
    return cm.paragraphs(*blocks)


def throughput_row(name, n_runs, repeats, subsample=4):
    def timed(fn):
        return cm.bench(fn, cfg=(repeats, 0.0, 0.0, repeats))[1]["median_s"]  # after a compile call

    zoo = getattr(wj.models, name)()
    keys = jax.random.split(jax.random.key(0), n_runs)
    liks = [wj.weak_likelihood(zoo.model, zoo.simulate(key, noise_ratio=0.05, subsample=subsample)) for key in keys]
    stacked = stack_likelihoods(liks)
    first = lambda x: x[0] if eqx.is_array(x) else x  # noqa: E731
    singles = [jax.tree_util.tree_map(first, stack_likelihoods([lik])) for lik in liks]  # the batch's K padding
    lo, hi = (jnp.asarray(b, float) for b in zoo.model.bounds)
    p0 = jax.random.uniform(jax.random.key(1), (n_runs, zoo.model.n_params), minval=lo, maxval=hi)
    solve = wj.MLE().solve
    vmapped = eqx.filter_jit(jax.vmap(lambda lik, p: solve(lik, p, lo, hi)))
    single = eqx.filter_jit(lambda lik, p: solve(lik, p, lo, hi))
    mapped = eqx.filter_jit(lambda liks, ps: jax.lax.map(lambda a: solve(a[0], a[1], lo, hi), (liks, ps)))
    t = {"vmap": timed(lambda: vmapped(stacked, p0)), "map": timed(lambda: mapped(stacked, p0))}
    t["loop"] = timed(lambda: [single(lik, p) for lik, p in zip(singles, p0)])
    sol = vmapped(stacked, p0)
    loop_params = np.stack([np.asarray(single(lik, p).params) for lik, p in zip(singles, p0)])
    steps = np.asarray(sol.num_steps)
    row = {"model": name, "runs": n_runs, "M": len(np.asarray(zoo.t)[::subsample]) - 1}
    row |= {"K": int(stacked.problem.phi.shape[2]), "successful": int(np.sum(np.asarray(sol.successful)))}
    row |= {"steps_median": float(np.median(steps)), "steps_max": int(np.max(steps))}
    row |= {f"{k}_s": t[k] for k in t} | {f"{k}_fits_per_s": n_runs / t[k] for k in t}
    row |= {"vmap_ratio": t["loop"] / t["vmap"], "map_ratio": t["loop"] / t["map"]}
    row["max_param_diff"] = float(np.max(np.abs(np.asarray(sol.params) - loop_params)))
    if jax.device_count() > 1:
        arrays, static = eqx.partition(stacked, eqx.is_array)

        def inner(arrays, ps):
            return jax.lax.map(lambda a: solve(eqx.combine(a[0], static), a[1], lo, hi), (arrays, ps))

        mesh = Mesh(np.asarray(jax.devices()), ("runs",))
        fit = eqx.filter_jit(jax.shard_map(inner, mesh=mesh, in_specs=P("runs"), out_specs=P("runs"), check_vma=False))
        t_shard = timed(lambda: fit(arrays, p0))
        diff = np.max(np.abs(np.asarray(fit(arrays, p0).params) - loop_params))
        row.update(devices=jax.device_count(), sharded_s=t_shard, sharded_fits_per_s=n_runs / t_shard)
        row.update(sharded_ratio=t["loop"] / t_shard, sharded_max_param_diff=float(diff))
    return row


def throughput(args, info):
    with threadpoolctl.threadpool_limits(1, user_api="blas"):  # host BLAS on one thread, as in the studies
        rows = [throughput_row(name, n, args.repeats) for name in args.models for n in args.runs or [32]]
    sharded = "devices" in rows[0]  # `lax.map` per device inside one `shard_map`, against the same loop
    md = cm.paragraphs(
        "# Study throughput: vmapped and sequential chunks vs a Python loop of jitted single fits",
        f"Command: `{cm.command()}`; machine: {cm.machine_line(info)}, devices {info['devices']}; host BLAS 1 thread. "
        f"Medians of {args.repeats} repeats." + (f" Sharded: over {args.devices} CPU devices." if sharded else ""),
        cm.markdown_table(
            "model | runs | M | K | steps median / max | vmap fits/s | map fits/s | loop fits/s | vmap/loop "
            "| map/loop | max abs param diff" + (" | sharded fits/s | sharded/loop | sharded diff" if sharded else ""),
            [
                [r["model"], r["runs"], r["M"], r["K"], f"{r['steps_median']:.0f} / {r['steps_max']}"]
                + [f"{r[k]:.1f}" for k in ("vmap_fits_per_s", "map_fits_per_s", "loop_fits_per_s")]
                + [f"{r['vmap_ratio']:.2f}", f"{r['map_ratio']:.2f}", f"{r['max_param_diff']:.1e}"]
                + ([f"{r['sharded_fits_per_s']:.1f}", f"{r['sharded_ratio']:.2f}"] if sharded else [])
                + ([f"{r['sharded_max_param_diff']:.1e}"] if sharded else [])
                for r in rows
            ],
        ),
    )
    data = {"command": cm.command(), "machine": info, "blas_threads": "1 thread", "rows": rows}
    cm.write_results(args.name or "study_throughput", data, md, indent=2, default=float, echo=True)


def main():
    ap = cm.parser(__doc__)
    ap.add_argument("--throughput", action="store_true", help="the batched fits alone against a loop")
    ap.add_argument("--runs", type=int, nargs="+", help="study sizes (default: 32 64; --throughput 32)")
    ap.add_argument("--boot", type=int, nargs="+", default=[20, 200], help="bootstrap sizes B")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--models", nargs="+", default=["logistic", "lorenz"], help="--throughput: wj.models")
    ap.add_argument("--devices", type=int, default=1, help="--throughput: XLA CPU devices; >1 also times sharded fits")
    ap.add_argument("--name", help="results file stem (default study_pipeline, study_throughput)")
    args = ap.parse_args()
    if args.devices > 1:  # before jax starts its backend
        jax.config.update("jax_num_cpu_devices", args.devices)
    info = cm.machine_info()
    if args.throughput:
        return throughput(args, info)
    zoo, rows = wj.models.lorenz(), []
    runs = args.runs or [32, 64]
    jobs = [*((study_row, n) for n in runs), (build_row, runs[0]), *((bootstrap_row, b) for b in args.boot)]
    for row, n in jobs:  # the results are rewritten after each row
        rows.append(row(zoo, n, args.repeats))
        print({k: float(f"{v:.4g}") if isinstance(v, float) else v for k, v in rows[-1].items()}, flush=True)
        data = {"command": cm.command(), "date": cm.utc_now(), "machine": info, "rows": rows}
        md = pipeline_markdown(rows, info, args.repeats)
        cm.write_results(args.name or "study_pipeline", data, md, indent=2, default=float)


if __name__ == "__main__":
    main()

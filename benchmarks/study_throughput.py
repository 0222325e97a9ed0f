"""Batched throughput of a study: vmapped chunk fits vs a Python loop over the same jitted single fit.

    OPENBLAS_THREAD_TIMEOUT=4 python benchmarks/study_throughput.py --runs 64   # logistic + lorenz
    python benchmarks/study_throughput.py --runs 64 --devices 2 --name study_throughput_2dev

The same WENDy-MLE fits of `--runs` datasets (Rummel et al. 2025 protocol, 5 % noise, M = 256, one padded K),
side by side: `vmap` and `lax.map` of `MLE().solve` (what `monte_carlo` runs per chunk with `vectorize=True`
and `False`), a Python loop of the jitted single solve, and with `--devices N` the `lax.map` inside a `shard_map`
over N XLA CPU devices. Medians after a compile call, host BLAS on one thread as in the studies.
Results: `benchmarks/results/study_throughput.{json,md}` (`--name` for another stem)."""

import argparse

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import threadpoolctl
from _common import bench, command, machine_info, machine_line, markdown_table, write_results
from jax.sharding import Mesh, PartitionSpec as P

import wendyjax as wj
from wendyjax.weak import stack_likelihoods


def run(name, n_runs, repeats, subsample=4):
    cfg = {"min_reps": repeats, "min_time": 0.0, "max_time": 0.0, "floor_reps": repeats}  # after a compile call

    def timed(fn):
        return bench(fn, cfg=cfg)[1]["median_s"]

    zoo = getattr(wj.models, name)()
    liks = [
        wj.weak_likelihood(zoo.model, zoo.simulate(key, noise_ratio=0.05, subsample=subsample))
        for key in jax.random.split(jax.random.key(0), n_runs)
    ]
    stacked = stack_likelihoods(liks)
    singles = [
        jax.tree_util.tree_map(lambda x: x[0] if eqx.is_array(x) else x, stack_likelihoods([lik])) for lik in liks
    ]  # the same K padding as the batch
    lo, hi = (jnp.asarray(b, float) for b in zoo.model.bounds)
    p0 = jax.random.uniform(jax.random.key(1), (n_runs, zoo.model.n_params), minval=lo, maxval=hi)
    solve = wj.MLE().solve
    vmapped = eqx.filter_jit(jax.vmap(lambda lik, p: solve(lik, p, lo, hi)))
    single = eqx.filter_jit(lambda lik, p: solve(lik, p, lo, hi))
    mapped = eqx.filter_jit(lambda liks, ps: jax.lax.map(lambda a: solve(a[0], a[1], lo, hi), (liks, ps)))
    t = {
        "vmap": timed(lambda: vmapped(stacked, p0)),
        "map": timed(lambda: mapped(stacked, p0)),
        "loop": timed(lambda: [single(lik, p) for lik, p in zip(singles, p0)]),
    }
    sol = vmapped(stacked, p0)
    loop_params = np.stack([np.asarray(single(lik, p).params) for lik, p in zip(singles, p0)])
    row = {
        "model": name,
        "runs": n_runs,
        "M": len(np.asarray(zoo.t)[::subsample]) - 1,
        "K": int(stacked.problem.phi.shape[2]),
        "successful": int(np.sum(np.asarray(sol.successful))),
        "steps_median": float(np.median(np.asarray(sol.num_steps))),
        "steps_max": int(np.max(np.asarray(sol.num_steps))),
        **{f"{k}_s": t[k] for k in t},
        **{f"{k}_fits_per_s": n_runs / t[k] for k in t},
        "vmap_ratio": t["loop"] / t["vmap"],
        "map_ratio": t["loop"] / t["map"],
        "max_param_diff": float(np.max(np.abs(np.asarray(sol.params) - loop_params))),
    }
    if jax.device_count() > 1:
        arrays, static = eqx.partition(stacked, eqx.is_array)
        inner = lambda arrays, ps: jax.lax.map(  # noqa: E731
            lambda a: solve(eqx.combine(a[0], static), a[1], lo, hi), (arrays, ps)
        )
        fit = eqx.filter_jit(
            jax.shard_map(
                inner,
                mesh=Mesh(np.asarray(jax.devices()), ("runs",)),
                in_specs=P("runs"),
                out_specs=P("runs"),
                check_vma=False,
            )
        )
        t_shard = timed(lambda: fit(arrays, p0))
        diff = np.max(np.abs(np.asarray(fit(arrays, p0).params) - loop_params))
        row.update(
            devices=jax.device_count(),
            sharded_s=t_shard,
            sharded_fits_per_s=n_runs / t_shard,
            sharded_ratio=t["loop"] / t_shard,
            sharded_max_param_diff=float(diff),
        )
    return row


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="+", default=["logistic", "lorenz"])
    ap.add_argument("--runs", type=int, default=32)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--name", default="study_throughput", help="results file stem under benchmarks/results/")
    ap.add_argument(
        "--devices",
        type=int,
        default=1,
        help="XLA CPU devices (jax_num_cpu_devices); with more than one, also time the sharded fits",
    )
    args = ap.parse_args()
    if args.devices > 1:
        jax.config.update("jax_num_cpu_devices", args.devices)
    info = machine_info()
    with threadpoolctl.threadpool_limits(1, user_api="blas"):  # host BLAS on one thread, as in the studies
        rows = [run(name, args.runs, args.repeats) for name in args.models]
    write_results(
        args.name,
        {"command": command(), "machine": info, "blas_threads": "1 thread", "rows": rows},
        indent=2,
        default=float,
    )
    lines = [
        "# Study throughput: vmapped and sequential chunks vs a Python loop of jitted single fits",
        "",
        f"Command: `{command()}`; machine: {machine_line(info)}, devices {info['devices']}; host BLAS 1 thread. "
        f"Medians of {args.repeats} repeats.",
        "",
        *markdown_table(
            [
                "model",
                "runs",
                "M",
                "K",
                "steps median / max",
                "vmap fits/s",
                "map fits/s",
                "loop fits/s",
                "vmap/loop",
                "map/loop",
                "max abs param diff",
            ],
            [
                [
                    r["model"],
                    r["runs"],
                    r["M"],
                    r["K"],
                    f"{r['steps_median']:.0f} / {r['steps_max']}",
                    *(f"{r[k]:.1f}" for k in ("vmap_fits_per_s", "map_fits_per_s", "loop_fits_per_s")),
                    f"{r['vmap_ratio']:.2f}",
                    f"{r['map_ratio']:.2f}",
                    f"{r['max_param_diff']:.1e}",
                ]
                for r in rows
            ],
        ),
    ]
    if "devices" in rows[0]:
        lines += [
            "",
            f"Sharded over {args.devices} CPU devices (`lax.map` per device inside one `shard_map`), "
            "against the same loop:",
            "",
            *markdown_table(
                ["model", "sharded fits/s", "loop fits/s", "sharded/loop", "max abs param diff"],
                [
                    [
                        r["model"],
                        f"{r['sharded_fits_per_s']:.1f}",
                        f"{r['loop_fits_per_s']:.1f}",
                        f"{r['sharded_ratio']:.2f}",
                        f"{r['sharded_max_param_diff']:.1e}",
                    ]
                    for r in rows
                ],
            ),
        ]
    write_results(args.name, markdown=lines)
    print("\n".join(lines))


if __name__ == "__main__":
    main()

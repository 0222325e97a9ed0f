"""A whole study and a whole bootstrap, end to end, by stage: where the time of what a user runs goes.

    python benchmarks/study_pipeline.py          # CPU: Lorenz studies of 32 and 64 runs, bootstraps B = 20, 200
    python benchmarks/study_pipeline.py --gpu    # 64, 256 and 1024 runs, into results/gpu/

Lorenz, M = 1024, 5 % noise, WENDy-MLE, medians of `--repeats` calls after one that compiles: `monte_carlo`
studies of R runs and `bootstrap`s of one fit with their stage seconds (`timings`), and the studies' batched
build of R likelihoods (`wj.weak.build_batch`) against one `weak_likelihood` per dataset, stacked, with their
largest difference in ℓ, ∇ℓ, ∇²ℓ at p*. `study_pipeline_9119ae6.md`: this script on the tree of commit 9119ae6.
Results: `benchmarks/results/study_pipeline.{json,md}` (`--gpu`: `results/gpu/`; `--name` for another stem)."""

import argparse
import statistics
import time

import jax
import jax.numpy as jnp
import numpy as np
from _common import bench, command, machine_info, machine_line, markdown_table, utc_now, write_results

import wendyjax as wj


def _repeat(run, repeats: int) -> tuple[float, dict, object]:
    """(first call's seconds, median stage timings of the next `repeats` calls, the last result);
    `run(key)` returns a result with `timings`."""
    start = time.perf_counter()
    run(0)
    first = time.perf_counter() - start
    results = [run(rep + 1) for rep in range(repeats)]
    return first, {k: statistics.median(r.timings[k] for r in results) for k in results[0].timings}, results[-1]


def study_row(zoo, n_runs: int, repeats: int) -> dict:
    first, t, study = _repeat(
        lambda key: wj.studies.monte_carlo(
            zoo, "mle", key=key, noise_levels=(0.05,), n_runs=n_runs, batch_size=64, progress=False
        ),
        repeats,
    )
    return {
        "kind": "study",
        "runs": n_runs,
        "first_call_s": first,
        **t,
        "fits_per_s": n_runs / t["total_s"],
        "build_ms_per_run": 1e3 * t["build_s"] / n_runs,
        "build_share": t["build_s"] / t["total_s"],
        "successful": int(np.sum(study.runs[0].status == "successful")),
    }


def build_row(zoo, n_runs: int, repeats: int) -> dict:
    datasets = [zoo.simulate(jax.random.key(100 + i), 0.05) for i in range(n_runs)]
    builds = {
        "per_dataset": lambda: wj.weak.stack_likelihoods([wj.weak_likelihood(zoo.model, d) for d in datasets]),
        "batched": lambda: wj.weak.build_batch(zoo.model, datasets).likelihoods(),
    }
    cfg = {"min_reps": repeats, "min_time": 0.0, "max_time": 0.0, "floor_reps": repeats}  # after a first call
    out, seconds = {}, {}
    for name, fn in builds.items():
        out[name], timing = bench(fn, cfg=cfg)
        seconds[name] = timing["median_s"]
    p = jnp.asarray(zoo.p_true)
    diff = 0.0
    for f in (wj.weak.nll, wj.weak.nll_grad, wj.weak.nll_hessian):
        a, b = (np.asarray(jax.vmap(f, in_axes=(0, None))(out[k], p)) for k in ("batched", "per_dataset"))
        diff = max(diff, float(np.max(np.abs(a - b)) / np.max(np.abs(b))))
    return {
        "kind": "build",
        "runs": n_runs,
        "per_dataset_s": seconds["per_dataset"],
        "batched_s": seconds["batched"],
        "speedup": seconds["per_dataset"] / seconds["batched"],
        "per_dataset_ms_per_run": 1e3 * seconds["per_dataset"] / n_runs,
        "batched_ms_per_run": 1e3 * seconds["batched"] / n_runs,
        "max_rel_diff": diff,
    }


def bootstrap_row(zoo, n_boot: int, repeats: int) -> dict:
    data = zoo.simulate(jax.random.key(7), 0.05)
    fit = wj.MLE().fit(zoo.model, data, p0=[8.0, 25.0, 2.0])
    first, t, boot = _repeat(
        lambda key: wj.studies.bootstrap(wj.MLE(), fit, data, n_boot, key=key, progress=False), repeats
    )
    return {
        "kind": "bootstrap",
        "runs": n_boot,
        "first_call_s": first,
        **t,
        "refits_per_s": n_boot / t["total_s"],
        "outside_fits_share": (t["total_s"] - t["fit_s"]) / t["total_s"],
        "failed": int(boot.n_failed),
    }


def markdown(rows, info, repeats) -> list[str]:
    def g(r, *keys):
        return [f"{r[k]:.3g}" for k in keys]

    lines = [
        "# A study and a bootstrap end to end, by stage (Lorenz, M = 1024, 5 % noise, WENDy-MLE)",
        "",
        f"Command: `{command()}`; machine: {machine_line(info)}; {utc_now()}. Medians of {repeats} warm calls "
        f"(after one that compiles); seconds.",
        "",
    ]
    kinds = {kind: [r for r in rows if r["kind"] == kind] for kind in ("study", "build", "bootstrap")}
    if kinds["study"]:
        lines += markdown_table(
            [
                "runs",
                "total",
                "simulate",
                "build",
                "fit",
                "diagnostics",
                "fits/s",
                "build ms/run",
                "build share",
                "first call",
            ],
            [
                [
                    r["runs"],
                    *g(r, "total_s", "simulate_s", "build_s", "fit_s", "diagnostics_s"),
                    f"{r['fits_per_s']:.1f}",
                    f"{r['build_ms_per_run']:.1f}",
                    f"{100 * r['build_share']:.1f} %",
                    f"{r['first_call_s']:.1f}",
                ]
                for r in kinds["study"]
            ],
        )
    if kinds["build"]:
        lines += [
            "",
            "The build alone, batched against one build per dataset (stacked):",
            "",
            *markdown_table(
                ["datasets", "batched ms/dataset", "per dataset ms/dataset", "speed-up", "max rel. diff of ℓ, ∇ℓ, ∇²ℓ"],
                [
                    [
                        r["runs"],
                        f"{r['batched_ms_per_run']:.1f}",
                        f"{r['per_dataset_ms_per_run']:.1f}",
                        f"{r['speedup']:.1f}x",
                        f"{r['max_rel_diff']:.1e}",
                    ]
                    for r in kinds["build"]
                ],
            ),
        ]
    if kinds["bootstrap"]:
        lines += [
            "",
            "Parametric bootstrap of one fit:",
            "",
            *markdown_table(
                ["B", "total", "initial states", "simulate", "build", "fit", "outside the fits", "first call"],
                [
                    [
                        r["runs"],
                        *g(r, "total_s", "initial_states_s", "simulate_s", "build_s", "fit_s"),
                        f"{100 * r['outside_fits_share']:.1f} %",
                        f"{r['first_call_s']:.1f}",
                    ]
                    for r in kinds["bootstrap"]
                ],
            ),
        ]
    return lines


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, nargs="+", help="study sizes (default: 32 64; with --gpu 64 256 1024)")
    ap.add_argument("--boot", type=int, nargs="+", default=[20, 200], help="bootstrap sizes B")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--gpu", action="store_true", help="the GPU sizes, results under results/gpu/")
    ap.add_argument("--name", default=None, help="results file stem (default study_pipeline, gpu/study_pipeline)")
    args = ap.parse_args()
    runs = args.runs or ([64, 256, 1024] if args.gpu else [32, 64])
    name = args.name or ("gpu/study_pipeline" if args.gpu else "study_pipeline")
    info, zoo, rows = machine_info(), wj.models.lorenz(), []
    jobs = [*((study_row, n) for n in runs), (build_row, runs[0]), *((bootstrap_row, b) for b in args.boot)]
    for row, n in jobs:  # the results are rewritten after each row
        rows.append(row(zoo, n, args.repeats))
        print({k: float(f"{v:.4g}") if isinstance(v, float) else v for k, v in rows[-1].items()}, flush=True)
        write_results(
            name,
            {"command": command(), "date": utc_now(), "machine": info, "rows": rows},
            indent=2,
            default=float,
            markdown=markdown(rows, info, args.repeats),
        )


if __name__ == "__main__":
    main()

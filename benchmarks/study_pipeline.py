"""A whole study and a whole bootstrap, end to end, by stage: where the time of what a user runs goes.

Run from the repository root::

    python benchmarks/study_pipeline.py          # CPU: Lorenz studies of 32 and 64 runs, bootstraps B = 20, 200
    python benchmarks/study_pipeline.py --gpu    # 64, 256 and 1024 runs, into results/gpu/
    python benchmarks/study_pipeline.py --runs 32 --boot 20 --repeats 1 --name study_pipeline_quick

Rows, each timed `--repeats` times after a first call that compiles (medians reported):

1. `study`: `wj.studies.monte_carlo(wj.models.lorenz(), "mle", noise_levels=0.05, n_runs=R)`
   (M = 1024, WENDy-MLE from starts drawn in the box, sandwich covariances, forward-simulation
   errors), with its recorded stage seconds (`Study.timings`: simulate, build, fit,
   diagnostics), fits per second of the whole study, and the build per run and as a share.
2. `build`: the studies' build of R datasets' likelihoods alone, batched
   (`wj.weak.build_batch(...).likelihoods()`: one radius search for all datasets, the test
   functions once per selected radius, the likelihoods assembled in one compiled call) against
   one build per dataset, stacked (`stack_likelihoods([weak_likelihood(model, d) for d in
   datasets])`, the studies' build before the batched one), and their largest difference in
   ℓ, ∇ℓ and ∇²ℓ at p*.
3. `bootstrap`: `wj.studies.bootstrap(wj.MLE(), fit, data, B)` of one Lorenz fit, with its
   stage seconds (`Bootstrap.timings`: initial states, simulate, build, fit) and the share of
   its time outside the refits' fits.

Results go to `benchmarks/results/study_pipeline.{json,md}` (`--gpu`: `results/gpu/`; `--name`
for another stem). The script also runs on trees without stage timings of bootstraps (then
only their totals are shown), so the same command measures an older commit side by side.
"""

import argparse
import statistics
import time

import jax
import jax.numpy as jnp
import numpy as np
from _common import command, machine_info, machine_line, utc_now, write_results

import wendyjax as wj

STAGES = ("simulate_s", "build_s", "fit_s", "diagnostics_s")
BOOT_STAGES = ("initial_states_s", "simulate_s", "build_s", "fit_s")


def _timings(result) -> dict:
    timings = getattr(result, "timings", None)
    if timings is None:  # a tree without stage timings (the landed main before the batched build)
        s = getattr(result, "settings", {})
        timings = {k: s[k] for k in STAGES if k in s}
        timings["total_s"] = s.get("wall_time_s", getattr(result, "seconds", float("nan")))
    return dict(timings)


def _median_timings(runs: list[dict]) -> dict:
    return {k: statistics.median(r.get(k, float("nan")) for r in runs) for k in runs[0]}


def study_row(bench, n_runs: int, repeats: int) -> dict:
    kw = dict(noise_levels=(0.05,), n_runs=n_runs, batch_size=64, progress=False)
    start = time.perf_counter()
    wj.studies.monte_carlo(bench, "mle", key=0, **kw)
    first = time.perf_counter() - start
    runs, ok = [], None
    for rep in range(repeats):
        study = wj.studies.monte_carlo(bench, "mle", key=rep + 1, **kw)
        runs.append(_timings(study))
        ok = int(np.sum(study.runs[0].status == "successful"))
    t = _median_timings(runs)
    total = t["total_s"]
    return {"kind": "study", "runs": n_runs, "first_call_s": first, **t, "fits_per_s": n_runs / total,
            "build_ms_per_run": 1e3 * t.get("build_s", np.nan) / n_runs,
            "build_share": t.get("build_s", np.nan) / total, "successful": ok}


def _max_rel(a, b) -> float:
    a, b = np.asarray(a), np.asarray(b)
    return float(np.max(np.abs(a - b)) / np.max(np.abs(b)))


def build_row(bench, n_runs: int, repeats: int) -> dict:
    datasets = [bench.simulate(jax.random.key(100 + i), 0.05) for i in range(n_runs)]
    model = bench.model

    def per_dataset():
        return jax.block_until_ready(wj.weak.stack_likelihoods([wj.weak_likelihood(model, d) for d in datasets]))

    def batched():
        return jax.block_until_ready(wj.weak.build_batch(model, datasets).likelihoods())

    times = {}
    for name, fn in (("per_dataset", per_dataset), ("batched", batched)):
        fn()
        samples = []
        for _ in range(repeats):
            start = time.perf_counter()
            out = fn()
            samples.append(time.perf_counter() - start)
        times[name] = (statistics.median(samples), out)
    p = jnp.asarray(bench.p_true)
    a, b = times["batched"][1], times["per_dataset"][1]
    diff = max(_max_rel(jax.vmap(f, in_axes=(0, None))(a, p), jax.vmap(f, in_axes=(0, None))(b, p))
               for f in (wj.weak.nll, wj.weak.nll_grad, wj.weak.nll_hessian))
    return {"kind": "build", "runs": n_runs, "per_dataset_s": times["per_dataset"][0],
            "batched_s": times["batched"][0], "speedup": times["per_dataset"][0] / times["batched"][0],
            "per_dataset_ms_per_run": 1e3 * times["per_dataset"][0] / n_runs,
            "batched_ms_per_run": 1e3 * times["batched"][0] / n_runs, "max_rel_diff": diff}


def bootstrap_row(bench, n_boot: int, repeats: int) -> dict:
    data = bench.simulate(jax.random.key(7), 0.05)
    fit = wj.MLE().fit(bench.model, data, p0=[8.0, 25.0, 2.0])
    start = time.perf_counter()
    wj.studies.bootstrap(wj.MLE(), fit, data, n_boot, key=0, progress=False)
    first = time.perf_counter() - start
    runs = []
    for rep in range(repeats):
        boot = wj.studies.bootstrap(wj.MLE(), fit, data, n_boot, key=rep + 1, progress=False)
        runs.append(_timings(boot))
    t = _median_timings(runs)
    outside = t["total_s"] - t.get("fit_s", np.nan)
    return {"kind": "bootstrap", "runs": n_boot, "first_call_s": first, **t, "refits_per_s": n_boot / t["total_s"],
            "outside_fits_share": outside / t["total_s"], "failed": int(boot.n_failed)}


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
    info = machine_info()
    bench = wj.models.lorenz()
    rows = []

    def save():
        write_results(name, {"command": command(), "date": utc_now(), "machine": info, "rows": rows}, indent=2,
                      default=float, markdown=_markdown(rows, info, args.repeats))

    for n in runs:
        rows.append(study_row(bench, n, args.repeats))
        r = rows[-1]
        print(f"study {n:5d} runs: {r['total_s']:.2f} s ({r['fits_per_s']:.1f} fits/s), build {r['build_s']:.2f} s "
              f"({r['build_ms_per_run']:.1f} ms/run, {100 * r['build_share']:.1f} %), fit {r['fit_s']:.2f} s, "
              f"diagnostics {r.get('diagnostics_s', float('nan')):.2f} s; first call {r['first_call_s']:.1f} s",
              flush=True)
        save()
    for n in runs[:1] if hasattr(wj.weak, "build_batch") else ():  # trees before the batched build have none
        rows.append(build_row(bench, n, args.repeats))
        r = rows[-1]
        print(f"build {n:5d} datasets: batched {r['batched_ms_per_run']:.1f} ms/run, per dataset "
              f"{r['per_dataset_ms_per_run']:.1f} ms/run ({r['speedup']:.1f}x), max rel diff {r['max_rel_diff']:.1e}",
              flush=True)
        save()
    for b in args.boot:
        rows.append(bootstrap_row(bench, b, args.repeats))
        r = rows[-1]
        print(f"bootstrap B = {b}: {r['total_s']:.2f} s, fit {r.get('fit_s', float('nan')):.2f} s, outside the fits "
              f"{100 * r['outside_fits_share']:.1f} % (initial states {r.get('initial_states_s', float('nan')):.2f} s, "
              f"build {r.get('build_s', float('nan')):.2f} s); first call {r['first_call_s']:.1f} s", flush=True)
        save()


def _markdown(rows, info, repeats) -> list[str]:
    fmt = lambda r, k: f"{r[k]:.3g}" if k in r and np.isfinite(r[k]) else "–"  # noqa: E731
    lines = ["# A study and a bootstrap end to end, by stage (Lorenz, M = 1024, 5 % noise, WENDy-MLE)", "",
             f"Command: `{command()}`; machine: {machine_line(info)}; {utc_now()}. Medians of {repeats} warm calls "
             f"(after one that compiles); seconds.", ""]
    studies = [r for r in rows if r["kind"] == "study"]
    if studies:
        lines += ["| runs | total | simulate | build | fit | diagnostics | fits/s | build ms/run | build share "
                  "| first call |", "|---|---|---|---|---|---|---|---|---|---|"]
        lines += [f"| {r['runs']} | {fmt(r, 'total_s')} | {fmt(r, 'simulate_s')} | {fmt(r, 'build_s')} "
                  f"| {fmt(r, 'fit_s')} | {fmt(r, 'diagnostics_s')} | {r['fits_per_s']:.1f} "
                  f"| {r['build_ms_per_run']:.1f} | {100 * r['build_share']:.1f} % | {r['first_call_s']:.1f} |"
                  for r in studies]
    builds = [r for r in rows if r["kind"] == "build"]
    if builds:
        lines += ["", "The build alone, batched against one build per dataset (stacked):", "",
                  "| datasets | batched ms/dataset | per dataset ms/dataset | speed-up | max rel. diff of ℓ, ∇ℓ, ∇²ℓ |",
                  "|---|---|---|---|---|"]
        lines += [f"| {r['runs']} | {r['batched_ms_per_run']:.1f} | {r['per_dataset_ms_per_run']:.1f} "
                  f"| {r['speedup']:.1f}x | {r['max_rel_diff']:.1e} |" for r in builds]
    boots = [r for r in rows if r["kind"] == "bootstrap"]
    if boots:
        lines += ["", "Parametric bootstrap of one fit:", "",
                  "| B | total | initial states | simulate | build | fit | outside the fits | first call |",
                  "|---|---|---|---|---|---|---|---|"]
        lines += [f"| {r['runs']} | {fmt(r, 'total_s')} | {fmt(r, 'initial_states_s')} | {fmt(r, 'simulate_s')} "
                  f"| {fmt(r, 'build_s')} | {fmt(r, 'fit_s')} | {100 * r['outside_fits_share']:.1f} % "
                  f"| {r['first_call_s']:.1f} |" for r in boots]
    return lines


if __name__ == "__main__":
    main()

"""A study sharded over several CPU devices against the same study on one.

Run from the repository root::

    python benchmarks/study_devices.py                      # logistic + lorenz, 2 CPU devices
    python benchmarks/study_devices.py --devices 4 --runs 128

`jax_num_cpu_devices` splits the host into `--devices` XLA devices; the same
`wendyjax.studies.monte_carlo` call (Rummel et al. 2025 protocol, 5 % noise, M = 256, `--runs` runs in
one chunk, p₀ from the box) then runs once with every device (the runs sharded over them,
one `shard_map` program per chunk) and once with the first device only. Each is timed
`--repeats` times after a compiling call; medians of the wall time and of the study's own
fit-stage time are reported, with the estimates' largest difference (the shards must not
change them).
Results go to `benchmarks/results/study_devices.{json,md}`.
"""

import argparse
import statistics
import time

import jax
from _common import command, machine_info, machine_line, write_results


def run(wj, name, n_runs, repeats):
    bench = getattr(wj.models, name)()
    kw = dict(noise_levels=[0.05], subsamples=[4], n_runs=n_runs, key=jax.random.key(1), batch_size=n_runs,
              progress=False)
    row = {"model": name, "runs": n_runs}
    params = {}
    for label, devices in (("sharded", jax.devices()), ("single", jax.devices()[:1])):
        wj.studies.monte_carlo(bench, wj.MLE(), devices=devices, **kw)  # compile
        walls, fits = [], []
        for _ in range(repeats):
            start = time.perf_counter()
            study = wj.studies.monte_carlo(bench, wj.MLE(), devices=devices, **kw)
            walls.append(time.perf_counter() - start)
            fits.append(study.timings["fit_s"])
        row[f"{label}_wall_s"], row[f"{label}_fit_s"] = statistics.median(walls), statistics.median(fits)
        params[label] = study.runs[0].params
    row["fit_ratio"] = row["single_fit_s"] / row["sharded_fit_s"]
    row["wall_ratio"] = row["single_wall_s"] / row["sharded_wall_s"]
    row["max_param_diff"] = float(abs(params["sharded"] - params["single"]).max())
    return row


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="+", default=["logistic", "lorenz"])
    ap.add_argument("--devices", type=int, default=2, help="number of CPU devices (default 2)")
    ap.add_argument("--runs", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    jax.config.update("jax_num_cpu_devices", args.devices)  # before jax starts its backend
    import wendyjax as wj

    info = machine_info()
    rows = []
    for name in args.models:
        row = run(wj, name, args.runs, args.repeats)
        rows.append(row)
        print(f"{name:10s} fit {row['sharded_fit_s']:.2f} s on {args.devices} devices vs {row['single_fit_s']:.2f} s "
              f"on one ({row['fit_ratio']:.2f}x); wall {row['sharded_wall_s']:.2f} vs {row['single_wall_s']:.2f} s "
              f"({row['wall_ratio']:.2f}x); max |dp| {row['max_param_diff']:.1e}")
    cmd = command()
    write_results("study_devices", {"command": cmd, "machine": info, "devices": args.devices, "rows": rows}, indent=2)
    lines = [f"# A study on {args.devices} CPU devices against one", "",
             f"Command: `{cmd}`; machine: {machine_line(info)}. One chunk of {args.runs} runs, 5 % noise, M = 256; "
             f"medians of {args.repeats} repeats after a compiling call. 'fit' is the study's fit stage (fits, "
             "covariances, forward simulations); 'wall' adds simulating the data and building the likelihoods on "
             "the host.", "",
             f"| model | runs | fit s, {args.devices} devices | fit s, 1 device | fit speed-up "
             f"| wall s, {args.devices} devices | wall s, 1 device | wall speed-up | max abs param diff |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['model']} | {r['runs']} | {r['sharded_fit_s']:.2f} | {r['single_fit_s']:.2f} "
                     f"| {r['fit_ratio']:.2f} | {r['sharded_wall_s']:.2f} | {r['single_wall_s']:.2f} "
                     f"| {r['wall_ratio']:.2f} | {r['max_param_diff']:.1e} |")
    write_results("study_devices", markdown=lines)


if __name__ == "__main__":
    main()

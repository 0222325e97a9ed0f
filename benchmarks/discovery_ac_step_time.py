"""Time of a Levenberg–Marquardt step of the Allen–Cahn discovery, with and without missing data.

Run from the repository root::

    python benchmarks/discovery_ac_step_time.py              # 003's 256² grid, 6 steps
    python benchmarks/discovery_ac_step_time.py --size 128 --steps 10

On the data of `discovery_pde.py` (two snapshots, 10 % noise, seed 0; nothing missing, and
10 % missing filled forward as `discovery_pde.py` starts), the first model a discovery tests
(the full library, θ0 = 1) is fitted as the discovery fits it: the vmapped pair of the
unpenalised and the penalised fit (`StateParameterRegression._solve_pair`, sparse-LU
solver), for exactly `--steps` steps. The complete-data cell runs twice (the first call
compiles) and the missing-data cell once; each sparse solve on the host is timed. Reported:
seconds per step of the pair, and the solves' share. Results go to
`benchmarks/results/discovery_ac_step_time{,_SIZE}.{json,md}` (`_SIZE` unless 256).
"""

import argparse
import datetime
import json
import statistics
import sys
import time
from pathlib import Path

import jax

jax.config.update("jax_enable_x64", True)

import equinox as eqx  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from wendyjax.discovery import _sparse_solve, discovery_problem, fill_missing  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent))
from discovery_pde import realisation, system  # noqa: E402
from likelihood import machine_info  # noqa: E402

RESULTS = Path(__file__).parent / "results"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=256)
    parser.add_argument("--steps", type=int, default=6)
    args = parser.parse_args()
    clean, library, true, dt, est, theta0 = system("ac", args.size, max_steps=args.steps)
    est = eqx.tree_at(lambda e: e.solver.rtol, est, 0.0)  # exactly `steps` steps: no convergence stop
    solves = []
    host_solve = _sparse_solve._solve_on_host

    def timed(*a):
        start = time.perf_counter()
        out = host_solve(*a)
        solves.append(time.perf_counter() - start)
        return out

    _sparse_solve._solve_on_host = timed
    pair = eqx.filter_jit(est._solve_pair)
    full = jnp.ones(true.shape)
    rows = []
    for label, missing in (("compile", 0.0), ("complete", 0.0), ("missing", 0.1)):
        problem = discovery_problem(realisation(clean, 0.1, missing, 0), library, dt, hessian="sparse")
        u0 = jnp.asarray(fill_missing(problem))
        solves.clear()
        start = time.perf_counter()
        out = jax.block_until_ready(pair(problem, u0, jnp.full(true.shape, float(theta0)), full))
        seconds = time.perf_counter() - start
        steps = np.asarray(out.n_steps)
        row = {"cell": label, "missing": missing, "steps": steps.tolist(), "seconds": seconds,
               "per_step_s": seconds / int(steps.max()), "solves": len(solves), "solve_s": sum(solves),
               "solve_median_s": statistics.median(solves)}
        rows.append(row)
        print(f"{label:9s} steps {steps}, {seconds:.1f} s, {row['per_step_s']:.2f} s per step of the pair; "
              f"{len(solves)} solves, {sum(solves):.1f} s (median {row['solve_median_s']:.2f} s)", flush=True)
    suffix = "" if args.size == 256 else f"_{args.size}"
    command = "python benchmarks/discovery_ac_step_time.py " + " ".join(sys.argv[1:])
    info = machine_info()
    (RESULTS / f"discovery_ac_step_time{suffix}.json").write_text(json.dumps(
        {"command": command.strip(), "date": datetime.date.today().isoformat(), "machine": info, "size": args.size,
         "rows": rows}, indent=2) + "\n")
    lines = [f"# Allen–Cahn discovery ({args.size}², 10 % noise): one LM step of the full-library pair of fits", "",
             f"Command: `{command.strip()}`; {datetime.date.today().isoformat()}; machine: "
             f"{info.get('cpu_model', '?')}, {info.get('cpu_count', '?')} CPUs. The first row includes compilation.",
             "", "| cell | missing | steps | s | s per step | solves | solve s | median solve s |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['cell']} | {r['missing']:.0%} | {r['steps']} | {r['seconds']:.1f} | {r['per_step_s']:.2f} "
                     f"| {r['solves']} | {r['solve_s']:.1f} | {r['solve_median_s']:.2f} |")
    (RESULTS / f"discovery_ac_step_time{suffix}.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()

r"""Long true-support fits on the Allen–Cahn data of `discovery_pde.py`: why conjugate-gradient
Levenberg–Marquardt failed there (`--solver cg`), and where the sparse-LU fits converge
(`--solver sparse`, the solver `discovery_pde.py` now uses).

Run from the repository root::

    python benchmarks/discovery_ac_fits.py [--solver cg] [--size 128] [--steps 1000]
    python benchmarks/discovery_ac_fits.py --solver sparse --steps 400
    python benchmarks/discovery_ac_fits.py --solver sparse --steps 400 --size 256 --cases 1 2   # the paper's grid

On the data of `discovery_pde.py` (two snapshots t = 25, 26, seed 0), fits of Meissner & Glasner 2024 eq. 12 with
only the true terms (u, u³, u_xx, u_yy), λ = 1e-2, R = 0, Gauss–Newton LM, for at most
`--steps` steps. `cg`: nothing missing; noise-free data from θ0 = 0.1, 10 % noise from
θ0 = 0.1 and from the true θ. `sparse` (the paper's code's α0 = 100, θ0 = 1): the four cells of Meissner & Glasner 2024
Table 4 (noise 10/20/30 % with nothing missing, 10 % with 10 % missing), and (case 4, a
diagnostic) the missing-data cell started at the noise-free states with the true θ, which
finds the minimum near the truth and its objective, and (case 5) that cell from the data with
the missing entries interpolated by the kernel smoother (`interpolate_missing`) instead of
filled forward. Also the objective at
the clean states with the true θ and with θ = 0. Times: the first fit includes compilation.
Writes `benchmarks/results/discovery_ac_fits{,_sparse}{,_SIZE}.{json,md}` (`_SIZE` unless 128).
"""

import argparse
import datetime
import json
import time

import jax
import jax.numpy as jnp
from _common import RESULTS, command, machine_info, write_results
from discovery_pde import field, realisation, system

import wendyjax as wj
from wendyjax.discovery import discovery_problem, fill_missing, interpolate_missing, objective


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--size", type=int, default=128)
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--solver", choices=["cg", "sparse"], default="cg")
    parser.add_argument("--cases", type=int, nargs="+", default=None,
                        help="rows of the solver's case list to run (0-based; default: all); the results "
                             "file keeps the rows of the other cases")
    args = parser.parse_args()
    clean, library, true, dt, _, _ = system("ac", args.size)
    mask = jnp.asarray(true != 0, float)
    if args.solver == "cg":
        solver = wj.discovery.LevenbergMarquardt(hessian="gauss_newton", linear_solver="cg", max_steps=args.steps)
        cases = ((0.0, 0.0, "0.1"), (0.1, 0.0, "0.1"), (0.1, 0.0, "truth"))
    else:
        solver = wj.discovery.LevenbergMarquardt(hessian="gauss_newton", linear_solver="sparse", max_steps=args.steps,
                                                 alpha0=100.0)
        cases = ((0.1, 0.0, "1"), (0.2, 0.0, "1"), (0.3, 0.0, "1"), (0.1, 0.1, "1"), (0.1, 0.1, "clean"),
                 (0.1, 0.1, "1 interpolated"))
    if args.cases is not None:
        if not all(0 <= i < len(cases) for i in args.cases):
            parser.error(f"--cases must be in 0 … {len(cases) - 1}, got {args.cases}")
        cases = tuple(cases[i] for i in args.cases)
    est = wj.StateParameterRegression(lam=1e-2, penalty=0.0, solver=solver)
    solve = jax.jit(est.fit_terms)
    rows = []
    for noise, missing, start in cases:
        problem = discovery_problem(field(realisation(clean, noise, missing, 0), dt), library,
                                    hessian=wj.discovery.HESSIAN_KINDS[args.solver])
        theta_start, _, states_start = start.partition(" ")
        theta0 = jnp.asarray(true) if theta_start in ("truth", "clean") else jnp.full(true.shape, float(theta_start))
        u0 = jnp.asarray(clean)[..., None] if start == "clean" else jnp.asarray(
            interpolate_missing(problem) if states_start == "interpolated" else fill_missing(problem))
        clock = time.perf_counter()
        fit = jax.block_until_ready(solve(problem, u0, theta0, mask, 0.0))
        seconds = time.perf_counter() - clock
        at_clean = {name: float(objective(problem, jnp.asarray(clean)[..., None], jnp.asarray(theta), mask, 1e-2, 0.0,
                                          est.eps)) for name, theta in (("true", true), ("zero", 0 * true))}
        rows.append({"noise": noise, "missing": missing, "start": start, "steps": int(fit.num_steps),
                     "converged": bool(fit.successful),
                     "loss": float(fit.objective), "theta": {t: float(v) for t, v, m in
                                                             zip(library.terms, fit.params[:, 0], true[:, 0]) if m},
                     "objective_at_clean_states": at_clean, "seconds": seconds,
                     "processor": machine_info()["processor"]})
        print(rows[-1], flush=True)
    name = "discovery_ac_fits" + ("_sparse" if args.solver == "sparse" else "") + (
        f"_{args.size}" if args.size != 128 else "")
    meta = {"date": datetime.date.today().isoformat(), "machine": machine_info(), "size": args.size,
            "command": command()}
    if args.cases is not None and (RESULTS / f"{name}.json").exists():  # keep the other cases' rows
        key = lambda r: (r["noise"], r.get("missing", 0.0), r["start"])  # noqa: E731
        saved = json.loads((RESULTS / f"{name}.json").read_text())
        old, new = saved["rows"], {key(r) for r in rows}
        for r in old:  # rows written before the processor was kept per row
            r.setdefault("processor", saved["meta"]["machine"]["processor"])
        meta["command"] = f"{saved['meta']['command']}`, then `{meta['command']}"
        rows = sorted([r for r in old if key(r) not in new] + rows, key=lambda r: (key(r)[1], key(r)[0]))
    write_results(name, {"meta": meta, "rows": rows})
    lines = [f"# Allen–Cahn true-support fits ({args.solver} LM) — {meta['date']}", "",
             f"`{meta['command']}` on {meta['machine']['cpu_count']} CPU cores (processor per row), "
             f"{args.size} × {args.size} grid. Truth: u 1, u³ −1, u_xx 1, u_yy 1. Start: θ0 (all terms), "
             "states from the data with missing entries filled forward ('interpolated': by the kernel smoother); "
             "'clean': θ0 = truth and the noise-free states (a diagnostic: the minimum near the truth and its "
             "objective).", "",
             "| noise | missing | start | steps | converged | objective | u, u³, u_xx, u_yy "
             "| objective at clean states, true θ / θ = 0 | s | CPU |", "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        c = r["objective_at_clean_states"]
        lines.append(f"| {r['noise']:.0%} | {r.get('missing', 0.0):.0%} | {r['start']} | {r['steps']} "
                     f"| {r['converged']} | {r['loss']:.4e} | "
                     + ", ".join(f"{v:.3f}" for v in r["theta"].values())
                     + f" | {c['true']:.3e} / {c['zero']:.3e} | {r['seconds']:.0f} | {r['processor']} |")
    write_results(name, markdown=lines)


if __name__ == "__main__":
    main()

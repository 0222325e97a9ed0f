r"""Why conjugate-gradient Levenberg–Marquardt failed on the Allen–Cahn rows of
`discovery_pde.py` (which now use the sparse LU): long true-support CG fits.

Run from the repository root::

    python benchmarks/discovery_ac_fits.py [--size 128] [--steps 1000]

On the data of `discovery_pde.py` (two snapshots t = 25, 26, seed 0, nothing missing), fits of
003 eq. 12 with only the true terms (u, u³, u_xx, u_yy), λ = 1e-2, R = 0, Gauss–Newton LM with
conjugate gradients, for `--steps` steps: noise-free data from θ0 = 0.1; 10 % noise from
θ0 = 0.1; 10 % noise from the true θ (times: the first fit includes compilation). Also the
objective at the clean states with the true θ and with θ = 0. Writes `benchmarks/results/discovery_ac_fits.{json,md}`.
"""

import argparse
import datetime
import json
import sys
import time
from pathlib import Path

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402

import wendyjax as wj  # noqa: E402
from wendyjax.discovery import discovery_problem, fill_missing, objective  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent))
from discovery_pde import realisation, system  # noqa: E402
from likelihood import machine_info  # noqa: E402

RESULTS = Path(__file__).parent / "results"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--size", type=int, default=128)
    parser.add_argument("--steps", type=int, default=1000)
    args = parser.parse_args()
    clean, library, true, dt, _, _ = system("ac", args.size)
    mask = jnp.asarray(true != 0, float)
    solver = wj.discovery.LevenbergMarquardt(hessian="gauss_newton", linear_solver="cg", max_steps=args.steps)
    est = wj.StateParameterRegression(lam=1e-2, penalty=0.0, solver=solver)
    solve = jax.jit(est.solve)
    rows = []
    for noise, start in ((0.0, "0.1"), (0.1, "0.1"), (0.1, "truth")):
        problem = discovery_problem(realisation(clean, noise, 0.0, 0), library, dt, hessian="diagonal")
        theta0 = jnp.asarray(true) if start == "truth" else jnp.full(true.shape, 0.1)
        clock = time.perf_counter()
        fit = jax.block_until_ready(solve(problem, jnp.asarray(fill_missing(problem)), theta0, mask, 0.0))
        seconds = time.perf_counter() - clock
        at_clean = {name: float(objective(problem, jnp.asarray(clean)[..., None], jnp.asarray(theta), mask, 1e-2, 0.0,
                                          est.eps)) for name, theta in (("true", true), ("zero", 0 * true))}
        rows.append({"noise": noise, "start": start, "steps": int(fit.n_steps), "converged": bool(fit.successful),
                     "loss": float(fit.loss), "theta": {t: float(v) for t, v, m in
                                                        zip(library.terms, fit.theta[:, 0], true[:, 0]) if m},
                     "objective_at_clean_states": at_clean, "seconds": seconds})
        print(rows[-1], flush=True)
    meta = {"date": datetime.date.today().isoformat(), "machine": machine_info(), "size": args.size,
            "command": "python benchmarks/discovery_ac_fits.py " + " ".join(sys.argv[1:])}
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "discovery_ac_fits.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
    lines = [f"# Allen–Cahn true-support fits — {meta['date']}", "",
             f"`{meta['command']}` on {meta['machine']['cpu_count']} CPU cores, {args.size} × {args.size} grid. "
             "Truth: u 1, u³ −1, u_xx 1, u_yy 1.", "",
             "| noise | start | steps | converged | objective | u, u³, u_xx, u_yy "
             "| objective at clean states, true θ / θ = 0 | s |", "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        c = r["objective_at_clean_states"]
        lines.append(f"| {r['noise']:.0%} | {r['start']} | {r['steps']} | {r['converged']} | {r['loss']:.4e} | "
                     + ", ".join(f"{v:.3f}" for v in r["theta"].values())
                     + f" | {c['true']:.3e} / {c['zero']:.3e} | {r['seconds']:.0f} |")
    (RESULTS / "discovery_ac_fits.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()

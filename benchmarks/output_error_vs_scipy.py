"""wendyjax output error vs scipy output error: same data, same start, same objective.

    python benchmarks/output_error_vs_scipy.py            # Lorenz and FitzHugh–Nagumo, 10 seeds
    python benchmarks/output_error_vs_scipy.py --quick    # 2 seeds

Lorenz (M = 1024 on [0, 10]) and FitzHugh–Nagumo (M = 1024 on [0, 25], Bortz et al. 2023's p*), 5 % additive
noise, seeds 0…n−1 (data key `PRNGKey(seed)`), p₀ = p*·(1 + 0.1·v), v ~ U(−1, 1) from `default_rng(1000 + seed)`
(near the truth: both reach the same minimum), u₀ from the first data row; both fit (p, u₀) by unweighted least
squares (Rummel et al. 2025 eq. 11), unbounded. wendyjax: jitted `OutputError().solve` (Tsit5, rtol 1e-6, atol
1e-8; optimistix LM, tolerances 1e-8), median of repeated calls after the first; compile = first − median. scipy:
`least_squares(method='lm', max_nfev=600)` around `solve_ivp(RK45, rtol 1e-6, atol 1e-8)` (`_scipy_oe.py`), one
timed fit per seed.

Target (issue 5): ≥ 10× faster per fit with equal accuracy. Results: `benchmarks/results/output_error_vs_scipy.*`.
"""

import argparse
from statistics import median

import jax
import jax.numpy as jnp
import numpy as np
from _common import bench, command, machine_info, machine_line, markdown_table, utc_now, write_results
from _scipy_oe import fit_scipy, fitzhugh_nagumo_rhs, lorenz_rhs, rel_err

import wendyjax as wj
from wendyjax.estimators import OutputError, output_error_problem

TARGET = 10.0
SYSTEMS = {
    "lorenz": (wj.models.lorenz, lorenz_rhs),
    "fitzhugh_nagumo": (wj.models.fitzhugh_nagumo, fitzhugh_nagumo_rhs),
}
TIMING = {"min_reps": 3, "min_time": 0.5, "max_time": 10.0, "floor_reps": 2}
NOTES = " ".join(__doc__.split("\n\n")[2].split())  # the method, for the results


def run_system(name, seeds, noise):
    factory, rhs_np = SYSTEMS[name]
    b = factory()
    p_true = np.asarray(b.p_true, float)
    unbounded = jnp.full(len(p_true), -jnp.inf), jnp.full(len(p_true), jnp.inf)
    solve = jax.jit(OutputError().solve)
    runs = []
    for seed in seeds:
        data = b.simulate(jax.random.key(seed), noise_ratio=noise)
        p0 = p_true * (1 + 0.1 * np.random.default_rng(1000 + seed).uniform(-1, 1, len(p_true)))
        problem = output_error_problem(b.model, data, weighted=False)
        sol, timing = bench(solve, problem, jnp.asarray(p0), *unbounded, cfg=TIMING)
        ours = {
            "params": np.asarray(sol.params).tolist(),
            "rel_err": rel_err(sol.params, p_true),
            "status": str(wj.estimators.status_names(sol.result)),
            "steps": int(sol.num_steps),
            "time_s": timing["median_s"],
            "compile_s": timing["compile_s"] if not runs else None,
        }
        theirs = fit_scipy(rhs_np, data, p0, p_true, rtol=1e-6, atol=1e-8, max_nfev=600, max_rhs=200_000)
        runs.append({"seed": seed, "p0": p0.tolist(), "wendyjax": ours, "scipy": theirs})
        print(
            f"  {name} seed {seed}: wendyjax {ours['time_s'] * 1e3:.0f} ms err {ours['rel_err']:.2e} "
            f"({ours['status']}, {ours['steps']} steps) | scipy {theirs['time_s'] * 1e3:.0f} ms err "
            f"{theirs['rel_err']:.2e} (nfev {theirs['nfev']}, converged {theirs['converged']})",
            flush=True,
        )
    ours, theirs = ([r[k]["time_s"] for r in runs] for k in ("wendyjax", "scipy"))
    return {
        "runs": runs,
        "summary": {
            "wendyjax_time_s": median(ours),
            "scipy_time_s": median(theirs),
            "speedup": median(theirs) / median(ours),
            "wendyjax_err": median(r["wendyjax"]["rel_err"] for r in runs),
            "scipy_err": median(r["scipy"]["rel_err"] for r in runs),
            "compile_s": runs[0]["wendyjax"]["compile_s"],
            "wendyjax_unsuccessful": sum(r["wendyjax"]["status"] != "successful" for r in runs),
            "scipy_not_converged": sum(not r["scipy"]["converged"] for r in runs),
            "median_speedup_per_seed": median(s / o for s, o in zip(theirs, ours)),
        },
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--noise", type=float, default=0.05)
    ap.add_argument("--quick", action="store_true", help="2 seeds")
    args = ap.parse_args()
    info = machine_info()
    results = {name: run_system(name, range(2 if args.quick else args.seeds), args.noise) for name in SYSTEMS}
    write_results("output_error_vs_scipy", {"args": vars(args), "machine": info, "results": results}, default=str)
    rows, targets = [], []
    for name, res in results.items():
        s = res["summary"]
        rows.append(
            [
                name,
                len(res["runs"]),
                s["wendyjax_time_s"] * 1e3,
                s["compile_s"],
                s["scipy_time_s"] * 1e3,
                s["speedup"],
                s["wendyjax_err"],
                s["scipy_err"],
                s["wendyjax_unsuccessful"],
                s["scipy_not_converged"],
            ]
        )
        # equal accuracy: medians within 10 % of each other (both reach the same minimum)
        equal = abs(s["wendyjax_err"] - s["scipy_err"]) <= 0.1 * max(s["wendyjax_err"], s["scipy_err"])
        targets.append(
            [
                name,
                f"{s['speedup']:.1f}x",
                f">= {TARGET:g}x",
                "PASS" if s["speedup"] >= TARGET else "MISS",
                f"{s['wendyjax_err']:.3g} vs {s['scipy_err']:.3g}",
                "PASS" if equal else "MISS",
            ]
        )
    lines = [
        "# Output error: wendyjax (diffrax + optimistix) vs scipy (solve_ivp + least_squares)",
        "",
        f"Generated by `{command()}` on {utc_now()}; {machine_line(info)}, float64.",
        "",
        NOTES,
        "",
        *markdown_table(
            [
                "system",
                "seeds",
                "wendyjax ms/fit",
                "compile s",
                "scipy ms/fit",
                "speed-up",
                "wendyjax median err",
                "scipy median err",
                "wendyjax unsuccessful",
                "scipy not converged",
            ],
            rows,
        ),
        "",
        "## Targets",
        "",
        *markdown_table(
            [
                "system",
                "speed-up (median times)",
                "required",
                "result",
                "median rel. err (ours vs scipy)",
                "equal accuracy (±10 %)",
            ],
            targets,
        ),
        "",
    ]
    write_results("output_error_vs_scipy", markdown=lines)
    print("\n".join(lines))


if __name__ == "__main__":
    main()

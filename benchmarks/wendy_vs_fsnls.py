"""WENDy-MLE against forward-solve nonlinear least squares (FSNLS, scipy) on Lorenz data.

    OPENBLAS_THREAD_TIMEOUT=4 python benchmarks/wendy_vs_fsnls.py   # 10 seeds × 5 and 10 % noise
    python benchmarks/wendy_vs_fsnls.py --quick                      # 2 seeds, tiny scipy cap (~1 min)

Rummel et al. 2025 Table 2 protocol, the same p₀ ~ U(box) for both: `wj.weak_likelihood` + the jitted
`MLE(start="best").solve` (medians of repeated calls after the first) against `solve_ivp` (RK45) inside
`least_squares` (LM) fitting (p, u0) (`_scipy_oe.py`, one timed fit per seed): time per fit, error, speed-up.
Results: `benchmarks/results/wendy_vs_fsnls.{json,md}`.
"""

import argparse
from statistics import median

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import scipy
from _common import bench, command, env_prefix, machine_info, machine_line, markdown_table, utc_now, write_results
from _scipy_oe import FAIL_RESIDUAL, fit_scipy, lorenz_rhs, rel_err
from scipy.integrate import solve_ivp

import wendyjax as wj

TARGET_SPEEDUP = 50.0
P0_SEED_OFFSET = 1000  # p0 of seed s: np.random.default_rng(1000 + s).uniform(box)
RTOL, ATOL = 1e-6, 1e-8  # solve_ivp's tolerances
MAX_RHS = 50_000  # rhs calls per solve_ivp, ~23x what RK45 needs at p*; a solve over it counts as failed
ESTIMATOR = wj.MLE(start="best")
_solve = eqx.filter_jit(lambda lik, p0, lo, hi: ESTIMATOR.solve(lik, p0, lo, hi))


def ms(s):
    return f"{1e3 * s:.1f}"


def fit_wendy(b, data, p0, lo, hi, cfg, seen_shapes):
    lik, t_build = bench(wj.weak_likelihood, b.model, data, cfg=cfg["build"])
    shape = lik.problem.phi.shape  # a new shape means a new compile
    sol, t_solve = bench(_solve, lik, jnp.asarray(p0, dtype=jnp.float64), lo, hi, cfg=cfg["solve"])
    new_shape = shape not in seen_shapes
    seen_shapes.add(shape)
    return {
        "params": np.asarray(sol.params).tolist(),
        "rel_err": rel_err(sol.params, b.p_true),
        "num_steps": int(sol.num_steps),
        "status": wj.RESULTS[sol.result] or "successful",
        "converged": bool(np.all(np.asarray(sol.successful))),
        "nll": float(sol.objective),
        "K": shape[1],
        "new_shape": new_shape,
        "build": t_build,
        "solve": t_solve,
        "build_s": t_build["median_s"],
        "solve_s": t_solve["median_s"],
        "total_s": t_build["median_s"] + t_solve["median_s"],
        "solve_compile_s": t_solve["compile_s"],
    }


def summarise(ratio, rs):
    ws, ss = [r["wendy"] for r in rs], [r["scipy"] for r in rs]
    compiles = [w["solve_compile_s"] for w in ws if w["new_shape"]]
    sw = {
        "n_not_converged": sum(not w["converged"] for w in ws),
        "n_compiles": len(compiles),
        **{f"median_{k}": median(w[k] for w in ws) for k in ("rel_err", "num_steps", "build_s", "solve_s", "total_s")},
        "median_solve_compile_s": median(compiles) if compiles else float("nan"),
    }
    sc = {
        **{f"median_{k}": median(s[k] for s in ss) for k in ("rel_err", "time_s", "nfev", "forward_solves")},
        "n_hit_cap": sum(s["hit_cap"] for s in ss),
        "n_not_converged": sum(not s["converged"] for s in ss),
        "n_fits_with_ivp_failures": sum(s["ivp_failures"] > 0 for s in ss),
        "n_fits_with_ivp_budget_stops": sum(s["ivp_budget_stops"] > 0 for s in ss),
    }
    return {
        "noise_ratio": ratio,
        "n_fits": len(rs),
        "wendy": sw,
        "scipy": sc,
        "speedup_total": sc["median_time_s"] / sw["median_total_s"],
        "speedup_solve_only": sc["median_time_s"] / sw["median_solve_s"],
        "more_accurate": bool(sw["median_rel_err"] < sc["median_rel_err"]),
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="smoke run: 2 seeds, max_nfev 10, few timing repeats")
    ap.add_argument("--seeds", type=int, default=None, help="seeds per noise level (default 10, --quick: 2)")
    ap.add_argument("--noise", type=float, nargs="+", default=[0.05, 0.10], help="noise ratios")
    ap.add_argument("--name", default="wendy_vs_fsnls", help="results file stem under benchmarks/results/")
    args = ap.parse_args()
    seeds = range(args.seeds or (2 if args.quick else 10))
    max_nfev = 10 if args.quick else 600  # scipy's default 100·n; the Jacobian's evaluations are not counted
    cfg = (
        {
            "build": {"min_reps": 1, "min_time": 0.0, "max_time": 1.0, "floor_reps": 1},
            "solve": {"min_reps": 2, "min_time": 0.0, "max_time": 1.0, "floor_reps": 1},
        }
        if args.quick
        else {
            "build": {"min_reps": 3, "min_time": 0.0, "max_time": 5.0, "floor_reps": 3},
            "solve": {"min_reps": 5, "min_time": 0.5, "max_time": 5.0, "floor_reps": 3},
        }
    )
    info = {**machine_info(), "scipy": scipy.__version__}
    print(f"WENDy-MLE vs scipy RK45 + LM on Lorenz; {machine_line(info)}; {len(seeds)} seeds × noise {args.noise}")
    b = wj.models.lorenz()
    lo, hi = (np.asarray(x, float) for x in b.model.bounds)
    solve_ivp(
        lorenz_rhs,
        (0.0, 10.0),
        np.asarray(b.u0, float),
        t_eval=np.asarray(b.t),
        args=tuple(b.p_true),
        rtol=RTOL,
        atol=ATOL,
    )  # scipy's first-call overheads, untimed

    seen_shapes, runs, seed_rows = set(), [], []
    for ratio in args.noise:
        for seed in seeds:
            data = b.simulate(jax.random.PRNGKey(seed), ratio, subsample=1)
            p0 = np.random.default_rng(P0_SEED_OFFSET + seed).uniform(lo, hi)
            w = fit_wendy(b, data, p0, jnp.asarray(lo), jnp.asarray(hi), cfg, seen_shapes)
            s = fit_scipy(lorenz_rhs, data, p0, b.p_true, RTOL, ATOL, max_nfev, MAX_RHS)
            runs.append({"noise_ratio": ratio, "seed": seed, "p0": p0.tolist(), "wendy": w, "scipy": s})
            status = "max_nfev" if s["hit_cap"] else "converged" if s["converged"] else f"status {s['status']}"
            seed_rows.append(
                [
                    f"{100 * ratio:g} %",
                    seed,
                    w["K"],
                    f"{w['rel_err']:.2e}",
                    w["num_steps"],
                    w["status"],
                    ms(w["build_s"]),
                    ms(w["solve_s"]),
                    f"{s['rel_err']:.2e}",
                    s["nfev"],
                    s["forward_solves"],
                    status,
                    f"{s['time_s']:.2f}",
                    f"{s['ivp_failures']} / {s['ivp_budget_stops']}",
                ]
            )
            print(" | ".join(map(str, seed_rows[-1])), flush=True)

    summary = [summarise(ratio, [r for r in runs if r["noise_ratio"] == ratio]) for ratio in args.noise]
    rows, targets = [], []
    for e in summary:
        w, s, nl = e["wendy"], e["scipy"], f"{100 * e['noise_ratio']:g} %"
        rows += [
            [
                nl,
                "WENDy-MLE",
                f"{w['median_rel_err']:.2e}",
                f"{ms(w['median_total_s'])} ms",
                f"{ms(w['median_build_s'])} ms",
                f"{ms(w['median_solve_s'])} ms",
                f"{w['median_solve_compile_s']:.2f} s ×{w['n_compiles']}" if w["n_compiles"] else "cached",
                f"{w['median_num_steps']:g} steps",
                w["n_not_converged"],
                "–",
                "–",
            ],
            [
                nl,
                "scipy RK45+LM",
                f"{s['median_rel_err']:.2e}",
                f"{ms(s['median_time_s'])} ms",
                "–",
                "–",
                "–",
                f"{s['median_nfev']:g} nfev ({s['median_forward_solves']:g} solves)",
                s["n_not_converged"],
                f"{s['n_hit_cap']} of {e['n_fits']}",
                f"{s['n_fits_with_ivp_failures']} / {s['n_fits_with_ivp_budget_stops']} budget",
            ],
        ]
        capped = " (lower bound: scipy capped)" if s["n_hit_cap"] else ""
        targets += [
            [
                f"speed-up per fit, build + solve (noise {nl})",
                f"{e['speedup_total']:.1f}x{capped}",
                f">= {TARGET_SPEEDUP:.0f}x",
                "PASS" if e["speedup_total"] >= TARGET_SPEEDUP else "MISS",
            ],
            [f"speed-up, solve only (noise {nl}; informative)", f"{e['speedup_solve_only']:.1f}x", "–", "–"],
            [
                f"median rel. error lower than scipy (noise {nl})",
                f"{w['median_rel_err']:.2e} vs {s['median_rel_err']:.2e}",
                "WENDy < scipy",
                "PASS" if e["more_accurate"] else "MISS",
            ],
        ]
    date = utc_now()
    protocol = {
        "model": "lorenz (Rummel et al. 2025 Table 2)",
        "noise_ratios": args.noise,
        "seeds": list(seeds),
        "p0": f"np.random.default_rng({P0_SEED_OFFSET} + seed).uniform(lower, upper)",
        "wendy_timing": cfg,
        "scipy": {
            "rtol": RTOL,
            "atol": ATOL,
            "max_nfev": max_nfev,
            "max_rhs_per_solve": MAX_RHS,
            "fail_residual": FAIL_RESIDUAL,
        },
    }
    write_results(
        args.name,
        {
            "script": "benchmarks/wendy_vs_fsnls.py",
            "date": date,
            "quick": args.quick,
            "machine": info,
            "protocol": protocol,
            "summary": summary,
            "targets": targets,
            "runs": runs,
        },
        indent=2,
        default=float,
    )
    md = [
        "# WENDy-MLE vs forward-solve least squares (Lorenz)",
        "",
        f"Generated by `{' '.join(x for x in (env_prefix(), command()) if x)}` on {date}"
        + (" — **quick smoke run: 2 seeds and a tiny scipy cap; not a result.**" if args.quick else "."),
        "",
        f"Machine: {machine_line(info)}; float64. Lorenz, Rummel et al. 2025 Table 2 protocol, {len(b.t)} samples on "
        f"[0, 10], additive Gaussian noise; seeds {seeds[0]}–{seeds[-1]} (data key `PRNGKey(seed)`), p₀ ~ U(box) "
        f"with `default_rng({P0_SEED_OFFSET} + seed)`, box {lo.tolist()} – {hi.tolist()}.",
        "",
        "- **WENDy-MLE**: `wj.weak_likelihood(model, data)`, then the jitted `MLE(start='best').solve` in the box "
        "(from p₀ or the WLS estimate, whichever has the lower ℓ). Medians of repeated calls after the first; "
        "compile = first solve − median, per new likelihood shape (×n compilations). Time per fit = build + solve.",
        f"- **scipy**: `solve_ivp(RK45, rtol={RTOL:g}, atol={ATOL:g})` in `least_squares(method='lm', "
        f"max_nfev={max_nfev})`, fitting p and u0 unbounded; a forward solve that fails or exceeds {MAX_RHS} rhs "
        f"calls gives residual {FAIL_RESIDUAL:g}. One timed fit per seed; when fits hit max_nfev the speed-up is a "
        "lower bound.",
        "",
        "## Per-fit medians",
        "",
        *markdown_table(
            [
                "noise",
                "method",
                "median rel. err",
                "median time/fit",
                "build",
                "solve",
                "compile",
                "TR steps / nfev",
                "not converged",
                "hit cap",
                "fits w/ failed solves",
            ],
            rows,
        ),
        "",
        "## Targets",
        "",
        *markdown_table(["target", "measured", "required", "result"], targets),
        "",
        "## Per seed",
        "",
        *markdown_table(
            [
                "noise",
                "seed",
                "K",
                "WENDy err",
                "steps",
                "WENDy status",
                "build ms",
                "solve ms",
                "scipy err",
                "nfev",
                "forward solves",
                "scipy status",
                "scipy s",
                "failed / over-budget solves",
            ],
            seed_rows,
        ),
        "",
    ]
    write_results(args.name, markdown=md)
    print("\n".join(md))


if __name__ == "__main__":
    main()

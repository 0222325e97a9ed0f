"""WENDy-MLE against forward-solve nonlinear least squares (FSNLS) on Lorenz data.

Run from the repository root::

    OPENBLAS_THREAD_TIMEOUT=4 python benchmarks/wendy_vs_fsnls.py   # 10 seeds × 5 and 10 % noise
    python benchmarks/wendy_vs_fsnls.py --quick                      # 2 seeds, tiny scipy cap (~1 min)

Lorenz, Rummel et al. 2025 Table 2 protocol (M + 1 = 1025 samples on [0, 10], additive Gaussian
noise), the same p₀ ~ U(box) (`default_rng(1000 + seed)`) for both. WENDy-MLE: `wj.weak_likelihood`
then the jitted `MLE(start="best").solve` in the box, each timed as the median of repeated calls
after the first (compile = first − median). scipy: `solve_ivp` (RK45, rtol 1e-6, atol 1e-8) inside
`least_squares(method="lm", max_nfev=600)` fitting (p, u0) from p₀ and the first data row; a forward
solve that fails or exceeds 50 000 rhs calls gives residual 1e6 (`_scipy_oe.py`); one timed fit per
seed. Reported per noise level: median time per fit, median ‖p̂ − p*‖/‖p*‖, steps / evaluations,
failures, and the speed-up (target ≥ 50×). On small CPU machines set `OPENBLAS_THREAD_TIMEOUT=4`:
OpenBLAS threads spin and compete with XLA's. Results: `benchmarks/results/wendy_vs_fsnls.{json,md}`.
"""

import argparse
import os
import statistics
import time
import traceback
import warnings

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import scipy
from _common import (
    bench,
    command,
    cpu_busy_seconds,
    env_prefix,
    idle_check,
    machine_info,
    machine_line,
    markdown_table,
    other_cpu_load,
    utc_now,
    write_results,
)
from _scipy_oe import FAIL_RESIDUAL, fit_scipy, lorenz_rhs, rel_err
from scipy.integrate import solve_ivp

import wendyjax as wj
from wendyjax.models import lorenz

NOISE_RATIOS = (0.05, 0.10)
TARGET_SPEEDUP = 50.0
P0_SEED_OFFSET = 1000  # p0 of seed s: np.random.default_rng(1000 + s).uniform(box)
RTOL, ATOL = 1e-6, 1e-8  # solve_ivp's tolerances
MAX_RHS = 50_000  # rhs calls per solve_ivp, ~23x what RK45 needs at p*; a solve over it counts as failed
ESTIMATOR = wj.MLE(start="best")

# the jitted WENDy solve (one compile per shape signature of the likelihood)
_solve = eqx.filter_jit(lambda est, lik, p0, lo, hi: est.solve(lik, p0, lo, hi))


def shape_signature(lik):
    """Shapes and dtypes of the likelihood's arrays: a new one means a new compile."""
    return tuple((np.shape(x), str(x.dtype)) for x in jax.tree_util.tree_leaves(eqx.filter(lik, eqx.is_array)))


def med(xs):
    xs = [x for x in xs if x is not None and np.isfinite(x)]
    return statistics.median(xs) if xs else float("nan")


def ms(s):
    return f"{1e3 * s:.1f}" if np.isfinite(s) else "n/a"


def sec(s):
    return f"{s:.2f}" if np.isfinite(s) else "n/a"


def fit_wendy(b, data, p0, lo, hi, build_cfg, solve_cfg, seen_shapes):
    lik, t_build = bench(wj.weak_likelihood, b.model, data, cfg=build_cfg)
    sig = shape_signature(lik)
    new_shape = sig not in seen_shapes
    seen_shapes.add(sig)
    sol, t_solve = bench(_solve, ESTIMATOR, lik, jnp.asarray(p0, dtype=jnp.float64), lo, hi, cfg=solve_cfg)
    p_hat = np.asarray(sol.params)
    return {
        "params": p_hat.tolist(), "rel_err": rel_err(p_hat, b.p_true), "num_steps": int(sol.num_steps),
        "status": wj.RESULTS[sol.result] or "successful", "converged": bool(np.all(np.asarray(sol.successful))),
        "nll": float(sol.objective), "K": int(lik.problem.phi.shape[1]),
        "K_real": int(np.sum(np.asarray(lik.problem.kmask[0]))), "linear": lik.linear is not None,
        "new_shape": new_shape, "build": t_build, "solve": t_solve,
        "build_s": t_build["median_s"], "solve_s": t_solve["median_s"],
        "total_s": t_build["median_s"] + t_solve["median_s"],
        "solve_compile_s": t_solve["compile_s"], "build_first_extra_s": t_build["compile_s"],
    }


def check_user_api(b, data, p0, wendy_params):
    """`ESTIMATOR.fit` (the user-facing path, untimed) must give the timed solve's estimate."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fit = ESTIMATOR.fit(b.model, data, p0, throw=False)
    diff = float(np.max(np.abs(np.asarray(fit.params) - np.asarray(wendy_params))))
    return {"max_abs_param_diff": diff, "agree": diff <= 1e-8 * max(1.0, float(np.max(np.abs(fit.params)))),
            "fit_num_steps": fit.num_steps, "fit_successful": fit.successful,
            "warnings": [str(w.message) for w in caught]}


def summarise(ratio, rs):
    ws = [r["wendy"] for r in rs if "exception" not in r["wendy"]]
    ss = [r["scipy"] for r in rs]
    compiles = [w["solve_compile_s"] for w in ws if w["new_shape"]]
    sw = {"n_ok": len(ws), "n_exceptions": len(rs) - len(ws), "n_not_converged": sum(not w["converged"] for w in ws),
          **{f"median_{k}": med([w[k] for w in ws])
             for k in ("rel_err", "num_steps", "build_s", "solve_s", "total_s", "build_first_extra_s")},
          "n_compiles": len(compiles), "median_solve_compile_s": med(compiles),
          "K_values": sorted({w["K"] for w in ws})}
    sc = {**{f"median_{k}": med([s[k] for s in ss]) for k in ("rel_err", "time_s", "nfev", "forward_solves")},
          "n_hit_cap": sum(s["hit_cap"] for s in ss), "n_not_converged": sum(not s["converged"] for s in ss),
          "n_fits_with_ivp_failures": sum(s["ivp_failures"] > 0 for s in ss),
          "n_fits_with_ivp_budget_stops": sum(s["ivp_budget_stops"] > 0 for s in ss),
          "total_ivp_budget_stops": sum(s["ivp_budget_stops"] for s in ss)}
    entry = {"noise_ratio": ratio, "n_fits": len(rs), "wendy": sw, "scipy": sc,
             "speedup_total": sc["median_time_s"] / sw["median_total_s"],
             "speedup_solve_only": sc["median_time_s"] / sw["median_solve_s"],
             "more_accurate": bool(sw["median_rel_err"] < sc["median_rel_err"])}
    entry["speedup_met"] = bool(entry["speedup_total"] >= TARGET_SPEEDUP)
    return entry


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="smoke run: 2 seeds, max_nfev 10, few timing repeats")
    ap.add_argument("--seeds", type=int, default=None, help="seeds per noise level (default 10, --quick: 2)")
    ap.add_argument("--first-seed", type=int, default=0, help="seeds first-seed … first-seed + seeds − 1")
    ap.add_argument("--max-nfev", type=int, default=None,
                    help="least_squares max_nfev, without the finite-difference Jacobian's evaluations (scipy >= "
                         "1.16); default 600 = scipy's default 100*n, --quick: 10")
    ap.add_argument("--noise", type=float, nargs="+", default=list(NOISE_RATIOS), help="noise ratios")
    ap.add_argument("--name", default="wendy_vs_fsnls", help="results file stem under benchmarks/results/")
    args = ap.parse_args()
    n_seeds = args.seeds if args.seeds is not None else (2 if args.quick else 10)
    max_nfev = args.max_nfev if args.max_nfev is not None else (10 if args.quick else 600)
    if n_seeds < 1 or max_nfev < 1 or args.first_seed < 0 or not all(0 < r < 1 for r in args.noise):
        ap.error("--seeds and --max-nfev must be positive, --first-seed non-negative, --noise in (0, 1)")
    seeds = range(args.first_seed, args.first_seed + n_seeds)
    noise_ratios = tuple(args.noise)
    if args.quick:
        build_cfg = {"min_reps": 1, "min_time": 0.0, "max_time": 1.0, "floor_reps": 1}
        solve_cfg = {"min_reps": 2, "min_time": 0.0, "max_time": 1.0, "floor_reps": 1}
    else:
        build_cfg = {"min_reps": 3, "min_time": 0.0, "max_time": 5.0, "floor_reps": 3}
        solve_cfg = {"min_reps": 5, "min_time": 0.5, "max_time": 5.0, "floor_reps": 3}

    t_start, cpu_start = time.perf_counter(), cpu_busy_seconds()
    info = machine_info()
    info["scipy"] = scipy.__version__
    print(f"WENDy-MLE vs scipy RK45 + LM on Lorenz; {machine_line(info)}; {n_seeds} seeds × noise "
          f"{', '.join(f'{100 * r:g} %' for r in noise_ratios)}; max_nfev {max_nfev}")
    idle_check(info)
    b = lorenz()
    p_true = np.asarray(b.p_true)
    lo_np, hi_np = (np.asarray(x, float) for x in b.model.bounds)
    lo, hi = jnp.asarray(lo_np), jnp.asarray(hi_np)
    # warm up scipy's solve_ivp (first-call overheads), untimed
    solve_ivp(lorenz_rhs, (0.0, 10.0), np.asarray(b.u0, float), method="RK45", t_eval=np.asarray(b.t),
              args=tuple(p_true), rtol=RTOL, atol=ATOL)

    seen_shapes, runs, errors, api_check = set(), [], [], None
    for ratio in noise_ratios:
        for seed in seeds:
            t0 = time.perf_counter()
            data = b.simulate(jax.random.PRNGKey(seed), ratio, subsample=1)
            p0 = np.random.default_rng(P0_SEED_OFFSET + seed).uniform(lo_np, hi_np)
            run = {"noise_ratio": ratio, "seed": seed, "p0": p0.tolist(), "n_samples": int(np.shape(data.t)[0]),
                   "simulate_s": time.perf_counter() - t0}
            try:
                run["wendy"] = w = fit_wendy(b, data, p0, lo, hi, build_cfg, solve_cfg, seen_shapes)
            except Exception as e:  # noqa: BLE001 — a failure is a result: record the library's exception
                run["wendy"] = w = {"exception": f"{type(e).__name__}: {e}", "traceback": traceback.format_exc()}
                errors.append(f"WENDy noise {ratio} seed {seed}:\n{w['traceback']}")
            if api_check is None and "exception" not in w:
                api_check = {**check_user_api(b, data, p0, w["params"]), "noise_ratio": ratio, "seed": seed}
            run["scipy"] = s = fit_scipy(lorenz_rhs, data, p0, p_true, RTOL, ATOL, max_nfev, MAX_RHS)
            runs.append(run)
            wtxt = (f"WENDy EXCEPTION {w['exception']}" if "exception" in w else
                    f"WENDy err {w['rel_err']:.2e} steps {w['num_steps']} build {ms(w['build_s'])} + solve "
                    f"{ms(w['solve_s'])} ms")
            print(f"noise {ratio:g} seed {seed}: {wtxt} | scipy err {s['rel_err']:.2e} nfev {s['nfev']} "
                  f"{sec(s['time_s'])} s", flush=True)

    summary = [summarise(ratio, [r for r in runs if r["noise_ratio"] == ratio]) for ratio in noise_ratios]
    header = ["noise", "method", "median rel. err", "median time/fit", "build", "solve",
              "compile", "TR steps / nfev", "not conv. / failed", "hit cap", "fits w/ failed solves"]
    rows = []
    for e in summary:
        w, s = e["wendy"], e["scipy"]
        nl = f"{100 * e['noise_ratio']:g} %"
        rows.append([nl, "WENDy-MLE", f"{w['median_rel_err']:.2e}", f"{ms(w['median_total_s'])} ms",
                     f"{ms(w['median_build_s'])} ms", f"{ms(w['median_solve_s'])} ms",
                     f"{sec(w['median_solve_compile_s'])} s ×{w['n_compiles']}" if w["n_compiles"] else "cached",
                     f"{w['median_num_steps']:g} steps", f"{w['n_not_converged']} / {w['n_exceptions']}", "–", "–"])
        rows.append([nl, "scipy RK45+LM", f"{s['median_rel_err']:.2e}", f"{ms(s['median_time_s'])} ms", "–", "–", "–",
                     f"{s['median_nfev']:g} nfev ({s['median_forward_solves']:g} solves)",
                     f"{s['n_not_converged']} / 0", f"{s['n_hit_cap']} of {e['n_fits']}",
                     f"{s['n_fits_with_ivp_failures']} / {s['n_fits_with_ivp_budget_stops']} budget"])
    targets = []
    for e in summary:
        nl = f"{100 * e['noise_ratio']:g} %"
        capped = " (lower bound: scipy capped)" if e["scipy"]["n_hit_cap"] else ""
        targets += [
            {"name": f"speed-up per fit, build + solve (noise {nl})", "value": e["speedup_total"],
             "target": f">= {TARGET_SPEEDUP:.0f}x", "met": e["speedup_met"],
             "shown": f"{e['speedup_total']:.1f}x{capped}"},
            {"name": f"speed-up, solve only (noise {nl}; informative)", "value": e["speedup_solve_only"],
             "target": "–", "met": None, "shown": f"{e['speedup_solve_only']:.1f}x"},
            {"name": f"median rel. error lower than scipy (noise {nl})",
             "value": [e["wendy"]["median_rel_err"], e["scipy"]["median_rel_err"]], "target": "WENDy < scipy",
             "met": e["more_accurate"],
             "shown": f"{e['wendy']['median_rel_err']:.2e} vs {e['scipy']['median_rel_err']:.2e}"}]
    trows = [[t["name"], t["shown"], t["target"], {True: "PASS", False: "MISS", None: "–"}[t["met"]]] for t in targets]

    total_s = time.perf_counter() - t_start
    if hasattr(os, "getloadavg"):
        info["loadavg_at_end"] = os.getloadavg()
    other = info["other_processes_mean_cores"] = other_cpu_load(cpu_start, cpu_busy_seconds(), total_s)
    date = utc_now()
    protocol = {
        "model": "lorenz (Rummel et al. 2025 Table 2)", "p_true": p_true.tolist(),
        "u0_true": np.asarray(b.u0).tolist(), "n_samples": int(np.shape(b.t)[0]),
        "t_span": [float(b.t[0]), float(b.t[-1])], "noise": "additive Gaussian",
        "noise_ratios": list(noise_ratios), "seeds": list(seeds), "data_key": "jax.random.PRNGKey(seed)",
        "p0": f"np.random.default_rng({P0_SEED_OFFSET} + seed).uniform(lower, upper)",
        "box": [lo_np.tolist(), hi_np.tolist()],
        "wendy": {"estimator": ("MLE(start='best'): rtol 1e-8, atol 1e-8, max_steps 500, from p0 or the WLS "
                                "estimate, whichever has lower nll"),
                  "likelihood": "wj.weak_likelihood(model, data) defaults",
                  "bounds": "the box", "timing_build": build_cfg, "timing_solve": solve_cfg},
        "scipy": {"forward": "solve_ivp RK45", "rtol": RTOL, "atol": ATOL,
                  "optimizer": "least_squares(method='lm'), 2-point FD Jacobian",
                  "unknowns": "p (3) and u0 (3); u0 start = first data row",
                  "max_nfev": max_nfev, "max_rhs_per_solve": MAX_RHS,
                  "fail_residual": FAIL_RESIDUAL, "bounds": "none (LM)"},
    }
    write_results(args.name, {"script": "benchmarks/wendy_vs_fsnls.py", "date": date, "quick": args.quick,
                              "machine": info, "protocol": protocol, "summary": summary, "targets": targets,
                              "user_api_check": api_check, "runs": runs, "errors": errors, "total_time_s": total_s},
                  indent=2, default=float)
    seed_rows = []
    for r in runs:
        w, s = r["wendy"], r["scipy"]
        wcols = (["–", "exception", "exception", "–", "–", "–"] if "exception" in w else
                 [w["K"], f"{w['rel_err']:.2e}", w["num_steps"], w["status"], ms(w["build_s"]), ms(w["solve_s"])])
        seed_rows.append([f"{100 * r['noise_ratio']:g} %", r["seed"], *wcols, f"{s['rel_err']:.2e}", s["nfev"],
                          s["forward_solves"], "max_nfev" if s["hit_cap"] else
                          ("converged" if s["converged"] else f"status {s['status']}"),
                          sec(s["time_s"]), f"{s['ivp_failures']} / {s['ivp_budget_stops']}"])
    md = [
        "# WENDy-MLE vs forward-solve least squares (Lorenz)", "",
        f"Generated by `{' '.join(x for x in (env_prefix(), command()) if x)}` on {date}"
        + (" — **quick smoke run: 2 seeds and a tiny scipy cap; not a result.**" if args.quick else "."), "",
        f"Machine: {info.get('cpu_model', info['processor'])}, {info['cpu_count']} CPUs, "
        f"{info['uname']['system']} {info['uname']['release']} ({info['uname']['machine']}), "
        f"jax {info['jax']}, devices {', '.join(info['devices'])}; float64.",
        "" if other is None else f"Other processes used {other:.2f} cores on average during the run"
        + (" (timings contended)." if other > 0.1 else "."), "",
        f"Lorenz, Rummel et al. 2025 Table 2 protocol: p* = (10, 28, 8/3), u0 = (2, 1, 1), "
        f"{protocol['n_samples']} samples on [0, 10], additive Gaussian noise; seeds "
        f"{seeds[0]}–{seeds[-1]} (data key `PRNGKey(seed)`), p₀ ~ U(box) with "
        f"`default_rng({P0_SEED_OFFSET} + seed)`, box {lo_np.tolist()} – {hi_np.tolist()}.", "",
        "- **WENDy-MLE**: `wj.weak_likelihood(model, data)` (build: test functions + "
        "precomputed blocks) then the jitted `MLE(start='best').solve` within the box, started from whichever of p₀ "
        "and the WLS estimate has the lower ℓ (`start='best'`, timed with the solve). Medians of "
        "repeated calls after the first; compile = first solve call − median, for each new "
        "shape signature of the likelihood (×n: number of compilations). Time per fit = "
        "build + solve (compile excluded).",
        f"- **scipy**: `solve_ivp(RK45, rtol={RTOL:g}, atol={ATOL:g}, t_eval=t)` in "
        f"`least_squares(method='lm', max_nfev={max_nfev})` (2-point Jacobian, whose "
        f"evaluations max_nfev does not count since scipy 1.16; 'solves' counts all forward "
        f"solves), fitting p and u0 (6 unknowns, u0 from the first noisy row), "
        f"unbounded. A forward solve that fails or exceeds {MAX_RHS} rhs calls gives residual "
        f"{FAIL_RESIDUAL:g} on the samples it misses. One timed fit per seed.",
        "- rel. err = ‖p̂ − p*‖/‖p*‖ (Rummel et al. 2025 eq. 12). Speed-up = median scipy time / median "
        "WENDy time per fit; when scipy fits hit max_nfev it is a lower bound.", "",
        "## Per-fit medians", "", *markdown_table(header, rows), "",
        "## Targets", "", *markdown_table(["target", "measured", "required", "result"], trows), "",
    ]
    if api_check is not None:
        md += ["## User API cross-check", "",
               f"`wj.MLE(start='best').fit(model, data, p0)` on noise {api_check['noise_ratio']:g}, seed "
               f"{api_check['seed']} gives max |Δp| = {api_check['max_abs_param_diff']:.1e} against "
               f"the timed solve ({'agrees' if api_check['agree'] else 'DISAGREES'}).", ""]
    md += ["## Per seed", "", *markdown_table(
        ["noise", "seed", "K", "WENDy err", "steps", "WENDy status", "build ms", "solve ms", "scipy err", "nfev",
         "forward solves", "scipy status", "scipy s", "failed / over-budget solves"], seed_rows), ""]
    if errors:
        md += ["## Exceptions", ""] + [f"```\n{e}\n```" for e in errors] + [""]
    write_results(args.name, markdown=md)
    print("\n".join(md))


if __name__ == "__main__":
    main()

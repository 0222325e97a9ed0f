"""WENDy-MLE against forward-solve nonlinear least squares (FSNLS) on Lorenz data.

Run from the repository root::

    python benchmarks/wendy_vs_fsnls.py             # full run: 10 seeds × 2 noise levels
                                                    # (tens of minutes on 2 CPU cores,
                                                    # dominated by the scipy fits)
    python benchmarks/wendy_vs_fsnls.py --quick     # smoke run: 2 seeds, tiny scipy cap (~1 min)
    python benchmarks/wendy_vs_fsnls.py --seeds 20  # more seeds

On small CPU machines prefix `OPENBLAS_THREAD_TIMEOUT=4` or `OPENBLAS_NUM_THREADS=1` (see
the README's benchmark section): the likelihood build (scipy SVDs for the test functions)
and JAX's CPU Cholesky run on OpenBLAS threads, which spin and slow everything down many
times over when the cores are shared. The setting is recorded with the results.

On the same Lorenz data (Rummel et al. 2025 Table 2 protocol: p* = (10, 28, 8/3), u0 = (2, 1, 1),
M + 1 = 1025 samples on [0, 10], additive Gaussian noise at 5 % and 10 %), and from the
same start p₀ drawn uniformly from Rummel et al. 2025 Table 2's box (`lorenz().model.bounds`, numpy
generator `default_rng(1000 + seed)`), it fits

1. WENDy-MLE (`wendyjax`): per fit, (a) `wj.weak_likelihood` (test-function selection and
   precomputed blocks, data-dependent, outside jit) and (b) the jitted
   `MLE(start="best").solve(lik, p0, lower, upper)` within the box (the trust region
   starts from whichever of p₀ and the closed-form WLS estimate has the lower ℓ; the WLS
   solve is part of the timed solve; Lorenz has one optimum, reached from either start). Both are timed as medians of
   repeated calls after the first one (each call ends with `block_until_ready`); the first
   call's excess over that median is reported as compile time (a compile happens for every
   new array-shape signature of the likelihood, e.g. a new number K of test functions).
   Per-fit time = build + solve, compile excluded.
2. What users do today: `scipy.integrate.solve_ivp` (RK45, rtol = 1e-6, atol = 1e-8,
   `t_eval` = the sample times) inside `scipy.optimize.least_squares(method="lm")` with its
   default finite-difference Jacobian, fitting θ = (p, u0) (6 unknowns) from the same p₀
   and u0 = the first (noisy) data row; residual = (simulated states − data).ravel().
   A failed forward solve (status < 0, non-finite states, or more than `max_rhs` = 50 000
   rhs calls, ≈ 23× what RK45 needs at p*: LM steps into stiff parameter regions where one
   solve would otherwise run for minutes) gives residual 1e6 on the missing / non-finite
   entries. MINPACK-LM is unbounded (p may leave the box). Each fit is capped at
   `max_nfev` residual evaluations (default 600 = scipy's own default 100·n for n = 6;
   since scipy 1.16 `nfev` / `max_nfev` of "lm" exclude the finite-difference Jacobian's
   evaluations, so one fit may run up to ≈ 7·max_nfev forward solves; the number of
   forward solves is reported as well). The number of fits that hit the cap is reported:
   for those the time is a lower bound on the uncapped fit's, so the speed-up is a lower
   bound too. Each fit is timed once (wall clock), after one warm-up `solve_ivp` call.

Reported per noise level: median per-fit wall time of each method, the median relative
coefficient error ‖p̂ − p*‖/‖p*‖ (Rummel et al. 2025 eq. 12), WENDy's median number of trust-region steps,
scipy's median number of function evaluations, the number of failed / non-converged fits
of each method, and the speed-up (median scipy time / median WENDy time; total per fit
and solve only). Targets (from the issue): speed-up ≥ 50× (total per fit) and lower median
error than the scipy fit. Results go to `benchmarks/results/wendy_vs_fsnls.{json,md}`.

Timing helpers and machine information come from `benchmarks/_common.py`, the scipy fit
from `benchmarks/_scipy_oe.py`.
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
    cpu_busy_seconds,
    env_prefix,
    fmt_table,
    idle_check,
    machine_info,
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

# the jitted WENDy solve (one compile per shape signature of the likelihood)
_solve = eqx.filter_jit(lambda est, lik, p0, lo, hi: est.solve(lik, p0, lo, hi))


# ----------------------------------------------------------------------------- helpers


ESTIMATOR = wj.MLE(start="best")


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


# ----------------------------------------------------------------------------- WENDy


def fit_wendy(b, data, p0, lo, hi, build_cfg, solve_cfg, seen_shapes):
    lik, t_build = bench(wj.weak_likelihood, b.model, data, cfg=build_cfg)
    sig = shape_signature(lik)
    new_shape = sig not in seen_shapes
    seen_shapes.add(sig)
    sol, t_solve = bench(_solve, ESTIMATOR, lik, jnp.asarray(p0, dtype=jnp.float64), lo, hi,
                         cfg=solve_cfg)
    prob = lik.problem
    k_real = int(np.sum(np.asarray(prob.kmask[0])))
    p_hat = np.asarray(sol.params)
    return lik, {
        "params": p_hat.tolist(),
        "rel_err": rel_err(p_hat, b.p_true),
        "num_steps": int(sol.num_steps),
        "status": wj.RESULTS[sol.result] or "successful",
        "converged": bool(np.all(np.asarray(sol.successful))),
        "nll": float(sol.objective),
        "K": int(prob.phi.shape[1]),
        "K_real": k_real,
        "linear": lik.linear is not None,
        "new_shape": new_shape,
        "build": t_build,
        "solve": t_solve,
        "build_s": t_build["median_s"],
        "solve_s": t_solve["median_s"],
        "total_s": t_build["median_s"] + t_solve["median_s"],
        "solve_compile_s": t_solve["compile_s"],
        "build_first_extra_s": t_build["compile_s"],
    }


def check_user_api(b, data, p0, wendy_params):
    """`ESTIMATOR.fit` (the user-facing path, untimed) must give the timed solve's estimate."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fit = ESTIMATOR.fit(b.model, data, p0, throw=False)
    diff = float(np.max(np.abs(np.asarray(fit.params) - np.asarray(wendy_params))))
    return {
        "max_abs_param_diff": diff,
        "agree": diff <= 1e-8 * max(1.0, float(np.max(np.abs(fit.params)))),
        "fit_num_steps": fit.num_steps,
        "fit_successful": fit.successful,
        "warnings": [str(w.message) for w in caught],
    }


# ----------------------------------------------------------------------------- main


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true",
                    help="smoke run: 2 seeds, max_nfev 10, few timing repeats (~1 min)")
    ap.add_argument("--seeds", type=int, default=None,
                    help="seeds per noise level (default 10, --quick: 2)")
    ap.add_argument("--max-nfev", type=int, default=None,
                    help="least_squares max_nfev: cap on residual evaluations per fit, without "
                         "the finite-difference Jacobian's (scipy >= 1.16); default 600 = "
                         "scipy's default 100*n, --quick: 10")
    ap.add_argument("--rtol", type=float, default=1e-6, help="solve_ivp rtol (default 1e-6)")
    ap.add_argument("--atol", type=float, default=1e-8, help="solve_ivp atol (default 1e-8)")
    ap.add_argument("--max-rhs", type=int, default=50_000,
                    help="budget of Lorenz rhs calls per solve_ivp (default 50000, about 23x "
                         "the ~2100 RK45 needs at p*); a solve over it counts as failed")
    ap.add_argument("--first-seed", type=int, default=0,
                    help="first seed (default 0): seeds first-seed … first-seed + seeds − 1")
    ap.add_argument("--noise", type=float, nargs="+", default=list(NOISE_RATIOS),
                    help="noise ratios (default: 0.05 0.10)")
    ap.add_argument("--name", default="wendy_vs_fsnls",
                    help="results file stem under benchmarks/results/ (default: wendy_vs_fsnls)")
    args = ap.parse_args()
    n_seeds = args.seeds if args.seeds is not None else (2 if args.quick else 10)
    max_nfev = args.max_nfev if args.max_nfev is not None else (10 if args.quick else 600)
    if n_seeds < 1 or max_nfev < 1 or args.max_rhs < 1:
        ap.error("--seeds, --max-nfev and --max-rhs must be positive")
    if args.first_seed < 0:
        ap.error("--first-seed must be non-negative")
    seeds = range(args.first_seed, args.first_seed + n_seeds)
    if not all(0 < r < 1 for r in args.noise):
        ap.error("--noise ratios must lie in (0, 1)")
    noise_ratios = tuple(args.noise)
    if args.quick:
        build_cfg = {"min_reps": 1, "min_time": 0.0, "max_time": 1.0, "floor_reps": 1}
        solve_cfg = {"min_reps": 2, "min_time": 0.0, "max_time": 1.0, "floor_reps": 1}
    else:
        build_cfg = {"min_reps": 3, "min_time": 0.0, "max_time": 5.0, "floor_reps": 3}
        solve_cfg = {"min_reps": 5, "min_time": 0.5, "max_time": 5.0, "floor_reps": 3}

    t_start = time.perf_counter()
    cpu_start = cpu_busy_seconds()
    info = machine_info()
    info["scipy"] = scipy.__version__
    print(f"WENDy-MLE vs FSNLS (solve_ivp RK45 + least_squares LM) on Lorenz  "
          f"({'quick' if args.quick else 'full'} run)")
    print(f"  {info.get('cpu_model', info['processor'])}, {info['cpu_count']} CPUs, "
          f"jax {info['jax']}, devices {info['devices']}")
    print(f"  {n_seeds} seeds × noise {', '.join(f'{100 * r:g} %' for r in noise_ratios)}; "
          f"solve_ivp rtol={args.rtol:g} atol={args.atol:g}; least_squares max_nfev={max_nfev}")
    idle_check(info)

    b = lorenz()
    p_true = np.asarray(b.p_true)
    lo_np, hi_np = (np.asarray(x, float) for x in b.model.bounds)
    lo, hi = jnp.asarray(lo_np), jnp.asarray(hi_np)

    # warm up scipy's solve_ivp (first-call overheads), untimed
    solve_ivp(lorenz_rhs, (0.0, 10.0), np.asarray(b.u0, float), method="RK45",
              t_eval=np.asarray(b.t), args=tuple(p_true), rtol=args.rtol, atol=args.atol)

    seen_shapes = set()
    runs = []
    api_check = None
    errors = []
    for ratio in noise_ratios:
        print(f"\nnoise {100 * ratio:g} %")
        for seed in seeds:
            t0 = time.perf_counter()
            data = b.simulate(jax.random.PRNGKey(seed), ratio, subsample=1)
            sim_s = time.perf_counter() - t0
            p0 = np.random.default_rng(P0_SEED_OFFSET + seed).uniform(lo_np, hi_np)
            run = {"noise_ratio": ratio, "seed": seed, "p0": p0.tolist(),
                   "n_samples": int(np.shape(data.t)[0]), "simulate_s": sim_s}
            try:
                lik, run["wendy"] = fit_wendy(b, data, p0, lo, hi, build_cfg, solve_cfg, seen_shapes)
                del lik
            except Exception as e:  # noqa: BLE001 — record the library's exception verbatim
                tb = traceback.format_exc()
                run["wendy"] = {"exception": f"{type(e).__name__}: {e}", "traceback": tb}
                errors.append(f"WENDy noise {ratio} seed {seed}:\n{tb}")
                print(tb)
            if api_check is None and "exception" not in run["wendy"]:
                try:
                    api_check = check_user_api(b, data, p0, run["wendy"]["params"])
                    api_check.update({"noise_ratio": ratio, "seed": seed})
                except Exception as e:  # noqa: BLE001
                    tb = traceback.format_exc()
                    api_check = {"exception": f"{type(e).__name__}: {e}", "traceback": tb}
                    errors.append(f"MLE().fit noise {ratio} seed {seed}:\n{tb}")
                    print(tb)
            run["scipy"] = fit_scipy(lorenz_rhs, data, p0, p_true, args.rtol, args.atol, max_nfev, args.max_rhs)
            runs.append(run)
            w, s = run["wendy"], run["scipy"]
            if "exception" in w:
                wtxt = f"WENDy EXCEPTION {w['exception']}"
            else:
                wtxt = (f"WENDy err {w['rel_err']:.2e} steps {w['num_steps']:3d} "
                        f"{'ok ' if w['converged'] else 'NOT'} K {w['K']:3d}  "
                        f"build {ms(w['build_s'])} + solve {ms(w['solve_s'])} ms"
                        + (f" (compile {w['solve_compile_s']:.1f} s)" if w["new_shape"] else ""))
            print(f"  seed {seed:2d}  {wtxt}  |  scipy err {s['rel_err']:.2e} nfev {s['nfev']:4d} "
                  f"({s['forward_solves']:5d} solves) "
                  f"{'cap' if s['hit_cap'] else ('ok ' if s['converged'] else 'NOT')}  "
                  f"{sec(s['time_s'])} s"
                  + (f" (failed solves {s['ivp_failures']}, over rhs budget {s['ivp_budget_stops']})"
                     if s["ivp_failures"] or s["ivp_budget_stops"] else ""))

    # --- summary per noise level
    summary = []
    for ratio in noise_ratios:
        rs = [r for r in runs if r["noise_ratio"] == ratio]
        ws = [r["wendy"] for r in rs if "exception" not in r["wendy"]]
        ss = [r["scipy"] for r in rs]
        compiles = [w["solve_compile_s"] for w in ws if w["new_shape"]]
        entry = {
            "noise_ratio": ratio,
            "n_fits": len(rs),
            "wendy": {
                "n_ok": len(ws),
                "n_exceptions": len(rs) - len(ws),
                "n_not_converged": sum(not w["converged"] for w in ws),
                "median_rel_err": med([w["rel_err"] for w in ws]),
                "median_num_steps": med([w["num_steps"] for w in ws]),
                "median_build_s": med([w["build_s"] for w in ws]),
                "median_solve_s": med([w["solve_s"] for w in ws]),
                "median_total_s": med([w["total_s"] for w in ws]),
                "n_compiles": len(compiles),
                "median_solve_compile_s": med(compiles),
                "median_build_first_extra_s": med([w["build_first_extra_s"] for w in ws]),
                "K_values": sorted({w["K"] for w in ws}),
            },
            "scipy": {
                "median_rel_err": med([s["rel_err"] for s in ss]),
                "median_time_s": med([s["time_s"] for s in ss]),
                "median_nfev": med([s["nfev"] for s in ss]),
                "median_forward_solves": med([s["forward_solves"] for s in ss]),
                "n_hit_cap": sum(s["hit_cap"] for s in ss),
                "n_not_converged": sum(not s["converged"] for s in ss),
                "n_fits_with_ivp_failures": sum(s["ivp_failures"] > 0 for s in ss),
                "n_fits_with_ivp_budget_stops": sum(s["ivp_budget_stops"] > 0 for s in ss),
                "total_ivp_budget_stops": sum(s["ivp_budget_stops"] for s in ss),
            },
        }
        sw, sc = entry["wendy"], entry["scipy"]
        entry["speedup_total"] = sc["median_time_s"] / sw["median_total_s"]
        entry["speedup_solve_only"] = sc["median_time_s"] / sw["median_solve_s"]
        entry["speedup_met"] = bool(entry["speedup_total"] >= TARGET_SPEEDUP)
        entry["more_accurate"] = bool(sw["median_rel_err"] < sc["median_rel_err"])
        summary.append(entry)

    header = ["noise", "method", "median rel. err", "median time/fit", "build", "solve",
              "compile", "TR steps / nfev", "not conv. / failed", "hit cap",
              "fits w/ failed solves"]
    rows = []
    for e in summary:
        w, s = e["wendy"], e["scipy"]
        rows.append([f"{100 * e['noise_ratio']:g} %", "WENDy-MLE", f"{w['median_rel_err']:.2e}",
                     f"{ms(w['median_total_s'])} ms", f"{ms(w['median_build_s'])} ms",
                     f"{ms(w['median_solve_s'])} ms",
                     (f"{sec(w['median_solve_compile_s'])} s ×{w['n_compiles']}" if w["n_compiles"]
                      else "cached"),
                     f"{w['median_num_steps']:g} steps",
                     f"{w['n_not_converged']} / {w['n_exceptions']}", "–", "–"])
        rows.append([f"{100 * e['noise_ratio']:g} %", "scipy RK45+LM", f"{s['median_rel_err']:.2e}",
                     f"{ms(s['median_time_s'])} ms", "–", "–", "–",
                     f"{s['median_nfev']:g} nfev ({s['median_forward_solves']:g} solves)",
                     f"{s['n_not_converged']} / 0", f"{s['n_hit_cap']} of {e['n_fits']}",
                     f"{s['n_fits_with_ivp_failures']} / {s['n_fits_with_ivp_budget_stops']} budget"])
    print("\nPer-fit medians over seeds (WENDy: after compilation; compile = first solve call − "
          "median, ×n = number of compilations; failed solves: fits with a failed solve_ivp / "
          "with one over the rhs budget)")
    print(fmt_table(header, rows))

    targets = []
    for e in summary:
        nl = f"{100 * e['noise_ratio']:g} %"
        capped = e["scipy"]["n_hit_cap"]
        targets.append({
            "name": f"speed-up per fit, build + solve (noise {nl})",
            "value": e["speedup_total"], "target": f">= {TARGET_SPEEDUP:.0f}x",
            "met": e["speedup_met"],
            "shown": f"{e['speedup_total']:.1f}x" + (" (lower bound: scipy capped)" if capped else ""),
        })
        targets.append({
            "name": f"speed-up, solve only (noise {nl}; informative)",
            "value": e["speedup_solve_only"], "target": "–", "met": None,
            "shown": f"{e['speedup_solve_only']:.1f}x",
        })
        targets.append({
            "name": f"median rel. error lower than scipy (noise {nl})",
            "value": [e["wendy"]["median_rel_err"], e["scipy"]["median_rel_err"]],
            "target": "WENDy < scipy", "met": e["more_accurate"],
            "shown": f"{e['wendy']['median_rel_err']:.2e} vs {e['scipy']['median_rel_err']:.2e}",
        })
    result_word = {True: "PASS", False: "MISS", None: "–"}
    trows = [[t["name"], t["shown"], t["target"], result_word[t["met"]]] for t in targets]
    print("\nTargets")
    print(fmt_table(["target", "measured", "required", "result"], trows))
    if api_check is not None:
        if "exception" in api_check:
            print(f"\nMLE().fit cross-check raised: {api_check['exception']}")
        else:
            print(f"\nMLE().fit cross-check (noise {api_check['noise_ratio']}, seed "
                  f"{api_check['seed']}): max |Δp| = {api_check['max_abs_param_diff']:.1e} "
                  f"({'agrees' if api_check['agree'] else 'DISAGREES'} with the timed solve)")

    total_s = time.perf_counter() - t_start
    if hasattr(os, "getloadavg"):
        info["loadavg_at_end"] = os.getloadavg()
    other = other_cpu_load(cpu_start, cpu_busy_seconds(), total_s)
    info["other_processes_mean_cores"] = other
    if other is not None:
        print(f"CPU used by other processes during the run: {other:.2f} cores on average"
              + (" — WARNING: timings are contended" if other > 0.1 else ""))
    print(f"total benchmark time {total_s:.1f} s")

    # --- write results
    date = utc_now()
    protocol = {
        "model": "lorenz (Rummel et al. 2025 Table 2)", "p_true": p_true.tolist(),
        "u0_true": np.asarray(b.u0).tolist(), "n_samples": int(np.shape(b.t)[0]),
        "t_span": [float(b.t[0]), float(b.t[-1])], "noise": "additive Gaussian",
        "noise_ratios": list(noise_ratios), "seeds": list(seeds),
        "data_key": "jax.random.PRNGKey(seed)",
        "p0": f"np.random.default_rng({P0_SEED_OFFSET} + seed).uniform(lower, upper)",
        "box": [lo_np.tolist(), hi_np.tolist()],
        "wendy": {"estimator": ("MLE(start='best'): rtol 1e-8, atol 1e-8, max_steps 500, from p0 or the WLS "
                                "estimate, whichever has lower nll"),
                  "likelihood": "wj.weak_likelihood(model, data) defaults",
                  "bounds": "the box", "timing_build": build_cfg, "timing_solve": solve_cfg},
        "scipy": {"forward": "solve_ivp RK45", "rtol": args.rtol, "atol": args.atol,
                  "optimizer": "least_squares(method='lm'), 2-point FD Jacobian",
                  "unknowns": "p (3) and u0 (3); u0 start = first data row",
                  "max_nfev": max_nfev, "max_rhs_per_solve": args.max_rhs,
                  "fail_residual": FAIL_RESIDUAL, "bounds": "none (LM)"},
    }
    result = {
        "script": "benchmarks/wendy_vs_fsnls.py", "date": date, "quick": args.quick,
        "machine": info, "protocol": protocol, "summary": summary, "targets": targets,
        "user_api_check": api_check, "runs": runs, "errors": errors, "total_time_s": total_s,
    }
    paths = write_results(args.name, result, indent=2, default=float)  # the data first
    opts = []
    if args.quick:
        opts.append("--quick")
    if args.seeds is not None:
        opts.append(f"--seeds {args.seeds}")
    if args.first_seed:
        opts.append(f"--first-seed {args.first_seed}")
    if tuple(args.noise) != NOISE_RATIOS:
        opts.append("--noise " + " ".join(f"{r:g}" for r in args.noise))
    if args.max_nfev is not None:
        opts.append(f"--max-nfev {args.max_nfev}")
    if args.rtol != 1e-6:
        opts.append(f"--rtol {args.rtol:g}")
    if args.atol != 1e-8:
        opts.append(f"--atol {args.atol:g}")
    if args.max_rhs != 50_000:
        opts.append(f"--max-rhs {args.max_rhs}")
    if args.name != "wendy_vs_fsnls":
        opts.append(f"--name {args.name}")
    command = " ".join(x for x in (env_prefix(), "python benchmarks/wendy_vs_fsnls.py", *opts) if x)
    seed_header = ["noise", "seed", "K", "WENDy err", "steps", "WENDy status", "build ms",
                   "solve ms", "scipy err", "nfev", "forward solves", "scipy status", "scipy s",
                   "failed / over-budget solves"]
    seed_rows = []
    for r in runs:
        w, s = r["wendy"], r["scipy"]
        wcols = (["–", "exception", "exception", "–", "–", "–"] if "exception" in w else
                 [w["K"], f"{w['rel_err']:.2e}", w["num_steps"], w["status"],
                  ms(w["build_s"]), ms(w["solve_s"])])
        seed_rows.append([f"{100 * r['noise_ratio']:g} %", r["seed"], wcols[0], *wcols[1:],
                          f"{s['rel_err']:.2e}", s["nfev"], s["forward_solves"],
                          "max_nfev" if s["hit_cap"] else ("converged" if s["converged"] else
                                                           f"status {s['status']}"),
                          sec(s["time_s"]), f"{s['ivp_failures']} / {s['ivp_budget_stops']}"])
    md_table = lambda header, rows: "\n".join(markdown_table(header, rows))  # noqa: E731
    md = [
        "# WENDy-MLE vs forward-solve least squares (Lorenz)",
        "",
        f"Generated by `{command}` on {date}"
        + (" — **quick smoke run: 2 seeds and a tiny scipy cap; not a result.**" if args.quick else "."),
        "",
        f"Machine: {info.get('cpu_model', info['processor'])}, {info['cpu_count']} CPUs, "
        f"{info['uname']['system']} {info['uname']['release']} ({info['uname']['machine']}), "
        f"jax {info['jax']}, devices {', '.join(info['devices'])}; float64.",
        "" if other is None else
        f"Other processes used {other:.2f} cores on average during the run"
        + (" (timings contended)." if other > 0.1 else "."),
        "",
        f"Lorenz, Rummel et al. 2025 Table 2 protocol: p* = (10, 28, 8/3), u0 = (2, 1, 1), "
        f"{protocol['n_samples']} samples on [0, 10], additive Gaussian noise; seeds "
        f"{seeds[0]}–{seeds[-1]} (data key `PRNGKey(seed)`), p₀ ~ U(box) with "
        f"`default_rng({P0_SEED_OFFSET} + seed)`, box {lo_np.tolist()} – {hi_np.tolist()}.",
        "",
        "- **WENDy-MLE**: `wj.weak_likelihood(model, data)` (build: test functions + "
        "precomputed blocks) then the jitted `MLE(start='best').solve` within the box, started from whichever of p₀ "
        "and the WLS estimate has the lower ℓ (`start='best'`, timed with the solve). Medians of "
        "repeated calls after the first; compile = first solve call − median, for each new "
        "shape signature of the likelihood (×n: number of compilations). Time per fit = "
        "build + solve (compile excluded).",
        f"- **scipy**: `solve_ivp(RK45, rtol={args.rtol:g}, atol={args.atol:g}, t_eval=t)` in "
        f"`least_squares(method='lm', max_nfev={max_nfev})` (2-point Jacobian, whose "
        f"evaluations max_nfev does not count since scipy 1.16; 'solves' counts all forward "
        f"solves), fitting p and u0 (6 unknowns, u0 from the first noisy row), "
        f"unbounded. A forward solve that fails or exceeds {args.max_rhs} rhs calls gives residual "
        f"{FAIL_RESIDUAL:g} on the samples it misses. One timed fit per seed.",
        "- rel. err = ‖p̂ − p*‖/‖p*‖ (Rummel et al. 2025 eq. 12). Speed-up = median scipy time / median "
        "WENDy time per fit; when scipy fits hit max_nfev it is a lower bound.",
        "",
        "## Per-fit medians",
        "",
        md_table(header, rows),
        "",
        "## Targets",
        "",
        md_table(["target", "measured", "required", "result"], trows),
        "",
    ]
    if api_check is not None:
        md += ["## User API cross-check", "",
               (f"`MLE().fit` raised `{api_check['exception']}`." if "exception" in api_check else
                f"`wj.MLE(start='best').fit(model, data, p0)` on noise {api_check['noise_ratio']:g}, seed "
                f"{api_check['seed']} gives max |Δp| = {api_check['max_abs_param_diff']:.1e} against "
                f"the timed solve ({'agrees' if api_check['agree'] else 'DISAGREES'})."), ""]
    md += ["## Per seed", "", md_table(seed_header, seed_rows), ""]
    if errors:
        md += ["## Exceptions", ""] + [f"```\n{e}\n```" for e in errors] + [""]
    paths += write_results(args.name, markdown=md)
    print(f"wrote {' and '.join(map(str, paths))}")


if __name__ == "__main__":
    main()

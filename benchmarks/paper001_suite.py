"""Bortz et al. 2023 §3.1–3.2 reproduced: WENDy (IRLS) against weak OLS on the paper's five systems.

Run from the repository root::

    python benchmarks/paper001_suite.py                                   # all five systems
    python benchmarks/paper001_suite.py --models lotka_volterra --runs 20 # quick check
    python benchmarks/paper001_suite.py --test-functions matlab           # Bortz et al. 2023's own test functions

Protocol (Bortz et al. 2023 §3.1): additive Gaussian noise with σ = σ_NR·rms(vec U*), 100 trials per
setting (`--runs`), a fine grid of 1024 intervals (512 for Logistic growth) subsampled by
factors of 2 down to M = 64, no parameter bounds. On the same datasets (same seed) the
weak OLS estimate (`WLS`) and WENDy (`IRLS`, Bortz et al. 2023 Alg. 2, started from OLS) are computed;
reported per cell are the median relative coefficient error E₂ (eq. 23) and forward
simulation error E_FS (eq. 24) of each, and the median over runs of the percentage drop
in E₂ from OLS to WENDy (the bar plots of Figs. 5–9). The text's claims are checked in a
table at the top of `benchmarks/results/paper001_suite.md`; metric rows and settings per
system and estimator go under `benchmarks/results/paper001/`. `--test-functions matlab`
builds the test functions by the rules of Bortz et al. 2023's MATLAB code
(`wj.TestFunctionConfig.matlab(k_min=2J)`) instead of WENDy.jl's defaults.
"""

import argparse

import jax
import numpy as np
import scipy.stats
from _common import RESULTS, command, machine_info, machine_line, markdown_table, save_study, timed_study, write_results

import wendyjax as wj
from wendyjax.studies import relative_coefficient_error

# subsampling of each zoo grid (1025 points; Logistic's Bortz et al. 2023 grid has 512 intervals on the
# same [0, 10], i.e. every second point of ours) giving M = 512/1024 … 64
SUBSAMPLES = {
    "logistic": [2, 4, 8, 16],
    "lotka_volterra": [1, 2, 4, 8, 16],
    "fitzhugh_nagumo": [1, 2, 4, 8, 16],
    "hindmarsh_rose": [1, 2, 4, 8, 16],
    "ptb": [1, 2, 4, 8, 16],
}

# Bortz et al. 2023 §3 claims: (system, noise, M or None for "M ≥ …", statistic, bound, text)
CLAIMS = [
    ("logistic", 0.10, 64, "median E2 (WENDy)", 0.06, "§3.2.1: E₂ < 6 % with 64 points and 10 % noise"),
    ("logistic", 0.10, 64, "median E_FS (WENDy)", 0.06, "§3.2.1: E_FS < 6 % with 64 points and 10 % noise"),
    ("lotka_volterra", 0.30, 64, "median E2 (WENDy)", 0.10, "§3.2.2: E₂ < 10 % with 64 points and 30 % noise"),
    ("fitzhugh_nagumo", 0.10, 128, "mean E2 (WENDy)", 0.06, "§3.2.3: on average 6 % E₂ at 10 % noise, 128 points"),
    ("fitzhugh_nagumo", 0.10, 128, "mean E_FS (WENDy)", 0.07, "§3.2.3: about 7 % E_FS at 10 % noise, 128 points"),
]

NOTES = [
    "FitzHugh–Nagumo uses the sign of the authors' MATLAB code, y' = −x/3 + 0.34/3 + (0.2/3)·y "
    "(the textbook model has −0.2/3); time span [0, 25] on the 1025-point grid.",
    "E₂ is ‖ŵ − w*‖₂/‖w*‖₂ as in the MATLAB code (`display_wendy_results.m`) and Rummel et al. 2025; "
    "Bortz et al. 2023's eq. 23 "
    "prints its square, which would make every E₂ claim far easier to meet.",
    "Hindmarsh–Rose and PTB: initial conditions and parameters of the MATLAB code "
    "(get_ode_features), see `wendyjax.models`.",
    "'Drop' = (E₂(OLS) − E₂(WENDy)) / E₂(OLS) per run, median over runs; Bortz et al. 2023 reports 60–90 % "
    "'in most cases', 50–85 % for Logistic at ≥ 10 % noise and M ≥ 256, 40–70 % for Lotka–Volterra, "
    "≥ 50 % (80 % at high noise, M = 1024) for FitzHugh–Nagumo, 70–90 % for Hindmarsh–Rose at 1–2 % "
    "noise and M ≥ 256, ≥ 70 % for PTB at M ≥ 512.",
]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="+", default=list(SUBSAMPLES), choices=list(SUBSAMPLES))
    ap.add_argument("--runs", type=int, default=100)
    ap.add_argument("--noise", type=float, nargs="+", default=[0.01, 0.10, 0.30])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--out", default="paper001_suite")
    ap.add_argument("--test-functions", choices=["wendy.jl", "matlab"], default="wendy.jl",
                    help="WENDy.jl's default test functions or those of Bortz et al. 2023's MATLAB code")
    args = ap.parse_args()

    info = machine_info()
    cmd = command()
    cells, per_run, sections, results = {}, {}, [], {}
    for name in args.models:
        bench = getattr(wj.models, name)()
        tf = (wj.TestFunctionConfig.matlab(k_min=2 * len(bench.p_true)) if args.test_functions == "matlab"
              else wj.TestFunctionConfig())
        studies, walls = {}, {}
        for label, est in (("ols", wj.WLS()), ("wendy", wj.IRLS())):
            # the same key gives the same datasets to both estimators; p0 is unused by the
            # closed-form OLS start of these linear-in-parameter models
            studies[label], walls[label] = timed_study(
                wj.studies.monte_carlo, benchmark=bench, estimator=est, noise_levels=args.noise,
                subsamples=SUBSAMPLES[name], n_runs=args.runs, key=jax.random.key(args.seed),
                p0=np.asarray(bench.p_true), bounds=None, test_functions=tf, batch_size=args.batch_size)
            save_study(studies[label], RESULTS / "paper001", f"{args.out}_{name}_{label}")
        rows, per_cell = [], []
        for i, cell in enumerate(studies["ols"].cells):
            ols, wendy = studies["ols"].runs[i], studies["wendy"].runs[i]
            e_ols = relative_coefficient_error(ols.params, cell.p_true)
            e_w = relative_coefficient_error(wendy.params, cell.p_true)
            drop = 100 * (e_ols - e_w) / e_ols
            stats = {
                "median E2 (OLS)": float(np.median(e_ols)), "median E2 (WENDy)": float(np.median(e_w)),
                "mean E2 (WENDy)": float(np.mean(e_w)),
                "median E_FS (OLS)": float(np.median(ols.forward_error)),
                "median E_FS (WENDy)": float(np.median(wendy.forward_error)),
                "mean E_FS (WENDy)": float(np.mean(wendy.forward_error)),
                "median drop %": float(np.median(drop)),
                "WENDy unsuccessful": int(np.sum(wendy.status != "successful")),
            }
            cells[(name, round(cell.noise_ratio, 4), wendy.m)] = stats
            per_run[(name, round(cell.noise_ratio, 4), wendy.m)] = {
                "E2 (WENDy)": e_w, "E_FS (WENDy)": np.asarray(wendy.forward_error)}
            per_cell.append({"noise": cell.noise_ratio, "M": wendy.m, **stats})
            rows.append([f"{100 * cell.noise_ratio:g} %", wendy.m, *stats.values()])
        results[name] = {"walls_s": walls, "cells": per_cell}
        sections += [f"### {name}", "", f"Wall time: OLS {walls['ols']:.0f} s, WENDy {walls['wendy']:.0f} s.", "",
                     *markdown_table(["noise", "M", *stats.keys()], rows), ""]
        print(f"{name}: OLS {walls['ols']:.0f} s, WENDy {walls['wendy']:.0f} s", flush=True)

    claims = []
    for name, noise, m, stat, bound, text in CLAIMS:
        got = cells.get((name, noise, m), {}).get(stat)
        if got is None:
            continue
        # 95 % percentile-bootstrap interval of the statistic over the runs (Monte Carlo error)
        fn, quantity = stat.split(" ", 1)
        ci = scipy.stats.bootstrap((per_run[(name, noise, m)][quantity],), getattr(np, fn), n_resamples=2000,
                                   method="percentile", random_state=0).confidence_interval
        met = "yes" if got < bound else ("within MC error" if ci.low < bound else "**no**")
        claims.append([text, stat, got, f"[{ci.low:.3g}, {ci.high:.3g}]", f"< {bound:g}", met])
    drops = [v["median drop %"] for v in cells.values()]
    lines = [
        "# Bortz et al. 2023 (WENDy, IRLS) beside weak OLS", "",
        f"Command: `{cmd}`. Machine: {machine_line(info)}, devices {info.get('devices')}. "
        f"{args.runs} runs per cell, seed {args.seed}, "
        f"test functions: {args.test_functions}.", "",
        "## The text's claims", "",
        *markdown_table(["claim", "statistic", "ours", "95 % bootstrap CI", "target", "met"], claims), "",
        f"Median drop in E₂ from OLS to WENDy over all {len(drops)} cells: {np.median(drops):.0f} % "
        f"(cells with a drop of 60–90 % or more: {sum(d >= 60 for d in drops)}; below 0: {sum(d < 0 for d in drops)}).",
        "", "## Notes", "", *(f"- {n}" for n in NOTES), "", "## Per system", "", *sections,
    ]
    write_results(args.out, {"command": cmd, "machine": info, "runs": args.runs, "seed": args.seed,
                             "test_functions": args.test_functions, "results": results}, lines, default=float)


if __name__ == "__main__":
    main()

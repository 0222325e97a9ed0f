"""Bortz et al. 2023 §3.1–3.2: WENDy (IRLS) against weak OLS on the paper's five systems, and the text's claims.

    python benchmarks/paper001_suite.py                                   # all five systems
    python benchmarks/paper001_suite.py --models lotka_volterra --runs 20 # quick check
    python benchmarks/paper001_suite.py --test-functions matlab           # Bortz et al. 2023's own test functions

Protocol (Bortz et al. 2023 §3.1): Gaussian noise σ = σ_NR·rms(U*), `--runs` trials per cell (paper:
100), the fine grid subsampled down to M = 64, no bounds; OLS (`WLS`) and WENDy (`IRLS`) on the same
datasets. Per cell: the median E₂ (eq. 23) and E_FS (eq. 24) of each and the median drop in E₂ from
OLS to WENDy (Figs. 5–9). Writes `benchmarks/results/<--out>.{md,json}` (the claims checked at the
top) and the metric rows and settings under `benchmarks/results/paper001/`. `--test-functions
matlab`: `wj.TestFunctionConfig.matlab(k_min=2J)`, the rules of the paper's MATLAB code.
"""

import jax
import numpy as np
import scipy.stats
from _common import (
    RESULTS,
    command,
    machine_info,
    machine_line,
    markdown_table,
    paragraphs,
    parser,
    save_study,
    timed_study,
    write_results,
)

import wendyjax as wj
from wendyjax.studies import relative_coefficient_error

# subsampling of each zoo grid (1025 points; Bortz et al. 2023's Logistic grid has 512 intervals on the same
# [0, 10], every second point of ours): M = 512 or 1024 down to 64
SUBSAMPLES = {
    "logistic": [2, 4, 8, 16],
    **{name: [1, 2, 4, 8, 16] for name in ("lotka_volterra", "fitzhugh_nagumo", "hindmarsh_rose", "ptb")},
}

# Bortz et al. 2023 §3 claims: (system, noise, M, statistic, bound, text)
CLAIMS = [
    ("logistic", 0.10, 64, "median E2 (WENDy)", 0.06, "§3.2.1: E₂ < 6 % with 64 points and 10 % noise"),
    ("logistic", 0.10, 64, "median E_FS (WENDy)", 0.06, "§3.2.1: E_FS < 6 % with 64 points and 10 % noise"),
    ("lotka_volterra", 0.30, 64, "median E2 (WENDy)", 0.10, "§3.2.2: E₂ < 10 % with 64 points and 30 % noise"),
    ("fitzhugh_nagumo", 0.10, 128, "mean E2 (WENDy)", 0.06, "§3.2.3: on average 6 % E₂ at 10 % noise, 128 points"),
    ("fitzhugh_nagumo", 0.10, 128, "mean E_FS (WENDy)", 0.07, "§3.2.3: about 7 % E_FS at 10 % noise, 128 points"),
]

NOTES = [
    "E₂ = ‖ŵ − w*‖₂/‖w*‖₂ as in the MATLAB code (eq. 23 prints its square); 'drop' = (E₂(OLS) − E₂(WENDy)) / "
    "E₂(OLS) per run, median over runs. Models (FitzHugh–Nagumo's sign, Hindmarsh–Rose's and PTB's values) and "
    "the paper's claims of drops: docs/pages/papers/bortz2023.md.",
]


def main():
    ap = parser(__doc__)
    ap.add_argument("--models", nargs="+", default=list(SUBSAMPLES), choices=list(SUBSAMPLES))
    ap.add_argument("--runs", type=int, default=100)
    ap.add_argument("--noise", type=float, nargs="+", default=[0.01, 0.10, 0.30])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--out", default="paper001_suite")
    ap.add_argument(
        "--test-functions", choices=["wendy.jl", "matlab"], default="wendy.jl", help="WENDy.jl's or the MATLAB code's"
    )
    args = ap.parse_args()

    info, cmd = machine_info(), command()
    cells, per_run, sections, results = {}, {}, [], {}
    for name in args.models:
        bench = getattr(wj.models, name)()
        matlab = args.test_functions == "matlab"
        tf = wj.TestFunctionConfig.matlab(k_min=2 * len(bench.p_true)) if matlab else wj.TestFunctionConfig()
        studies, walls = {}, {}
        for label, est in (("ols", wj.WLS()), ("wendy", wj.IRLS())):
            # the same key gives both estimators the same datasets; OLS needs no p0 on these linear models
            studies[label], walls[label] = timed_study(
                wj.studies.monte_carlo,
                **dict(benchmark=bench, estimator=est, noise_levels=args.noise, subsamples=SUBSAMPLES[name]),
                **dict(n_runs=args.runs, key=jax.random.key(args.seed), p0=np.asarray(bench.p_true), bounds=None),
                **dict(test_functions=tf, batch_size=args.batch_size),
            )
            save_study(studies[label], RESULTS / "paper001", f"{args.out}_{name}_{label}")
        rows, per_cell = [], []
        for cell, ols, wendy in zip(studies["ols"].cells, studies["ols"].runs, studies["wendy"].runs):
            e_ols = relative_coefficient_error(ols.params, cell.p_true)
            e_w = relative_coefficient_error(wendy.params, cell.p_true)
            stats = {
                "median E2 (OLS)": float(np.median(e_ols)),
                "median E2 (WENDy)": float(np.median(e_w)),
                "mean E2 (WENDy)": float(np.mean(e_w)),
                "median E_FS (OLS)": float(np.median(ols.forward_error)),
                "median E_FS (WENDy)": float(np.median(wendy.forward_error)),
                "mean E_FS (WENDy)": float(np.mean(wendy.forward_error)),
                "median drop %": float(np.median(100 * (e_ols - e_w) / e_ols)),
                "WENDy unsuccessful": int(np.sum(wendy.status != "successful")),
            }
            key = (name, round(cell.noise_ratio, 4), wendy.m)
            cells[key] = stats
            per_run[key] = {"E2 (WENDy)": e_w, "E_FS (WENDy)": np.asarray(wendy.forward_error)}
            per_cell.append({"noise": cell.noise_ratio, "M": wendy.m, **stats})
            rows.append([f"{100 * cell.noise_ratio:g} %", wendy.m, *stats.values()])
        results[name] = {"walls_s": walls, "cells": per_cell}
        sections += [
            f"### {name}",
            f"Wall time: OLS {walls['ols']:.0f} s, WENDy {walls['wendy']:.0f} s.",
            markdown_table(["noise", "M", *stats.keys()], rows),
        ]
        print(f"{name}: OLS {walls['ols']:.0f} s, WENDy {walls['wendy']:.0f} s", flush=True)

    claims = []
    for name, noise, m, stat, bound, text in CLAIMS:
        if (got := cells.get((name, noise, m), {}).get(stat)) is None:
            continue
        # 95 % percentile-bootstrap interval of the statistic over the runs (Monte Carlo error)
        fn, quantity = stat.split(" ", 1)
        ci = scipy.stats.bootstrap(
            (per_run[(name, noise, m)][quantity],),
            getattr(np, fn),
            n_resamples=2000,
            method="percentile",
            random_state=0,
        ).confidence_interval
        met = "yes" if got < bound else ("within MC error" if ci.low < bound else "**no**")
        claims.append([text, stat, got, f"[{ci.low:.3g}, {ci.high:.3g}]", f"< {bound:g}", met])
    drops = [v["median drop %"] for v in cells.values()]
    lines = paragraphs(
        "# Bortz et al. 2023 (WENDy, IRLS) beside weak OLS",
        f"Command: `{cmd}`. Machine: {machine_line(info)}, devices {info.get('devices')}. {args.runs} runs per "
        f"cell, seed {args.seed}, test functions: {args.test_functions}.",
        "## The text's claims",
        markdown_table("claim | statistic | ours | 95 % bootstrap CI | target | met", claims),
        f"Median drop in E₂ from OLS to WENDy over all {len(drops)} cells: {np.median(drops):.0f} % "
        f"(cells with a drop of 60–90 % or more: {sum(d >= 60 for d in drops)}; below 0: {sum(d < 0 for d in drops)}).",
        "## Notes",
        [f"- {n}" for n in NOTES],
        "## Per system",
        *sections,
    )
    data = {"command": cmd, "machine": info, "runs": args.runs, "seed": args.seed}
    write_results(args.out, data | {"test_functions": args.test_functions, "results": results}, lines, default=float)


if __name__ == "__main__":
    main()

"""Bortz et al. 2023 §3.1–3.2: WENDy (IRLS) against weak OLS on the paper's five systems, and the text's claims.

    python benchmarks/paper001_suite.py [--models lotka_volterra --runs 20] [--test-functions matlab]

OLS (`WLS`) and WENDy (`IRLS`) on the same datasets, M down to 64, no bounds: per cell the median E₂ and E_FS and the
median drop in E₂ (Figs. 5–9), the claims checked at the top. Studies under `benchmarks/results/paper001/`.
"""

import _common as cm
import jax
import numpy as np
import scipy.stats

import wendyjax as wj
from wendyjax.studies import relative_coefficient_error

# subsampling of each zoo grid (1025 points; Bortz et al. 2023's Logistic grid has 512 intervals on the same
# [0, 10], every second point of ours): M = 512 or 1024 down to 64
SUBSAMPLES = {"logistic": [2, 4, 8, 16]} | {m: [1, 2, 4, 8, 16] for m in ("lotka_volterra", "fitzhugh_nagumo")}
SUBSAMPLES |= {m: [1, 2, 4, 8, 16] for m in ("hindmarsh_rose", "ptb")}

# Bortz et al. 2023 §3 claims: (system, noise, M, statistic, bound, text)
CLAIMS = [
    ("logistic", 0.10, 64, "median E2 (WENDy)", 0.06, "§3.2.1: E₂ < 6 % with 64 points and 10 % noise"),
    ("logistic", 0.10, 64, "median E_FS (WENDy)", 0.06, "§3.2.1: E_FS < 6 % with 64 points and 10 % noise"),
    ("lotka_volterra", 0.30, 64, "median E2 (WENDy)", 0.10, "§3.2.2: E₂ < 10 % with 64 points and 30 % noise"),
    ("fitzhugh_nagumo", 0.10, 128, "mean E2 (WENDy)", 0.06, "§3.2.3: on average 6 % E₂ at 10 % noise, 128 points"),
    ("fitzhugh_nagumo", 0.10, 128, "mean E_FS (WENDy)", 0.07, "§3.2.3: about 7 % E_FS at 10 % noise, 128 points"),
]

NOTE = (
    "E₂ = ‖ŵ − w*‖₂/‖w*‖₂ as in the MATLAB code (eq. 23 prints its square); 'drop' = (E₂(OLS) − E₂(WENDy)) / "
    "E₂(OLS) per run, median over runs. Models (FitzHugh–Nagumo's sign, Hindmarsh–Rose's and PTB's values) and "
    "the paper's claims of drops: docs/pages/papers/bortz2023.md."
)


def main():
    ap = cm.parser(__doc__)
    ap.add_argument("--models", nargs="+", default=list(SUBSAMPLES), choices=list(SUBSAMPLES))
    ap.add_argument("--runs", type=int, default=100)
    ap.add_argument("--noise", type=float, nargs="+", default=[0.01, 0.10, 0.30])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--out", default="paper001_suite")
    ap.add_argument("--test-functions", choices=["wendy.jl", "matlab"], default="wendy.jl")
    args = ap.parse_args()

    info, cmd = cm.machine_info(), cm.command()
    cells, per_run, sections, results = {}, {}, [], {}
    for name in args.models:
        bench = getattr(wj.models, name)()
        matlab = args.test_functions == "matlab"
        tf = wj.TestFunctionConfig.matlab(k_min=2 * len(bench.p_true)) if matlab else wj.TestFunctionConfig()
        studies, walls = {}, {}
        for label, est in (("ols", wj.WLS()), ("wendy", wj.IRLS())):
            # the same key gives both estimators the same datasets; OLS needs no p0 on these linear models
            studies[label], walls[label] = cm.timed_study(
                wj.studies.monte_carlo,
                **dict(benchmark=bench, estimator=est, noise_levels=args.noise, subsamples=SUBSAMPLES[name]),
                **dict(n_runs=args.runs, key=jax.random.key(args.seed), p0=np.asarray(bench.p_true), bounds=None),
                **dict(test_functions=tf, batch_size=args.batch_size),
            )
            cm.save_study(studies[label], cm.RESULTS / "paper001", f"{args.out}_{name}_{label}")
        rows, per_cell = [], []
        for cell, ols, wendy in zip(studies["ols"].cells, studies["ols"].runs, studies["wendy"].runs):
            e_ols = relative_coefficient_error(ols.params, cell.p_true)
            e_w = relative_coefficient_error(wendy.params, cell.p_true)
            fs_ols, fs_w = np.asarray(ols.forward_error), np.asarray(wendy.forward_error)
            stats = {"median E2 (OLS)": np.median(e_ols), "median E2 (WENDy)": np.median(e_w)}
            stats |= {"mean E2 (WENDy)": np.mean(e_w), "median E_FS (OLS)": np.median(fs_ols)}
            stats |= {"median E_FS (WENDy)": np.median(fs_w), "mean E_FS (WENDy)": np.mean(fs_w)}
            stats = {k: float(v) for k, v in stats.items()}
            stats["median drop %"] = float(np.median(100 * (e_ols - e_w) / e_ols))
            stats["WENDy unsuccessful"] = int(np.sum(wendy.status != "successful"))
            key = (name, round(cell.noise_ratio, 4), wendy.m)
            cells[key] = stats
            per_run[key] = {"E2 (WENDy)": e_w, "E_FS (WENDy)": fs_w}
            per_cell.append({"noise": cell.noise_ratio, "M": wendy.m, **stats})
            rows.append([f"{100 * cell.noise_ratio:g} %", wendy.m, *stats.values()])
        results[name] = {"walls_s": walls, "cells": per_cell}
        sections += [
            f"### {name}",
            f"Wall time: OLS {walls['ols']:.0f} s, WENDy {walls['wendy']:.0f} s.",
            cm.markdown_table(["noise", "M", *stats.keys()], rows),
        ]
        print(f"{name}: OLS {walls['ols']:.0f} s, WENDy {walls['wendy']:.0f} s", flush=True)

    claims = []
    for name, noise, m, stat, bound, text in CLAIMS:
        if (got := cells.get((name, noise, m), {}).get(stat)) is None:
            continue
        # 95 % percentile-bootstrap interval of the statistic over the runs (Monte Carlo error)
        fn, quantity = stat.split(" ", 1)
        sample = (per_run[(name, noise, m)][quantity],)
        ci = scipy.stats.bootstrap(sample, getattr(np, fn), n_resamples=2000, method="percentile", random_state=0)
        ci = ci.confidence_interval
        met = "yes" if got < bound else ("within MC error" if ci.low < bound else "**no**")
        claims.append([text, stat, got, f"[{ci.low:.3g}, {ci.high:.3g}]", f"< {bound:g}", met])
    drops = [v["median drop %"] for v in cells.values()]
    lines = cm.paragraphs(
        "# Bortz et al. 2023 (WENDy, IRLS) beside weak OLS",
        f"Command: `{cmd}`. Machine: {cm.machine_line(info)}, devices {info.get('devices')}. {args.runs} runs per "
        f"cell, seed {args.seed}, test functions: {args.test_functions}.",
        "## The text's claims",
        cm.markdown_table("claim | statistic | ours | 95 % bootstrap CI | target | met", claims),
        f"Median drop in E₂ from OLS to WENDy over all {len(drops)} cells: {np.median(drops):.0f} % "
        f"(cells with a drop of 60–90 % or more: {sum(d >= 60 for d in drops)}; below 0: {sum(d < 0 for d in drops)}).",
        "## Notes",
        NOTE,
        "## Per system",
        *sections,
    )
    data = {"command": cmd, "machine": info, "runs": args.runs, "seed": args.seed}
    cm.write_results(args.out, data | {"test_functions": args.test_functions, "results": results}, lines, default=float)


if __name__ == "__main__":
    main()

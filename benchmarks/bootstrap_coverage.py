"""Coverage of the parametric bootstrap's 95 % intervals (basic, percentile, bias-corrected)
beside the fit's own inverse-Hessian and sandwich intervals, on the Logistic.

Run from the repository root::

    python benchmarks/bootstrap_coverage.py                  # 40 datasets × 60 refits per cell
    python benchmarks/bootstrap_coverage.py --runs 8 --boot 40   # quick (40: the fewest refits for 95 % quantiles)

Per cell (5 % additive noise; 65 and 257 samples, i.e. subsample 16 and 4 of the 1025-point
grid; WENDy-WLS): `runs` datasets, each fitted and bootstrapped with `boot` refits by
`wj.studies.bootstrap`. Reported per parameter: the coverage of each interval with its
binomial standard error, the estimator's Monte Carlo bias and spread, the mean bootstrap
bias, and the time per bootstrap. Results: `benchmarks/results/bootstrap_coverage.{json,md}`.
"""

import argparse
import time
import warnings

import jax
import numpy as np
from _common import machine_info, machine_line, write_results

import wendyjax as wj

KINDS = ("basic", "percentile", "bias_corrected", "hessian", "sandwich")


def cell(subsample: int, runs: int, boot: int, noise: float = 0.05) -> dict:
    bench = wj.models.logistic()
    truth = np.asarray(bench.p_true)
    cover = {k: [] for k in KINDS}
    est, bias, seconds = [], [], []
    for i in range(runs):
        data = bench.simulate(jax.random.key(1000 + i), noise, subsample=subsample)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fit = wj.WLS().fit(bench.model, data)
            hess = wj.WLS().fit(bench.model, data, covariance="hessian")
        result = wj.studies.bootstrap(wj.WLS(), fit, data, boot, key=i, progress=False)
        seconds.append(result.seconds)
        intervals = {"basic": result.basic(), "percentile": result.percentile(),
                     "bias_corrected": result.bias_corrected(), "hessian": hess.ci(), "sandwich": fit.ci()}
        for k, (lo, hi) in intervals.items():
            cover[k].append((lo <= truth) & (truth <= hi))
        est.append(fit.params)
        bias.append(result.bias)
    est = np.asarray(est)
    cov = {k: np.mean(v, axis=0) for k, v in cover.items()}
    return {"subsample": subsample, "samples": len(np.asarray(bench.t)[::subsample]), "runs": runs, "boot": boot,
            "coverage": {k: v.tolist() for k, v in cov.items()},
            "binomial_se": {k: np.sqrt(v * (1 - v) / runs).tolist() for k, v in cov.items()},
            "mc_bias": (est.mean(0) - truth).tolist(), "mc_sd": est.std(0, ddof=1).tolist(),
            "bootstrap_bias": np.mean(bias, axis=0).tolist(), "seconds_per_bootstrap": float(np.median(seconds))}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=40)
    parser.add_argument("--boot", type=int, default=60)
    args = parser.parse_args()
    info = machine_info()
    clock = time.perf_counter()
    cells = [cell(s, args.runs, args.boot) for s in (16, 4)]
    lines = ["# Coverage of the parametric bootstrap's 95 % intervals (Logistic, WENDy-WLS, 5 % noise)", "",
             f"`python benchmarks/bootstrap_coverage.py --runs {args.runs} --boot {args.boot}`; "
             f"{machine_line(info)}; {time.perf_counter() - clock:.0f} s in all.", "",
             "| samples | param | " + " | ".join(KINDS) + " | MC bias | MC sd | bootstrap bias | s / bootstrap |",
             "|---|---|" + "---|" * len(KINDS) + "---|---|---|---|"]
    for c in cells:
        for j, name in enumerate(("p1", "p2")):
            cov = " | ".join(f"{c['coverage'][k][j]:.3f} ± {c['binomial_se'][k][j]:.3f}" for k in KINDS)
            lines.append(f"| {c['samples']} | {name} | {cov} | {c['mc_bias'][j]:.4f} | {c['mc_sd'][j]:.4f} | "
                         f"{c['bootstrap_bias'][j]:.4f} | {c['seconds_per_bootstrap']:.2f} |")
    lines += ["", "Coverage ± its binomial standard error over the datasets. Basic intervals subtract the bootstrap "
              "bias estimate; percentile and bias-corrected ones inherit the weak form's bias."]
    text = "\n".join(lines) + "\n"
    print(text)
    write_results("bootstrap_coverage", {"machine": info, "cells": cells}, text, indent=2)


if __name__ == "__main__":
    main()

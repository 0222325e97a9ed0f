"""Where simulated annealing fails in the Carey & Ramsay 2021 §5 study: robust errors and the basin check.

Run from the repository root (after, or independently of, `data2ld_simulation.py`)::

    python benchmarks/data2ld_sa_failures.py     # ~3 min on 2 CPU cores

For every cell of the study, the same replicates and SA runs as `data2ld_simulation.py`
(same seeds and `--sa-iterations` default 5000), it reports the median and 90 % quantile of
|θ̂ − θ| beside the RMSE, and counts the replicates whose SA estimate is far off (some
|θ̂ⱼ − θⱼ| above ten times that parameter's median error). For each far replicate it runs
scipy's `least_squares` on the same residual from the truth and records whether that local
fit has the lower SSE — i.e. whether SA missed the basin rather than found a better
(aliased) minimum. Writes `benchmarks/results/data2ld_sa_failures.{json,md}`.
"""

import datetime

import jax
import jax.numpy as jnp
import numpy as np
from _common import machine_info, write_results
from _data2ld_competitors import pulse_response
from data2ld_simulation import NS, SIGMAS, TRUTH, replicates, sa_batch, spline_problem
from scipy.optimize import least_squares

N_ITER, REPLICATES = 5000, 1000


def cell(N, sigma):
    t, _, Y = replicates(N, sigma, REPLICATES)
    key = jax.random.fold_in(jax.random.PRNGKey(int(1000 * N + 100 * sigma)), 1)  # as data2ld_simulation.main
    theta, _, _, _, sse = sa_batch(t, N_ITER)(jax.random.split(key, REPLICATES), jnp.asarray(Y), spline_problem(t).phi)
    theta, sse = np.asarray(theta), np.asarray(sse)
    err = np.abs(theta - TRUTH)
    med = np.median(err, axis=0)
    far = np.flatnonzero(np.any(err > 10 * med, axis=1))
    forward = jax.jit(lambda th: pulse_response(th, t))
    missed = 0
    for i in far:
        local = least_squares(lambda p, y: np.asarray(forward(jnp.asarray(p))) - y, TRUTH, args=(Y[i],))
        missed += int(2 * local.cost < sse[i])
    return {"sigma": sigma, "N": N, "rmse_x100": (100 * np.sqrt(np.mean(err**2, axis=0))).tolist(),
            "median_abs_err_x100": (100 * med).tolist(),
            "q90_abs_err_x100": (100 * np.quantile(err, 0.9, axis=0)).tolist(),
            "far": len(far), "far_with_lower_local_sse": missed}


def main():
    rows = []
    for sigma in SIGMAS:
        for N in NS:
            rows.append(cell(N, sigma))
            print(rows[-1], flush=True)
    out = {"date": datetime.date.today().isoformat(), "machine": machine_info(), "iterations": N_ITER,
           "replicates": REPLICATES, "cells": rows}
    write_results("data2ld_sa_failures", out)
    lines = ["# Simulated annealing in the Carey & Ramsay 2021 §5 study: robust errors and missed basins", "",
             f"{out['date']}; `python benchmarks/data2ld_sa_failures.py` ({REPLICATES} replicates, {N_ITER} SA "
             "steps, the seeds of `data2ld_simulation.py`). 'far': replicates with some |θ̂ⱼ − θⱼ| > 10 × that "
             "parameter's median error; 'missed basin': of those, how many have a higher SSE than scipy's "
             "`least_squares` started at the truth (SA did not find the least-squares basin).", "",
             "| σ | N | 100·RMSE (β₀, β₁, α) | 100·median abs. error | 100·90 % quantile | far | missed basin |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        fmt = lambda v: ", ".join(f"{x:.3g}" for x in v)  # noqa: E731
        lines.append(f"| {r['sigma']} | {r['N']} | {fmt(r['rmse_x100'])} | {fmt(r['median_abs_err_x100'])} | "
                     f"{fmt(r['q90_abs_err_x100'])} | {r['far']} | {r['far_with_lower_local_sse']} |")
    write_results("data2ld_sa_failures", markdown=lines)


if __name__ == "__main__":
    main()

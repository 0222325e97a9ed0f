"""Output error (OE) vs WENDy-MLE vs the WENDy → OE hybrid, on Rummel et al. 2025's protocols.

    python benchmarks/output_error.py [--part lorenz|goodwin] [--quick]

Lorenz on [0, T], T = 3 … 30 (§3.5, Fig. 1), and Goodwin-2D and -3D at M = 256, noise 1–25 % (Figs. 5–6): coefficient
and forward errors of each method, one `wj.studies.monte_carlo` per cell.
"""

import time

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from _common import machine_info, markdown_table, paragraphs, parser, provenance, write_results

import wendyjax as wj
from wendyjax.studies import relative_coefficient_error

METHODS = {"WENDy-MLE": "mle", "OE": "output_error", "hybrid": "hybrid"}
SHOWN = ("OE", "WENDy-MLE", "hybrid")  # the order of the Goodwin table


def stats(res):
    """Median coefficient error, median forward error, failed runs."""
    return np.median(res["coef"]), np.median(res["forward"]), int(np.sum(res["failed"]))


def cells(bench, names, noise, subsample, n_runs, key, label):
    """One study per method: per-run coefficient and forward errors (a failed run counts with its start's, Rummel
    et al. 2025 §3.3), failures and the compiled study's time per fit; and p₀'s errors."""
    row = {}
    for name in names:
        study = wj.studies.monte_carlo(
            bench, METHODS[name], noise_levels=(noise,), subsamples=(subsample,), n_runs=n_runs, key=key, progress=False
        )
        r, p_true, failed = study.runs[0], study.cells[0].p_true, study.failed(0)
        p0 = relative_coefficient_error(r.p0, p_true)
        coef = np.where(failed, p0, relative_coefficient_error(r.params, p_true)).tolist()
        forward = np.where(failed, study.p0_forward_error[0], r.forward_error).tolist()
        row[name] = res = dict(coef=coef, forward=forward, p0_coef=p0.tolist(), failed=failed.tolist())
        res |= {"status": r.status.tolist(), "fit_s_per_run": study.timings["fit_s"] / n_runs}
        print(f"  {label} {name:9s}: coef err median {np.median(coef):.3g}, failed {sum(res['failed'])}", flush=True)
    assert all(np.allclose(row[name]["p0_coef"], res["p0_coef"]) for name in names), "the methods must share p0"
    return {**row, "p0": res["p0_coef"]}


def lorenz_sweep(ts, n_runs, seed):
    out = []
    for T in ts:
        t = jnp.asarray(np.round(np.arange(0.0, T + 1e-9, 0.01), 10))
        bench = eqx.tree_at(lambda b: b.t, wj.models.lorenz(), t)
        key = jax.random.fold_in(jax.random.key(seed), T)
        row = cells(bench, ("WENDy-MLE", "OE"), 0.10, 1, n_runs, key, f"Lorenz T = {T:2d}")
        out.append({"T": T, "M": len(bench.t) - 1, **row})
    return out


def goodwin(noises, n_runs, seed, subsample):
    out = []
    for bench in (wj.models.goodwin_2d(), wj.models.goodwin_3d()):
        for noise in noises:
            key = jax.random.fold_in(jax.random.key(seed), int(round(1000 * noise)))
            row = cells(bench, METHODS, noise, subsample, n_runs, key, f"{bench.model.name} noise {noise:.2f}")
            out.append({"model": bench.model.name, "noise": noise, "M": (len(bench.t) - 1) // subsample, **row})
    return out


def report(args, lorenz, good, elapsed, info):
    blocks = [
        "# Output error vs WENDy-MLE vs hybrid (Rummel et al. 2025 §3.5, §3.6.4–3.6.5)",
        provenance(info, f", devices {info['devices']}; total {elapsed / 60:.1f} min"),
        "Errors: relative coefficient error ‖p̂ − p*‖/‖p*‖ (eq. 12) and forward-simulation error (eq. 13); a failed "
        "run (its forward simulation fails, or a non-finite estimate/covariance) counts with its start's error "
        "(§3.3). s/fit: compiled study time per run (compilation included).",
    ]
    if lorenz:
        blocks += [
            f"## Lorenz, growing T (Rummel et al. 2025 §3.5, Fig. 1): 10 % noise, Δt = 0.01, {args.runs} runs per T",
            markdown_table(
                "T | M | WENDy mean | WENDy median | OE mean | OE median | p₀ mean | WENDy failed | OE failed "
                "| WENDy s/fit | OE s/fit",
                [
                    [r["T"], r["M"], *(f(r[n]["coef"]) for n in ("WENDy-MLE", "OE") for f in (np.mean, np.median))]
                    + [np.mean(r["p0"]), *(int(np.sum(r[n]["failed"])) for n in ("WENDy-MLE", "OE"))]
                    + [r["WENDy-MLE"]["fit_s_per_run"], r["OE"]["fit_s_per_run"]]
                    for r in lorenz
                ],
            ),
        ]
    if good:
        blocks += [
            f"## Goodwin 2D / 3D (Rummel et al. 2025 Figs. 5–6): {args.goodwin_runs} runs per cell, M = {good[0]['M']}",
            markdown_table(
                "model | noise | OE coef | OE fwd | OE fail | MLE coef | MLE fwd | MLE fail | hybrid coef "
                "| hybrid fwd | hybrid fail | p₀ coef",
                [
                    [
                        r["model"],
                        r["noise"],
                        *(v for n in SHOWN for v in stats(r[n])),
                        np.median(r["p0"]),
                    ]
                    for r in good
                ],
            ),
        ]
    return paragraphs(*blocks)


def main():
    ap = parser(__doc__)
    ap.add_argument("--part", choices=("all", "lorenz", "goodwin"), default="all")
    ap.add_argument("--runs", type=int, default=30, help="runs per T of the Lorenz sweep (paper: 30)")
    ap.add_argument("--goodwin-runs", type=int, default=20, help="runs per Goodwin cell")
    ap.add_argument("--T", type=int, nargs="+", default=list(range(3, 31, 3)))
    ap.add_argument("--noise", type=float, nargs="+", default=[0.01, 0.05, 0.10, 0.25])
    ap.add_argument("--subsample", type=int, default=4, help="Goodwin: every s-th sample (4: M = 256)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--quick", action="store_true", help="3 runs, T ∈ {3, 12}, one noise level")
    args = ap.parse_args()
    if args.quick:
        args.runs, args.goodwin_runs, args.T, args.noise = 3, 3, [3, 12], [0.05]
    start = time.perf_counter()
    lorenz = lorenz_sweep(args.T, args.runs, args.seed) if args.part in ("all", "lorenz") else []
    good = goodwin(args.noise, args.goodwin_runs, args.seed, args.subsample) if args.part in ("all", "goodwin") else []
    elapsed = time.perf_counter() - start
    info = machine_info()
    data = {"args": vars(args), "machine": info, "lorenz": lorenz, "goodwin": good, "elapsed_s": elapsed}
    write_results("output_error", data, report(args, lorenz, good, elapsed, info), echo=True)


if __name__ == "__main__":
    main()

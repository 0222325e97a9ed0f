"""Output error (OE) vs WENDy-MLE vs the WENDy → OE hybrid, on Rummel et al. 2025's protocols.

Run from the repository root::

    python benchmarks/output_error.py                  # Lorenz T sweep + Goodwin 2D/3D
    python benchmarks/output_error.py --part lorenz    # only Rummel et al. 2025 §3.5
    python benchmarks/output_error.py --quick          # few runs, smoke test

1. **Rummel et al. 2025 §3.5 (Fig. 1)**: Lorenz on [0, T], T ∈ {3, 6, …, 30}, Δt = 0.01, 10 % additive
   noise, 30 runs per T, p₀ uniform in Rummel et al. 2025 Table 2's box (the same data and p₀ for
   both methods): relative coefficient error (Rummel et al. 2025 eq. 12) of WENDy-MLE, OE and p₀.
   The paper plots the mean; we report mean and median.
2. **Rummel et al. 2025 §3.6.4–3.6.5 (Figs. 5–6)**: Goodwin-2D (additive) and Goodwin-3D (log-normal),
   M = 256, noise ratios 1–25 %: OE, WENDy-MLE and the hybrid (WENDy-MLE estimate as
   OE's start), coefficient and forward-simulation errors and failure rates.

Every method runs through `wendyjax.studies.monte_carlo` (one compiled fit per setting).
OE fits p and u₀ by Levenberg–Marquardt (optimistix) with forward-mode Jacobians through
diffrax, with the benchmark's ODE solver (Tsit5, or Kvaerno5 for Goodwin-3D; the paper
uses Rodas4P). A failed fit (forward simulation of the estimate fails) counts with its
start's error, as in Rummel et al. 2025 §3.3. Results: `benchmarks/results/output_error.{json,md}` and
`output_error_lorenz.png`, `output_error_goodwin.png`.
"""

import argparse
import time

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from _common import RESULTS, command, machine_info, machine_line, markdown_table, utc_now, write_results

import wendyjax as wj
from wendyjax.studies import relative_coefficient_error

METHODS = {"WENDy-MLE": "mle", "OE": "output_error", "hybrid": "hybrid"}


def run_errors(bench, method, noise, subsample, n_runs, key):
    """Per-run coefficient and forward errors (failed runs: those of p₀), p₀ errors,
    failure flags and the time per fit of one study cell."""
    start = time.perf_counter()
    study = wj.studies.monte_carlo(bench, method, noise_levels=(noise,), subsamples=(subsample,), n_runs=n_runs,
                                   key=key, progress=False)
    wall = time.perf_counter() - start
    r, cell = study.runs[0], study.cells[0]
    failed = study.failed(0)
    p0_err = relative_coefficient_error(r.p0, cell.p_true)
    coef = np.where(failed, p0_err, relative_coefficient_error(r.params, cell.p_true))
    fwd = np.where(failed, study.p0_forward_error[0], r.forward_error)
    return {
        "coef": coef.tolist(), "forward": fwd.tolist(), "p0_coef": p0_err.tolist(), "failed": failed.tolist(),
        "status": r.status.tolist(), "fit_s_per_run": study.timings["fit_s"] / n_runs, "wall_s": wall,
    }


def summary(values):
    v = np.asarray(values, float)
    return {"mean": float(np.mean(v)), "median": float(np.median(v))}


def lorenz_sweep(ts, n_runs, seed):
    base = wj.models.lorenz()
    out = []
    for T in ts:
        bench = eqx.tree_at(lambda b: b.t, base, jnp.asarray(np.round(np.arange(0.0, T + 1e-9, 0.01), 10)))
        key = jax.random.fold_in(jax.random.key(seed), T)
        row = {"T": T, "M": len(bench.t) - 1}
        for name in ("WENDy-MLE", "OE"):
            res = run_errors(bench, METHODS[name], 0.10, 1, n_runs, key)
            row[name] = res
            print(f"  Lorenz T = {T:2d}  {name:9s}: mean coef err {np.mean(res['coef']):.3g}, median "
                  f"{np.median(res['coef']):.3g}, failed {int(np.sum(res['failed']))}/{n_runs}, "
                  f"{res['fit_s_per_run']:.2f} s/fit", flush=True)
        row["p0"] = row["WENDy-MLE"]["p0_coef"]
        assert np.allclose(row["p0"], row["OE"]["p0_coef"]), "the methods must share p0"
        out.append(row)
    return out


def goodwin(noises, n_runs, seed, subsample):
    out = []
    for factory in (wj.models.goodwin_2d, wj.models.goodwin_3d):
        bench = factory()
        for noise in noises:
            key = jax.random.fold_in(jax.random.key(seed), int(round(1000 * noise)))
            row = {"model": bench.model.name, "noise": noise, "M": (len(bench.t) - 1) // subsample}
            for name, method in METHODS.items():
                res = run_errors(bench, method, noise, subsample, n_runs, key)
                row[name] = res
                print(f"  {bench.model.name} noise {noise:.2f} {name:9s}: median coef err "
                      f"{np.median(res['coef']):.3g}, median fwd err {np.median(res['forward']):.3g}, "
                      f"failed {int(np.sum(res['failed']))}/{n_runs}, {res['fit_s_per_run']:.2f} s/fit", flush=True)
            row["p0"] = row["OE"]["p0_coef"]
            out.append(row)
    return out


def plot(lorenz, good, directory):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if lorenz:
        fig, ax = plt.subplots(figsize=(5, 3.5))
        ts = [r["T"] for r in lorenz]
        for name, color in (("WENDy-MLE", "goldenrod"), ("OE", "tab:blue")):
            ax.plot(ts, [np.mean(r[name]["coef"]) for r in lorenz], "o-", color=color, label=f"{name} (mean)")
            ax.plot(ts, [np.median(r[name]["coef"]) for r in lorenz], "o--", color=color, alpha=0.5,
                    label=f"{name} (median)")
        ax.plot(ts, [np.mean(r["p0"]) for r in lorenz], "k.-", label="p₀ (mean)")
        ax.set(xlabel="T", ylabel="relative coefficient error", yscale="log",
               title="Lorenz, 10 % noise, Δt = 0.01 (Rummel et al. 2025 Fig. 1)")
        ax.legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(directory / "output_error_lorenz.png", dpi=120)
        plt.close(fig)
    if good:
        models = sorted({r["model"] for r in good})
        fig, axes = plt.subplots(2, len(models), figsize=(5 * len(models), 6), squeeze=False)
        for j, model in enumerate(models):
            rows = [r for r in good if r["model"] == model]
            x = [100 * r["noise"] for r in rows]
            for name, color in (("OE", "tab:blue"), ("WENDy-MLE", "goldenrod"), ("hybrid", "maroon")):
                axes[0, j].plot(x, [np.median(r[name]["coef"]) for r in rows], "o-", color=color, label=name)
                axes[1, j].plot(x, [np.median(r[name]["forward"]) for r in rows], "o-", color=color, label=name)
            axes[0, j].plot(x, [np.median(r["p0"]) for r in rows], "k.-", label="p₀")
            axes[0, j].set(title=f"{model} (M = {rows[0]['M']})", ylabel="median coef. error", yscale="log")
            axes[1, j].set(xlabel="noise ratio (%)", ylabel="median forward error", yscale="log")
            axes[0, j].legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(directory / "output_error_goodwin.png", dpi=120)
        plt.close(fig)


def report(args, lorenz, good, elapsed, info):
    lines = ["# Output error vs WENDy-MLE vs hybrid (Rummel et al. 2025 §3.5, §3.6.4–3.6.5)", "",
             f"Generated by `{command()}` on {utc_now()}; {machine_line(info)}, devices {info['devices']}; "
             f"float64; total {elapsed / 60:.1f} min.", "",
             "Errors: relative coefficient error ‖p̂ − p*‖/‖p*‖ (Rummel et al. 2025, eq. 12) and forward-simulation "
             "error "
             "(Rummel et al. 2025 eq. 13); a failed run (forward simulation of its estimate fails, or a non-finite "
             "estimate/covariance) counts with its start's error (Rummel et al. 2025, §3.3). s/fit: compiled study "
             "time per "
             "run on this machine (compilation included).", ""]
    if lorenz:
        lines += [f"## Lorenz, growing T (Rummel et al. 2025, §3.5, Fig. 1): 10 % noise, Δt = 0.01, "
                  f"{args.runs} runs per T", "",
                  "![](output_error_lorenz.png)", ""]
        rows = []
        for r in lorenz:
            w, o = r["WENDy-MLE"], r["OE"]
            rows.append([r["T"], r["M"], np.mean(w["coef"]), np.median(w["coef"]), np.mean(o["coef"]),
                         np.median(o["coef"]), np.mean(r["p0"]), int(np.sum(w["failed"])), int(np.sum(o["failed"])),
                         w["fit_s_per_run"], o["fit_s_per_run"]])
        lines += markdown_table(["T", "M", "WENDy mean", "WENDy median", "OE mean", "OE median", "p₀ mean",
                                 "WENDy failed", "OE failed", "WENDy s/fit", "OE s/fit"], rows) + [""]
    if good:
        lines += [f"## Goodwin 2D / 3D (Rummel et al. 2025 Figs. 5–6): {args.goodwin_runs} runs per cell, "
                  f"M = {good[0]['M']}", "", "![](output_error_goodwin.png)", ""]
        rows = []
        for r in good:
            row = [r["model"], r["noise"]]
            for name in ("OE", "WENDy-MLE", "hybrid"):
                row += [np.median(r[name]["coef"]), np.median(r[name]["forward"]), int(np.sum(r[name]["failed"]))]
            rows.append(row + [np.median(r["p0"])])
        lines += markdown_table(["model", "noise", "OE coef", "OE fwd", "OE fail", "MLE coef", "MLE fwd",
                                 "MLE fail", "hybrid coef", "hybrid fwd", "hybrid fail", "p₀ coef"], rows) + [""]
    return lines


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
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
    write_results("output_error", {"args": vars(args), "machine": info, "lorenz": lorenz, "goodwin": good,
                                   "elapsed_s": elapsed})
    plot(lorenz, good, RESULTS)
    write_results("output_error", markdown=report(args, lorenz, good, elapsed, info))
    print(f"wrote {RESULTS / 'output_error.md'} ({elapsed / 60:.1f} min)")


if __name__ == "__main__":
    main()

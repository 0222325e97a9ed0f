"""One cell of Rummel et al. 2025's suite with its per-run estimates: how much of a parameter's variance a few
runs carry.

Run from the repository root::

    python benchmarks/paper000_cell_runs.py --model goodwin_3d --noise 0.1 --subsample 2
    python benchmarks/paper000_cell_runs.py --model goodwin_3d --noise 0.1 --subsample 2 --k-max 600

The cell runs as in `paper000_suite.py` (WENDy-MLE from p₀ uniform in the box, `--runs`
runs, eq. (9) covariance, at most `--k-max` test functions; `--cpu-devices` splits the
host into that many XLA devices, which changes no estimate). Per parameter the report
gives the mean, |bias| and variance over all runs, the variance without the runs whose
weak negative log-likelihood at the estimate exceeds `--flag` times the cell's median
(a fit that ended at another local minimum: the objective of a good fit varies by tens
of per cent across runs, see the objective quantiles), and the variance from the median
absolute deviation (1.4826 MAD, squared). The flagged runs are listed. Results go to
`benchmarks/results/<--out>.{md,json}`.
"""

import argparse

import jax
import numpy as np
from _common import command, machine_info, machine_line, write_results


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="goodwin_3d")
    ap.add_argument("--noise", type=float, default=0.1)
    ap.add_argument("--subsample", type=int, default=2, help="1, 2, 4: M = 1024, 512, 256")
    ap.add_argument("--runs", type=int, default=100)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--k-max", type=int, default=200)
    ap.add_argument("--flag", type=float, default=10.0, help="flag runs whose objective exceeds this × the median")
    ap.add_argument("--cpu-devices", type=int, default=1)
    ap.add_argument("--out", default=None, help="results file stem (default paper000_cell_runs_<model>)")
    args = ap.parse_args()
    jax.config.update("jax_num_cpu_devices", args.cpu_devices)  # before jax starts its backend
    import wendyjax as wj

    bench = getattr(wj.models, args.model)()
    study = wj.studies.monte_carlo(bench, wj.MLE(), noise_levels=[args.noise], subsamples=[args.subsample],
                                   n_runs=args.runs, key=jax.random.key(args.seed),
                                   test_functions=wj.TestFunctionConfig(k_max=args.k_max), progress=False)
    runs = study.runs[0]
    ok = ~study.failed(0)
    params, objective = runs.params[ok], runs.objective[ok]
    p_true = np.asarray(bench.p_true, float)
    flagged = objective > args.flag * np.median(objective)
    mad = 1.4826 * np.median(np.abs(params - np.median(params, axis=0)), axis=0)
    rows = [{"param": f"p{j + 1}", "true": p_true[j], "mean": params[:, j].mean(),
             "abs_bias": abs(params[:, j].mean() - p_true[j]), "var": params[:, j].var(),
             "var_unflagged": params[~flagged, j].var(), "var_mad": mad[j] ** 2}
            for j in range(len(p_true))]
    flagged_runs = [{"run": int(i), "objective": float(runs.objective[i]), "params": runs.params[i].tolist()}
                    for i in np.flatnonzero(ok)[flagged]]
    quantiles = np.quantile(objective, [0, 0.5, 0.9, 1]).tolist()
    cmd = command()
    out = args.out or f"paper000_cell_runs_{args.model}"
    info = machine_info()
    data = {"command": cmd, "machine": info, "args": vars(args), "median_k": float(np.median(runs.k)),
            "ok": int(ok.sum()), "objective_quantiles": quantiles, "rows": rows, "flagged": flagged_runs}
    write_results(out, data, default=float)
    lines = [f"# {args.model}, noise {100 * args.noise:g} %, M = {runs.m}: per-run estimates", "",
             f"Command: `{cmd}`; machine: {machine_line(info)}. {int(ok.sum())}/{args.runs} runs without failure, "
             f"seed {args.seed}, "
             f"k_max {args.k_max} (median K {np.median(runs.k):.0f}). Objective (weak NLL at the estimate) "
             f"min / median / 90 % / max: {' / '.join(f'{q:.4g}' for q in quantiles)}; "
             f"{int(flagged.sum())} run(s) above {args.flag:g}× the median are flagged.", "",
             "| param | true | mean | abs bias | variance | variance without flagged | MAD variance |",
             "|---|---|---|---|---|---|---|"]
    lines += [f"| {r['param']} | {r['true']:.4g} | {r['mean']:.4g} | {r['abs_bias']:.3g} | {r['var']:.3g} "
              f"| {r['var_unflagged']:.3g} | {r['var_mad']:.3g} |" for r in rows]
    lines += ["", "Flagged runs:", ""]
    lines += [f"- run {f['run']}: objective {f['objective']:.4g}, estimate "
              f"({', '.join(f'{v:.4g}' for v in f['params'])})" for f in flagged_runs] or ["- none"]
    write_results(out, markdown=lines)
    print("\n".join(lines))


if __name__ == "__main__":
    main()

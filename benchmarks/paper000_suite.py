"""Rummel et al. 2025 §3.6 test suite: WENDy-MLE Monte Carlo studies beside the paper's medians and Table D1.

    python benchmarks/paper000_suite.py [--models logistic lorenz] [--full]   # noise 1, 10, 20 % (--full: Tables D)
    python benchmarks/paper000_suite.py --models NAME --merge OUT1 OUT2 ... --out OUT   # medians over saved pieces

Each system of Table 2, M ∈ {1024, 512, 256}, p₀ uniform in the box; studies under `benchmarks/results/paper000/`.
"""

import csv
import json

import _common as cm
import jax
import numpy as np

import wendyjax as wj

# Rummel et al. 2025 §3.6.1–3.6.6: the noise range of each figure and the medians over all parameters
# quoted in the text (relative squared bias, variance, MSE in %; coverage as a fraction)
PAPER = {
    "logistic": dict(max_noise=0.50, bias2=0.0033, var=0.129, mse=0.259, cov=1.00, where="§3.6.1, Fig. 2, D1–D2"),
    "hindmarsh_rose": dict(max_noise=0.20, bias2=13.7, var=0.708, mse=17.5, cov=0.965, where="§3.6.2, Fig. 3"),
    "lorenz": dict(max_noise=0.30, bias2=0.00317, var=0.00565, mse=0.0182, cov=1.00, where="§3.6.3, Fig. 4"),
    "goodwin_2d": dict(max_noise=0.25, bias2=13.5, var=29.1, mse=86.1, cov=0.50, where="§3.6.4, Fig. 5, Table D9"),
    "goodwin_3d": dict(max_noise=0.25, bias2=0.0357, var=0.403, mse=0.891, cov=1.00, where="§3.6.5, Fig. 6"),
    "sir_tdi": dict(max_noise=0.20, bias2=0.00438, var=0.0581, mse=0.146, cov=1.00, where="§3.6.6, Fig. 7"),
}

# Table D1 (Logistic growth), transcribed: {noise: {param: (bias, variance, MSE, coverage)
# for M = 1024, 512, 256}}. p* = (1, -1), so relative and absolute values coincide. The
# table's MSE column equals bias² + 2·variance in every cell (e.g. 1 %, M = 1024, p1:
# 0.0021² + 2·3.1e-6 = 1.1e-5), where eq. (15)–(17) give MSE = bias² + variance.
TABLE_D1 = {
    0.01: {
        "p1": ((0.0021, 0.002, 0.0015), (3.1e-6, 6.7e-6, 1.2e-5), (1.1e-5, 1.7e-5, 2.5e-5), (1, 1, 0.99)),
        "p2": ((0.0016, 0.0016, 0.0012), (4.1e-6, 9.3e-6, 1.8e-5), (1.1e-5, 2.1e-5, 3.7e-5), (1, 1, 1)),
    },
    0.05: {
        "p1": ((0.0011, 0.0006, -0.0022), (8e-5, 1.6e-4, 2.8e-4), (1.6e-4, 3.2e-4, 5.6e-4), (1, 1, 1)),
        "p2": ((0.00055, 6.5e-5, -0.0024), (1e-4, 2.2e-4, 4.3e-4), (2.1e-4, 4.3e-4, 8.6e-4), (1, 1, 1)),
    },
    0.10: {
        "p1": ((-0.0018, -0.0037, -0.011), (3.3e-4, 6.1e-4, 1.1e-3), (6.6e-4, 1.2e-3, 2.3e-3), (1, 1, 1)),
        "p2": ((-0.0025, -0.0043, -0.011), (4.2e-4, 8.4e-4, 1.7e-3), (8.5e-4, 1.7e-3, 3.5e-3), (1, 1, 1)),
    },
    0.20: {
        "p1": ((-0.0034, -0.01, -0.037), (1.7e-3, 2.3e-3, 4.3e-3), (3.4e-3, 4.8e-3, 9.9e-3), (1, 1, 1)),
        "p2": ((-0.0057, -0.012, -0.038), (2e-3, 3.1e-3, 6.6e-3), (4e-3, 6.4e-3, 1.5e-2), (1, 1, 1)),
    },
    0.50: {
        "p1": ((-0.092, -0.19, -0.2), (0.024, 0.022, 0.016), (0.057, 0.081, 0.074), (1, 1, 1)),
        "p2": ((-0.095, -0.19, -0.21), (0.022, 0.023, 0.025), (0.052, 0.081, 0.092), (1, 1, 1)),
    },
}
_M_INDEX = {1024: 0, 512: 1, 256: 2}
PAPER_KEYS = ("bias2", "var", "mse", "cov")  # the medians in the text, beside ours
OURS_PAPER = "bias² ours | paper | var ours | paper | MSE ours | paper | cov ours | paper"

PROTOCOL_NOTES = (
    "Ours is the median over all parameters and all cells run (noise × M; the paper does not say over which), so "
    "with the quick grid it is not the paper's population. A run fails when its forward simulation fails or its "
    "estimate/covariance is not finite; the statistics are over the other runs (§3.3). Noise scale and Table 2's "
    "misprints: docs/pages/papers/rummel2025.md, 'Our choices, and where we deviate'."
)


def median_over(rows: list[dict], key: str) -> float:
    """Median of `key` over `rows`, ignoring NaN and missing entries (NaN when none)."""
    vals = np.array([r.get(key, np.nan) for r in rows], float)
    return float(np.nanmedian(vals)) if np.isfinite(vals).any() else float("nan")


def medians(rows) -> dict:
    """Rummel et al. 2025's medians over parameters and cells: relative squared bias, variance, MSE
    (in %) and the 2√C coverage."""
    keys = {"bias2": "rel_sq_bias", "var": "rel_variance", "mse": "rel_mse"}
    return {k: 100 * median_over(rows, key) for k, key in keys.items()} | {"cov": median_over(rows, "coverage_2se")}


def cell_rows(rows) -> list[list]:
    out = []
    for nr, m in dict.fromkeys((r["noise_ratio"], r["M"]) for r in rows):
        cell = [r for r in rows if r["noise_ratio"] == nr and r["M"] == m]
        first, ours = cell[0], medians(cell)
        out.append(
            [f"{100 * nr:g} %", m, f"{first['n_ok']}/{first['n_runs']}", first["failure_rate"]]
            + [first["median_coef_error"], first["median_forward_error"], *(ours[k] for k in PAPER_KEYS)]
            + [float(np.nanmin([r.get("coverage_2se", np.nan) for r in cell])), median_over(cell, "coverage_0.95")]
            + [first["median_steps"], first["n_at_bound"]]
        )
    return out


def logistic_vs_d1(rows, n) -> list[list]:
    out = []
    for r in rows:
        ref = TABLE_D1.get(round(r["noise_ratio"], 4), {}).get(r["param"])
        if ref is None or r["M"] not in _M_INDEX:
            continue
        i = _M_INDEX[r["M"]]
        ok = cm.matches({"mse": r["rel_mse"], "cov": r["coverage_2se"]}, {"mse": ref[2][i], "cov": ref[3][i]}, n)
        out.append(
            [f"{100 * r['noise_ratio']:g} %", r["M"], r["param"], float(np.sqrt(r["rel_sq_bias"])), abs(ref[0][i])]
            + [r["rel_variance"], ref[1][i], r["rel_mse"], ref[2][i], r["coverage_2se"], ref[3][i]]
            + ["yes" if ok else "**no**"]
        )
    return out


def merge(model: str, studies: list[str], out: str) -> None:
    """The medians over all cells of saved studies of `model` (`benchmarks/results/paper000/<study>_<model>.csv`),
    refusing pieces whose cells overlap or whose runs per cell, estimator or test functions differ."""
    if len(set(studies)) != len(studies):
        raise SystemExit("a study is named twice")
    rows, cells, configs = [], {}, {}
    for study in studies:
        path = cm.RESULTS / "paper000" / f"{study}_{model}.csv"
        if not path.exists():
            raise SystemExit(f"no saved study {path}")
        settings = json.loads(path.with_suffix(".settings.json").read_text())
        configs[study] = json.dumps([settings["estimator"], settings["test_functions"]], sort_keys=True)
        with path.open() as fh:
            for row in csv.DictReader(fh):
                cell = (float(row["noise_ratio"]), int(row["M"]))
                if cells.setdefault(cell, study) != study:
                    raise SystemExit(f"cell noise {cell[0]:g}, M {cell[1]} is in both {cells[cell]} and {study}")
                rows.append({k: (v if k == "param" else float(v)) for k, v in row.items()})
    if len({r["n_runs"] for r in rows}) != 1:
        raise SystemExit("the pieces ran different numbers of runs per cell")
    if len(set(configs.values())) != 1:
        raise SystemExit(f"the pieces differ in estimator or test-function settings: {configs}")
    n_runs, ref, ours, n_cells = int(rows[0]["n_runs"]), PAPER[model], medians(rows), len(cells)
    fail, match = float(np.mean([r["failure_rate"] for r in rows])), cm.matches(ours, ref, n_runs)
    lines = cm.paragraphs(
        f"# Rummel et al. 2025, {model}: medians over {n_cells} cells of {len(studies)} saved studies",
        f"Command: `{cm.command()}`. Studies: {', '.join(studies)}; {n_runs} runs per cell; M ∈ "
        f"{sorted({m for _, m in cells})}; {len({nr for nr, _ in cells})} noise levels.",
        cm.markdown_table(
            f"system | cells | {OURS_PAPER} | failure | match",
            [[model, n_cells, *(v for k in PAPER_KEYS for v in (ours[k], ref[k])), fail, "yes" if match else "**no**"]],
        ),
    )
    data = {"command": cm.command(), "studies": studies, "n_cells": n_cells, "n_runs": n_runs, "ours": ours}
    cm.write_results(out, data | {"paper": ref, "failure_rate": fail, "match": bool(match)}, lines, echo=True)


def main():
    ap = cm.parser(__doc__)
    ap.add_argument("--models", nargs="+", default=list(PAPER), choices=list(PAPER))
    ap.add_argument("--runs", type=int, default=100)
    ap.add_argument("--noise", type=float, nargs="+", help="noise ratios (default: 1, 10, 20 %%)")
    ap.add_argument("--full", action="store_true", help="the figure's whole noise grid")
    ap.add_argument("--subsamples", type=int, nargs="+", default=[1, 2, 4], help="1, 2, 4: M = 1024, 512, 256")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--out", default="paper000_suite")
    ap.add_argument("--start", default="p0", choices=wj.MLE.starts, help="MLE(start=...); p0: the paper's protocol")
    ap.add_argument("--k-max", type=int, default=wj.TestFunctionConfig.k_max, help="most test functions K")
    ap.add_argument("--merge", nargs="+", metavar="STUDY", help="no fits: the medians over these saved studies (--out)")
    args = ap.parse_args()
    if args.merge and len(args.models) != 1:
        ap.error("--merge needs one system in --models")
    if args.merge:
        return merge(args.models[0], args.merge, args.out)

    info, cmd = cm.machine_info(), cm.command()
    summary, sections, results = [], [], {}
    for name in args.models:
        top = round(PAPER[name]["max_noise"] * 100)
        full = [i / 100 for i in [*range(1, 21), *range(25, top + 1, 5)]]
        grid = args.noise or (full if args.full else [0.01, 0.10, 0.20])
        study, wall = cm.timed_study(
            wj.studies.monte_carlo,
            **dict(benchmark=getattr(wj.models, name)(), estimator=wj.MLE(start=args.start), noise_levels=grid),
            **dict(subsamples=args.subsamples, n_runs=args.runs, key=jax.random.key(args.seed)),
            **dict(batch_size=args.batch_size, test_functions=wj.TestFunctionConfig(k_max=args.k_max)),
        )
        cm.save_study(study, cm.RESULTS / "paper000", f"{args.out}_{name}")
        rows, ref, s = study.rows(), PAPER[name], study.timings
        ours = medians(rows) | {"cov95": median_over(rows, "coverage_0.95")}
        fail = float(np.mean([r["failure_rate"] for r in rows]))
        stages = {k: s[k] for k in ("simulate_s", "build_s", "fit_s", "diagnostics_s")}
        results[name] = dict(noise=grid, subsamples=args.subsamples, ours=ours, paper=ref, failure_rate=fail)
        results[name] |= stages | {"wall_s": wall}
        levels = ", ".join(f"{100 * g:g}" for g in grid) if len(grid) <= 5 else f"{len(grid)} levels"
        summary.append(
            [name, levels, *(v for k in PAPER_KEYS for v in (ours[k], ref[k])), ours["cov95"], fail]
            + ["yes" if cm.matches(ours, ref, args.runs) else "**no**", f"{wall:.0f}"]
        )
        sections += [
            f"### {name} ({ref['where']})",
            f"Wall time {wall:.0f} s (simulate {s['simulate_s']:.0f} s, build {s['build_s']:.0f} s, "
            f"fit {s['fit_s']:.0f} s, diagnostics {s['diagnostics_s']:.0f} s, compilation included).",
            cm.markdown_table(
                "noise | M | ok | failure | median coef err | median fwd err | bias² % | var % | MSE % "
                "| cov 2se (median) | cov 2se (min) | cov 95 % | median steps | runs on the box",
                cell_rows(rows),
            ),
        ]
        if d1 := logistic_vs_d1(rows, args.runs) if name == "logistic" else []:
            sections += [
                "#### Logistic cell by cell beside Table D1",
                "|bias| relative; 'match' = our MSE ≤ paper's × (1 + 3√(2/N)) and our coverage ≥ "
                "paper's − 3 binomial sd.",
                cm.markdown_table(["noise", "M", "param", "|bias| ours", *OURS_PAPER.split(" | ")[1:], "match"], d1),
            ]
        print(f"{name}: {wall:.0f} s, MSE median {ours['mse']:.3g} % (paper {ref['mse']} %), cov {ours['cov']:.3f}")
        lines = cm.paragraphs(  # rewritten after every system: an interrupted run keeps what it finished
            "# Rummel et al. 2025 test suite (§3.6): WENDy-MLE beside the paper",
            f"Command: `{cmd}`. Machine: {cm.machine_line(info)}, devices {info.get('devices')}. "
            f"MLE start: {args.start}. {args.runs} runs per cell, seed {args.seed}, "
            f"M ∈ {{{', '.join(str(1024 // s) for s in args.subsamples)}}}, k_max {args.k_max}. "
            f"Total wall time {sum(r['wall_s'] for r in results.values()):.0f} s.",
            "## Medians over parameters (and cells): ours beside Rummel et al. 2025's text",
            "Relative squared bias, variance and MSE in %; coverage of |p̂ − p*| < 2√C (eq. 18) and of the "
            "nominal 95 % interval. 'match' = our MSE ≤ paper's × (1 + 3√(2/N)) and our 2√C coverage ≥ paper's "
            "− 3 binomial sd; the populations differ when the noise grid differs (see notes).",
            cm.markdown_table(f"system | noise % | {OURS_PAPER} | cov 95 % ours | failure | match | time s", summary),
            "## Protocol notes",
            PROTOCOL_NOTES,
            "## Per system",
            *sections,
        )
        data = {"command": cmd, "machine": info, "runs": args.runs, "seed": args.seed, "start": args.start}
        cm.write_results(args.out, data | {"k_max": args.k_max, "results": results}, lines, default=float)


if __name__ == "__main__":
    main()

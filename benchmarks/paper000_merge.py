"""Medians over all cells of several saved paper-000 studies of one system, beside Rummel et al. 2025's.

A system's whole grid is often run in pieces (M = 256 on one day, M = 512/1024 on
another, or on different machines); Rummel et al. 2025's text quotes one median over all of them. From
the repository root::

    python benchmarks/paper000_merge.py goodwin_2d paper000_suite_g2d_full_m256 \\
        paper000_suite_g2d_full_m512_1024 --out paper000_suite_g2d_full

reads `benchmarks/results/paper000/<study>_<model>.csv` (written by `paper000_suite.py`),
refuses pieces whose cells (noise, M) overlap, whose runs per cell differ, or whose
estimator (its start) or test-function settings (e.g. `k_max`) differ, and writes
`benchmarks/results/<out>.md` and `.json`: the medians over all parameters and cells of
relative squared bias, variance, MSE and 2√C coverage, with `paper000_suite.py`'s rule
for a match.
"""

import argparse
import csv
import json

import numpy as np
from _common import RESULTS, command, markdown_table, matches, median_over, write_results
from paper000_suite import PAPER


def read_rows(model: str, studies: list[str]) -> list[dict]:
    if len(set(studies)) != len(studies):
        raise SystemExit("a study is named twice")
    rows, cells, configs = [], {}, {}
    for study in studies:
        path = RESULTS / "paper000" / f"{study}_{model}.csv"
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
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model", choices=list(PAPER))
    ap.add_argument("studies", nargs="+", help="the --out names of the paper000_suite.py runs")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()

    rows = read_rows(args.model, args.studies)
    n_runs = int(rows[0]["n_runs"])
    ref = PAPER[args.model]
    ours = {k: 100 * median_over(rows, key) for k, key in
            (("bias2", "rel_sq_bias"), ("var", "rel_variance"), ("mse", "rel_mse"))}
    ours["cov"] = median_over(rows, "coverage_2se")
    n_cells = len({(r["noise_ratio"], r["M"]) for r in rows})
    fail = float(np.mean([r["failure_rate"] for r in rows]))
    match = matches(ours, ref, n_runs)
    cmd = command()
    lines = [f"# Rummel et al. 2025, {args.model}: medians over {n_cells} cells of {len(args.studies)} saved "
             f"studies", "",
             f"Command: `{cmd}`. Studies: {', '.join(args.studies)}; {n_runs} runs per cell; M ∈ "
             f"{sorted({int(r['M']) for r in rows})}; {len({r['noise_ratio'] for r in rows})} noise levels.", "",
             *markdown_table(["system", "cells", "bias² ours", "paper", "var ours", "paper", "MSE ours", "paper",
                              "cov ours", "paper", "failure", "match"],
                             [[args.model, n_cells, ours["bias2"], ref["bias2"], ours["var"], ref["var"], ours["mse"],
                               ref["mse"], ours["cov"], ref["cov"], fail, "yes" if match else "**no**"]]), ""]
    write_results(args.out, {"command": cmd, "studies": args.studies, "n_cells": n_cells, "n_runs": n_runs,
                             "ours": ours, "paper": ref, "failure_rate": fail, "match": bool(match)}, lines)
    print("\n".join(lines))


if __name__ == "__main__":
    main()

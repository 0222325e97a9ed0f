"""Other interval rules scored on the saved studies of the interval calibration, without
refitting: the hull (union) of the bias-corrected normal bootstrap's and the profile's
interval, beside the methods the studies measured.

The normal bootstrap removes the weak form's bias but assumes a normal spread of the
refits; the profile follows a skewed or bounded likelihood but keeps the bias. Their hull
covers wherever either one does, at the width of the wider. Both intervals are computed
by `BootstrapOrProfile` already, so the hull costs nothing more.

Run from the repository root, after `interval_calibration.py --save-studies DIR`::

    python benchmarks/interval_calibration.py --systems lorenz --noise 0.1 --m 256 --runs 30 \
        --boot 50 --save-studies DIR
    python benchmarks/interval_rules.py --studies DIR

Writes `benchmarks/results/interval_rules.{json,md}`; the target is the calibration's
(every parameter's coverage within two binomial errors of 95 %, median width ≤ 1.25 ×
the ideal one).
"""

import argparse
import json
from pathlib import Path

import numpy as np
from _common import RESULTS, write_results
from interval_calibration import SYSTEMS, meets

import wendyjax as wj

RULES = ("bootstrap_normal", "profile", "bootstrap_or_profile", "hull")


def hull(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The union of two methods' intervals (runs, 2, j: lower and upper ends); where one of
    them is missing (NaN), the other."""
    return np.stack([np.fmin(a[:, 0], b[:, 0]), np.fmax(a[:, 1], b[:, 1])], axis=1)


def score(path: Path) -> dict:
    """One saved study (one cell): coverage and width over the ideal per rule and parameter."""
    study = wj.studies.Study.load(path)
    (cell,), (runs,) = study.cells, study.runs
    runs.intervals["hull"] = hull(runs.intervals["bootstrap_normal"], runs.intervals["profile"])
    rows = study.rows()
    c = {"study": path.name, "system": study.model_name, "noise": cell.noise_ratio, "M": int(runs.m),
         "runs": len(runs.params), "n_ok": rows[0]["n_ok"], "binomial_se": rows[0]["binomial_se"],
         "params": list(study.param_names)}
    c["coverage"] = {k: [row[f"coverage_{k}"] for row in rows] for k in RULES}
    c["width_ratio"] = {k: [row[f"width_ratio_{k}"] for row in rows] for k in RULES}
    c["meets"] = {k: meets(c, k) for k in RULES}
    c["calibration_cell"] = _same_as_calibration(c)
    return c


def _same_as_calibration(c: dict) -> str:
    """Whether the study is the results file's cell of the same setting: its runs, and the
    coverage of the methods both have."""
    path = RESULTS / "interval_calibration.json"
    cal = json.loads(path.read_text())["cells"].get(f"{c['system']}/{c['noise']:g}/{c['M']}") if path.exists() else None
    if cal is None or cal["runs"] != c["runs"]:
        return "none with these runs"
    diff = max(abs(a - b) for k in RULES if k in cal["coverage"] for a, b in zip(c["coverage"][k], cal["coverage"][k]))
    return "same coverage" if diff == 0 else f"coverage differs by up to {diff:.3f}"


def markdown(cells: list[dict], folder: str) -> list[str]:
    lines = ["# Interval rules scored on saved calibration studies", "",
             f"`python benchmarks/interval_rules.py --studies {folder}`: the studies of "
             "`interval_calibration.py --save-studies` (WENDy-MLE, the cells' commands in "
             "`results/interval_calibration.json`). hull: the union of the normal bootstrap's and the profile's "
             "interval. Lowest coverage over the parameters (largest median width over the ideal); **bold**: meets "
             "the target (every parameter within two binomial errors of 0.95, width ≤ 1.25 × ideal).", "",
             "| system | noise | M | runs ok | " + " | ".join(RULES) + " | the calibration's cell |",
             "|---|---|---|---|" + "---|" * len(RULES) + "---|"]
    for c in cells:
        vals = []
        for k in RULES:
            v = f"{min(c['coverage'][k]):.2f} ({max(c['width_ratio'][k]):.2f})"
            vals.append(f"**{v}**" if c["meets"][k] else v)
        lines.append(f"| {c['system']} | {c['noise']:g} | {c['M']} | {c['n_ok']}/{c['runs']} | " + " | ".join(vals)
                     + f" | {c['calibration_cell']} |")
    pooled = {k: (sum(np.sum(np.asarray(c["coverage"][k]) * c["n_ok"]) for c in cells),
                  sum(c["n_ok"] * len(c["params"]) for c in cells)) for k in RULES}
    lines += ["", "Cells meeting the target: " + ", ".join(f"{k} {sum(c['meets'][k] for c in cells)}/{len(cells)}"
                                                           for k in RULES) + ".",
              "", "Coverage pooled over every parameter of these cells (the parameters of a run share its data, so "
              "this is no binomial count): " + ", ".join(f"{k} {hit / total:.3f} ({hit:.0f}/{total})"
                                                        for k, (hit, total) in pooled.items()) + "."]
    return lines


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--studies", type=Path, required=True,
                        help="the folder `interval_calibration.py --save-studies` wrote (WENDy-MLE cells)")
    args = parser.parse_args()
    paths = sorted(args.studies.glob("*_mle.json"))
    if not paths:
        raise SystemExit(f"--studies: no WENDy-MLE studies (*_mle.json) in {args.studies}; write them with "
                         "`python benchmarks/interval_calibration.py ... --save-studies DIR`.")
    cells = sorted((score(p) for p in paths), key=lambda c: (SYSTEMS.index(c["system"]), c["noise"], c["M"]))
    data = {"rules": RULES, "cells": cells}
    lines = markdown(cells, str(args.studies))
    write_results("interval_rules", data, lines)
    print("\n".join(lines))


if __name__ == "__main__":
    main()

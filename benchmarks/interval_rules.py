"""Other interval rules scored on the saved studies of the interval calibration, without
refitting, beside the methods the studies measured:

- `hull`: the union of the bias-corrected normal bootstrap's and the profile's interval.
  The normal bootstrap removes the weak form's bias but assumes a normal spread of the
  refits; the profile follows a skewed or bounded likelihood but keeps the bias. Their
  hull covers wherever either one does, at the width of the wider. `BootstrapOrProfile`
  computes both already, so it costs nothing more.
- `bootstrap_normal_t`, `bootstrap_or_profile_t`: the normal bootstrap's interval made
  exact for B refits under normality, as `Bootstrap.normal` computes it now: z replaced by
  t_{B−1} √(1 + 1/B), since its centre p̂ − b carries the Monte Carlo error of the bias
  estimate b and its standard error comes from B draws (the z form covers 0.936 at B = 30,
  0.942 at B = 50, 0.948 at B = 200). Studies saved before (their settings have no
  `normal_interval`, or "z") are rebuilt from their ends: centre and half-width, widened
  by the ratio of the two quantiles, cut to the box; an interval the box had cut is
  rebuilt from the cut one, slightly too narrow, and such intervals are counted.

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
import re
from pathlib import Path

import numpy as np
import scipy.stats
from _common import RESULTS, write_results
from interval_calibration import SYSTEMS, meets, pooled_coverage

import wendyjax as wj

RULES = ("bootstrap_normal", "profile", "bootstrap_or_profile", "hull", "bootstrap_normal_t", "bootstrap_or_profile_t")


def hull(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The union of two methods' intervals (runs, 2, j: lower and upper ends); where one of
    them is missing (NaN), the other."""
    return np.stack([np.fmin(a[:, 0], b[:, 0]), np.fmax(a[:, 1], b[:, 1])], axis=1)


def t_factor(n_boot: int, level: float) -> float:
    """t_{B−1} √(1 + 1/B) over z: how much wider the normal bootstrap's exact interval is."""
    q = 0.5 + level / 2
    return float(scipy.stats.t.ppf(q, n_boot - 1) * np.sqrt(1 + 1 / n_boot) / scipy.stats.norm.ppf(q))


def widened(ends: np.ndarray, factor: float, lower: np.ndarray, upper: np.ndarray) -> tuple[np.ndarray, int]:
    """Intervals (runs, 2, j) widened about their centres by `factor`, cut to the box, and
    how many of them the box had cut already."""
    lo, hi = ends[:, 0], ends[:, 1]
    centre, half = (lo + hi) / 2, (hi - lo) / 2
    cut = int(np.sum((lo <= lower) | (hi >= upper)))
    return np.stack([np.clip(centre - factor * half, lower, upper), np.clip(centre + factor * half, lower, upper)],
                    axis=1), cut


def study_boot(study: wj.studies.Study) -> int:
    """B of the study's normal bootstrap, from its recorded interval methods."""
    for text in study.settings["intervals"]:
        if text.startswith("BootstrapIntervals(") and "kind='normal'" in text:
            return int(re.search(r"n_boot=(\d+)", text).group(1))
    raise ValueError("the study has no normal bootstrap intervals (`BootstrapIntervals(B, kind='normal')`).")


def score(path: Path) -> dict:
    """One saved study (one cell): coverage and width over the ideal per rule and parameter."""
    study = wj.studies.Study.load(path)
    (cell,), (runs,) = study.cells, study.runs
    ends = runs.intervals
    ends["hull"] = hull(ends["bootstrap_normal"], ends["profile"])
    n_boot, level = study_boot(study), study.settings["level"]
    lower, upper = (np.asarray(b, float) for b in study.settings.get("bounds", (-np.inf, np.inf)))
    # studies saved before `Bootstrap.normal` took the t form hold the z form: rebuild those
    form = study.settings.get("normal_interval", "z")
    factor = t_factor(n_boot, level) if form == "z" else 1.0
    ends["bootstrap_normal_t"], cut = widened(ends["bootstrap_normal"], factor, lower, upper)
    # where BootstrapOrProfile took the bootstrap's interval, the widened one; the profile's elsewhere
    # (also where the bootstrap's is NaN: an interval equal to it there is NaN too)
    both, boot = ends["bootstrap_or_profile"], ends["bootstrap_normal"]
    same = (both == boot) | (np.isnan(both) & np.isnan(boot))
    took = np.all(same, axis=1, keepdims=True)
    ends["bootstrap_or_profile_t"] = np.where(took, ends["bootstrap_normal_t"], ends["bootstrap_or_profile"])
    rows = study.rows()
    c = {"study": path.name, "system": study.model_name, "noise": cell.noise_ratio, "M": int(runs.m),
         "runs": len(runs.params), "n_ok": rows[0]["n_ok"], "binomial_se": rows[0]["binomial_se"],
         "params": list(study.param_names), "boot": n_boot, "saved_normal_interval": form, "t_factor": factor,
         "bootstrap_cut_by_box": cut}
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
             "interval; _t: the normal bootstrap's interval with z replaced by t_{B−1} √(1 + 1/B), exact under "
             "normality for B refits (× the factor in the B column; cut: bootstrap intervals the box had cut, "
             "rebuilt slightly too narrow). Lowest coverage over the parameters (largest median width over the "
             "ideal); **bold**: meets the target (every parameter within two binomial errors of 0.95, width ≤ "
             "1.25 × ideal). The last column: whether the study reproduces the calibration file's cell.", "",
             "| system | noise | M | runs ok | B (factor) | cut | " + " | ".join(RULES) + " | the calibration's cell |",
             "|---|---|---|---|---|---|" + "---|" * len(RULES) + "---|"]
    for c in cells:
        vals = []
        for k in RULES:
            v = f"{min(c['coverage'][k]):.2f} ({max(c['width_ratio'][k]):.2f})"
            vals.append(f"**{v}**" if c["meets"][k] else v)
        lines.append(f"| {c['system']} | {c['noise']:g} | {c['M']} | {c['n_ok']}/{c['runs']} | {c['boot']} "
                     f"({c['t_factor']:.3f}) | {c['bootstrap_cut_by_box']} | " + " | ".join(vals)
                     + f" | {c['calibration_cell']} |")
    pooled = pooled_coverage(cells, RULES)
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

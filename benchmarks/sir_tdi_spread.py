"""SIR-TDI at M = 1024: is the 1.4x width of v in the 20-run calibration cells real, and does
the normal bootstrap cover there? Three studies of the command line, then their intervals
scored with all runs and without those whose solver did not stop successfully.

Run from the repository root::

    python benchmarks/sir_tdi_spread.py                  # all three studies (about 50 min on 2 cores)
    python benchmarks/sir_tdi_spread.py --studies DIR    # reuse the study JSONs in DIR, run the others
    python benchmarks/sir_tdi_spread.py --quick          # 3 runs per study, B = 4: checks that it runs

The studies (`python -m wendyjax study ...`, commands below) are written to `--studies`
(default: a temporary folder; a few hundred KB, keep them out of git); the scores go to
`benchmarks/results/sir_tdi_spread.{json,md}`.
"""

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import scipy.stats
from _common import machine_info, machine_line, markdown_table, write_results
from interval_rules import hull, study_boot, t_factor, widened

import wendyjax as wj

STUDIES = {  # name: the arguments of `python -m wendyjax study`
    "hessian_100": "sir_tdi --noise 0.05,0.1 --subsample 1 --runs 100 --seed 1 --covariance hessian "
                   "--intervals hessian",
    "bootstrap_40_noise10": "sir_tdi --noise 0.1 --subsample 1 --runs 40 --seed 1 --covariance hessian "
                            "--intervals hessian,bootstrap_normal --boot 30",
    "bootstrap_40_noise05": "sir_tdi --noise 0.05 --subsample 1 --runs 40 --seed 1 --covariance hessian "
                            "--intervals hessian,bootstrap_normal --boot 30",
}


def score(study: wj.studies.Study) -> list[dict]:
    """Per cell, method and parameter: coverage and median width over the ideal one, with all
    runs that did not fail and with only those whose solver stopped successfully; where a
    study has the normal bootstrap, also its interval exact for B refits (`interval_rules.py`)
    and its hull (union) with the Hessian's."""
    out = []
    for i, (cell, r) in enumerate(zip(study.cells, study.runs)):
        if {"bootstrap_normal", "hessian"} <= set(r.intervals):
            lower, upper = (np.asarray(b, float) for b in study.settings["bounds"])
            factor = t_factor(study_boot(study), study.settings["level"])
            r.intervals["bootstrap_normal_t"] = widened(r.intervals["bootstrap_normal"], factor, lower, upper)[0]
            r.intervals["hull"] = hull(r.intervals["bootstrap_normal"], r.intervals["hessian"])
        kept = {"all": ~study.failed(i)}
        kept["successful"] = kept["all"] & (r.status == "successful")
        for which, ok in kept.items():
            p = r.params[ok]
            sd = p.std(0, ddof=1)
            for method, ends in r.intervals.items():
                lo, hi = ends[ok, 0], ends[ok, 1]
                cover = np.mean((lo <= cell.p_true) & (cell.p_true <= hi), axis=0)
                ratio = np.median(hi - lo, axis=0) / (2 * scipy.stats.norm.ppf(0.975) * sd)
                for j, name in enumerate(study.param_names):
                    out.append({"noise": cell.noise_ratio, "runs": which, "n": int(ok.sum()), "method": method,
                                "param": name, "coverage": float(cover[j]), "width_ratio": float(ratio[j]),
                                "bias_over_sd": float((p[:, j].mean() - cell.p_true[j]) / sd[j]), "sd": float(sd[j])})
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--studies", type=Path,
                        help="folder of the study JSONs: those there are read, the others run and written there")
    parser.add_argument("--quick", action="store_true", help="3 runs per study and B = 4 (measures nothing)")
    args = parser.parse_args()
    folder = args.studies or Path(tempfile.mkdtemp())
    quick = ["--runs", "3", "--boot", "4"] if args.quick else []  # the last of a repeated option counts
    for name, argv in STUDIES.items():
        if not (folder / f"{name}.json").exists():
            subprocess.run([sys.executable, "-m", "wendyjax", "study", *argv.split(), *quick, "--json",
                            str(folder / f"{name}.json")], check=True)
    rows = {name: score(wj.studies.Study.load(folder / f"{name}.json")) for name in STUDIES}
    data = {"machine": machine_info(), "commands": {k: f"python -m wendyjax study {v} --json {k}.json"
                                                   for k, v in STUDIES.items()}, "rows": rows}
    lines = ["# SIR-TDI at M = 1024: the spread of the estimates and the intervals' width", "",
             f"`python benchmarks/sir_tdi_spread.py`; {machine_line(data['machine'])}. Coverage of the 95 % "
             "intervals and their median width over the ideal one (2 × 1.96 × the estimates' standard deviation), "
             "with every run that did not fail (`all`) and with only the runs whose solver stopped successfully "
             "(`successful`: a run that stops at its step limit does not fail, Rummel et al. 2025, eq. 14). "
             "bootstrap_normal_t: the normal bootstrap's interval with z replaced by t_{B−1} √(1 + 1/B) "
             "(`interval_rules.py`); hull: the union of the normal bootstrap's and the Hessian's interval.", ""]
    for name, command in data["commands"].items():
        lines += [f"`{command}`", ""]
        table = [[r["noise"], r["runs"], r["n"], r["method"], r["param"], f"{r['coverage']:.2f}",
                  f"{r['width_ratio']:.2f}", f"{r['bias_over_sd']:+.2f}", r["sd"]] for r in rows[name]]
        lines += markdown_table(["noise", "runs", "n", "method", "param", "coverage", "width / ideal", "bias/sd",
                                 "sd"], table) + [""]
    write_results("sir_tdi_spread", data, lines)
    print("\n".join(lines))


if __name__ == "__main__":
    main()

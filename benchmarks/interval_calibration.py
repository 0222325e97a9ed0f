"""Calibration of the 95 % intervals of WENDy-MLE and the hybrid: coverage and width per method and cell.

    python benchmarks/interval_calibration.py --systems logistic --m 256 --runs 40 --boot 50 [--estimator hybrid]

Every interval method in one `wj.studies.monte_carlo` per system, noise level and M; cells accumulate in
`interval_calibration.json` (a rerun replaces its cell) and the report is rebuilt from all of them.
"""

import collections
import json
import math
import time

import numpy as np
import scipy.stats
from _common import RESULTS, commit, machine_info, machine_line, markdown_table, paragraphs, parser, write_results

import wendyjax as wj

S = wj.studies
SYSTEMS = ("logistic", "lotka_volterra", "lorenz", "fitzhugh_nagumo", "goodwin_3d", "sir_tdi")
METHODS = ("sandwich", "hessian", "gauss_newton", "bootstrap_basic", "bootstrap_normal", "profile")
METHODS += ("bootstrap_or_profile",)
# the estimators a cell may use, with their Wald intervals (a cell without an "estimator" field is MLE's)
ESTIMATORS = {"mle": (wj.MLE, ("sandwich", "hessian")), "hybrid": (wj.Hybrid, ("gauss_newton",))}
WALDS = {w for _, walds in ESTIMATORS.values() for w in walds}
STEM = "interval_calibration"
# the normal bootstrap interval's form (`Bootstrap.normal`); cells without the field used z for t_{B-1} √(1 + 1/B)
NORMAL_INTERVAL = "t"
TIMED = ("bootstrap_basic", "profile", "bootstrap_or_profile")
est = lambda c: c.get("estimator", "mle")  # noqa: E731  (cells measured before the hybrid are MLE's)


def cell(system, noise, m, runs, boot, points, seed, estimator="mle") -> dict:
    bench = getattr(wj.models, system)()
    clock = time.perf_counter()
    lo, hi = bench.model.bounds if bench.model.bounds is not None else (None, None)
    box = lo is not None and np.all(np.isfinite(lo)) and np.all(np.isfinite(hi))
    make, walds = ESTIMATORS[estimator]
    normal, profile = S.BootstrapIntervals(boot, kind="normal"), S.ProfileIntervals(n_points=points)
    intervals = (*(S.Wald(w) for w in walds), S.BootstrapIntervals(boot), normal, profile)
    options = dict(covariance=walds[-1], progress=False, p0="box" if box else np.asarray(bench.p_true))
    options["intervals"] = (*intervals, S.BootstrapOrProfile(normal, profile))
    options |= dict(noise_levels=[noise], subsamples=[(len(bench.t) - 1) // m], n_runs=runs, key=seed)
    study = S.monte_carlo(bench, make(), **options)
    seconds = time.perf_counter() - clock
    r, ok, rows = study.runs[0], ~study.failed(0), study.rows()
    p, truth = r.params[ok], np.asarray(bench.p_true, float)
    names = [k for k in METHODS if k in walds or k not in WALDS]
    n_ok = int(ok.sum())
    # runs whose profile interval reaches the box (or is open without one): the data do not determine the parameter
    prof = r.intervals["profile"][ok]
    edge_lo, edge_hi = (-np.inf, np.inf) if lo is None else (np.asarray(lo, float), np.asarray(hi, float))
    out = {"system": system, "estimator": estimator, "noise": noise, "M": int(r.m), "runs": runs, "n_ok": n_ok}
    out |= {"boot": boot, "profile_points": points, "seed": seed, "params": list(study.param_names)}
    out["p0"] = "uniform in the box" if box else "the true parameters (the model has no box)"
    out["binomial_se"] = math.sqrt(0.95 * 0.05 / max(n_ok, 1))
    out |= {f: {k: [row[f"{f}_{k}"] for row in rows] for k in names} for f in ("coverage", "width_ratio", "missing")}
    out["ideal_width"] = [row["ideal_width"] for row in rows]
    out["bias_over_sd"] = ((p.mean(0) - truth) / p.std(0, ddof=1)).tolist()
    out |= {"skewness": scipy.stats.skew(p, axis=0).tolist(), "at_bound": [row["at_bound"] for row in rows]}
    out["open_profile"] = np.sum((prof[:, 0] <= edge_lo) | (prof[:, 1] >= edge_hi), axis=0).tolist()
    out["seconds_per_interval"] = {k: study.settings["interval_s"][k] for k in TIMED}
    out |= {"interval_errors": study.settings.get("interval_errors", {}), "normal_interval": NORMAL_INTERVAL}
    return out | {"study_fit_s": study.timings["fit_s"], "seconds": seconds, "commit": commit()}


def exact_pass(c: dict) -> float:
    """The chance that intervals covering exactly 95 % meet the coverage criterion in cell `c`
    (every parameter within two binomial errors; the parameters taken as independent)."""
    hits = np.arange(c["n_ok"] + 1)
    inside = np.abs(hits / c["n_ok"] - 0.95) <= 2 * c["binomial_se"]
    return float(scipy.stats.binom.pmf(hits[inside], c["n_ok"], 0.95).sum() ** len(c["params"]))


def meets(c: dict, method: str) -> bool:
    if method not in c["coverage"]:  # a cell measured before the method existed
        return False
    cov, ratio = np.asarray(c["coverage"][method], float), np.asarray(c["width_ratio"][method], float)
    return bool(np.all(np.abs(cov - 0.95) <= 2 * c["binomial_se"]) and np.all(ratio <= 1.25))


def consistent(c: dict, method: str, alpha: float = 0.05) -> bool:
    """No parameter's coverage rejects 95 % (exact two-sided binomial test) and no median width rejects a ratio
    of at most 1.25 to the ideal one (the sd of n normal estimates is σ √(χ²_{n−1}/(n−1))), each test
    Šidák-adjusted over the cell's parameters: exact intervals fail this in about 2·alpha of the cells."""
    if method not in c["coverage"]:
        return False
    n, cov, ratio = c["n_ok"], np.asarray(c["coverage"][method], float), np.asarray(c["width_ratio"][method], float)
    if not (np.all(np.isfinite(cov)) and np.all(np.isfinite(ratio))):
        return False
    p_cov = min(scipy.stats.binomtest(round(x * n), n, 0.95).pvalue for x in cov)
    p_width = scipy.stats.chi2.cdf((n - 1) * (1.25 / ratio.max()) ** 2, n - 1)
    sidak = 1 - (1 - alpha) ** (1 / len(c["params"]))
    return bool(p_cov > sidak and p_width > sidak)


def _counts(cells, test) -> str:
    counts = {k: (sum(test(c, k) for c in cells), sum(k in c["coverage"] for c in cells)) for k in METHODS}
    return ", ".join(f"{k} {hit}/{n}" for k, (hit, n) in counts.items() if n)


def _pooled(cells) -> str:
    """Per method: the coverage pooled over every parameter of the cells that have it (covering / intervals)."""
    has = {k: [c for c in cells if k in c["coverage"]] for k in METHODS}
    hits = {k: sum(np.sum(np.asarray(c["coverage"][k]) * c["n_ok"]) for c in has[k]) for k in METHODS}
    pooled = {k: (hits[k], sum(c["n_ok"] * len(c["params"]) for c in has[k])) for k in METHODS}
    return ", ".join(f"{k} {hit / total:.3f} ({hit:.0f}/{total})" for k, (hit, total) in pooled.items() if total)


def _miss(c: dict, k: str) -> str:
    why = []
    for j, name in enumerate(c["params"]):
        cov, ratio = c["coverage"][k][j], c["width_ratio"][k][j]
        if abs(cov - 0.95) > 2 * c["binomial_se"]:
            why.append(
                f"{name} covers {cov:.2f} (bias/sd {c['bias_over_sd'][j]:+.2f}, skewness "
                f"{c['skewness'][j]:+.1f}, profile open to the box in {c['open_profile'][j]}/{c['n_ok']} runs, "
                f"width {ratio:.2f}× ideal)"
            )
        elif ratio > 1.25:
            why.append(f"{name} {ratio:.2f}× the ideal width")
    failed = c["runs"] - c["n_ok"]
    return f"- {_where(c)}, {k}: {'; '.join(why)}" + (f" ({failed} failed runs left out)" if failed else "") + "."


def _where(c: dict) -> str:
    return f"{c['system']}, {c.get('estimator', 'mle')}, {c['noise']:g}, M = {c['M']}"


def _table(cells) -> list[str]:
    """A row per cell and parameter: each method's coverage (width ratio), bold where it meets the target."""
    rows = []
    for c in cells:
        head = [c["system"], est(c), f"{c['noise']:g}", c["M"]]
        head += [f"{c['n_ok']}/{c['runs']} ± {c['binomial_se']:.3f}", c["boot"]]
        for j, name in enumerate(c["params"]):
            vals = [
                ("**{}**" if meets(c, k) else "{}").format(f"{c['coverage'][k][j]:.2f} ({c['width_ratio'][k][j]:.2f})")
                if k in c["coverage"]
                else "–"
                for k in METHODS
            ]
            rows.append([*(head if j == 0 else [""] * len(head)), name, *vals, f"{c['bias_over_sd'][j]:+.2f}"])
    return markdown_table(["system", "estimator", "noise", "M", "runs ok", "B", "param", *METHODS, "bias/sd"], rows)


def _summary(name: str, mine: list[dict]) -> list[str]:
    """The counts, the chance of exact intervals, the pooled coverage and the seconds of one estimator's cells."""
    consistent_line = (
        "Cells whose coverage and width are consistent with the target given their Monte Carlo "
        "error (no parameter's coverage rejects 95 % by an exact binomial test, no width rejects "
        "1.25 × ideal by the χ² law of the runs' standard deviation, each at 5 % Šidák-adjusted over "
        f"the cell's parameters; `consistent`) ({name}): {_counts(mine, consistent)}."
    )
    if off := [c for c in mine if not consistent(c, "bootstrap_or_profile")]:
        consistent_line += (
            " bootstrap_or_profile is not in: " + "; ".join(f"{c['system']} {c['noise']:g}, M = {c['M']}" for c in off)
        ) + "."
    chance = [exact_pass(c) for c in mine]
    one = [1 - p ** (1 / len(c["params"])) for p, c in zip(chance, mine)]
    k = [len(c["params"]) for c in mine]
    pooled = (
        f"Exact 95 % intervals would meet the coverage criterion in {sum(chance):.1f} of these "
        f"{len(mine)} cells on average (per cell {min(chance):.2f}–{max(chance):.2f}: with these runs a "
        f"parameter misses two binomial errors by chance {min(one):.1%}–{max(one):.1%} of the time, and "
        f"a cell has {min(k)}–{max(k)} of them, taken as independent), so a cell missed by one run says "
        "little about a method. Coverage pooled over every parameter of every cell "
        f"(the parameters of a run share its data, so this is no binomial count): {_pooled(mine)}."
    )
    if rest := [c for c in mine if c["system"] != "goodwin_3d"]:  # WENDy's bias there: no interval covers
        pooled += f" Outside Goodwin-3D ({len(rest)} cells): {_pooled(rest)}."
    seconds = ", ".join(f"{k} {np.median([c['seconds_per_interval'][k] for c in mine]):.2f}" for k in TIMED)
    return paragraphs(
        f"Cells where each method meets the target ({name}): {_counts(mine, meets)}.",
        consistent_line,
        pooled,
        f"Seconds per interval of {name} (median over its cells; a bootstrap of B refits, a profile "
        f"of every parameter, bootstrap-or-profile both): {seconds}.",
    )


def markdown(data: dict) -> list[str]:
    order = list(ESTIMATORS)
    cells = sorted(data["cells"].values(), key=lambda c: order.index(est(c)))  # then stably by cell:
    cells.sort(key=lambda c: (SYSTEMS.index(c["system"]), c["noise"], c["M"]))
    machines = collections.Counter(machine_line(c["machine"]) for c in cells)
    n_z = sum(c.get("normal_interval", "z") == "z" for c in cells)
    notes = [c for c in cells if "note" in c]  # what the run of a cell had to say (added by hand)
    z_note = [
        f"{n_z} of the {len(cells)} cells measured bootstrap_normal and bootstrap_or_profile with the normal "
        "bootstrap's earlier form, z_{(1+c)/2} in place of t_{B−1} √(1 + 1/B) (field `normal_interval`): "
        "3.6 % (B = 50) and 6.1 % (B = 30) narrower."
    ][: int(n_z > 0)]
    return paragraphs(
        "# Calibration of the 95 % intervals of WENDy-MLE (and of the hybrid where a cell names it)",
        "`python benchmarks/interval_calibration.py` (cells as listed; the command and the machine of each in "
        "the JSON); "
        + "; ".join(f"{n} cell{'s' * (n > 1)} on {line}" for line, n in machines.most_common())
        + f"; commits {', '.join(sorted({c['commit'] for c in cells}))}.",
        "Per cell and parameter: coverage of each method's 95 % intervals, and in brackets their median "
        "width over the ideal width (2 × 1.96 × the Monte Carlo standard deviation of the estimates). "
        "± is the binomial standard error of a 95 % coverage over the runs that did not fail; **bold**: the "
        "method meets the target in the cell (every parameter within 2 binomial errors of 0.95, width ≤ "
        "1.25 × ideal). bias/sd: the estimator's Monte Carlo bias over its spread.",
        *z_note,
        _table(cells),
        "Where a method misses (automatic: which criterion, with the estimator's bias over its spread and "
        "the failed runs beside it):",
        [_miss(c, k) for c in cells for k in METHODS if k in c["coverage"] and not meets(c, k)],
        *([["Notes on cells:", ""] + [f"- {_where(c)}: {c['note']}" for c in notes]] if notes else []),
        *(_summary(name, mine) for name in ESTIMATORS if (mine := [c for c in cells if est(c) == name])),
    )


def _update(key: str, c: dict) -> dict:
    """Add a cell, with the machine it ran on, to the results file as it is now, so that runs in
    parallel keep each other's cells, and rewrite both files."""
    path = RESULTS / f"{STEM}.json"
    data = json.loads(path.read_text()) if path.exists() else {"cells": {}}
    data["cells"][key] = {**c, "machine": machine_info()}
    write_results(STEM, data, markdown(data), indent=1)
    return data


def main():
    ap = parser(__doc__)
    ap.add_argument("--systems", nargs="+", default=list(SYSTEMS), choices=SYSTEMS)
    ap.add_argument("--noise", nargs="+", type=float, default=[0.05, 0.10])
    ap.add_argument("--m", nargs="+", type=int, default=[256, 1024])
    ap.add_argument("--runs", type=int, default=40)
    ap.add_argument("--boot", type=int, default=100)
    ap.add_argument("--points", type=int, default=15, help="profile grid points per parameter")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--estimator", choices=list(ESTIMATORS), default="mle")
    args = ap.parse_args()
    hybrid = f" --estimator {args.estimator}" if args.estimator != "mle" else ""
    for system, noise, m in ((s, n, m) for s in args.systems for n in args.noise for m in args.m):
        c = cell(system, noise, m, args.runs, args.boot, args.points, args.seed, args.estimator)
        c["command"] = (
            f"python benchmarks/interval_calibration.py --systems {system} --noise {noise:g} --m {m} "
            f"--runs {args.runs} --boot {args.boot} --points {args.points} --seed {args.seed}{hybrid}"
        )
        data = _update(f"{system}/{noise:g}/{m}" + (f"/{args.estimator}" if hybrid else ""), c)
        print(json.dumps({k: c[k] for k in ("system", "noise", "M", "n_ok", "coverage", "width_ratio")}), flush=True)
    print("\n".join(markdown(data)))


if __name__ == "__main__":
    main()

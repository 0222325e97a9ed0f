"""Weak SINDy (pysindy) and integral matching with thresholding on Meissner & Glasner 2024's ODE data.

Beside our sparse state-and-parameter regression (`discovery_ode.py`) and the paper's rows.

Run from the repository root (after `discovery_ode.py`, whose rows it reads)::

    python benchmarks/discovery_competitors.py --seeds 5

Data: the realisations of `discovery_ode.py` (Van der Pol, Lorenz; same cells, same seeds; libraries of
monomials of degree 1–3 / 1–2 without constant). Settings fixed per system before any noisy fit:

- **Weak SINDy** (pysindy 2.x): `ps.WeakPDELibrary(function_library=ps.PolynomialLibrary(degree,
  include_bias=False), spatiotemporal_grid=t, K=100)` with `ps.STLSQ(threshold=0.5)`, otherwise
  pysindy's defaults (subdomain centres from NumPy's global generator, seeded with the realisation's
  seed); missing entries filled by linear interpolation in time (`np.interp`).
- **Integral matching + thresholding** (ours): `wj.IntegralMatching(order=15,
  solver=wj.LeastSquares(threshold=0.5)).fit(library, wj.Trajectory(t, data, mask))`; it fills
  missing entries by the same interpolation. Order 15, not Anonymous 2025's 30: a degree-K node fit
  needs K + 1 observed samples per subinterval and at 40 % missing some keep only 19.
- Threshold 0.5: half the smallest true |coefficient| (1 in both systems).

The feature mapping to pysindy's names is checked by weak SINDy on the noiseless data (exact support,
error < 1 %). Per fit: missing and extra terms, largest and ‖·‖₂ relative coefficient errors on the
true support, wall time after one untimed warm-up per system and method; an exception is a failure.
Writes `benchmarks/results/discovery_competitors.{json,md}`.
"""

import argparse
import datetime
import json
import time
import warnings

import numpy as np
import pysindy as ps
from _common import RESULTS, command, machine_info, write_results
from discovery_ode import CELLS, PAPER, realisation, system

import wendyjax as wj

DT = 0.02
DEGREE = {"van_der_pol": 3, "lorenz": 2}
THRESHOLD = {"van_der_pol": 0.5, "lorenz": 0.5}  # half the smallest true |coefficient| (1 in both)
K_DOMAINS = {"van_der_pol": 100, "lorenz": 100}  # pysindy's default
ORDER = 15  # LGR order of integral matching (the docstring says why not 30)
LENGTH = 1.0  # subinterval length h of integral matching (Anonymous 2025's default)
METHODS = ("weak_sindy", "integral_matching")
LABELS = {"weak_sindy": "weak SINDy", "integral_matching": "IM + ST (ours)"}


def pysindy_order(library, degree):
    """Index of each of `library`'s features among pysindy's default feature names."""
    names = ps.PolynomialLibrary(degree=degree, include_bias=False).fit(
        np.zeros((2, library.n_states))).get_feature_names()

    def translate(name):
        out = []
        for token in name.split(" "):
            base, _, power = token.partition("^")
            out.append(library.state_names[int(base[1:])] + (f"^{power}" if power else ""))
        return " ".join(out)

    translated = [translate(n) for n in names]
    if sorted(translated) != sorted(library.feature_names) or len(set(translated)) != len(translated):
        raise RuntimeError(f"pysindy features {names} do not match ours {library.feature_names}.")
    return np.array([translated.index(n) for n in library.feature_names])


def fill(t, data):
    """Each component's missing (NaN) entries linearly interpolated over its observed times."""
    return np.column_stack([np.interp(t, t[~np.isnan(c)], c[~np.isnan(c)]) for c in data.T])


def weak_sindy(name, library, order, t, data, seed):
    """Weak SINDy's coefficient matrix (features × states, our order) and its warnings."""
    u = fill(t, data) if np.isnan(data).any() else data
    np.random.seed(seed)  # pysindy draws the subdomain centres from the global generator
    weak = ps.WeakPDELibrary(function_library=ps.PolynomialLibrary(degree=DEGREE[name], include_bias=False),
                             spatiotemporal_grid=t, K=K_DOMAINS[name])
    model = ps.SINDy(feature_library=weak, optimizer=ps.STLSQ(threshold=THRESHOLD[name]))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model.fit(u, t=t)
    messages = sorted({str(w.message) for w in caught if "axes labeled for array" not in str(w.message)})
    return np.asarray(model.coefficients()).T[order], messages


def integral_matching(name, library, t, data):
    """Our coefficient matrix (features × states) from the masked data."""
    est = wj.IntegralMatching(order=ORDER, length=LENGTH, solver=wj.LeastSquares(threshold=THRESHOLD[name]))
    return np.asarray(est.fit(library, wj.Trajectory(t, data, ~np.isnan(data))).params), []


def compare(theta, true):
    """`Discovery.compare`'s numbers, the support being the nonzero fitted coefficients."""
    support, found = true != 0, theta != 0
    err = np.abs(theta - true)[support] / np.abs(true[support])
    return {"missing_terms": int((support & ~found).sum()), "extra_terms": int((~support & found).sum()),
            "max_relative_error": float(err.max()),
            "relative_l2_error": float(np.linalg.norm((theta - true)[support]) / np.linalg.norm(true[support]))}


def fewest_observed(data, window):
    """Fewest observed samples of any state in any run of `window` consecutive samples."""
    cum = np.concatenate([np.zeros((1, data.shape[1])), np.cumsum(~np.isnan(data), axis=0)])
    return int((cum[window:] - cum[:-window]).min())


def check_mapping(name, library, true, order, t, clean):
    theta, _ = weak_sindy(name, library, order, t, clean, 0)
    rel = np.abs(theta - true)[true != 0] / np.abs(true[true != 0])
    if not (np.array_equal(theta != 0, true != 0) and rel.max() < 1e-2):
        raise RuntimeError(f"{name}: weak SINDy on noiseless data through the feature mapping gives\n"
                           f"{library.equations(theta)}, not {library.equations(true)}.")
    return float(rel.max())


def run(name, method, library, order, t, data, seed):
    start = time.perf_counter()
    try:
        if method == "weak_sindy":
            theta, messages = weak_sindy(name, library, order, t, data, seed)
        else:
            theta, messages = integral_matching(name, library, t, data)
    except Exception as exc:  # noqa: BLE001 (a failure is a result)
        return None, time.perf_counter() - start, [f"{type(exc).__name__}: {exc}"]
    return theta, time.perf_counter() - start, messages


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--systems", nargs="+", default=["van_der_pol", "lorenz"])
    args = parser.parse_args()
    rows, checks, warmup = [], {}, {}
    for name in args.systems:
        clean, library, true = system(name)
        t = DT * np.arange(clean.shape[0])
        order = pysindy_order(library, DEGREE[name])
        checks[name] = check_mapping(name, library, true, order, t, clean)
        print(f"{name}: feature mapping checked (noiseless weak SINDy, max rel. err {checks[name]:.2e})", flush=True)
        first = realisation(clean, *CELLS[0], 0)
        for method in METHODS:
            warmup[f"{name}/{method}"] = run(name, method, library, order, t, first, 0)[1]
        window = int(round(LENGTH / DT)) + 1
        for cell, (noise, missing) in enumerate(CELLS):
            for seed in range(args.seeds):
                data = realisation(clean, noise, missing, seed)
                for method in METHODS:
                    theta, seconds, messages = run(name, method, library, order, t, data, seed)
                    row = {"system": name, "method": method, "noise": noise, "missing": missing, "seed": seed,
                           "seconds": seconds, "messages": messages, "fewest_observed_per_subinterval":
                           fewest_observed(data, window), "paper": PAPER[name][cell]}
                    if theta is None:
                        row.update(failed=True, missing_terms=None, extra_terms=None, max_relative_error=None,
                                   relative_l2_error=None, equations=None)
                    else:
                        row.update(failed=False, **compare(theta, true), equations=library.equations(theta, 4),
                                   theta=theta.tolist())
                    rows.append(row)
                    summary = ("FAILED " + messages[0] if theta is None else
                               f"missing {row['missing_terms']} extra {row['extra_terms']} "
                               f"max rel {row['max_relative_error']:.3f} L2 {row['relative_l2_error']:.3f}")
                    print(f"{name} {noise:.0%} noise {missing:.0%} missing seed {seed} {method}: {summary} "
                          f"{seconds:.3f} s", flush=True)
    write(rows, args, checks, warmup)


def exact(row):
    return not row["failed"] and row["missing_terms"] == 0 and row["extra_terms"] == 0


def spr_rows():
    """Our StateParameterRegression's rows and meta from discovery_ode.json (None if absent)."""
    path = RESULTS / "discovery_ode.json"
    if not path.exists():
        return None, {}
    saved = json.loads(path.read_text())
    return saved["meta"], {(r["system"], r["noise"], r["missing"], r["seed"]): r for r in saved["rows"]}


def fmt(x):
    return "—" if x is None else f"{x:.3f}"


def write(rows, args, checks, warmup):
    spr_meta, spr = spr_rows()
    meta = {"date": datetime.date.today().isoformat(), "machine": machine_info(), "seeds": args.seeds,
            "command": command(),
            "pysindy": ps.__version__, "threshold": THRESHOLD, "K_domains": K_DOMAINS, "degree": DEGREE,
            "integral_matching": {"order": ORDER, "length": LENGTH, "smoother": "SavitzkyGolay(61, 15)"},
            "labels": LABELS,
            "mapping_check_max_relative_error": checks, "warmup_seconds": warmup,
            "state_parameter_regression_source": None if spr_meta is None else {
                k: spr_meta.get(k) for k in ("date", "seeds", "command")}}
    write_results("discovery_competitors", {"meta": meta, "rows": rows})

    machine = meta["machine"]
    spr_seeds = None if spr_meta is None else spr_meta.get("seeds")
    lines = [f"# Equation-discovery competitors on Meissner & Glasner 2024's ODE protocols — {meta['date']}", "",
             f"`{meta['command']}` on {machine['cpu_count']} CPU cores ({machine.get('cpu_model', '')}), pysindy "
             f"{meta['pysindy']}. Same realisations as `benchmarks/discovery_ode.py` (seed s ↔ seed s). Weak SINDy: "
             f"`ps.WeakPDELibrary` (K = 100 subdomains, pysindy's default size and test functions) + "
             f"`ps.STLSQ(threshold=0.5)`, missing entries filled by linear interpolation in time. IM + ST: "
             f"`wj.IntegralMatching(order={ORDER}, solver=wj.LeastSquares(threshold=0.5))` on the masked data "
             "(it fills missing entries by the same interpolation itself). "
             "Threshold 0.5 = half the smallest true |coefficient| (1 in both systems), "
             "fixed per system, not per cell. SPR: our `StateParameterRegression` (Meissner & Glasner 2024, BIC, "
             "no threshold), rows of "
             f"`benchmarks/results/discovery_ode.json`"
             + ("" if spr_meta is None else f" ({spr_meta.get('command')}, {spr_meta.get('date')})")
             + ". Paper: its single realisation (Meissner & Glasner 2024, Tables 1–2). Full protocol in the "
             "script's docstring.", "",
             "## Exact support recovered (realisations)", "",
             f"| system | noise | missing | {' | '.join(LABELS.values())} | SPR (ours, {spr_seeds} seeds) "
             "| paper: missing / extra |", "|---|---|---|" + "---|" * len(METHODS) + "---|---|"]
    seeds = range(args.seeds)
    cells = [(s, n, m) for s in args.systems for n, m in CELLS]
    fewer = spr_seeds is not None and spr_seeds < args.seeds
    for s, n, m in cells:
        counts = []
        for method in METHODS:
            sel = [r for r in rows if (r["system"], r["method"], r["noise"], r["missing"]) == (s, method, n, m)]
            common = [r for r in sel if r["seed"] < spr_seeds] if fewer else []
            counts.append(f"{sum(exact(r) for r in sel)}/{len(sel)}"
                          + (f" ({sum(exact(r) for r in common)}/{len(common)})" if fewer else ""))
        theirs = [spr[(s, n, m, k)] for k in range(max(seeds) + 1 if spr_seeds is None else spr_seeds)
                  if (s, n, m, k) in spr]
        spr_count = (f"{sum(r['missing_terms'] == 0 and r['extra_terms'] == 0 for r in theirs)}/{len(theirs)}"
                     if theirs else "—")
        p = PAPER[s][CELLS.index((n, m))]
        lines.append(f"| {s} | {n:.0%} | {m:.0%} | {' | '.join(counts)} | {spr_count} "
                     f"| {p[0]} / {p[1]} ({'exact' if p[0] == p[1] == 0 else 'not exact'}) |")
    if spr_seeds is not None and spr_seeds != args.seeds:
        lines += ["", f"Seed counts differ: SPR has {spr_seeds} realisations per cell (seeds 0–{spr_seeds - 1}, the "
                  f"same data as seeds 0–{spr_seeds - 1} here), the competitors {args.seeds}"
                  + (f"; in brackets, the competitors' counts on seeds 0–{spr_seeds - 1} alone." if fewer else ".")]
    lines += ["", "## Per realisation", "",
              "Missing / extra terms, largest relative coefficient error / relative ‖·‖₂ coefficient error on the "
              "true support.", "",
              f"| system | noise | missing | seed | {' | '.join(LABELS.values())} | SPR (ours) | paper |",
              "|---|---|---|---|" + "---|" * len(METHODS) + "---|---|"]
    by = {(r["system"], r["method"], r["noise"], r["missing"], r["seed"]): r for r in rows}
    for s, n, m in cells:
        for k in seeds:
            parts = []
            for method in METHODS:
                r = by[(s, method, n, m, k)]
                parts.append("failed" if r["failed"] else f"{r['missing_terms']} / {r['extra_terms']} / "
                             f"{fmt(r['max_relative_error'])} / {fmt(r['relative_l2_error'])}")
            theirs = spr.get((s, n, m, k))
            parts.append("—" if theirs is None else f"{theirs['missing_terms']} / {theirs['extra_terms']} / "
                         f"{fmt(theirs['max_relative_error'])} / {fmt(theirs['relative_l2_error'])}")
            p = PAPER[s][CELLS.index((n, m))]
            paper = f"{p[0]} / {p[1]}" + (f" / {p[2]:.3f} / {p[3]:.3f}" if p[2] is not None else "")
            lines.append(f"| {s} | {n:.0%} | {m:.0%} | {k} | {' | '.join(parts)} | {paper} |")
    lines += ["", "## Wall time per fit", "",
              "Median over every realisation of a system (after one untimed warm-up fit per system and method); "
              "SPR: median of `discovery_ode.json`'s runs (a whole discovery, first run with compilation).", "",
              f"| system | {' | '.join(LABELS.values())} | IM + ST warm-up | SPR |",
              "|---|" + "---|" * len(METHODS) + "---|---|"]
    for s in args.systems:
        med = [np.median([r["seconds"] for r in rows if r["system"] == s and r["method"] == method])
               for method in METHODS]
        theirs = [r["seconds"] for key, r in spr.items() if key[0] == s]
        lines.append(f"| {s} | {' | '.join(f'{x:.3f} s' for x in med)} | {warmup[f'{s}/integral_matching']:.2f} s | "
                     f"{f'{np.median(theirs):.1f} s' if theirs else '—'} |")
    failures = [r for r in rows if r["failed"]]
    noted = sorted({(r["method"], msg) for r in rows for msg in r["messages"] if not r["failed"]})
    if failures or noted:
        lines += ["", "## Failures and warnings", ""]
        lines += [f"- {LABELS[r['method']]} failed on {r['system']} {r['noise']:.0%}/{r['missing']:.0%} seed "
                  f"{r['seed']}: {r['messages'][0]}" for r in failures]
        lines += [f"- {LABELS[method]} warned ({sum(msg in r['messages'] for r in rows if r['method'] == method)} "
                  f"fits): {msg}" for method, msg in noted]
    write_results("discovery_competitors", markdown=lines)


if __name__ == "__main__":
    main()

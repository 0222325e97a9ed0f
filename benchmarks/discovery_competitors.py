"""Weak SINDy (pysindy) and integral matching with thresholding on Meissner & Glasner 2024's ODE data.

Run from the repository root (after `discovery_ode.py`, whose rows it shows beside its own)::

    python benchmarks/discovery_competitors.py --seeds 5

The realisations of `discovery_ode.py` (same cells and seeds, same libraries): weak SINDy
(`ps.WeakPDELibrary`, K = 100 subdomains, `ps.STLSQ(threshold=0.5)`, missing entries interpolated linearly)
and `wj.IntegralMatching(order=15, solver=wj.LeastSquares(threshold=0.5))` on the masked data (order 15, not
30: at 40 % missing some subintervals keep only 19 observed samples). Threshold 0.5: half the smallest true
|coefficient|. Per fit: missing / extra terms, coefficient errors on the true support, wall time after a
warm-up; an exception is a failure. Findings: docs/pages/papers/meissner-glasner2024.md.
Writes `benchmarks/results/discovery_competitors.{json,md}`.
"""

import argparse
import datetime
import json
import time
import warnings

import numpy as np
import pysindy as ps
from _common import RESULTS, command, machine_info, markdown_table, write_results
from discovery_ode import CELLS, PAPER, SYSTEMS, paper_cell, realisation, system

import wendyjax as wj

DT = 0.02
THRESHOLD = 0.5  # half the smallest true |coefficient| (1 in both systems)
K_DOMAINS = 100  # pysindy's default
ORDER, LENGTH = 15, 1.0  # integral matching's LGR order (the docstring says why not 30) and subinterval length
LABELS = {"weak_sindy": "weak SINDy", "integral_matching": "IM + ST (ours)"}


def pysindy_order(library):
    """Index of each of `library`'s features among pysindy's default feature names."""
    names = (
        ps.PolynomialLibrary(degree=library.degree, include_bias=False)
        .fit(np.zeros((2, library.n_states)))
        .get_feature_names()
    )
    translated = [
        " ".join(
            library.state_names[int(base[1:])] + (f"^{power}" if power else "")
            for base, _, power in (token.partition("^") for token in name.split(" "))
        )
        for name in names
    ]
    if sorted(translated) != sorted(library.feature_names) or len(set(translated)) != len(translated):
        raise RuntimeError(f"pysindy features {names} do not match ours {library.feature_names}.")
    return np.array([translated.index(n) for n in library.feature_names])


def weak_sindy(library, order, t, data, seed):
    """Weak SINDy's coefficient matrix (features × states, our order) and its warnings."""
    u = np.column_stack([np.interp(t, t[~np.isnan(c)], c[~np.isnan(c)]) for c in data.T])  # gaps filled
    np.random.seed(seed)  # pysindy draws the subdomain centres from the global generator
    weak = ps.WeakPDELibrary(
        function_library=ps.PolynomialLibrary(degree=library.degree, include_bias=False),
        spatiotemporal_grid=t,
        K=K_DOMAINS,
    )
    model = ps.SINDy(feature_library=weak, optimizer=ps.STLSQ(threshold=THRESHOLD))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model.fit(u, t=t)
    messages = sorted({str(w.message) for w in caught if "axes labeled for array" not in str(w.message)})
    return np.asarray(model.coefficients()).T[order], messages


def run(method, library, order, t, data, seed):
    """(coefficients or None on an exception, seconds, messages)."""
    start = time.perf_counter()
    try:
        if method == "weak_sindy":
            theta, messages = weak_sindy(library, order, t, data, seed)
        else:
            est = wj.IntegralMatching(order=ORDER, length=LENGTH, solver=wj.LeastSquares(threshold=THRESHOLD))
            theta, messages = np.asarray(est.fit(library, wj.Trajectory(t, data, ~np.isnan(data))).params), []
    except Exception as exc:  # noqa: BLE001 (a failure is a result)
        return None, time.perf_counter() - start, [f"{type(exc).__name__}: {exc}"]
    return theta, time.perf_counter() - start, messages


def compare(theta, true):
    """`Discovery.compare`'s numbers, the support being the nonzero fitted coefficients."""
    support, found = true != 0, theta != 0
    err = np.abs(theta - true)[support] / np.abs(true[support])
    return {
        "missing_terms": int((support & ~found).sum()),
        "extra_terms": int((~support & found).sum()),
        "max_relative_error": float(err.max()),
        "relative_l2_error": float(np.linalg.norm((theta - true)[support]) / np.linalg.norm(true[support])),
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5, help="realisations per cell")
    args = parser.parse_args()
    rows, checks, warmup = [], {}, {}
    for name in SYSTEMS:
        clean, library, true = system(name)
        t = DT * np.arange(clean.shape[0])
        order = pysindy_order(library)
        theta, _ = weak_sindy(library, order, t, clean, 0)  # the feature mapping, checked on noiseless data
        rel = np.abs(theta - true)[true != 0] / np.abs(true[true != 0])
        if not (np.array_equal(theta != 0, true != 0) and rel.max() < 1e-2):
            raise RuntimeError(
                f"{name}: noiseless weak SINDy gives {library.equations(theta)}, not {library.equations(true)}."
            )
        checks[name] = float(rel.max())
        for method in LABELS:
            warmup[f"{name}/{method}"] = run(method, library, order, t, realisation(clean, *CELLS[0], 0), 0)[1]
        for cell, (noise, missing) in enumerate(CELLS):
            for seed in range(args.seeds):
                data = realisation(clean, noise, missing, seed)
                for method in LABELS:
                    theta, seconds, messages = run(method, library, order, t, data, seed)
                    row = {
                        "system": name,
                        "method": method,
                        "noise": noise,
                        "missing": missing,
                        "seed": seed,
                        "seconds": seconds,
                        "messages": messages,
                        "paper": PAPER[name][cell],
                        "failed": theta is None,
                    }
                    if theta is not None:
                        row.update(**compare(theta, true), equations=library.equations(theta, 4), theta=theta.tolist())
                    rows.append(row)
                    print(
                        f"{name} {noise:.0%} noise {missing:.0%} missing seed {seed} {method}: "
                        + (
                            "FAILED " + messages[0]
                            if theta is None
                            else f"missing {row['missing_terms']} extra {row['extra_terms']}"
                        )
                        + f" {seconds:.3f} s",
                        flush=True,
                    )
    write(rows, args, checks, warmup)


def write(rows, args, checks, warmup):
    path = RESULTS / "discovery_ode.json"  # our StateParameterRegression's rows ("SPR")
    saved = json.loads(path.read_text()) if path.exists() else {"meta": None, "rows": []}
    spr_meta, spr = saved["meta"], {(r["system"], r["noise"], r["missing"], r["seed"]): r for r in saved["rows"]}
    meta = {
        "date": datetime.date.today().isoformat(),
        "machine": machine_info(),
        "seeds": args.seeds,
        "command": command(),
        "pysindy": ps.__version__,
        "threshold": THRESHOLD,
        "K_domains": K_DOMAINS,
        "integral_matching": {"order": ORDER, "length": LENGTH, "smoother": "SavitzkyGolay(61, 15)"},
        "labels": LABELS,
        "mapping_check_max_relative_error": checks,
        "warmup_seconds": warmup,
        "state_parameter_regression_source": spr_meta and {k: spr_meta[k] for k in ("date", "seeds", "command")},
    }
    write_results("discovery_competitors", {"meta": meta, "rows": rows})

    def exact(r):
        return not r.get("failed") and r["missing_terms"] == r["extra_terms"] == 0

    def entry(r):
        return (
            "—"
            if r is None
            else "failed"
            if r.get("failed")
            else (
                f"{r['missing_terms']} / {r['extra_terms']} / "
                f"{r['max_relative_error']:.3f} / {r['relative_l2_error']:.3f}"
            )
        )

    by = {(r["system"], r["method"], r["noise"], r["missing"], r["seed"]): r for r in rows}
    cells = [(s, n, m) for s in SYSTEMS for n, m in CELLS]
    seeds = range(args.seeds)
    summary, per_seed = [], []
    for s, n, m in cells:
        p = PAPER[s][CELLS.index((n, m))]
        theirs = [spr[s, n, m, k] for k in seeds if (s, n, m, k) in spr]
        summary.append(
            [
                s,
                f"{n:.0%}",
                f"{m:.0%}",
                *(f"{sum(exact(by[s, method, n, m, k]) for k in seeds)}/{len(seeds)}" for method in LABELS),
                f"{sum(map(exact, theirs))}/{len(theirs)}" if theirs else "—",
                f"{p[0]} / {p[1]} ({'exact' if p[0] == p[1] == 0 else 'not exact'})",
            ]
        )
        per_seed += [
            [
                s,
                f"{n:.0%}",
                f"{m:.0%}",
                k,
                *(entry(by[s, method, n, m, k]) for method in LABELS),
                entry(spr.get((s, n, m, k))),
                paper_cell(p),
            ]
            for k in seeds
        ]
    times = [
        [
            s,
            *(
                f"{np.median([r['seconds'] for r in rows if (r['system'], r['method']) == (s, method)]):.3f} s"
                for method in LABELS
            ),
            f"{warmup[f'{s}/integral_matching']:.2f} s",
            f"{np.median([r['seconds'] for k, r in spr.items() if k[0] == s]):.1f} s" if spr else "—",
        ]
        for s in SYSTEMS
    ]
    noted = sorted({(r["method"], msg) for r in rows for msg in r["messages"] if not r["failed"]})
    machine = meta["machine"]
    lines = [
        f"# Equation-discovery competitors on Meissner & Glasner 2024's ODE protocols — {meta['date']}",
        "",
        f"`{meta['command']}` on {machine['cpu_count']} CPU cores ({machine.get('cpu_model', '')}), pysindy "
        f"{meta['pysindy']}. The realisations of `benchmarks/discovery_ode.py` (seed s ↔ seed s). Weak SINDy: "
        f"`ps.WeakPDELibrary` (K = {K_DOMAINS}) + `ps.STLSQ(threshold={THRESHOLD:g})`, gaps interpolated linearly. "
        f"IM + ST: `wj.IntegralMatching(order={ORDER}, solver=wj.LeastSquares(threshold={THRESHOLD:g}))` on the "
        "masked data. SPR: our `StateParameterRegression`, rows of `discovery_ode.json`"
        + ("" if spr_meta is None else f" ({spr_meta['command']}, {spr_meta['date']})")
        + ", same seeds. Paper: its single realisation (Meissner & Glasner 2024, Tables 1–2).",
        "",
        "## Exact support recovered (realisations)",
        "",
        *markdown_table(
            ["system", "noise", "missing", *LABELS.values(), "SPR (ours)", "paper: missing / extra"], summary
        ),
        "",
        "## Per realisation",
        "",
        "Missing / extra terms, largest relative coefficient error / relative ‖·‖₂ coefficient error on the "
        "true support.",
        "",
        *markdown_table(["system", "noise", "missing", "seed", *LABELS.values(), "SPR (ours)", "paper"], per_seed),
        "",
        "## Wall time per fit",
        "",
        "Median over every realisation of a system (after one untimed warm-up fit per system and method); "
        "SPR: median of `discovery_ode.json`'s runs (a whole discovery, first run with compilation).",
        "",
        *markdown_table(["system", *LABELS.values(), "IM + ST warm-up", "SPR"], times),
    ]
    if any(r["failed"] for r in rows) or noted:
        lines += [
            "",
            "## Failures and warnings",
            "",
            *(
                f"- {LABELS[r['method']]} failed on {r['system']} {r['noise']:.0%}/{r['missing']:.0%} seed "
                f"{r['seed']}: {r['messages'][0]}"
                for r in rows
                if r["failed"]
            ),
            *(
                f"- {LABELS[method]} warned ({sum(msg in r['messages'] for r in rows if r['method'] == method)} "
                f"fits): {msg}"
                for method, msg in noted
            ),
        ]
    write_results("discovery_competitors", markdown=lines)


if __name__ == "__main__":
    main()

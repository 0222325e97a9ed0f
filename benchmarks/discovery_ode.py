"""Equation discovery on Meissner & Glasner 2024's ODE protocols (Tables 1–2): ours, and weak SINDy (`--competitors`).

    python benchmarks/discovery_ode.py --seeds 5 [--start smoothed | --competitors]

Van der Pol and Lorenz, noise 30/50/70 % of each state's sd, 20/40 % missing; ours: sparse state-and-parameter
regression from the forward-filled data or the smoother. `--competitors` (pysindy): weak SINDy and integral matching
with thresholding on the same realisations, beside the rows of `discovery_ode.json`.
"""

import datetime
import itertools
import json
import time
import warnings

import _common as cm
import diffrax
import jax.numpy as jnp
import numpy as np

import wendyjax as wj

SYSTEMS = ("van_der_pol", "lorenz")
CELLS = [(0.3, 0.2), (0.5, 0.2), (0.7, 0.2), (0.3, 0.4), (0.5, 0.4), (0.7, 0.4)]
# Meissner & Glasner 2024 Tables 1-2: missing terms, extra terms, and (correct-support cells) the largest relative
# coefficient error and the relative ‖·‖₂ error (arithmetic on the printed coefficients)
PAPER = {
    "van_der_pol": [(0, 0, 0.121, 0.088), (0, 0, 0.193, 0.140), (0, 0, 0.259, 0.190), (0, 0, 0.060, 0.045)]
    + [(1, 1, None, None), (1, 7, None, None)],
    "lorenz": [(0, 0, 0.215, 0.046), (0, 0, 0.335, 0.075), (1, 2, None, None), (0, 0, 0.300, 0.063)]
    + [(0, 0, 0.456, 0.098), (1, 10, None, None)],
}
DT, THRESHOLD, K_DOMAINS = 0.02, 0.5, 100  # competitors: half the smallest true |coefficient|; pysindy's default K
ORDER, LENGTH = 15, 1.0  # integral matching's LGR order (the docstring says why not 30) and subinterval length
LABELS = {"weak_sindy": "weak SINDy", "integral_matching": "IM + ST (ours)"}


def system(name):
    """Clean samples (Δt = 0.02, Tsit5 at 1e-12), library (monomials without constant) and true coefficients."""
    if name == "van_der_pol":  # μ = 2, u0 = (0, 2), t ∈ [0, 10]
        bench = wj.models.van_der_pol()
        model, p, u0, degree, t = bench.model, bench.p_true, bench.u0, 3, jnp.linspace(0.0, 10.0, 501)
    else:  # the standard Lorenz system (the paper's printed eq. 19 has typos; its tables fit this one)
        model, degree, t = wj.models.lorenz().model, 2, jnp.linspace(0.0, 5.0, 251)
        p, u0 = jnp.array([10.0, 28.0, 8.0 / 3.0]), jnp.array([-8.0, 8.0, 27.0])
    clean = np.asarray(wj.solve(model, p, u0, t, solver=diffrax.Tsit5(), rtol=1e-12, atol=1e-12))
    library = wj.PolynomialLibrary(model.state_names, degree, constant=False)
    return clean, library, library.coefficients(model, p)


def realisation(clean, noise, missing, seed):
    """The noisy data of one realisation, NaN at the missing entries."""
    rng = np.random.default_rng(seed)
    noisy = clean + noise * clean.std(axis=0) * rng.standard_normal(clean.shape)
    return np.where(rng.uniform(size=clean.shape) >= missing, noisy, np.nan)


def paper_cell(p):
    return f"{p[0]} / {p[1]}" + (f" / {p[2]:.3f} / {p[3]:.3f}" if p[2] is not None else "")


def meta(args, **extra):
    return {"date": datetime.date.today().isoformat(), "machine": cm.machine_info(), "seeds": args.seeds, **extra}


def ours(args):
    est, rows = wj.StateParameterRegression(), []
    name = "discovery_ode" + ("" if args.start == "data" else f"_{args.start}")
    for system_name in SYSTEMS:
        clean, library, true = system(system_name)
        for (cell, (noise, missing)), seed in itertools.product(enumerate(CELLS), range(args.seeds)):
            data = realisation(clean, noise, missing, seed)
            start = time.perf_counter()
            found = est.fit(library, wj.Trajectory(DT * np.arange(len(data)), data, ~np.isnan(data)), u0=args.start)
            row = {"system": system_name, "noise": noise, "missing": missing, "seed": seed}
            row |= {"seconds": time.perf_counter() - start, "models_tested": len(found.history)}
            row |= {**found.compare(true), **{f"state_error_{k}": v for k, v in found.state_error(clean).items()}}
            rows.append(row | {"equations": found.equations(4), "paper": PAPER[system_name][cell]})
            print(f"{system_name} {noise:.0%}/{missing:.0%} seed {seed}: {found.equations(4)}", flush=True)
            m = meta(args, command=cm.command())
            cm.write_results(name, {"meta": m, "rows": rows}, ours_markdown(rows, m, args))


def ours_markdown(rows, m, args):
    exact = {}
    for r in rows:
        exact.setdefault((r["system"], r["noise"], r["missing"]), []).append(r["missing_terms"] + r["extra_terms"] == 0)
    start = "the forward-filled data (the paper)" if args.start == "data" else "the smoother"
    return cm.paragraphs(
        f"# Sparse state-and-parameter regression (Meissner & Glasner 2024) on its ODE protocols — {m['date']}",
        f"`{m['command']}` on {cm.machine_line(m['machine'])}. Per realisation: missing / extra terms, "
        "the largest relative and the relative ‖·‖₂ coefficient error on the true support, the relative ‖·‖₂ error "
        "of the reconstructed states (of the data, observed entries, in brackets), wall time of the discovery (the "
        f"first of each system compiles). Paper: its single realisation. States start from {start}.",
        cm.markdown_table(
            "system | noise | missing | seed | missing terms | extra terms | max rel. err | rel. L2 err "
            "| state err (data) | models | s | paper: missing / extra / max rel / L2",
            [
                [r["system"], f"{r['noise']:.0%}", f"{r['missing']:.0%}", r["seed"], r["missing_terms"]]
                + [r["extra_terms"], f"{r['max_relative_error']:.3f}", f"{r['relative_l2_error']:.3f}"]
                + [f"{r['state_error_reconstruction']:.3f} ({r['state_error_data']:.3f})", r["models_tested"]]
                + [f"{r['seconds']:.1f}", paper_cell(r["paper"])]
                for r in rows
            ],
        ),
        "Exact support recovered (realisations):",
        [f"- {s} {n:.0%} noise {m:.0%} missing: {sum(v)}/{len(v)}" for (s, n, m), v in exact.items()],
        f"Median wall time per discovery run: {np.median([r['seconds'] for r in rows]):.1f} s (all runs).",
    )


def pysindy_order(ps, library):
    """Index of each of `library`'s features among pysindy's default feature names."""
    lib = ps.PolynomialLibrary(degree=library.degree, include_bias=False)
    names = lib.fit(np.zeros((2, library.n_states))).get_feature_names()
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


def weak_sindy(ps, library, order, t, data, seed):
    """Weak SINDy's coefficient matrix (features × states, our order) and its warnings."""
    u = np.column_stack([np.interp(t, t[~np.isnan(c)], c[~np.isnan(c)]) for c in data.T])  # gaps filled
    np.random.seed(seed)  # pysindy draws the subdomain centres from the global generator
    features = ps.PolynomialLibrary(degree=library.degree, include_bias=False)
    weak = ps.WeakPDELibrary(function_library=features, spatiotemporal_grid=t, K=K_DOMAINS)
    model = ps.SINDy(feature_library=weak, optimizer=ps.STLSQ(threshold=THRESHOLD))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model.fit(u, t=t)
    messages = sorted({str(w.message) for w in caught if "axes labeled for array" not in str(w.message)})
    return np.asarray(model.coefficients()).T[order], messages


def run(ps, method, library, order, t, data, seed):
    """(coefficients or None on an exception, seconds, messages)."""
    start = time.perf_counter()
    try:
        if method == "weak_sindy":
            theta, messages = weak_sindy(ps, library, order, t, data, seed)
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
    out = {"missing_terms": int((support & ~found).sum()), "extra_terms": int((~support & found).sum())}
    l2 = float(np.linalg.norm((theta - true)[support]) / np.linalg.norm(true[support]))
    return out | {"max_relative_error": float(err.max()), "relative_l2_error": l2}


def competitors(args):
    import pysindy as ps

    rows, checks, warmup = [], {}, {}
    for name in SYSTEMS:
        clean, library, true = system(name)
        t = DT * np.arange(clean.shape[0])
        order = pysindy_order(ps, library)
        theta, _ = weak_sindy(ps, library, order, t, clean, 0)  # the feature mapping, checked on noiseless data
        rel = np.abs(theta - true)[true != 0] / np.abs(true[true != 0])
        if not (np.array_equal(theta != 0, true != 0) and rel.max() < 1e-2):
            raise RuntimeError(f"{name}: noiseless weak SINDy gives {library.equations(theta)}, not the truth.")
        checks[name] = float(rel.max())
        for method in LABELS:
            warmup[f"{name}/{method}"] = run(ps, method, library, order, t, realisation(clean, *CELLS[0], 0), 0)[1]
        for (cell, (noise, missing)), seed, method in itertools.product(enumerate(CELLS), range(args.seeds), LABELS):
            data = realisation(clean, noise, missing, seed)
            theta, seconds, messages = run(ps, method, library, order, t, data, seed)
            row = {"system": name, "method": method, "noise": noise, "missing": missing, "seed": seed}
            row |= {"seconds": seconds, "messages": messages, "paper": PAPER[name][cell], "failed": theta is None}
            if theta is not None:
                row.update(**compare(theta, true), equations=library.equations(theta, 4), theta=theta.tolist())
            rows.append(row)
            print(f"{name} {noise:.0%}/{missing:.0%} seed {seed} {method}: {row.get('equations', 'FAILED')}")
    path = cm.RESULTS / "discovery_ode.json"  # our StateParameterRegression's rows ("SPR")
    saved = json.loads(path.read_text()) if path.exists() else {"meta": None, "rows": []}
    spr_meta, spr = saved["meta"], {(r["system"], r["noise"], r["missing"], r["seed"]): r for r in saved["rows"]}
    m = meta(args, command=cm.command(), pysindy=ps.__version__, threshold=THRESHOLD, K_domains=K_DOMAINS)
    m |= {"integral_matching": {"order": ORDER, "length": LENGTH, "smoother": "SavitzkyGolay(61, 15)"}}
    m |= {"labels": LABELS, "mapping_check_max_relative_error": checks, "warmup_seconds": warmup}
    m["state_parameter_regression_source"] = spr_meta and {k: spr_meta[k] for k in ("date", "seeds", "command")}
    md = competitors_markdown(rows, args, m, spr_meta, spr, warmup)
    cm.write_results("discovery_competitors", {"meta": m, "rows": rows}, md)


def competitors_markdown(rows, args, m, spr_meta, spr, warmup):
    def exact(r):
        return not r.get("failed") and r["missing_terms"] == r["extra_terms"] == 0

    by = {(r["system"], r["method"], r["noise"], r["missing"], r["seed"]): r for r in rows}
    seeds, summary = range(args.seeds), []
    for s, n, mi in [(s, n, mi) for s in SYSTEMS for n, mi in CELLS]:
        p, theirs = PAPER[s][CELLS.index((n, mi))], [spr[s, n, mi, k] for k in seeds if (s, n, mi, k) in spr]
        summary.append(
            [s, f"{n:.0%}", f"{mi:.0%}"]
            + [f"{sum(exact(by[s, method, n, mi, k]) for k in seeds)}/{len(seeds)}" for method in LABELS]
            + [f"{sum(map(exact, theirs))}/{len(theirs)}" if theirs else "—"]
            + [f"{p[0]} / {p[1]} ({'exact' if p[0] == p[1] == 0 else 'not exact'})"]
        )
    median_s = lambda s, k: np.median([r["seconds"] for r in rows if r["system"] == s and r["method"] == k])  # noqa: E731
    times = [
        [s, *(f"{median_s(s, k):.3f} s" for k in LABELS), f"{warmup[f'{s}/integral_matching']:.2f} s"]
        + [f"{np.median([r['seconds'] for k, r in spr.items() if k[0] == s]):.1f} s" if spr else "—"]
        for s in SYSTEMS
    ]
    failed = [f"{LABELS[r['method']]} {r['system']} {r['noise']:.0%}/{r['missing']:.0%} seed {r['seed']}" for r in rows]
    failed = [f for f, r in zip(failed, rows) if r["failed"]]
    return cm.paragraphs(
        f"# Equation-discovery competitors on Meissner & Glasner 2024's ODE protocols — {m['date']}",
        f"`{m['command']}` on {cm.machine_line(m['machine'])}, pysindy {m['pysindy']}. The realisations of "
        f"`python benchmarks/discovery_ode.py` (seed s ↔ seed s). Weak SINDy: `ps.WeakPDELibrary` (K = {K_DOMAINS}) + "
        f"`ps.STLSQ(threshold={THRESHOLD:g})`, gaps interpolated linearly. IM + ST: "
        f"`wj.IntegralMatching(order={ORDER}, solver=wj.LeastSquares(threshold={THRESHOLD:g}))` on the masked data. "
        "SPR: our `StateParameterRegression`, rows of `discovery_ode.json`"
        + ("" if spr_meta is None else f" ({spr_meta['command']}, {spr_meta['date']})")
        + ". Paper: its single realisation (Tables 1–2). Per realisation, with any warnings: the JSON.",
        "## Exact support recovered (realisations)",
        cm.markdown_table(
            ["system", "noise", "missing", *LABELS.values(), "SPR (ours)", "paper: missing / extra"], summary
        ),
        "## Wall time per fit",
        "Median over every realisation of a system (after one untimed warm-up fit per system and method); "
        "SPR: median of `discovery_ode.json`'s runs (a whole discovery, first run with compilation).",
        cm.markdown_table(["system", *LABELS.values(), "IM + ST warm-up", "SPR"], times),
        f"Failed fits: {'; '.join(failed) or 'none'}.",
    )


def main():
    ap = cm.parser(__doc__)
    ap.add_argument("--seeds", type=int, default=5, help="realisations per cell")
    ap.add_argument("--start", choices=["data", "smoothed"], default="data", help="states our fits start from")
    ap.add_argument("--competitors", action="store_true", help="weak SINDy and integral matching (needs pysindy)")
    args = ap.parse_args()
    (competitors if args.competitors else ours)(args)


if __name__ == "__main__":
    main()

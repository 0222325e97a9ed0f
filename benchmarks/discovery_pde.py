"""Sparse state-and-parameter regression on Meissner & Glasner 2024's PDE protocols (Tables 3–4).

    python benchmarks/discovery_pde.py [--systems ks ac] [--cells 0 1 …] [--start data|smoothed|interpolated]

Kuramoto–Sivashinsky (128 × 128) and 2-D Allen–Cahn from two snapshots; one cell (a row of the paper's table) takes
minutes; rows of other cells, starts and seeds are kept from the previous results.
"""

import datetime
import functools
import json
import time

import numpy as np
from _common import RESULTS, command, machine_info, markdown_table, paragraphs, parser, write_results

import wendyjax as wj

KS_TERMS = ("u", "u^2", "u^3", "u_x", "u_xx", "u_xxx", "u_xxxx", "u u_x", "u^2 u_x")
AC_TERMS = ("u", "u^3", "u_x", "u_y", "u_xx", "u_yy", "u u_x", "u u_y", "u^2 u_x", "u^2 u_y")
# Meissner & Glasner 2024 Tables 3-4: (noise, missing, missing terms, extra terms, discovered coefficients on the
# true support in the order of TRUE[system] or None)
PAPER = {
    "ks": [(0.3, 0.4, 0, 0, (-1.007, -1.020, 1.019)), (0.5, 0.4, 0, 0, (-1.008, -1.022, 1.017))]
    + [(1.0, 0.4, 0, 0, (-1.012, -1.027, 1.008)), (0.3, 0.6, 0, 0, (-1.004, -1.015, 1.020))]
    + [(0.5, 0.6, 0, 0, (-1.003, -1.013, 1.017)), (1.0, 0.6, 1, 4, None)],
    "ac": [(0.1, 0.0, 0, 0, (0.972, -0.973, 0.974, 0.985)), (0.2, 0.0, 0, 0, (0.939, -0.940, 0.929, 0.952))]
    + [(0.3, 0.0, 0, 0, (0.889, -0.889, 0.864, 0.904)), (0.1, 0.1, 0, 0, (0.949, -0.949, 0.959, 0.957))],
}
TRUE = {"ks": {"u_xx": -1.0, "u_xxxx": -1.0, "u u_x": 1.0}, "ac": {"u": 1.0, "u^3": -1.0, "u_xx": 1.0, "u_yy": 1.0}}


def system(name: str, ac_size: int, max_steps: int):
    """Clean data `(T, *space)`, library, true coefficients, Δt, estimator and θ0 (the paper's code's)."""
    lm = functools.partial(wj.discovery.LevenbergMarquardt, hessian="gauss_newton", max_steps=max_steps)
    if name == "ks":  # Cholesky on the block-tridiagonal Hessian, θ0 = −1 for u_xxxx and 1 otherwise
        t, x, clean = wj.models.kuramoto_sivashinsky()
        library = wj.FiniteDifferenceLibrary(KS_TERMS, x[1] - x[0])
        solver = lm()
        est = wj.StateParameterRegression(lam=1e-2, penalty=1e-4, solver=solver)
        theta0 = np.where(np.array(KS_TERMS)[:, None] == "u_xxxx", -1.0, 1.0)
    else:  # a sparse LU of the state block (the paper's conjugate gradients did not converge), α0 = 100
        t, x, clean = wj.models.allen_cahn_2d(ac_size)
        library = wj.FiniteDifferenceLibrary(AC_TERMS, (x[1] - x[0],) * 2)
        solver = lm(linear_solver="sparse", alpha0=100.0)
        est = wj.StateParameterRegression(lam=1e-2, penalty=1e-6, solver=solver)
        theta0 = 1.0
    true = np.array([[TRUE[name].get(term, 0.0)] for term in library.terms])
    return clean, library, true, float(t[1] - t[0]), est, theta0


def realisation(clean, noise, missing, seed):
    """The noisy data of one realisation, NaN at the missing entries."""
    rng = np.random.default_rng(seed)
    noisy = clean + noise * clean.std() * rng.standard_normal(clean.shape)
    return np.where(rng.uniform(size=clean.shape) >= missing, noisy, np.nan)


def main():
    ap = parser(__doc__)
    ap.add_argument("--seeds", type=int, default=1)
    ap.add_argument("--first-seed", type=int, default=0, help="run seeds first-seed … first-seed + seeds − 1")
    ap.add_argument("--systems", nargs="+", default=["ks", "ac"], choices=["ks", "ac"])
    ap.add_argument("--cells", type=int, nargs="+", default=None, help="rows of each system's table (0-based)")
    ap.add_argument("--ac-size", type=int, default=256, help="Allen–Cahn grid N (default 256, the paper's)")
    ap.add_argument("--max-steps", type=int, default=100, help="Levenberg–Marquardt steps per fit (default 100)")
    ap.add_argument("--start", choices=["data", "smoothed", "interpolated"], default="data", help="starting states")
    args = ap.parse_args()
    previous = RESULTS / "discovery_pde.json"
    rows = json.loads(previous.read_text())["rows"] if previous.exists() else []
    machine = machine_info()
    meta = {"command": command(), "date": datetime.date.today().isoformat()}
    meta["processor"] = f"{machine['cpu_count']} CPU cores, {machine['processor']}"
    seeds = range(args.first_seed, args.first_seed + args.seeds)
    for name in args.systems:
        clean, library, true, dt, est, theta0 = system(name, args.ac_size, args.max_steps)
        cells = [c for i, c in enumerate(PAPER[name]) if args.cells is None or i in args.cells]
        run = {(name, clean.shape, *cell[:2], args.start, args.max_steps, seed) for cell in cells for seed in seeds}
        keys = ("system", "grid", "noise", "missing", "start", "max_steps", "seed")
        rows = [r for r in rows if tuple(tuple(r[k]) if k == "grid" else r[k] for k in keys) not in run]
        for noise, missing, *paper in cells:
            for seed in seeds:
                data = realisation(clean, noise, missing, seed)[..., None]
                start = time.perf_counter()
                field = wj.Field(dt * np.arange(data.shape[0]), data, ~np.isnan(data))
                found = est.fit(library, field, theta0, u0=args.start)
                row = {"system": name, **meta, "grid": list(clean.shape), "noise": noise, "missing": missing}
                row |= {"seed": seed, "start": args.start, "max_steps": args.max_steps}
                row |= {"seconds": time.perf_counter() - start, "models_tested": len(found.history)}
                row |= found.compare(true)
                row |= {f"state_error_{k}": v for k, v in found.state_error(clean[..., None]).items()}
                row["true_support_coefficients"] = found.params[true[:, 0] != 0, 0].tolist()
                row |= {"equations": found.equations(4), "table": found.models_table(), "paper": paper}
                rows.append(row)
                print(f"{name} {noise:.0%}/{missing:.0%} seed {seed}: {row['equations'][0]}", flush=True)
                write(rows, machine)


def write(rows, machine):
    cell = {(name, noise, missing): i for name, table in PAPER.items() for i, (noise, missing, *_) in enumerate(table)}
    order = ("system", "grid", "start", "max_steps")
    rows = sorted(rows, key=lambda r: (*(r[k] for k in order), cell[r["system"], r["noise"], r["missing"]], r["seed"]))
    runs = sorted({(r["date"], r["command"], r.get("processor", "machine not recorded")) for r in rows})
    coefficients = lambda values: ", ".join(f"{c:.3f}" for c in values)  # noqa: E731
    table = [
        [f"{r['system']} ({'×'.join(map(str, r['grid']))})", r["start"], f"{r['noise']:.0%}", f"{r['missing']:.0%}"]
        + [r["seed"], r["missing_terms"], r["extra_terms"], coefficients(r["true_support_coefficients"])]
        + [f"{r['max_relative_error']:.3f}", f"{r['state_error_reconstruction']:.3f} ({r['state_error_data']:.3f})"]
        + [r["models_tested"], f"{r['seconds']:.1f}", r["max_steps"]]
        + [f"{r['paper'][0]} / {r['paper'][1]}" + (" / " + coefficients(r["paper"][2]) if r["paper"][2] else "")]
        for r in rows
    ]
    header = "system (grid) | start | noise | missing | seed | missing terms | extra terms | true-term coefficients"
    header += " | max rel. err | state err (data) | models | s | step cap | paper: missing / extra / coefficients"
    markdown = paragraphs(
        "# Sparse state-and-parameter regression (Meissner & Glasner 2024) on its PDE protocols",
        "; ".join(f"`{c}` ({d}, {m})" for d, c, m in runs) + ". Per realisation: missing / extra terms, the "
        "discovered coefficients of the true terms (KS: u_xx, u_xxxx, u u_x, truth −1, −1, 1; AC: u, u³, u_xx, "
        "u_yy, truth 1, −1, 1, 1), the largest relative coefficient error, the relative ‖·‖₂ error of the "
        "reconstructed states (of the data, observed entries, in brackets), wall time of the whole discovery "
        "(the first run of each system includes compilation), the Levenberg–Marquardt step cap per fit. "
        'Start: forward-filled data (the paper\'s), `u0="smoothed"` or `u0="interpolated"`. Paper: its single '
        "realisation. The discovered equations: the JSON.",
        markdown_table(header, table),
    )
    write_results("discovery_pde", {"meta": {"machine": machine, "runs": runs}, "rows": rows}, markdown)


if __name__ == "__main__":
    main()

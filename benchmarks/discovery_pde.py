r"""Sparse state-and-parameter regression on Meissner & Glasner 2024's PDE protocols (Tables 3–4).

Kuramoto–Sivashinsky (Table 3: noise 30/50/100 %, missing 40/60 %, (λ, R) = (1e-2, 1e-4)) and 2-D
Allen–Cahn from two snapshots (Table 4: noise 10/20/30 % with nothing missing and 10 % with 10 %
missing, (λ, R) = (1e-2, 1e-6)).

Run from the repository root::

    python benchmarks/discovery_pde.py [--seeds 1] [--first-seed 0] [--systems ks ac] [--cells 0 1 …] [--ac-size 256]
        [--start data|smoothed|interpolated]

`--cells` picks rows of each system's table (0-based, in the order of `PAPER`); rows of the
cells (starts, seeds) not run are kept from the previous results file. `--start` picks the
states every fit starts from: the data with missing entries filled forward (Meissner & Glasner 2024 §5, the
default), the Gaussian kernel smoother whose widths leave-one-out cross-validation
chooses (`u0="smoothed"`, not Meissner & Glasner 2024's), or the data with only the missing entries from that
smoother (`u0="interpolated"`). Allen–Cahn rows are recorded at `--ac-size 128` (a
40 × 40 domain instead of 80 × 80, all four cells) and at Meissner & Glasner 2024's 256 (an 80 × 80 domain;
27–67 min per cell on 2 cores, all four cells from the forward-filled start and the
missing-data cell also from the interpolated start).

Data as in Meissner & Glasner 2024 §5.2. KS: $u_t = u u_x - u_{xx} - u_{xxxx}$ on a periodic domain of length 40,
$u(x, 0) = -2\sin(12\pi x/40) + 2e^{-(x-2)^2/5}$, 128 points (Δx = 0.3125) × 128 levels
(Δt = 0.3), `wj.models.kuramoto_sivashinsky()`. AC: $u_t = \Delta u + u - u^3$, Neumann,
N × N grid of step 40/127 from $0.1(\mathrm{rand} - 0.5)$, snapshots at t = 25 and 26 (Δt = 1),
`wj.models.allen_cahn_2d(N)`. Noise: Gaussian with sd = level × the standard deviation of the
clean field; missing: each value independently with the given probability. Libraries as
Meissner & Glasner 2024 eqs. 21 and 23 (9 and 10 terms), second-order centred differences on the interior, no
boundary condition assumed.

Solver settings: Gauss–Newton Hessian (the true Hessian of these residuals is indefinite
away from the minimum); at most 100 Levenberg–Marquardt steps per fit (`--max-steps`). KS:
Cholesky on the coloured block-tridiagonal Hessian, α0 = 1e-4, θ0 = 1 for every term except
θ0 = −1 for u_xxxx (the start of Meissner & Glasner 2024's code). AC: a sparse LU of the state
block (Meissner & Glasner 2024 §5.2.2 used conjugate gradients, which did not converge in 1000
steps here), with the paper's code's α0 = 100 and θ0 = 1 for every term.

Writes `benchmarks/results/discovery_pde.{json,md}`.
"""

import argparse
import datetime
import json
import time

import numpy as np
from _common import RESULTS, command, machine_info, write_results

import wendyjax as wj

KS_TERMS = ("u", "u^2", "u^3", "u_x", "u_xx", "u_xxx", "u_xxxx", "u u_x", "u^2 u_x")
AC_TERMS = ("u", "u^3", "u_x", "u_y", "u_xx", "u_yy", "u u_x", "u u_y", "u^2 u_x", "u^2 u_y")
# Meissner & Glasner 2024 Tables 3-4: (noise, missing, missing terms, extra terms, discovered coefficients on the
# true support in the order of TRUE[system] or None)
PAPER = {
    "ks": [(0.3, 0.4, 0, 0, (-1.007, -1.020, 1.019)), (0.5, 0.4, 0, 0, (-1.008, -1.022, 1.017)),
           (1.0, 0.4, 0, 0, (-1.012, -1.027, 1.008)), (0.3, 0.6, 0, 0, (-1.004, -1.015, 1.020)),
           (0.5, 0.6, 0, 0, (-1.003, -1.013, 1.017)), (1.0, 0.6, 1, 4, None)],
    "ac": [(0.1, 0.0, 0, 0, (0.972, -0.973, 0.974, 0.985)), (0.2, 0.0, 0, 0, (0.939, -0.940, 0.929, 0.952)),
           (0.3, 0.0, 0, 0, (0.889, -0.889, 0.864, 0.904)), (0.1, 0.1, 0, 0, (0.949, -0.949, 0.959, 0.957))],
}
TRUE = {"ks": {"u_xx": -1.0, "u_xxxx": -1.0, "u u_x": 1.0},
        "ac": {"u": 1.0, "u^3": -1.0, "u_xx": 1.0, "u_yy": 1.0}}


def system(name: str, ac_size: int, max_steps: int = 100):
    """Clean data `(T, *space)`, library, true coefficients, Δt, estimator and θ0."""
    if name == "ks":
        t, x, clean = wj.models.kuramoto_sivashinsky()
        library = wj.FiniteDifferenceLibrary(KS_TERMS, x[1] - x[0])
        solver = wj.discovery.LevenbergMarquardt(hessian="gauss_newton", max_steps=max_steps)
        est = wj.StateParameterRegression(lam=1e-2, penalty=1e-4, solver=solver)
        theta0 = np.where(np.array(KS_TERMS)[:, None] == "u_xxxx", -1.0, 1.0)
    else:
        t, x, clean = wj.models.allen_cahn_2d(ac_size)
        library = wj.FiniteDifferenceLibrary(AC_TERMS, (x[1] - x[0],) * 2)
        solver = wj.discovery.LevenbergMarquardt(hessian="gauss_newton", linear_solver="sparse",
                                                 max_steps=max_steps, alpha0=100.0)
        est = wj.StateParameterRegression(lam=1e-2, penalty=1e-6, solver=solver)
        theta0 = 1.0
    true = np.array([[TRUE[name].get(term, 0.0)] for term in library.terms])
    return clean, library, true, float(t[1] - t[0]), est, theta0


def realisation(clean, noise, missing, seed):
    """The noisy data of one realisation, NaN at the missing entries."""
    rng = np.random.default_rng(seed)
    noisy = clean + noise * clean.std() * rng.standard_normal(clean.shape)
    return np.where(rng.uniform(size=clean.shape) >= missing, noisy, np.nan)


def field(data, dt):
    """One field `(T, *space)` as a `wj.Field` on time levels Δt apart, the NaN entries missing."""
    data = np.asarray(data)[..., None]
    return wj.Field(dt * np.arange(data.shape[0]), data, ~np.isnan(data))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--seeds", type=int, default=1)
    parser.add_argument("--first-seed", type=int, default=0, help="run seeds first-seed … first-seed + seeds − 1")
    parser.add_argument("--systems", nargs="+", default=["ks", "ac"], choices=["ks", "ac"])
    parser.add_argument("--cells", type=int, nargs="+", default=None,
                        help="rows of each system's table to run (0-based; default: all)")
    parser.add_argument("--ac-size", type=int, default=256)
    parser.add_argument("--max-steps", type=int, default=100, help="Levenberg–Marquardt steps per fit (default 100)")
    parser.add_argument("--start", choices=["data", "smoothed", "interpolated"], default="data",
                        help="starting states: the forward-filled data (the paper's), the cross-validated smoother, or "
                             "the data with the smoother at the missing entries")
    args = parser.parse_args()
    previous = RESULTS / "discovery_pde.json"  # rows of the systems not run now are kept
    cmd = command()
    today = datetime.date.today().isoformat()
    machine = machine_info()
    processor = f"{machine['cpu_count']} CPU cores, {machine['processor']}"
    cells = {name: [PAPER[name][i] for i in (range(len(PAPER[name])) if args.cells is None else args.cells)
                    if i < len(PAPER[name])] for name in args.systems}
    rows = json.loads(previous.read_text())["rows"] if previous.exists() else []
    for r in rows:  # rows written before these fields were recorded
        r.setdefault("start", "data")
        r.setdefault("max_steps", 100)
    for name in args.systems:
        clean, library, true, dt, est, theta0 = system(name, args.ac_size, args.max_steps)
        run = {(name, tuple(clean.shape), cell[0], cell[1], args.start, args.max_steps, seed) for cell in cells[name]
               for seed in range(args.first_seed, args.first_seed + args.seeds)}
        rows = [r for r in rows if (r["system"], tuple(r["grid"]), r["noise"], r["missing"], r["start"], r["max_steps"],
                                    r["seed"]) not in run]
        for noise, missing, *paper in cells[name]:
            for seed in range(args.first_seed, args.first_seed + args.seeds):
                data = realisation(clean, noise, missing, seed)
                start = time.perf_counter()
                found = est.fit(library, field(data, dt), theta0, u0=args.start)
                seconds = time.perf_counter() - start
                support = true[:, 0] != 0
                row = {"system": name, "command": cmd, "date": today, "processor": processor,
                       "grid": list(clean.shape), "noise": noise,
                       "missing": missing, "seed": seed, "start": args.start, "max_steps": args.max_steps,
                       "seconds": seconds,
                       "models_tested": len(found.history), **found.compare(true), **{
                           f"state_error_{k}": v for k, v in found.state_error(clean[..., None]).items()},
                       "true_support_coefficients": found.params[support, 0].tolist(),
                       "equations": found.equations(4), "table": found.models_table(), "paper": paper}
                rows.append(row)
                print(f"{name} {noise:.0%} noise {missing:.0%} missing seed {seed} from {args.start}: "
                      f"missing {row['missing_terms']} "
                      f"extra {row['extra_terms']} max rel err {row['max_relative_error']:.3f} "
                      f"state err {row['state_error_reconstruction']:.3f} (data {row['state_error_data']:.3f}) "
                      f"{seconds:.1f} s\n  {row['equations'][0]}", flush=True)
                write(rows)


def write(rows):
    cell = {(name, noise, missing): i for name, table in PAPER.items() for i, (noise, missing, *_) in enumerate(table)}
    rows = sorted(rows, key=lambda r: (r["system"], r["grid"], r["start"], r["max_steps"],
                                       cell[r["system"], r["noise"], r["missing"]], r["seed"]))
    runs = sorted({(r["date"], r["command"], r.get("processor", "machine not recorded")) for r in rows})
    meta = {"machine": machine_info(), "runs": runs}
    write_results("discovery_pde", {"meta": meta, "rows": rows})
    lines = ["# Sparse state-and-parameter regression (Meissner & Glasner 2024) on its PDE protocols", "",
             "; ".join(f"`{c}` ({d}, {m})" for d, c, m in runs) + ". Per realisation: missing / extra terms "
             "against the true support, the discovered coefficients of the true terms (KS: u_xx, u_xxxx, u u_x; "
             "AC: u, u³, u_xx, u_yy; truth −1, −1, 1 and 1, −1, 1, 1), the largest relative coefficient error, "
             "the relative ‖·‖₂ error of the reconstructed states (of the data, observed entries, in brackets), "
             "wall time of the whole discovery (the first run of each system includes compilation), the cap on "
             "Levenberg–Marquardt steps per fit. Start: the "
             "states the fits start from, the forward-filled data (the paper's), the Gaussian smoother with widths "
             "chosen by leave-one-out cross-validation (`u0=\"smoothed\"`), or the data with that smoother at "
             "the missing entries (`u0=\"interpolated\"`). Paper: its single realisation "
             "(Meissner & Glasner 2024 Tables 3–4).", "",
             "| system (grid) | start | noise | missing | seed | missing terms | extra terms | true-term coefficients "
             "| max rel. err | state err (data) | models | s | step cap | paper: missing / extra / coefficients |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        m, e, coef = r["paper"]
        paper = f"{m} / {e}" + (" / " + ", ".join(f"{c:.3f}" for c in coef) if coef else "")
        mine = ", ".join(f"{c:.3f}" for c in r["true_support_coefficients"])
        grid = "×".join(map(str, r["grid"]))
        lines.append(f"| {r['system']} ({grid}) | {r['start']} | {r['noise']:.0%} | {r['missing']:.0%} | {r['seed']} "
                     f"| {r['missing_terms']} "
                     f"| {r['extra_terms']} | {mine} | {r['max_relative_error']:.3f} "
                     f"| {r['state_error_reconstruction']:.3f} ({r['state_error_data']:.3f}) | {r['models_tested']} "
                     f"| {r['seconds']:.1f} | {r['max_steps']} | {paper} |")
    lines += ["", "Discovered equations:", ""]
    lines += [f"- {r['system']} {'×'.join(map(str, r['grid']))} {r['noise']:.0%} / {r['missing']:.0%} seed "
              f"{r['seed']} from {r['start']}, ≤ {r['max_steps']} steps: "
              f"`{r['equations'][0]}`"
              for r in rows]
    write_results("discovery_pde", markdown=lines)


if __name__ == "__main__":
    main()

"""Sparse state-and-parameter regression on Meissner & Glasner 2024's ODE protocols (Tables 1–2).

Run from the repository root::

    python benchmarks/discovery_ode.py --seeds 5                   # the results file
    python benchmarks/discovery_ode.py --seeds 5 --start smoothed  # discovery_ode_smoothed

Van der Pol (Table 1) and Lorenz (Table 2), noise 30/50/70 % of each component's standard deviation,
20/40 % of the entries missing at random, (λ, R) = (1e-2, 1e-4), the estimator's defaults otherwise;
`--seeds` realisations per cell (the paper shows one), each fit started from the forward-filled data (the
paper's) or the cross-validated smoother (`--start smoothed`). Protocol and findings:
docs/pages/papers/meissner-glasner2024.md. Writes `benchmarks/results/discovery_ode{,_smoothed}.{json,md}`.
"""

import argparse
import datetime
import time

import diffrax
import jax.numpy as jnp
import numpy as np
from _common import command, machine_info, markdown_table, write_results

import wendyjax as wj

SYSTEMS = ("van_der_pol", "lorenz")
CELLS = [(0.3, 0.2), (0.5, 0.2), (0.7, 0.2), (0.3, 0.4), (0.5, 0.4), (0.7, 0.4)]
# Meissner & Glasner 2024 Tables 1-2: missing terms, extra terms, and (correct-support cells) the largest relative
# coefficient error and the relative ‖·‖₂ error (arithmetic on the printed coefficients)
PAPER = {
    "van_der_pol": [
        (0, 0, 0.121, 0.088),
        (0, 0, 0.193, 0.140),
        (0, 0, 0.259, 0.190),
        (0, 0, 0.060, 0.045),
        (1, 1, None, None),
        (1, 7, None, None),
    ],
    "lorenz": [
        (0, 0, 0.215, 0.046),
        (0, 0, 0.335, 0.075),
        (1, 2, None, None),
        (0, 0, 0.300, 0.063),
        (0, 0, 0.456, 0.098),
        (1, 10, None, None),
    ],
}


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


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5, help="realisations per cell")
    parser.add_argument("--start", choices=["data", "smoothed"], default="data", help="states the fits start from")
    args = parser.parse_args()
    est = wj.StateParameterRegression()
    rows = []
    for name in SYSTEMS:
        clean, library, true = system(name)
        for cell, (noise, missing) in enumerate(CELLS):
            for seed in range(args.seeds):
                data = realisation(clean, noise, missing, seed)
                start = time.perf_counter()
                found = est.fit(
                    library, wj.Trajectory(0.02 * np.arange(len(data)), data, ~np.isnan(data)), u0=args.start
                )
                row = {
                    "system": name,
                    "noise": noise,
                    "missing": missing,
                    "seed": seed,
                    "seconds": time.perf_counter() - start,
                    "models_tested": len(found.history),
                    **found.compare(true),
                    **{f"state_error_{k}": v for k, v in found.state_error(clean).items()},
                    "equations": found.equations(4),
                    "paper": PAPER[name][cell],
                }
                rows.append(row)
                print(
                    f"{name} {noise:.0%} noise {missing:.0%} missing seed {seed}: missing {row['missing_terms']} "
                    f"extra {row['extra_terms']} max rel err {row['max_relative_error']:.3f} "
                    f"{row['seconds']:.1f} s",
                    flush=True,
                )
                write(rows, args)


def write(rows, args):
    name = "discovery_ode" + ("" if args.start == "data" else f"_{args.start}")
    meta = {
        "date": datetime.date.today().isoformat(),
        "machine": machine_info(),
        "seeds": args.seeds,
        "command": command(),
    }
    write_results(name, {"meta": meta, "rows": rows})
    cpu = meta["machine"].get("cpu_model") or meta["machine"]["processor"]
    exact = {}
    for r in rows:
        exact.setdefault((r["system"], r["noise"], r["missing"]), []).append(r["missing_terms"] + r["extra_terms"] == 0)
    write_results(
        name,
        markdown=[
            f"# Sparse state-and-parameter regression (Meissner & Glasner 2024) on its ODE protocols — {meta['date']}",
            "",
            f"`{meta['command']}` on {meta['machine']['cpu_count']} CPU cores ({cpu}). Per realisation: missing / "
            "extra terms, the largest relative and the relative ‖·‖₂ coefficient error on the true support, the "
            "relative ‖·‖₂ error of the reconstructed states (of the data, observed entries, in brackets), wall time "
            "of the discovery (the first of each system compiles). Paper: its single realisation. States start from "
            f"{'the forward-filled data (the paper)' if args.start == 'data' else 'the smoother'}.",
            "",
            *markdown_table(
                [
                    "system",
                    "noise",
                    "missing",
                    "seed",
                    "missing terms",
                    "extra terms",
                    "max rel. err",
                    "rel. L2 err",
                    "state err (data)",
                    "models",
                    "s",
                    "paper: missing / extra / max rel / L2",
                ],
                [
                    [
                        r["system"],
                        f"{r['noise']:.0%}",
                        f"{r['missing']:.0%}",
                        r["seed"],
                        r["missing_terms"],
                        r["extra_terms"],
                        f"{r['max_relative_error']:.3f}",
                        f"{r['relative_l2_error']:.3f}",
                        f"{r['state_error_reconstruction']:.3f} ({r['state_error_data']:.3f})",
                        r["models_tested"],
                        f"{r['seconds']:.1f}",
                        paper_cell(r["paper"]),
                    ]
                    for r in rows
                ],
            ),
            "",
            "Exact support recovered (realisations):",
            "",
            *(f"- {s} {n:.0%} noise {m:.0%} missing: {sum(v)}/{len(v)}" for (s, n, m), v in exact.items()),
            "",
            f"Median wall time per discovery run: {np.median([r['seconds'] for r in rows]):.1f} s (all runs).",
        ],
    )


if __name__ == "__main__":
    main()

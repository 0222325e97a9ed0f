"""The PEtab benchmark collection through wendyjax.petab: log-likelihoods against AMICI's, batched multistarts.

    python benchmarks/petab_collection.py [--starts 100 --problems Boehm_JProteomeRes2014,Fujita_SciSignal2010]

Needs `.[petab]` and the collection (`--collection`). Per problem, in its own process: `wendyjax.petab.load`, the
log-likelihood against AMICI's published value and the collection's simulated data; `--starts N`: a multistart
(the first call, compilation included; `--warm`: and the same starts again, compiled);
`--pypesto-python PYTHON`: pyPESTO + AMICI beside it (`_pypesto_petab.py`).
"""

import argparse
import json
import math
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import _common as cm
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_COLLECTION = ROOT.parent / "shared" / "data" / "petab-benchmark"
# AMICI-dev/AMICI, tests/benchmark_models/benchmark_models.yaml (log-likelihoods at the nominal parameters)
AMICI = {"Bachmann_MSB2011": 418.40573341425295, "Beer_MolBioSystems2014": 58622.9145631413}
AMICI |= {"Boehm_JProteomeRes2014": -138.22199693517703, "Borghans_BiophysChem1997": 83.3237191357272}
AMICI |= {"Brannmark_JBC2010": -141.889113770537, "Bruno_JExpBot2016": 46.688176988431806}
AMICI |= {"Chen_MSB2009": -115700.1192629893, "Crauste_CellSystems2017": -190.96521897435176}
AMICI |= {"Elowitz_Nature2000": 63.20279991419332, "Fiedler_BMCSystBiol2016": 58.58390161681}
AMICI |= {"Fujita_SciSignal2010": 53.08377736998929, "Isensee_JCB2018": -3949.375966548649}
AMICI |= {"Lucarelli_CellSystems2018": -1681.6059879426584, "Schwen_PONE2014": -943.9992988598723}
AMICI |= {"Sneyd_PNAS2002": 319.79177818768756, "Smith_BMCSystBiol2013": -888198.436541014}
AMICI |= {"Weber_BMC2015": -296.2017922646865, "Zheng_PNAS2012": 278.33353271001477}

#: the Markdown table's columns: (header, row key, format)
COLUMNS = [("problem", "problem", "s"), ("status", "status", "s"), ("params", "parameters", "d")]
COLUMNS += [
    ("conditions", "conditions", "d"),
    ("ODE solver", "solver", "s"),
    ("llh (wendyjax)", "llh", ".10g"),
    ("AMICI published", "amici", ".10g"),
]
COLUMNS += [("rel. diff", "rel_amici", ".1e"), ("rel. diff vs AMICI here", "rel_amici_here", ".1e")]
COLUMNS += [("rel. diff vs simulatedData", "rel_simulated_data", ".1e"), ("llh s (incl. compile)", "llh_s", ".1f")]
COLUMNS += [("starts", "starts", "d"), ("draws replaced", "rejected_starts", "d")]
COLUMNS += [("best objective", "best_objective", ".6g"), ("within 0.1", "within_0.1", ".0%")]
COLUMNS += [("converged", "converged", "d")]
COLUMNS += [
    ("s per converged start", "s_per_converged", ".2f"),
    ("warm: s per converged start", "s_per_converged_warm", ".2f"),
]
COLUMNS += [("vmapped: s per converged start", "s_per_converged_vmap", ".2f"), ("pyPESTO best", "pypesto_best", ".6g")]
COLUMNS += [("pyPESTO within 0.1", "pypesto_within_0.1", ".0%")]
COLUMNS += [
    ("pyPESTO converged", "pypesto_converged", "d"),
    ("pyPESTO s per converged start", "pypesto_s_per_converged", ".2f"),
]
COLUMNS += [("pyPESTO with AMICI's model build: s per converged start", "pypesto_s_per_converged_build", ".2f")]
COLUMNS += [("starts at the best", "at_best", "d"), ("s per start at the best", "multistart_s_per_best", ".2f")]
COLUMNS += [("warm: s per start at the best", "multistart_warm_s_per_best", ".2f")]
COLUMNS += [("pyPESTO starts at the best", "pypesto_at_best", "d")]
COLUMNS += [("pyPESTO s per start at the best", "pypesto_s_per_best", ".2f")]
COLUMNS += [("pyPESTO with AMICI's model build: s per start at the best", "pypesto_s_build_per_best", ".2f")]


def simulated_data_llh(folder: Path, yaml_file: Path) -> float | None:
    """petab's log-likelihood of the collection's `simulatedData_*.tsv` (the reference tool's
    simulations), or None where the problem has none."""
    simulated = sorted(folder.glob("simulatedData_*.tsv"))
    if not simulated:
        return None
    import pandas as pd
    import petab.v1 as petab

    reference = petab.Problem.from_yaml(yaml_file)
    sim, measured = pd.read_csv(simulated[0], sep="\t"), reference.measurement_df
    try:  # petab matches simulations to measurements by their columns ...
        return float(petab.calculate_llh(measured, sim, reference.observable_df, reference.parameter_df))
    except Exception:  # ... which fails on some tables (empty preequilibration ids): then row by row
        if not (
            len(sim) == len(measured)
            and np.array_equal(sim["observableId"], measured["observableId"])
            and np.allclose(sim["time"], measured["time"])
        ):
            raise ValueError("its rows do not line up with the measurement table") from None
        table = measured.rename(columns={"measurement": "simulation"})
        table["simulation"] = sim["simulation"].to_numpy()
        return float(petab.calculate_llh(measured, table, reference.observable_df, reference.parameter_df))


def one(folder: Path, args) -> dict:
    """Everything measured on one problem, as a JSON-able dict."""
    import warnings

    import jax

    import wendyjax.petab as wp
    from wendyjax.estimators import status_names

    warnings.filterwarnings("ignore")

    row = {"problem": folder.name, "amici": AMICI.get(folder.name)}
    yaml_file = cm.problem_yaml(folder)
    if yaml_file is None:
        return row | {"status": "no YAML file"}
    start = time.perf_counter()
    try:
        problem = wp.load(
            yaml_file, rtol=args.rtol, atol=args.atol, max_steps=args.ode_max_steps, max_rejections=args.max_rejections
        )
    except (wp.PetabError, OSError) as error:
        return row | {"status": "refused", "reason": str(error)}
    row |= {"load_s": time.perf_counter() - start, "parameters": problem.n_parameters}
    row |= {"conditions": len(problem.conditions), "measurements": len(problem.measurements)}
    row["solver"] = type(problem.solver).__name__
    start = time.perf_counter()
    try:
        llh = float(problem.log_likelihood())
    except RuntimeError as error:
        return row | {"status": "solve failed", "reason": str(error)}
    row |= {"status": "loaded", "llh": llh, "llh_s": time.perf_counter() - start}
    if row["amici"] is not None:
        row["rel_amici"] = (llh - row["amici"]) / abs(row["amici"])
    try:
        if (reference := simulated_data_llh(folder, yaml_file)) is not None:
            row |= {"llh_simulated_data": reference, "rel_simulated_data": (llh - reference) / abs(reference)}
    except Exception as error:  # the collection's table belongs to another version of the problem
        row["simulated_data_error"] = f"{type(error).__name__}: {error}"[:200]
    if args.starts:
        result = wp.multistart(problem, args.starts, key=0, max_steps=args.max_steps)
        nominal = -llh - float(problem.log_prior())
        converged = int(result.converged.sum())
        row |= {"starts": args.starts, "devices": jax.device_count(), "best_objective": result.best_objective}
        row |= {"nominal_objective": nominal, "within_0.1": result.fraction_within(min(nominal, result.best_objective))}
        row |= {"converged": converged, "objectives": [float(v) for v in np.asarray(result.objectives)]}
        row["rejected_starts"] = result.n_rejected
        row |= {"multistart_s": result.seconds, "s_per_converged": result.seconds / max(converged, 1)}
        row["median_steps"] = float(np.median(np.asarray(result.num_steps)))
        row["steps"] = [int(n) for n in np.asarray(result.num_steps)]
        row["statuses"] = [str(n) for n in status_names(result.result)]  # per start, in order
        if args.warm:  # the same starts again, compiled (as pyPESTO's time leaves out AMICI's model build)
            warm = wp.multistart(problem, args.starts, key=0, max_steps=args.max_steps)
            row |= {
                "multistart_warm_s": warm.seconds,
                "s_per_converged_warm": warm.seconds / max(int(warm.converged.sum()), 1),
            }
        if args.vectorize == "both":
            vmapped = wp.multistart(problem, args.starts, key=0, max_steps=args.max_steps, vectorize=True)
            diff = np.abs(np.asarray(vmapped.objectives) - np.asarray(result.objectives))
            row["multistart_vmap_s"] = vmapped.seconds
            row["s_per_converged_vmap"] = vmapped.seconds / max(int(vmapped.converged.sum()), 1)
            row["vmap_max_objective_diff"] = float(np.nanmax(diff))
    return row


def pypesto(args, folder: Path, row: dict) -> dict:
    """pyPESTO + AMICI on the same problem, starts and step budget (`_pypesto_petab.py` in `--pypesto-python`)."""
    script, yaml_file = ROOT / "benchmarks" / "_pypesto_petab.py", cm.problem_yaml(folder)
    command = [args.pypesto_python, str(script), str(yaml_file), str(args.starts), str(args.max_steps)]
    # its environment's bin first: AMICI compiles the model with that environment's swig
    env = dict(os.environ, PATH=f"{Path(args.pypesto_python).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    try:
        out = subprocess.run(command, capture_output=True, text=True, timeout=args.timeout, cwd=ROOT, env=env)
    except subprocess.TimeoutExpired:
        return {"pypesto_error": f"timeout ({args.timeout:.0f} s)"}
    if out.returncode:
        return {"pypesto_error": (out.stderr.strip().splitlines() or ["?"])[-1][:300]}
    theirs = json.loads(out.stdout.strip().splitlines()[-1])
    theirs["rel_amici_here"] = (row["llh"] - theirs["amici_llh"]) / abs(theirs["amici_llh"])
    if "pypesto_s" in theirs:  # end to end as wendyjax's first call, which includes its compilation
        theirs["pypesto_s_build"] = theirs["amici_import_s"] + theirs["pypesto_s"]
        theirs["pypesto_s_per_converged_build"] = theirs["pypesto_s_build"] / max(theirs["pypesto_converged"], 1)
    if "pypesto_fvals" in theirs and "best_objective" in row:
        best_known = min(row["nominal_objective"], row["best_objective"], theirs["pypesto_best"])
        theirs["pypesto_within_0.1"] = float(np.mean(np.array(theirs["pypesto_fvals"], float) <= best_known + 0.1))
        row["within_0.1"] = float(np.mean(np.array(row["objectives"]) <= best_known + 0.1))
        theirs["best_known"] = best_known
    return theirs


def per_start_at_the_best(row: dict) -> dict:
    """Seconds per start that reached the best known objective (within 0.1): the efficiency
    that matters for a multistart, whose point is the best fit. The warm call repeats the
    first call's starts, so it reaches the best from as many."""
    best_known = row.get("best_known", min(row["nominal_objective"], row["best_objective"]))
    out = {}
    for side, objectives, times in (
        ("", row["objectives"], ("multistart_s", "multistart_warm_s")),
        ("pypesto_", row.get("pypesto_fvals", []), ("pypesto_s", "pypesto_s_build")),
    ):
        reached = int(np.sum(np.array(objectives, float) <= best_known + 0.1))
        if objectives:
            out[f"{side}at_best"] = reached
        for t in times:
            if t in row and reached:
                out[f"{t}_per_best"] = row[t] / reached
    return out


def main() -> None:
    parser = cm.parser(__doc__)
    parser.add_argument("--collection", type=Path, default=DEFAULT_COLLECTION)
    parser.add_argument("--problems", help="comma-separated problem names (default: every folder)")
    parser.add_argument("--starts", type=int, default=0, help="multistart starts per problem (default 0: none)")
    parser.add_argument("--max-steps", type=int, default=200)
    parser.add_argument("--rtol", type=float, default=1e-8)
    parser.add_argument("--atol", type=float, default=1e-12)
    parser.add_argument("--ode-max-steps", type=int, default=10_000, help="steps per ODE solve (wp.load's max_steps)")
    parser.add_argument(
        "--max-rejections", type=int, default=100, help="rejected steps in a row that fail a solve (wp.load's)"
    )
    parser.add_argument("--timeout", type=float, default=900, help="seconds per problem")
    parser.add_argument("--name", default="petab_collection")
    parser.add_argument("--pypesto-python", help="a Python with amici, pypesto, fides, petab: pyPESTO + AMICI beside")
    parser.add_argument("--vectorize", choices=("auto", "both"), default="auto", help="both: also vmapped")
    parser.add_argument("--warm", action="store_true", help="also time a second, compiled call of the same starts")
    parser.add_argument("--one", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(one(args.collection / args.one, args)))
        return
    if not args.collection.is_dir():
        parser.error(f"--collection: no folder {args.collection} (give the collection's Benchmark-Models folder)")
    rows, folders = [], sorted(p.name for p in args.collection.iterdir() if p.is_dir())
    for name in args.problems.split(",") if args.problems else folders:
        start = time.perf_counter()
        try:  # the same arguments, for this one problem
            command = [sys.executable, __file__, *sys.argv[1:], "--one", name, "--collection", str(args.collection)]
            out = subprocess.run(command, capture_output=True, text=True, timeout=args.timeout, cwd=ROOT)
            if out.returncode == 0:
                row = json.loads(out.stdout.strip().splitlines()[-1])
            else:
                row = {"problem": name, "status": "error", "reason": out.stderr.strip().splitlines()[-1][:300]}
        except subprocess.TimeoutExpired:
            row = {"problem": name, "status": f"timeout ({args.timeout:.0f} s)", "amici": AMICI.get(name)}
        if args.pypesto_python and row["status"] == "loaded":
            row |= pypesto(args, args.collection / name, row)
        if "objectives" in row:
            row |= per_start_at_the_best(row)
        row["wall_s"] = time.perf_counter() - start
        rows.append(row)
        print(json.dumps(row), flush=True)

    def cells(r):  # a refusal shown by the feature it names
        if r["status"] == "refused" and (feature := re.search(r"\b(uses|has) ([^(]+)", r.get("reason", ""))):
            r = r | {"status": f"refused: {feature.group(1)} {feature.group(2).strip()}"}
        values = [(r.get(key), spec) for _, key, spec in COLUMNS]
        return ["" if v is None or (isinstance(v, float) and math.isnan(v)) else format(v, spec) for v, spec in values]

    matched = [r for r in rows if r.get("rel_amici") is not None and abs(r["rel_amici"]) <= 1e-6]
    on_error = os.environ.get("EQX_ON_ERROR")
    md = cm.paragraphs(
        "# PEtab collection through wendyjax.petab",
        cm.provenance(info := cm.machine_info(), f"; ODE tolerances rtol {args.rtol:g}, atol {args.atol:g}")
        + (f" Environment: EQX_ON_ERROR={on_error}." if on_error else "")
        + "".join(sorted({f" pyPESTO side: {r['pypesto_versions']}." for r in rows if "pypesto_versions" in r})),
        cm.markdown_table([h for h, _, _ in COLUMNS], [cells(r) for r in rows]),
        f"{sum(r['status'] == 'loaded' for r in rows)} of {len(rows)} problems loaded; {len(matched)} match "
        "AMICI's published log-likelihood to 1e-6 relative.",
    )
    settings = vars(args) | {"collection": str(args.collection)}
    cm.write_results(args.name, {"machine": info, "settings": settings, "rows": rows}, md, default=str)


if __name__ == "__main__":
    main()

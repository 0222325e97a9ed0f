"""The PEtab benchmark collection through wendyjax.petab: log-likelihoods against AMICI's, batched multistarts.

Run from the repository root (needs `pip install -e .[petab]`)::

    python benchmarks/petab_collection.py                          # every problem: load + log-likelihood
    python benchmarks/petab_collection.py --starts 100 --problems Boehm_JProteomeRes2014,Fujita_SciSignal2010
    python benchmarks/petab_collection.py --collection PATH/TO/Benchmark-Models-PEtab/Benchmark-Models

`--collection` is the folder with one sub-folder per problem (default: `../shared/data/petab-benchmark`
beside the repository, when it exists). Each problem runs in its own process, under `--timeout` seconds:

1. `wendyjax.petab.load` (or the reason it refuses the problem);
2. the log-likelihood at the nominal parameters, against the value AMICI's test suite publishes
   (AMICI-dev/AMICI, tests/benchmark_models/benchmark_models.yaml) and against petab's own
   `calculate_llh` on the collection's `simulatedData_*.tsv` (where the problem has one: the
   simulations of the collection's reference tool);
3. with `--starts N`: `wendyjax.petab.multistart` (N starts drawn in the box, one compiled call):
   the best objective, the fraction of starts within 0.1 of the best known objective (the lower of
   the nominal one and the best reached), and the wall time per converged start (compilation included);
   with `--vectorize both` also the same starts vmapped (`vectorize=True`), in the same process.

With `--pypesto-python PYTHON` (an interpreter with amici, pypesto, fides and petab; AMICI compiles
every model with a C++ toolchain and SWIG) pyPESTO + AMICI run the same problem, starts and step
budget beside wendyjax (`benchmarks/_pypesto_petab.py`). Results go to
`benchmarks/results/petab_collection.{json,md}` (`--name` for another stem).
"""

import argparse
import json
import math
import os
import platform
import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_COLLECTION = ROOT.parent / "shared" / "data" / "petab-benchmark"
# AMICI-dev/AMICI, tests/benchmark_models/benchmark_models.yaml (log-likelihoods at the nominal parameters)
AMICI = {
    "Bachmann_MSB2011": 418.40573341425295, "Beer_MolBioSystems2014": 58622.9145631413,
    "Boehm_JProteomeRes2014": -138.22199693517703, "Borghans_BiophysChem1997": 83.3237191357272,
    "Brannmark_JBC2010": -141.889113770537, "Bruno_JExpBot2016": 46.688176988431806,
    "Chen_MSB2009": -115700.1192629893, "Crauste_CellSystems2017": -190.96521897435176,
    "Elowitz_Nature2000": 63.20279991419332, "Fiedler_BMCSystBiol2016": 58.58390161681,
    "Fujita_SciSignal2010": 53.08377736998929, "Isensee_JCB2018": -3949.375966548649,
    "Lucarelli_CellSystems2018": -1681.6059879426584, "Schwen_PONE2014": -943.9992988598723,
    "Sneyd_PNAS2002": 319.79177818768756, "Smith_BMCSystBiol2013": -888198.436541014,
    "Weber_BMC2015": -296.2017922646865, "Zheng_PNAS2012": 278.33353271001477,
}


def one(folder: Path, starts: int, rtol: float, atol: float, max_steps: int, cpu_devices: int = 1,
        vectorize: str = "auto") -> dict:
    """Everything measured on one problem, as a JSON-able dict."""
    import warnings

    import jax

    jax.config.update("jax_enable_x64", True)
    if cpu_devices > 1:  # the multistart's starts sharded over this many XLA CPU devices (one per core)
        jax.config.update("jax_num_cpu_devices", cpu_devices)
    warnings.filterwarnings("ignore")
    import numpy as np
    import pandas as pd
    import petab.v1 as petab

    import wendyjax.petab as wp

    name = folder.name
    row = {"problem": name, "amici": AMICI.get(name)}
    yamls = sorted(folder.glob("*.yaml"))
    if not yamls:
        return row | {"status": "no YAML file"}
    start = time.perf_counter()
    try:
        problem = wp.load(yamls[0], rtol=rtol, atol=atol)
    except (wp.PetabError, OSError) as error:
        return row | {"status": "refused", "reason": str(error)}
    row |= {"load_s": time.perf_counter() - start, "parameters": problem.n_parameters,
            "conditions": len(problem.conditions), "measurements": len(problem.measurements)}
    start = time.perf_counter()
    try:
        llh = float(problem.log_likelihood())
    except RuntimeError as error:
        return row | {"status": "solve failed", "reason": str(error)}
    row |= {"status": "loaded", "llh": llh, "llh_s": time.perf_counter() - start}
    if row["amici"] is not None:
        row["rel_amici"] = (llh - row["amici"]) / abs(row["amici"])
    simulated = sorted(folder.glob("simulatedData_*.tsv"))
    if simulated:
        reference = petab.Problem.from_yaml(yamls[0])
        sim = pd.read_csv(simulated[0], sep="\t")
        measured = reference.measurement_df
        try:  # petab matches simulations to measurements by their columns ...
            row["llh_simulated_data"] = float(petab.calculate_llh(measured, sim, reference.observable_df,
                                                                  reference.parameter_df))
        except Exception:  # ... which fails on some tables (empty preequilibration ids): then row by row
            try:
                same = len(sim) == len(measured) and (
                    sim["observableId"].to_numpy() == measured["observableId"].to_numpy()).all() and np.allclose(
                    sim["time"], measured["time"])
                if not same:
                    raise ValueError("its rows do not line up with the measurement table") from None
                table = measured.rename(columns={"measurement": "simulation"})
                table["simulation"] = sim["simulation"].to_numpy()
                row["llh_simulated_data"] = float(petab.calculate_llh(measured, table, reference.observable_df,
                                                                      reference.parameter_df))
            except Exception as error:  # the collection's table belongs to another version of the problem
                row["simulated_data_error"] = f"{type(error).__name__}: {error}"[:200]
        if "llh_simulated_data" in row:
            row["rel_simulated_data"] = (llh - row["llh_simulated_data"]) / abs(row["llh_simulated_data"])
    if starts:
        result = wp.multistart(problem, starts, key=0, max_steps=max_steps)
        nominal = -llh - float(problem.log_prior())
        best_known = min(nominal, result.best_objective)
        converged = int(result.converged.sum())
        row |= {"starts": starts, "devices": jax.device_count(), "best_objective": result.best_objective,
                "nominal_objective": nominal,
                "within_0.1": result.fraction_within(best_known), "converged": converged,
                "objectives": [float(v) for v in np.asarray(result.objectives)],
                "multistart_s": result.seconds, "s_per_converged": result.seconds / max(converged, 1),
                "median_steps": float(np.median(np.asarray(result.num_steps)))}
        if vectorize == "both":
            vmapped = wp.multistart(problem, starts, key=0, max_steps=max_steps, vectorize=True)
            row |= {"multistart_vmap_s": vmapped.seconds,
                    "s_per_converged_vmap": vmapped.seconds / max(int(vmapped.converged.sum()), 1),
                    "vmap_max_objective_diff": float(np.nanmax(np.abs(np.asarray(vmapped.objectives)
                                                                      - np.asarray(result.objectives))))}
    return row


def _pypesto(args, folder: Path, row: dict) -> dict:
    """pyPESTO + AMICI on the same problem, starts and step budget (benchmarks/_pypesto_petab.py
    in the interpreter `--pypesto-python`)."""
    yaml_file = sorted(folder.glob("*.yaml"))[0]
    command = [args.pypesto_python, str(ROOT / "benchmarks" / "_pypesto_petab.py"), str(yaml_file), str(args.starts),
               str(args.max_steps)]
    try:
        # its environment's bin first: AMICI compiles the model with that environment's swig
        env = dict(os.environ, PATH=f"{Path(args.pypesto_python).parent}{os.pathsep}{os.environ.get('PATH', '')}")
        out = subprocess.run(command, capture_output=True, text=True, timeout=args.timeout, cwd=ROOT, env=env)
    except subprocess.TimeoutExpired:
        return {"pypesto_error": f"timeout ({args.timeout:.0f} s)"}
    if out.returncode:
        return {"pypesto_error": (out.stderr.strip().splitlines() or ["?"])[-1][:300]}
    theirs = json.loads(out.stdout.strip().splitlines()[-1])
    theirs["rel_amici_here"] = (row["llh"] - theirs["amici_llh"]) / abs(theirs["amici_llh"])
    if "pypesto_fvals" in theirs and "best_objective" in row:
        best_known = min(row["nominal_objective"], row["best_objective"], theirs["pypesto_best"])
        fvals = np.array(theirs["pypesto_fvals"], dtype=float)
        theirs["pypesto_within_0.1"] = float(np.mean(fvals <= best_known + 0.1))
        row["within_0.1"] = float(np.mean(np.array(row["objectives"]) <= best_known + 0.1))
        theirs["best_known"] = best_known
    return theirs


def _fmt(value, spec):
    return "" if value is None or (isinstance(value, float) and math.isnan(value)) else format(value, spec)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--collection", type=Path, default=DEFAULT_COLLECTION)
    parser.add_argument("--problems", help="comma-separated problem names (default: every folder)")
    parser.add_argument("--starts", type=int, default=0, help="multistart starts per problem (default 0: none)")
    parser.add_argument("--max-steps", type=int, default=200)
    parser.add_argument("--rtol", type=float, default=1e-8)
    parser.add_argument("--atol", type=float, default=1e-12)
    parser.add_argument("--timeout", type=float, default=900, help="seconds per problem")
    parser.add_argument("--name", default="petab_collection")
    parser.add_argument("--pypesto-python", help="a Python interpreter with amici, pypesto, fides and petab: runs "
                                                 "pyPESTO + AMICI on every loaded problem beside wendyjax")
    parser.add_argument("--cpu-devices", type=int, default=1,
                        help="XLA CPU devices to shard the starts over (e.g. 2 on a 2-core machine; default 1)")
    parser.add_argument("--vectorize", choices=("auto", "both"), default="auto",
                        help="both: the multistart also vmapped (vectorize=True), timed beside the default")
    parser.add_argument("--one", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(one(args.collection / args.one, args.starts, args.rtol, args.atol, args.max_steps,
                             args.cpu_devices, args.vectorize)))
        return
    if not args.collection.is_dir():
        parser.error(f"--collection: no folder {args.collection} (give the collection's Benchmark-Models folder)")
    names = args.problems.split(",") if args.problems else sorted(p.name for p in args.collection.iterdir()
                                                                  if p.is_dir())
    rows = []
    for name in names:
        command = [sys.executable, __file__, "--one", name, "--collection", str(args.collection), "--starts",
                   str(args.starts), "--max-steps", str(args.max_steps), "--rtol", str(args.rtol), "--atol",
                   str(args.atol), "--cpu-devices", str(args.cpu_devices), "--vectorize", args.vectorize]
        start = time.perf_counter()
        try:
            out = subprocess.run(command, capture_output=True, text=True, timeout=args.timeout, cwd=ROOT)
            row = json.loads(out.stdout.strip().splitlines()[-1]) if out.returncode == 0 else \
                {"problem": name, "status": "error", "reason": out.stderr.strip().splitlines()[-1][:300]}
        except subprocess.TimeoutExpired:
            row = {"problem": name, "status": f"timeout ({args.timeout:.0f} s)", "amici": AMICI.get(name)}
        if args.pypesto_python and row["status"] == "loaded":
            row |= _pypesto(args, args.collection / name, row)
        row["wall_s"] = time.perf_counter() - start
        rows.append(row)
        print(json.dumps(row), flush=True)
    _write(rows, args)


def _write(rows: list[dict], args) -> None:
    out = ROOT / "benchmarks" / "results"
    machine = (f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
               f"Python {platform.python_version()}")
    (out / f"{args.name}.json").write_text(json.dumps({"machine": machine, "settings": vars(args) | {
        "collection": str(args.collection)}, "rows": rows}, indent=1, default=str))
    on_error = os.environ.get("EQX_ON_ERROR")
    lines = [f"# PEtab collection through wendyjax.petab\n\nMachine: {machine}. Command: `python "
             f"benchmarks/petab_collection.py {' '.join(sys.argv[1:])}`; ODE tolerances rtol {args.rtol:g}, atol "
             f"{args.atol:g}." + (f" Environment: EQX_ON_ERROR={on_error}." if on_error else "")
             + "\n",
             "| problem | status | params | conditions | llh (wendyjax) | AMICI published | rel. diff | rel. diff vs "
             "AMICI here | rel. diff vs simulatedData | llh s (incl. compile) | starts | best objective | within 0.1 "
             "| s per converged start | vmapped: s per converged start | pyPESTO best | pyPESTO within 0.1 | pyPESTO s "
             "per converged start |",
             "|" + "---|" * 18]
    for r in rows:
        feature = re.search(r"\b(uses|has) ([^(]+)", r.get("reason", ""))
        status = f"refused: {feature.group(1)} {feature.group(2).strip()}" if r["status"] == "refused" and feature \
            else r["status"]
        cells = [r["problem"], status, _fmt(r.get("parameters"), "d"), _fmt(r.get("conditions"), "d"),
                 _fmt(r.get("llh"), ".10g"), _fmt(r.get("amici"), ".10g"), _fmt(r.get("rel_amici"), ".1e"),
                 _fmt(r.get("rel_amici_here"), ".1e"), _fmt(r.get("rel_simulated_data"), ".1e"),
                 _fmt(r.get("llh_s"), ".1f"), _fmt(r.get("starts"), "d"), _fmt(r.get("best_objective"), ".6g"),
                 _fmt(r.get("within_0.1"), ".0%"), _fmt(r.get("s_per_converged"), ".2f"),
                 _fmt(r.get("s_per_converged_vmap"), ".2f"),
                 _fmt(r.get("pypesto_best"), ".6g"), _fmt(r.get("pypesto_within_0.1"), ".0%"),
                 _fmt(r.get("pypesto_s_per_converged"), ".2f")]
        lines.append("| " + " | ".join(cells) + " |")
    matched = [r for r in rows if r.get("rel_amici") is not None and abs(r["rel_amici"]) <= 1e-6]
    loaded = [r for r in rows if r["status"] == "loaded"]
    lines.append(f"\n{len(loaded)} of {len(rows)} problems loaded; {len(matched)} match AMICI's published "
                 f"log-likelihood to 1e-6 relative.")
    (out / f"{args.name}.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()

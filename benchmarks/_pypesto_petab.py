"""pyPESTO + AMICI side of `petab_collection.py --pypesto-python PYTHON`: one problem's AMICI log-likelihood at the
nominal parameters and a fides multistart, as one JSON line (`python benchmarks/_pypesto_petab.py YAML STARTS STEPS`).
"""

import json
import logging
import sys
import tempfile
import time
import warnings
from importlib.metadata import version

warnings.filterwarnings("ignore")
logging.disable(logging.WARNING)

import numpy as np  # noqa: E402
import petab.v1 as petab  # noqa: E402
import pypesto  # noqa: E402
import pypesto.optimize as optimize  # noqa: E402
import pypesto.petab  # noqa: E402


def main() -> None:
    path, starts, max_steps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    begin = time.perf_counter()
    problem = petab.Problem.from_yaml(path)
    importer = pypesto.petab.PetabImporter(problem, output_folder=tempfile.mkdtemp(prefix="amici_"))
    pp = importer.create_problem()
    row = {"amici_import_s": time.perf_counter() - begin}
    row["pypesto_versions"] = " ".join(f"{m}=={version(m)}" for m in ("amici", "pypesto", "fides", "petab"))
    # the log-likelihood: AMICI's objective alone (pyPESTO's problem adds the priors to it), of every parameter
    likelihood = importer.create_objective_creator().create_objective()
    row["amici_llh"] = -float(likelihood(np.asarray(problem.x_nominal_scaled)))
    if starts:
        # one process: pyPESTO's process pool pickles the AMICI objective, which needs AMICI built with HDF5
        optimizer = optimize.FidesOptimizer(options={"maxiter": max_steps}, verbose=logging.ERROR)
        start = time.perf_counter()
        engine = pypesto.engine.SingleCoreEngine()
        result = optimize.minimize(pp, optimizer=optimizer, n_starts=starts, engine=engine, progress_bar=False)
        seconds = time.perf_counter() - start
        fvals = np.array([r.fval for r in result.optimize_result.list])
        converged = int(sum(r.exitflag is not None and r.exitflag > 0 for r in result.optimize_result.list))
        row |= {"pypesto_best": float(np.nanmin(fvals)), "pypesto_fvals": [float(f) for f in fvals]}
        row |= {"pypesto_converged": converged, "pypesto_s": seconds}
        row["pypesto_s_per_converged"] = seconds / max(converged, 1)
    print(json.dumps(row))


if __name__ == "__main__":
    main()

"""PEtab multistarts with the Fisher information alone against the hybrid that switches to BFGS (bfgs_after).

    python benchmarks/petab_hybrid_hessian.py [--problems Zhao_QuantBiol2020,Oliveira_NatCommun2021] [--starts 32]

Needs `.[petab]` and the collection (`--collection`). Per problem, in one run: `wp.multistart` from the same
`--starts` starts (key 0, 200 steps) with the PEtab fits' trust region as it was before the hybrid
(`bfgs_after=None`: the Fisher information as the Hessian throughout) and with each of `--after` (a BFGS
approximation replaces it once that many steps in a row left the radius unchanged; fides' `HybridFixed`, pyPESTO's
default, switches after 20). Reported: the starts that converged, those stopped at the step limit, the best objective,
the starts within 0.1 of the best either setting reached, the median number of steps, and the wall time of the call
(its fits' compilation included; a one-step call before compiles the checks of the draws, which both share).
"""

import dataclasses
import inspect
import time
from pathlib import Path

import _common as cm
import jax
import numpy as np

jax.config.update("jax_enable_x64", True)
import wendyjax.petab as wp  # noqa: E402

#: the PEtab fits' trust region: multistart's default solver
SOLVER = inspect.signature(wp.multistart).parameters["solver"].default

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_COLLECTION = ROOT.parent / "shared" / "data" / "petab-benchmark"
PROBLEMS = (
    "Zhao_QuantBiol2020,Oliveira_NatCommun2021,Boehm_JProteomeRes2014,Borghans_BiophysChem1997,Elowitz_Nature2000"
)


def main() -> None:
    parser = cm.parser(__doc__)
    parser.add_argument("--collection", type=Path, default=DEFAULT_COLLECTION)
    parser.add_argument("--problems", default=PROBLEMS, help="comma-separated problem names")
    parser.add_argument("--starts", type=int, default=32)
    parser.add_argument("--max-steps", type=int, default=200)
    parser.add_argument("--after", default="20", help="bfgs_after values beside None, comma-separated")
    parser.add_argument("--name", default="petab_hybrid_hessian")
    args = parser.parse_args()
    settings = [None] + [int(v) for v in args.after.split(",")]
    rows = []
    for name in args.problems.split(","):
        problem = wp.load(cm.problem_yaml(args.collection / name))
        # one step first: compiles the checks of the draws, which both settings share, outside their timings
        wp.multistart(problem, args.starts, key=0, max_steps=1)
        results = {}
        for after in settings:
            solver = dataclasses.replace(SOLVER, bfgs_after=after)
            start = time.perf_counter()
            result = wp.multistart(problem, args.starts, key=0, max_steps=args.max_steps, solver=solver)
            results[after] = (result, time.perf_counter() - start)
        best = min(r.best_objective for r, _ in results.values())
        for after, (result, seconds) in results.items():
            steps = np.asarray(result.num_steps)
            converged = int(result.converged.sum())
            row = {"problem": name, "bfgs_after": after, "starts": args.starts, "converged": converged}
            row |= {"at_step_limit": int(np.sum(steps >= args.max_steps)), "best_objective": result.best_objective}
            row |= {"within_0.1_of_best": int(np.sum(np.asarray(result.objectives) <= best + 0.1))}
            row |= {"median_steps": float(np.median(steps)), "seconds": seconds}
            row["seconds_per_converged"] = seconds / converged if converged else None
            print(row, flush=True)
            rows.append(row)
    header = [
        "problem", "bfgs_after", "converged", "at the step limit", "best objective", "within 0.1 of the best",
        "median steps", "s (compilation included)", "s per converged start",
    ]  # fmt: skip
    table = [
        [
            r["problem"], "None" if r["bfgs_after"] is None else r["bfgs_after"], f"{r['converged']} of {r['starts']}",
            r["at_step_limit"], f"{r['best_objective']:.3f}", r["within_0.1_of_best"], r["median_steps"],
            round(r["seconds"], 1), "" if r["seconds_per_converged"] is None else round(r["seconds_per_converged"], 2),
        ]
        for r in rows
    ]  # fmt: skip
    cm.write_table_report(
        args.name,
        "PEtab multistarts: the Fisher information alone against the hybrid with BFGS",
        f"`wp.multistart(problem, {args.starts}, key=0, max_steps={args.max_steps}, solver=...)` with the PEtab "
        "fits' trust region and `bfgs_after` as in the table (None: the Fisher information throughout), one call "
        "each, its fits' compilation included (a one-step call before compiles the checks of the draws, which both "
        'share); "within 0.1 of the best": of the lowest objective either setting reached.',
        header,
        table,
        {"settings": vars(args) | {"collection": str(args.collection)}, "rows": rows},
    )


if __name__ == "__main__":
    main()

"""How many rejected steps in a row a PEtab problem's ODE solves need: wp.load's max_rejections against its cost.

    python benchmarks/petab_rejections.py [--problems Crauste_CellSystems2017,Boehm_JProteomeRes2014] [--draws 48]

Needs `.[petab]` and the collection (`--collection`). Per problem: its log-likelihood at the nominal parameters and
at `--draws` points drawn uniformly in its box, with each of the limits `--limits` (the last, 10^9, is none in
practice): how many solves succeed, and the seconds for all points, compiled. A limit below what some solve needs
turns that success into a failure; above it, only the failures end sooner.
"""

import time
from pathlib import Path

import _common as cm
import jax
import numpy as np

jax.config.update("jax_enable_x64", True)
import wendyjax.petab as wp  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_COLLECTION = ROOT.parent / "shared" / "data" / "petab-benchmark"
PROBLEMS = (
    "Boehm_JProteomeRes2014,Elowitz_Nature2000,Fiedler_BMCSystBiol2016,Oliveira_NatCommun2021,"
    "Crauste_CellSystems2017,Fujita_SciSignal2010"
)


def solved(problem, x) -> bool:
    try:
        return bool(np.isfinite(float(problem.log_likelihood(x))))
    except RuntimeError:  # the solve failed
        return False


def main() -> None:
    parser = cm.parser(__doc__)
    parser.add_argument("--collection", type=Path, default=DEFAULT_COLLECTION)
    parser.add_argument("--problems", default=PROBLEMS, help="comma-separated problem names")
    parser.add_argument("--draws", type=int, default=48)
    parser.add_argument("--limits", default="10,20,50,100,1000000000", help="max_rejections values, comma-separated")
    parser.add_argument("--name", default="petab_rejections")
    args = parser.parse_args()
    limits = [int(v) for v in args.limits.split(",")]
    rows = []
    for name in args.problems.split(","):
        row = {"problem": name}
        for limit in limits:
            problem = wp.load(cm.problem_yaml(args.collection / name), max_rejections=limit)
            points = np.concatenate(
                [
                    np.asarray(problem.nominal)[None],
                    np.asarray(
                        jax.random.uniform(
                            jax.random.key(1),
                            (args.draws, problem.n_parameters),
                            minval=problem.lower,
                            maxval=problem.upper,
                        )
                    ),
                ]
            )
            solved(problem, points[0])  # compiles
            start = time.perf_counter()
            ok = [solved(problem, x) for x in points]
            row[f"solved_{limit}"] = int(sum(ok))
            row[f"seconds_{limit}"] = time.perf_counter() - start
            row.setdefault("solver", type(problem.solver).__name__)
        print(row, flush=True)
        rows.append(row)
    header = ["problem", "ODE solver"] + [f"solved, limit {v:g}" for v in limits] + [f"s, limit {v:g}" for v in limits]
    table = [
        [r["problem"], r["solver"]] + [r[f"solved_{v}"] for v in limits] + [round(r[f"seconds_{v}"], 2) for v in limits]
        for r in rows
    ]
    cm.write_table_report(
        args.name,
        "Rejected steps in a row: PEtab solves against wp.load's max_rejections",
        f"Each problem's nominal parameters and {args.draws} points drawn uniformly in its box (key 1), the "
        "log-likelihood's solves at wp.load's default tolerances: how many succeed, and the seconds for all of them "
        "(compiled).",
        header,
        table,
        {"settings": vars(args) | {"collection": str(args.collection)}, "rows": rows},
    )


if __name__ == "__main__":
    main()

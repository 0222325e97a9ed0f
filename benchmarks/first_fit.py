"""The first fit of a fresh Python process, end to end: what a user waits for before any result.

    python benchmarks/first_fit.py [--tree OLD --tree .]   # source trees side by side, 3 fresh processes per case

Each case in a new interpreter with a source tree first on `PYTHONPATH`: the seconds of the first `fit(...)` (tracing,
compiling, solving) and of a second, identical one; medians over `--repeats` processes, the trees taking turns.
"""

import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

import _common as cm

SETUP = """
import json, sys, time, jax, numpy as np
jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp, wendyjax as wj
lorenz = wj.models.lorenz()
data = lorenz.simulate(jax.random.key(0), 0.05, subsample=4)
p0 = np.asarray(lorenz.p_true) * 1.1
flu = wj.datasets.boarding_school()
N = wj.datasets.BOARDING_SCHOOL_N
sir = wj.ODEModel(lambda u, p, t: jnp.stack([-p[0] * u[0] * u[1] / N, p[0] * u[0] * u[1] / N - p[1] * u[1],
                  p[1] * u[1]]), ["S", "I", "R"], ["beta", "gamma", "I0", "phi"],
                  bounds=([0.1, 0.05, 0.5, 0.1], [5.0, 2.0, 20.0, 1000.0]), name="flu")
tied = lambda p: jnp.stack([N - p[2], p[2], 0.0])
goodwin = wj.models.goodwin_3d()
g_data = goodwin.simulate(jax.random.key(0), subsample=4)
g_p0 = np.clip(np.asarray(goodwin.p_true) * 1.2, *goodwin.model.bounds)
"""

#: case → the fit call (Lorenz: M = 257 samples, 5 % noise; Goodwin-3D: the Uncertainty guide's, not linear in its
#: parameters; the flu: the Real data guide's counts)
CASES = {
    "lorenz-output-error": "wj.OutputError().fit(lorenz.model, data, p0)",
    "lorenz-hybrid": "wj.Hybrid().fit(lorenz.model, data, p0)",
    "lorenz-mle": "wj.MLE().fit(lorenz.model, data, p0)",
    "lorenz-mle-hessian": "wj.MLE().fit(lorenz.model, data, p0, covariance='hessian')",
    "goodwin-mle-hessian": "wj.MLE().fit(goodwin.model, g_data, g_p0, covariance='hessian')",
    "flu-output-error-negative-binomial": (
        "wj.OutputError().fit(sir, flu, [1.5, 0.5, 3.0, 10.0], u0=tied, noise=wj.NegativeBinomial('phi'))"
    ),
}


def one_process(tree: Path, call: str) -> tuple[float, float]:
    """(first call's seconds, second call's) of `call` in a fresh interpreter on `tree`."""
    timed = "s = time.perf_counter(); {c}; t.append(time.perf_counter() - s)"
    code = SETUP + "t = []\n" + "\n".join([timed.format(c=call)] * 2) + "\nprint(json.dumps([wj.__file__, *t]))"
    env = {**os.environ, "PYTHONPATH": str(tree), "PYTHONWARNINGS": "ignore"}
    # run in the tree: `python -c` puts the working directory first on the path
    out = subprocess.run([sys.executable, "-c", code], env=env, cwd=tree, capture_output=True, text=True, check=True)
    where, first, second = json.loads(out.stdout.strip().splitlines()[-1])
    if not Path(where).resolve().is_relative_to(tree):
        raise RuntimeError(f"the fresh process imported wendyjax from {where}, not from the tree {tree}")
    return first, second


def main() -> None:
    ap = cm.parser(__doc__)
    ap.add_argument("--tree", action="append", type=Path, help="a wendyjax source tree (repeatable; default .)")
    ap.add_argument("--repeats", type=int, default=3, help="fresh processes per case and tree")
    ap.add_argument("--cases", nargs="*", choices=list(CASES), default=list(CASES))
    ap.add_argument("--name", default="first_fit")
    args = ap.parse_args()
    trees = [t.resolve() for t in args.tree or [Path(".")]]
    rows = []
    for case in args.cases:
        # the trees alternate, so that a change in the machine's load falls on all of them alike
        runs = [[one_process(tree, CASES[case]) for tree in trees] for _ in range(args.repeats)]
        for i, tree in enumerate(trees):
            mine = [r[i] for r in runs]
            first, second = (statistics.median(r[k] for r in mine) for k in (0, 1))
            row = dict(case=case, tree=str(tree), commit=cm.commit(tree), first_s=first, second_s=second, runs=mine)
            rows.append(row)
            print(f"{case} [{tree}]: first {first:.2f} s, second {second:.3f} s", flush=True)
    info = cm.machine_info()
    table = [[r["case"], f"{Path(r['tree']).name} ({r['commit']})", r["first_s"], r["second_s"]] for r in rows]
    lines = cm.paragraphs(
        "# The first fit of a fresh process, end to end",
        cm.provenance(info, f"; medians of {args.repeats} fresh processes per row"),
        cm.markdown_table("case | source tree | first fit s | second fit s", table),
    )
    cm.write_results(args.name, {"info": info, "rows": rows}, lines)


if __name__ == "__main__":
    main()

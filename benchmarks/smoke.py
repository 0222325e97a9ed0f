"""Every benchmark script in its quickest configuration: checks that each still runs (measures nothing).

    python benchmarks/smoke.py [likelihood spiral_neural ...]   # default: all of them, one after another

Each run in its own process, writing into a scratch copy of `benchmarks/results`; exits non-zero if any failed. Left
out: `discovery_pde` (a cell takes minutes), `petab_collection`, `petab_rejections` and `petab_hybrid_hessian`
(they need the PEtab collection), `gpu_check.sh` (a GPU).
"""

import argparse
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
#: script → its quickest arguments, one string per run
QUICK = {
    "collocation_nfe": ["--quick"],
    "data2ld_head_impact": [""],
    "data2ld_simulation": [
        "--replicates 4 --nls-replicates 2 --pc-replicates 2 --sa-iterations 50 --sft-iterations 50 --sft-burn-in 10"
    ],
    "discovery_ode": ["--seeds 1", "--seeds 1 --competitors"],
    "first_fit": ["--repeats 1 --cases lorenz-mle"],
    "hidden_lorenz": ["--quick"],
    "integral_matching_sindy": ["--quick"],
    "interval_calibration": ["--systems logistic --noise 0.05 --m 256 --runs 3 --boot 40 --points 5"],
    "likelihood": ["--quick", "--scaling --quick"],
    "lorenz96_sparse": ["--quick"],
    "output_error": ["--quick"],
    "paper000_suite": ["--models logistic --runs 2"],
    "paper001_suite": ["--models logistic --runs 2"],
    "spiral_neural": ["--quick"],
    "study_pipeline": [
        "--runs 4 --boot 4 --repeats 1 --name study_pipeline_smoke",
        "--throughput --runs 4 --repeats 1",
    ],
    "wendy_vs_fsnls": ["--quick", "--estimator oe --quick"],
}
NEEDS = {"--competitors": "pysindy", "integral_matching_sindy": "pysindy"}  # skipped without `.[bench]`


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("scripts", nargs="*", help=f"default: all of {', '.join(QUICK)}")
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds per run")
    args = parser.parse_args()
    if unknown := sorted(set(args.scripts) - set(QUICK)):
        parser.error(f"unknown script(s) {', '.join(unknown)}; choose from {', '.join(QUICK)}")
    failed = []
    with tempfile.TemporaryDirectory(prefix="wendyjax-smoke-") as scratch:
        shutil.copytree(HERE / "results", Path(scratch) / "results")  # scripts that read earlier results find them
        env = {**os.environ, "WENDYJAX_BENCHMARK_RESULTS": str(Path(scratch) / "results")}
        for name, options in ((n, o) for n in args.scripts or QUICK for o in QUICK[n]):
            label = f"{name} {options}".strip()
            need = next((NEEDS[k] for k in NEEDS if k in label.split()), None)
            if need and importlib.util.find_spec(need) is None:
                print(f'skip {label:40s}          needs {need} (pip install -e ".[bench]")', flush=True)
                continue
            clock = time.perf_counter()
            try:
                cmd = [sys.executable, str(HERE / f"{name}.py"), *options.split()]
                run = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=args.timeout)
                ok, tail = run.returncode == 0, (run.stderr.strip().splitlines() or [""])[-1]
            except subprocess.TimeoutExpired:
                ok, tail = False, f"no result after {args.timeout:g} s"
            seconds = time.perf_counter() - clock
            print(f"{'ok  ' if ok else 'FAIL'} {label:40s} {seconds:7.1f} s{'' if ok else '  ' + tail}", flush=True)
            failed += [] if ok else [label]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

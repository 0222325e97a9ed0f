#!/usr/bin/env bash
# The checks of wendyjax that need an accelerator, in one run of at most 8 minutes on one GPU.
#
#   bash benchmarks/gpu_check.sh            # from anywhere; runs in the repository root
#   GPU_CHECK_BUDGET=300 bash benchmarks/gpu_check.sh   # a shorter total budget (seconds)
#   GPU_CHECK_ALLOW_CPU=1 GPU_CHECK_BUDGET=120 bash benchmarks/gpu_check.sh   # a dry run on a CPU (.venv)
#
# Steps (each under its own `timeout`, all within one total budget; a failed or timed-out
# step is recorded and the next one runs):
#   0 setup       pick a Python whose jax sees a GPU; make `import wendyjax` work
#   1 env         nvidia-smi, jax / jaxlib versions and devices, lscpu, package versions
#   2 tests       the tests that vmap fits or likelihoods on the default (GPU) device, the batched
#                 build and the sharded-study test (tests/test_studies.py, test_estimators.py,
#                 test_likelihood.py, test_batch_build.py, test_integral_matching.py), pytest
#                 -q -x with the project's addopts replaced (they need pytest-rerunfailures,
#                 which the GPU image lacks)
#   3 pipeline    benchmarks/study_pipeline.py --gpu --runs 1024 256 --boot 200 --repeats 1:
#                 whole Lorenz M = 1024 WENDy-MLE studies and a bootstrap of B = 200 refits,
#                 end to end, by stage (the targets: 1,024 runs in at most 5 s warm, B = 200
#                 in at most 2 s warm)
#   4 fsnls       benchmarks/wendy_vs_fsnls.py, 2 seeds at 5 % noise (WENDy on the GPU, scipy
#                 RK45 + LM on the host)
#   5 bootstrap   benchmarks/interval_calibration.py --timing (one bootstrap of B = 200 WENDy-MLE
#                 refits of a Lorenz fit at M = 1024 in one call, and its three profiles, each
#                 timed twice), into results/gpu/ beside the others
#   6 throughput  benchmarks/study_throughput.py --runs 64 --models logistic (vmap / lax.map /
#                 loop of fits; the shard_map row appears only with more than one device)
#   7 spiral      benchmarks/spiral_neural.py --quick --no-training (the per-gradient timings:
#                 integral matching vs backprop / adjoint through diffrax)
# Results: benchmarks/results/gpu/ (logs, the benchmarks' .md/.json, summary.md with every
# step's exit code and wall time). Where $OUT is set (the device tool's output folder), the
# folder is also packed into $OUT/gpu_results.tar.gz, with summary.md beside it.
#
# Python on the GPU machine: the image's `python3` carries jax with its CUDA plugin,
# equinox, diffrax, optimistix, lineax, optax, jaxtyping, scipy, pytest and matplotlib, and
# nothing can be downloaded there (see the device notes), so no virtual environment is
# made when that python3 sees a GPU: wendyjax is installed into it editable without
# dependencies, or put on PYTHONPATH if that fails. A `.venv` whose jax sees a GPU is used
# first. Only where neither sees a GPU is `.venv` created with
# `pip install -e ".[test]" "jax[cuda12]"` (needs a package index).

set -uo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1
RES=benchmarks/results/gpu
mkdir -p "$RES"
BUDGET=${GPU_CHECK_BUDGET:-480}  # seconds for all steps; the pack-up after them takes a few
START=$(date +%s)
SUMMARY=$RES/summary.md
TSV=$RES/summary.tsv
export PYTHONUNBUFFERED=1
printf 'step\texit\twall_s\tlimit_s\tlog\n' >"$TSV"

# step NAME BUDGET_S LOG CMD [ARGS...]: run CMD under timeout min(BUDGET_S, time left), output to LOG
step() {
    local name=$1 budget=$2 log=$3
    shift 3
    local left limit rc t0 t1 wall
    left=$((START + BUDGET - $(date +%s)))
    limit=$((budget < left ? budget : left))
    if ((left < 15)); then
        echo "== $name: skipped (${left} s of the budget left)"
        printf '%s\tskipped\t0\t%s\t%s\n' "$name" "$limit" "$log" >>"$TSV"
        return 0
    fi
    echo "== $name (limit ${limit} s) -> $log"
    t0=$(date +%s.%N)
    timeout --kill-after=10 "$limit" "$@" >"$log" 2>&1
    rc=$?
    t1=$(date +%s.%N)
    wall=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')
    printf '%s\t%s\t%s\t%s\t%s\n' "$name" "$rc" "$wall" "$limit" "$log" >>"$TSV"
    echo "   exit $rc after ${wall} s"
    tail -n 5 "$log" | sed 's/^/   | /'
    return 0
}

gpu_python() {  # does this python's jax see a GPU?
    timeout 120 "$1" -c 'import jax, sys; sys.exit(0 if any(d.platform == "gpu" for d in jax.devices()) else 1)' \
        >/dev/null 2>&1
}

setup() {
    if [[ -n "${GPU_CHECK_ALLOW_CPU:-}" && -x .venv/bin/python ]]; then
        PY=$PWD/.venv/bin/python
        echo "GPU_CHECK_ALLOW_CPU: using .venv/bin/python whatever its jax sees (a dry run)"
    elif [[ -x .venv/bin/python ]] && gpu_python .venv/bin/python; then
        PY=$PWD/.venv/bin/python
        echo "using .venv/bin/python (its jax sees a GPU)"
    elif gpu_python python3; then
        PY=$(command -v python3)
        echo "using the image's python3 ($PY): its jax sees a GPU; no virtual environment made"
    else
        echo "no python with a GPU jax: creating .venv with jax[cuda12] (needs a package index)"
        [[ -x .venv/bin/python ]] || python3 -m venv .venv || return 1
        .venv/bin/python -m pip install -q -e ".[test]" "jax[cuda12]" || return 1
        PY=$PWD/.venv/bin/python
        gpu_python "$PY" || echo "WARNING: jax in .venv sees no GPU either; the checks run on CPU"
    fi
    # imported from / : in the repository root the checkout itself would be found
    if ! (cd / && "$PY" -c 'import wendyjax') >/dev/null 2>&1; then
        echo "installing wendyjax editable into $PY (no dependencies, no build isolation)"
        if ! timeout 120 "$PY" -m pip install -q --no-deps --no-build-isolation -e .; then
            echo "pip install failed: using PYTHONPATH=$PWD"
            export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
        fi
    fi
    (cd / && "$PY" -c 'import wendyjax, jax; print("wendyjax", wendyjax.__version__, "from", wendyjax.__file__);
print("jax", jax.__version__, "default backend", jax.default_backend(), jax.devices())')
}

# --- 0: setup (runs in this shell: PY and PYTHONPATH must survive it)
PY=python3
t0=$(date +%s.%N)
setup >"$RES/setup.log" 2>&1
rc=$?
t1=$(date +%s.%N)
printf 'setup\t%s\t%s\t-\t%s\n' "$rc" "$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')" \
    "$RES/setup.log" >>"$TSV"
cat "$RES/setup.log"
export PY

# --- 1: environment
# shellcheck disable=SC2317  # called through `bash -c env_info` under timeout
env_info() {
    echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "git: $(git rev-parse HEAD 2>/dev/null || echo 'no .git here')"
    echo "python: $PY"
    echo "PYTHONPATH: ${PYTHONPATH:-}"
    echo
    nvidia-smi || echo "nvidia-smi failed"
    echo
    lscpu | grep -E '^(Model name|CPU\(s\))' || true
    echo
    "$PY" - <<'EOF'
import platform
import jax
import jaxlib
jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp
print("python", platform.python_version(), "| jax", jax.__version__, "| jaxlib", jaxlib.__version__)
print("default backend:", jax.default_backend())
for d in jax.devices():
    print("device:", d, "|", d.device_kind, "| platform", d.platform)
print("local device count:", jax.local_device_count())
x = jnp.ones((1024, 1024))
print("float64 matmul on", (x @ x).devices(), "dtype", (x @ x).dtype)
import importlib.metadata as md
for name in ("jax-cuda12-plugin", "jax-cuda13-plugin", "jax-cuda12-pjrt", "jax-cuda13-pjrt", "equinox", "diffrax",
             "optimistix", "lineax", "optax", "jaxtyping", "numpy", "scipy", "pytest", "wendyjax"):
    try:
        print(f"{name} {md.version(name)}")
    except md.PackageNotFoundError:
        print(f"{name} (not installed)")
EOF
}
export -f env_info
step env 45 "$RES/env.txt" bash -c env_info

# --- 2: tests that vmap on the accelerator or shard (addopts replaced: no pytest-rerunfailures there)
TESTS_K="small_study or equal_single_fits or sequential_study or sweep_over or sharded_study"
TESTS_K="$TESTS_K or vmapped_fits_equal or vmap_over_parameters or solve_equals_fit_with_progress_and_vmaps"
TESTS_K="$TESTS_K or share_chunks or bases_are_kept or vmapped_and_sequential"
TESTS_K="$TESTS_K or (batched_likelihood and lorenz) or (radius_search_equals and (lorenz or logistic))"
# test_studies.py last: its sharded-study test (two CPU devices in a subprocess) is the slowest
step tests 130 "$RES/tests.log" "$PY" -m pytest -o addopts="" -q -x -rA -p no:cacheprovider --durations=10 \
    --junitxml="$RES/tests.xml" \
    tests/test_likelihood.py tests/test_batch_build.py tests/test_estimators.py tests/test_integral_matching.py \
    tests/test_studies.py -k "$TESTS_K"

# --- 3: whole studies and a bootstrap, end to end, by stage
step pipeline 200 "$RES/study_pipeline.log" "$PY" benchmarks/study_pipeline.py --gpu --runs 1024 256 --boot 200 \
    --repeats 1

# --- 4: WENDy-MLE (GPU) vs scipy solve_ivp + least_squares (host), small setting
step fsnls 50 "$RES/wendy_vs_fsnls.log" "$PY" benchmarks/wendy_vs_fsnls.py --seeds 2 --noise 0.05 \
    --name gpu/wendy_vs_fsnls

# --- 5: the parametric bootstrap of B = 200 refits (Lorenz, M = 1024) in one call, and the profiles
step bootstrap 50 "$RES/interval_timing.log" env WENDYJAX_BENCHMARK_RESULTS="$RES" \
    "$PY" benchmarks/interval_calibration.py --timing

# --- 6: study throughput (vmapped chunk vs lax.map vs a loop of jitted fits; sharded when several devices)
step throughput 30 "$RES/study_throughput.log" "$PY" benchmarks/study_throughput.py --runs 64 --models logistic \
    --name gpu/study_throughput

# --- 7: spiral neural ODE, per-gradient speed-ups only (no budgeted backprop/adjoint training)
step spiral 50 "$RES/spiral_neural.log" "$PY" benchmarks/spiral_neural.py --quick --no-training \
    --name gpu/spiral_neural

# --- summary
TOTAL=$(($(date +%s) - START))
{
    echo "# GPU checks: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo
    echo "Command: \`bash benchmarks/gpu_check.sh\` (budget ${BUDGET} s, total ${TOTAL} s); python: \`$PY\`."
    echo "Device: $(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null \
        | head -n 1 || echo '?')."
    echo "Exit codes: 0 passed, 124 timed out (137: killed after the timeout), skipped: no time left."
    echo
    echo "| step | exit | wall s | limit s | log |"
    echo "|---|---|---|---|---|"
    tail -n +2 "$TSV" | awk -F '\t' '{ printf "| %s | %s | %s | %s | %s |\n", $1, $2, $3, $4, $5 }'
    echo
    echo "Result files: $(cd "$RES" && find . -type f | sort | tr '\n' ' ')"
} >"$SUMMARY"
cat "$SUMMARY"

if [[ -n "${OUT:-}" && -d "${OUT:-}" ]]; then
    tar -czf "$OUT/gpu_results.tar.gz" -C benchmarks/results gpu && cp "$SUMMARY" "$OUT/summary.md"
    echo "packed $RES into $OUT/gpu_results.tar.gz"
fi

# exit status: 0 when every step passed
if tail -n +2 "$TSV" | awk -F '\t' '$2 != "0" { bad = 1 } END { exit bad }'; then
    exit 0
fi
exit 1

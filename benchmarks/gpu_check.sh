#!/usr/bin/env bash
# The checks of wendyjax that need an accelerator, in one run of at most 8 minutes on one GPU.
#
#   bash benchmarks/gpu_check.sh                         # from anywhere; runs in the repository root
#   GPU_CHECK_BUDGET=300 bash benchmarks/gpu_check.sh    # a shorter total budget (seconds)
#   GPU_CHECK_ALLOW_CPU=1 GPU_CHECK_BUDGET=120 bash benchmarks/gpu_check.sh   # a dry run on a CPU (.venv)
#
# Each step runs under its own `timeout` within the total budget (a failed step is recorded, the next one runs):
# the tests that vmap or shard on the default device, then the benchmarks below. Results in benchmarks/results/gpu/
# (or $WENDYJAX_BENCHMARK_RESULTS/gpu): logs, the benchmarks' files and summary.md; packed into $OUT where it is set.

set -uo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1
RES=${WENDYJAX_BENCHMARK_RESULTS:-benchmarks/results}/gpu
mkdir -p "$RES"
BUDGET=${GPU_CHECK_BUDGET:-480} # seconds for all steps; the pack-up after them takes a few
START=$(date +%s)
TSV=$RES/summary.tsv
export PYTHONUNBUFFERED=1
printf 'step\texit\twall_s\tlimit_s\tlog\n' >"$TSV"

# step NAME BUDGET_S LOG CMD [ARGS...]: run CMD under timeout min(BUDGET_S, time left), output to LOG
step() {
    local name=$1 budget=$2 log=$3 left limit rc t0 wall
    shift 3
    left=$((START + BUDGET - $(date +%s)))
    limit=$((budget < left ? budget : left))
    if ((left < 15)); then
        printf '%s\tskipped\t0\t%s\t%s\n' "$name" "$limit" "$log" >>"$TSV" && return 0
    fi
    echo "== $name (limit ${limit} s) -> $log"
    t0=$(date +%s.%N)
    timeout --kill-after=10 "$limit" "$@" >"$log" 2>&1
    rc=$?
    wall=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
    printf '%s\t%s\t%s\t%s\t%s\n' "$name" "$rc" "$wall" "$limit" "$log" >>"$TSV"
    echo "   exit $rc after ${wall} s" && tail -n 5 "$log" | sed 's/^/   | /'
}

gpu_python() { # does this python's jax see a GPU?
    timeout 120 "$1" -c 'import jax, sys; sys.exit(all(d.platform != "gpu" for d in jax.devices()))' >/dev/null 2>&1
}

# the python: .venv's if its jax sees a GPU (or GPU_CHECK_ALLOW_CPU), else the image's, wendyjax installed into it
if [[ -x .venv/bin/python ]] && { [[ -n "${GPU_CHECK_ALLOW_CPU:-}" ]] || gpu_python .venv/bin/python; }; then
    PY=$PWD/.venv/bin/python
elif gpu_python python3; then
    PY=$(command -v python3)
    (cd / && "$PY" -c 'import wendyjax') >/dev/null 2>&1 ||
        timeout 120 "$PY" -m pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1 ||
        export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
else
    echo "no python whose jax sees a GPU (GPU_CHECK_ALLOW_CPU=1: a dry run with .venv)" && exit 1
fi
echo "python: $PY; PYTHONPATH: ${PYTHONPATH:-}"
step env 45 "$RES/env.txt" bash -c "git rev-parse HEAD; nvidia-smi; lscpu | grep -E '^(Model name|CPU\(s\))'; \
    '$PY' -c 'import jax; print(jax.default_backend(), [f\"{d} ({d.device_kind})\" for d in jax.devices()])'; \
    '$PY' -m pip list 2>/dev/null | grep -iE '^(jax|jaxlib|jax-cuda.*|equinox|diffrax|optimistix|numpy|scipy) '"

# tests that vmap on the accelerator or shard (addopts replaced: the GPU image lacks pytest-rerunfailures)
TESTS_K="small_study or equal_single_fits or sequential_study or sweep_over or sharded_study"
TESTS_K="$TESTS_K or vmapped_fits_equal or vmap_over_parameters or solve_equals_fit_with_progress_and_vmaps"
TESTS_K="$TESTS_K or share_chunks or bases_are_kept or vmapped_and_sequential"
TESTS_K="$TESTS_K or (batched_likelihood and lorenz) or (radius_search_equals and (lorenz or logistic))"
step tests 130 "$RES/tests.log" "$PY" -m pytest -o addopts="" -q -x -rA -p no:cacheprovider --durations=10 \
    --junitxml="$RES/tests.xml" tests/test_likelihood.py tests/test_batch_build.py tests/test_estimators.py \
    tests/test_integral_matching.py tests/test_studies.py -k "$TESTS_K"
# whole Lorenz M = 1024 studies and a bootstrap of B = 200, by stage (targets: 1,024 runs ≤ 5 s, B = 200 ≤ 2 s warm)
step pipeline 200 "$RES/study_pipeline.log" "$PY" benchmarks/study_pipeline.py --runs 1024 256 --boot 200 \
    --repeats 1 --name gpu/study_pipeline
step fsnls 50 "$RES/wendy_vs_fsnls.log" "$PY" benchmarks/wendy_vs_fsnls.py --seeds 2 --noise 0.05 \
    --name gpu/wendy_vs_fsnls
step throughput 30 "$RES/study_throughput.log" "$PY" benchmarks/study_pipeline.py --throughput --runs 64 \
    --models logistic --name gpu/study_throughput
step spiral 50 "$RES/spiral_neural.log" "$PY" benchmarks/spiral_neural.py --quick --no-training \
    --name gpu/spiral_neural

DEVICE=$(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null | head -n 1)
{
    printf '%s\n' "# GPU checks: $(date -u +%Y-%m-%dT%H:%M:%SZ)" "" "Command: \`bash benchmarks/gpu_check.sh\` (budget \
${BUDGET} s, total $(($(date +%s) - START)) s). Python: \`$PY\`. Device: ${DEVICE:-?}. Exit codes: 0 passed, 124 \
timed out (137: killed after the timeout), skipped: no time left." "" "| step | exit | wall s | limit s | log |" \
        "|---|---|---|---|---|"
    tail -n +2 "$TSV" | awk -F '\t' '{ printf "| %s | %s | %s | %s | %s |\n", $1, $2, $3, $4, $5 }'
    echo -e "\nResult files: $(cd "$RES" && find . -type f | sort | tr '\n' ' ')"
} >"$RES/summary.md"
cat "$RES/summary.md"
if [[ -n "${OUT:-}" && -d "${OUT:-}" ]]; then
    tar -czf "$OUT/gpu_results.tar.gz" -C "$(dirname "$RES")" gpu && cp "$RES/summary.md" "$OUT/summary.md"
fi
tail -n +2 "$TSV" | awk -F '\t' '$2 != "0" { bad = 1 } END { exit bad }' # 0 when every step passed

#!/usr/bin/env bash
# The checks of wendyjax that need an accelerator, in one run of at most 8 minutes on one GPU: the tests that vmap or
# shard on the default device, then the benchmarks' GPU runs, each under its own `timeout` within the total budget (a
# failed step is recorded and the next one runs).
#
#   bash benchmarks/gpu_check.sh    # from anywhere; PY=PYTHON (default python3), GPU_CHECK_BUDGET=SECONDS (480)
#
# Results in benchmarks/results/gpu/ (or $WENDYJAX_BENCHMARK_RESULTS/gpu): a log per step, the benchmarks' files and
# summary.md (each step's exit code and seconds: 124/137 timed out); packed into $OUT where it is set.

set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1
RES=${WENDYJAX_BENCHMARK_RESULTS:-benchmarks/results}/gpu
BUDGET=${GPU_CHECK_BUDGET:-480}
PY=${PY:-python3}
START=$(date +%s)
FAILED=0
export PYTHONUNBUFFERED=1 PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" # this checkout's wendyjax
mkdir -p "$RES"
DEVICE=$(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null | head -n 1)
printf '%s\n' "# GPU checks: $(date -u +%Y-%m-%dT%H:%M:%SZ)" "" "Commit $(git rev-parse --short HEAD 2>/dev/null), \
python \`$PY\`, device ${DEVICE:-?}, budget $BUDGET s." "" "| step | exit | s |" "|---|---|---|" >"$RES/summary.md"

step() { # step NAME LIMIT_S CMD [ARGS...]: CMD under timeout min(LIMIT_S, the budget left), output to NAME.log
    local name=$1 left=$((START + BUDGET - $(date +%s))) t0=$SECONDS rc=skipped
    local limit=$(($2 < left ? $2 : left))
    shift 2
    if ((limit >= 15)); then
        timeout --kill-after=10 "$limit" "$@" >"$RES/$name.log" 2>&1
        rc=$?
    fi
    echo "| $name | $rc | $((SECONDS - t0)) |" | tee -a "$RES/summary.md"
    [[ $rc == 0 ]] || FAILED=1
}

step env 45 "$PY" -c 'import jax; print(jax.__version__, [f"{d} ({d.device_kind})" for d in jax.devices()])'
# tests that vmap on the accelerator or shard (addopts replaced: the GPU image lacks pytest-rerunfailures)
TESTS_K="small_study or equal_single_fits or sequential_study or sweep_over or sharded_study or vmapped_fits_equal"
TESTS_K="$TESTS_K or vmap_over_parameters or solve_equals_fit_with_progress_and_vmaps or share_chunks"
TESTS_K="$TESTS_K or bases_are_kept or blocks_are_equal or (batched_likelihood and lorenz)"
TESTS_K="$TESTS_K or (radius_search_equals and (lorenz or logistic))"
step tests 130 "$PY" -m pytest -o addopts="" -q -x -rA -p no:cacheprovider --durations=10 tests/test_likelihood.py \
    tests/test_batch_build.py tests/test_estimators.py tests/test_integral_matching.py tests/test_studies.py -k "$TESTS_K"
# whole Lorenz M = 1024 studies and a bootstrap of B = 200, by stage (targets: 1,024 runs ≤ 5 s, B = 200 ≤ 2 s warm)
step pipeline 200 "$PY" benchmarks/study_pipeline.py --runs 1024 256 --boot 200 --repeats 1 --name gpu/study_pipeline
# 1,000 starts of Boehm et al. 2014 (the copy the package ships) in one call, and again compiled (target: under 10 s);
# needs the petab extra (petab, python-libsbml, sbmlmath, sympy), which the GPU image of 2026-12-04 lacked
if "$PY" -c 'import petab, libsbml, sbmlmath, sympy' >/dev/null 2>&1; then
    step petab 150 "$PY" benchmarks/petab_collection.py --collection wendyjax/datasets/petab \
        --problems Boehm_JProteomeRes2014 --starts 1000 --warm --timeout 140 --name gpu/petab_multistart
else
    echo "| petab | skipped: no petab extra in \`$PY\` | 0 |" | tee -a "$RES/summary.md"
fi
step fsnls 50 "$PY" benchmarks/wendy_vs_fsnls.py --seeds 2 --noise 0.05 --name gpu/wendy_vs_fsnls
step throughput 30 "$PY" benchmarks/study_pipeline.py --throughput --runs 64 --models logistic --name gpu/study_throughput
step spiral 50 "$PY" benchmarks/spiral_neural.py --quick --no-training --name gpu/spiral_neural

cat "$RES/summary.md"
if [[ -n "${OUT:-}" && -d "${OUT:-}" ]]; then
    tar -czf "$OUT/gpu_results.tar.gz" -C "$(dirname "$RES")" gpu && cp "$RES/summary.md" "$OUT/summary.md"
fi
exit $FAILED

#!/usr/bin/env bash
# Compile time of the test suite under XLA:CPU code-generation flags: the evidence behind the
# XLA_FLAGS that tests/conftest.py sets.
#
#   bash benchmarks/test_xla_flags.sh      # ~7 minutes on 2 idle CPU cores, from anywhere
#
# Runs three compile-heavy tests (the distributed study, StateParameterRegression's vmapped
# solve, MLE start='both') one after another in one process (no xdist) per flag set, each set
# in a fresh pytest process (XLA_FLAGS is read when JAX's CPU backend starts), and records
# pytest's summary line and the wall time. A flag set only counts if all three pass: with
# --xla_backend_optimization_level=0 the discovery test's fits diverge.
# Writes benchmarks/results/test_xla_flags.md.
set -uo pipefail
cd "$(dirname "$0")/.."
TESTS=(tests/test_studies.py::test_distributed_study_equals_single_process
       tests/test_discovery.py::test_contract_call_failure_status_and_vmapped_solve
       tests/test_estimators.py::test_mle_start_both_keeps_the_lower_local_minimum)
OUT=benchmarks/results/test_xla_flags.md
{
  echo "# XLA:CPU flags and the tests' compile time"
  echo
  echo "\`bash benchmarks/test_xla_flags.sh\` on $(date -u +%Y-%m-%d), $(nproc) cores," \
       "$(lscpu | sed -n 's/^Model name: *//p'), jax $(python -c 'import jax; print(jax.__version__)')."
  echo "Three tests, sequential, one pytest process per flag set: ${TESTS[*]}"
  echo
  echo "| XLA_FLAGS | pytest | wall (s) |"
  echo "|---|---|---|"
} > "$OUT"
for F in "" "--xla_backend_optimization_level=1" "--xla_llvm_disable_expensive_passes=true" \
         "--xla_cpu_use_fusion_emitters=false" \
         "--xla_cpu_use_fusion_emitters=false --xla_backend_optimization_level=1" \
         "--xla_cpu_use_fusion_emitters=false --xla_llvm_disable_expensive_passes=true"; do
  S=$(date +%s)
  R=$(XLA_FLAGS="$F" python -m pytest -q -p no:xdist -p no:cacheprovider "${TESTS[@]}" 2>&1 | tail -1)
  echo "| ${F:-(none: XLA defaults)} | $R | $(( $(date +%s) - S )) |" | tee -a "$OUT"
done

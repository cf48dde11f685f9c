#!/bin/bash
# Runs the runtime tests on the GPU machine (see docs/gpu-roundtrip.md for the
# round trip). Usage: tests/runtime/device_run.sh BUILD_DIR
# Carry: BUILD_DIR/tests/runtime and BUILD_DIR/runtime (the binaries).
set -u
B=${1:-build-runtime}
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
T=$B/tests/runtime/deltac_runtime_tests
export DELTAC_RUN_BIN=$PWD/$B/runtime/deltac-run
if ! "$T" --gtest_list_tests >/dev/null 2>&1; then
  echo "test binary does not start:"; ldd "$T"; exit 1
fi
"$T" >"$OUT/runtime_tests.log" 2>&1
rc=$?
grep -E '^\[  (PASSED|FAILED|SKIPPED) |tests? ran|Failure|seed' "$OUT/runtime_tests.log" | head -60
echo "runtime tests exit code: $rc"
if command -v compute-sanitizer >/dev/null; then
  compute-sanitizer --tool memcheck --error-exitcode 9 "$T" \
    --gtest_filter='Gpu/*K128*:CudaDevicePointers.*:CudaCli.*' >"$OUT/memcheck.log" 2>&1
  echo "memcheck exit code: $? ($(grep -c '^\[       OK' "$OUT/memcheck.log") tests; $(grep 'ERROR SUMMARY' "$OUT/memcheck.log" | tail -1))"
fi
exit $rc

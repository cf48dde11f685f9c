#!/usr/bin/env bash
# Runs the prebuilt GPU test (and decode benchmark, when built) on the lent
# GPU machine; see docs/gpu-roundtrip.md. Full logs go to $OUT (or ./out).
# Usage, from the repository root: tests/cuda/device_run.sh [build-dir]
set -uo pipefail
build=${1:-build-cuda}
out=${OUT:-out}
mkdir -p "$out"
tests=$build/tests/cuda/deltac_cuda_tests
bench=$build/bench/cuda/deltac_cuda_decode_bench

nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
if ! "$tests" --gtest_list_tests >/dev/null 2>&1; then
  echo "prebuilt $tests does not start here:"; ldd "$tests"; exit 1
fi
"$tests" 2>&1 | tee "$out/tests.log" | grep -E '^\s+[a-z]+_(f32|bf16)_|FAILED|PASSED|SKIPPED|Failure|error' | tail -n 60
rc=${PIPESTATUS[0]}
echo "gpu tests exit code: $rc"
if command -v compute-sanitizer >/dev/null; then
  filter='*T33*:*varlen*:*misaligned*:*K48_V80*:*K256_V128*:*vk_layout*:*bv32*'
  compute-sanitizer --tool memcheck --error-exitcode 9 "$tests" --gtest_filter="$filter" \
    >"$out/memcheck.log" 2>&1
  echo "memcheck exit code: $? ($(grep -c 'OK \]' "$out/memcheck.log") cases; ERROR SUMMARY: $(grep -o 'ERROR SUMMARY: [0-9]* errors' "$out/memcheck.log"))"
  compute-sanitizer --tool racecheck --error-exitcode 9 "$tests" --gtest_filter='*T8*:*K48_V80*' \
    >"$out/racecheck.log" 2>&1
  echo "racecheck exit code: $? ($(grep -o 'RACECHECK SUMMARY: [0-9]* hazard[s]* displayed' "$out/racecheck.log" | head -1))"
fi
if [ -x "$bench" ]; then
  "$bench" 2>&1 | tee "$out/bench.log"
fi
exit $rc

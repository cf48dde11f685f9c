#!/usr/bin/env bash
# Every GPU check in one call on the lent GPU machine (docs/gpu-roundtrip.md):
# the CUDA kernel tests, the runtime's GPU tests, the drivers of the generated
# CUDA code, compute-sanitizer on a subset, the main job built there WITHOUT
# LLVM from sources `deltac generate` wrote here (.device/gen), and the decode
# benchmark next to the peer's (flash-linear-attention, when .peer/fla is
# carried). Full logs go to $OUT.
# Usage: scripts/device_check.sh BUILD_DIR [main-job options]
# Carry: BUILD_DIR/{tests/cuda,tests/runtime,runtime,tests/lit/gen,bench/cuda}, .device, .peer
set -u
B=${1:-build}; shift || true
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
rc=0
step() { echo "== $1: exit $2"; [ "$2" -eq 0 ] || rc=1; }
cuda_tests=$B/tests/cuda/deltac_cuda_tests
runtime_tests=$B/tests/runtime/deltac_runtime_tests
export DELTAC_RUN_BIN=$PWD/$B/runtime/deltac-run

"$cuda_tests" >"$OUT/cuda_tests.log" 2>&1
r=$?; grep -E '^\[  (PASSED|FAILED|SKIPPED) ' "$OUT/cuda_tests.log"; step "CUDA kernel tests" $r

"$runtime_tests" >"$OUT/runtime_tests.log" 2>&1
r=$?; grep -E '^\[  (PASSED|FAILED|SKIPPED) ' "$OUT/runtime_tests.log"; step "runtime tests" $r

for exe in "$B"/tests/lit/gen/*/run_cuda_*; do
  [ -x "$exe" ] || continue
  "$exe" >>"$OUT/generated.log" 2>&1
  step "generated CUDA driver $(basename "$exe")" $?
done

if command -v compute-sanitizer >/dev/null; then
  compute-sanitizer --tool memcheck --error-exitcode 9 "$cuda_tests" \
    --gtest_filter='*T33*:*varlen*:*misaligned*:*K48_V80*:*K256_V128*:*vk_layout*' >"$OUT/memcheck.log" 2>&1
  step "memcheck, kernel tests ($(grep -o 'ERROR SUMMARY: [0-9]* errors' "$OUT/memcheck.log" | tail -1))" $?
  compute-sanitizer --tool racecheck --error-exitcode 9 "$cuda_tests" \
    --gtest_filter='*T8*:*K48_V80*' >"$OUT/racecheck.log" 2>&1
  step "racecheck, kernel tests" $?
  compute-sanitizer --tool memcheck --error-exitcode 9 "$runtime_tests" \
    --gtest_filter='Gpu/*K128*:CudaDevicePointers.*:CudaCli.*' >"$OUT/memcheck_runtime.log" 2>&1
  step "memcheck, runtime tests" $?
fi

# The main job, configured and built here with no LLVM from the carried sources.
nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
if cmake -S . -B /tmp/demo -G Ninja -DDELTAC_BUILD_COMPILER=OFF -DDELTAC_BUILD_TESTS=OFF \
     -DDELTAC_BUILD_BENCH=OFF -DDELTAC_DEMO_GENERATED_DIR="$PWD/.device/gen" \
     -DCMAKE_CUDA_COMPILER="$nvcc" >"$OUT/demo_build.log" 2>&1 &&
   cmake --build /tmp/demo -j "$(nproc)" --target qwen3_next_demo >>"$OUT/demo_build.log" 2>&1; then
  /tmp/demo/examples/qwen3_next_demo "$@" 2>&1 | tee "$OUT/demo.log"
  step "main job (built without LLVM)" "${PIPESTATUS[0]}"
else
  tail -20 "$OUT/demo_build.log"; step "main job build" 1
fi

# Decode: ours and the peer's, same machine, same call.
if [ -x "$B/bench/cuda/deltac_cuda_decode_bench" ]; then
  "$B/bench/cuda/deltac_cuda_decode_bench" 2>&1 | tee "$OUT/bench.log"
fi
if [ -d .peer/fla ]; then
  PYTHONPATH=$PWD/.peer python3 bench/cuda/fla_decode.py 2>&1 | tee "$OUT/fla.log"
fi
exit $rc

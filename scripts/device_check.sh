#!/usr/bin/env bash
# Every GPU check in one call on the lent GPU machine (docs/gpu-roundtrip.md):
# the CUDA kernel tests, the runtime's GPU tests, the drivers of the generated
# CUDA code, and the main job built there WITHOUT LLVM from sources that
# `deltac generate` wrote here (carried in .device/gen).
# Usage: scripts/device_check.sh BUILD_DIR   (carry BUILD_DIR/tests/cuda,
#        BUILD_DIR/tests/runtime, BUILD_DIR/runtime, BUILD_DIR/tests/lit/gen, .device)
set -u
B=${1:-build}; shift || true
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
rc=0
step() { echo "== $1: exit $2"; [ "$2" -eq 0 ] || rc=1; }

"$B/tests/cuda/deltac_cuda_tests" >"$OUT/cuda_tests.log" 2>&1
r=$?; grep -E '^\[  (PASSED|FAILED|SKIPPED) ' "$OUT/cuda_tests.log"; step "CUDA kernel tests" $r

DELTAC_RUN_BIN=$PWD/$B/runtime/deltac-run "$B/tests/runtime/deltac_runtime_tests" \
  >"$OUT/runtime_tests.log" 2>&1
r=$?; grep -E '^\[  (PASSED|FAILED|SKIPPED) ' "$OUT/runtime_tests.log"; step "runtime tests" $r

for d in "$B"/tests/lit/gen/*/; do
  for exe in "$d"run_cuda_*; do
    [ -x "$exe" ] || continue
    "$exe" >>"$OUT/generated.log" 2>&1
    step "generated CUDA driver $(basename "$exe")" $?
  done
done

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
exit $rc

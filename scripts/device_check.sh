#!/usr/bin/env bash
# Every GPU check in one call on the lent GPU machine (docs/gpu-roundtrip.md):
# the CUDA kernel tests (recurrent and chunked), the runtime's GPU cases
# (catalogue dispatch, chunked through the C API, device-side checks), the
# drivers of the generated CUDA code, the main job (built here from
# `deltac generate` output), compute-sanitizer on subsets, the Python
# package's CUDA tests, and the decode benchmark of this build next to a
# baseline build's (BASE_BUILD_DIR, optional). Each step has a time limit so
# that the call fits the device budget. Full logs go to $OUT.
# Usage: scripts/device_check.sh BUILD_DIR [BASE_BUILD_DIR]
# Carry: BUILD_DIR/{tests/cuda,tests/runtime,tests/lit/gen,runtime,bench/cuda,
#        examples,python} and BASE_BUILD_DIR/bench/cuda.
# Steps can be left out: SKIP="memcheck layers ..." (names: kernels backward
# runtime generated demo decode first_call memcheck pytest cp autograd layers);
# "layers" (deltac.nn vs fla's layers, carry .peer) runs only when asked:
# LAYERS=1.
set -u
B=${1:-build}
BASE=${2:-}
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
rc=0
step() { echo "== $1: exit $2"; [ "$2" -eq 0 ] || rc=1; }
want() { [[ " ${SKIP:-} " != *" $1 "* ]]; }
summary() { grep -E '^\[  (PASSED|FAILED|SKIPPED) |^\[  FAILED  \]' "$1" | head -15; }
cuda_tests=$B/tests/cuda/deltac_cuda_tests
runtime_tests=$B/tests/runtime/deltac_runtime_tests
export DELTAC_RUN_BIN=$PWD/$B/runtime/deltac-run

if want kernels; then
  timeout 170 "$cuda_tests" >"$OUT/cuda_tests.log" 2>&1
  r=$?; summary "$OUT/cuda_tests.log"; step "CUDA kernel tests" $r
  grep -o 'DELTAC_TEST_SEED=[0-9]*' "$OUT/cuda_tests.log" | head -1
fi

if want backward && [ -x "$B/tests/cuda/deltac_cuda_backward_tests" ]; then
  timeout 120 "$B/tests/cuda/deltac_cuda_backward_tests" >"$OUT/backward_tests.log" 2>&1
  r=$?; summary "$OUT/backward_tests.log"; step "CUDA backward tests" $r
fi

if want runtime; then
  timeout 180 "$runtime_tests" >"$OUT/runtime_tests.log" 2>&1
  r=$?; summary "$OUT/runtime_tests.log"; step "runtime tests (GPU cases run)" $r
fi

for exe in "$B"/tests/lit/gen/*/run_cuda_*; do
  [ -x "$exe" ] && want generated || continue
  timeout 30 "$exe" >>"$OUT/generated.log" 2>&1
  step "generated CUDA driver $(basename "$exe")" $?
done

# The main job: generated CPU and CUDA entries (CUDA prefill: mode auto ->
# cuda_chunked), checked against float64 and timed.
if want demo && [ -x "$B/examples/qwen3_next_demo" ]; then
  timeout 120 "$B/examples/qwen3_next_demo" --tokens=8192 --batch=64 2>&1 | tee "$OUT/demo.log"
  step "main job" "${PIPESTATUS[0]}"
fi

# Decode speed: this build next to the baseline (same binary source, same run).
for b in "$BASE" "$B"; do
  want decode && [ -n "$b" ] && [ -x "$b/bench/cuda/deltac_cuda_decode_bench" ] || continue
  echo "-- decode bench: $b"
  timeout 60 "$b/bench/cuda/deltac_cuda_decode_bench" 2>&1 | tee -a "$OUT/bench.log" | tail -12
done

# The first runtime call's cost beyond a warm one (issue #9's < 1 ms).
if want first_call && [ -x "$B/bench/cuda/deltac_cuda_first_call" ]; then
  timeout 60 "$B/bench/cuda/deltac_cuda_first_call" 2>&1 | tee "$OUT/first_call.log"
  step "first-call cost" "${PIPESTATUS[0]}"
fi

if want memcheck && command -v compute-sanitizer >/dev/null; then
  timeout 100 compute-sanitizer --tool memcheck --error-exitcode 9 "$runtime_tests" \
    --gtest_filter='Gpu/*K128_V128*:CudaDevicePointers.*:CudaCheck*.*:*Chunked*' \
    >"$OUT/memcheck_runtime.log" 2>&1
  step "memcheck, runtime GPU cases ($(grep -o 'ERROR SUMMARY: [0-9]* errors' "$OUT/memcheck_runtime.log" | tail -1))" $?
fi

if [ -f "$B/python/libdeltac_c.so" ] && python3 -c 'import torch, pytest' 2>/dev/null; then
  export DELTAC_LIBRARY="$PWD/$B/python/libdeltac_c.so" PYTHONPATH="$PWD/python:$PWD/.peer"
  py=(python3 -m pytest -q -rs -p no:cacheprovider -W ignore::DeprecationWarning)  # timeout runs no shell function
  if want pytest; then
    timeout 120 "${py[@]}" tests/python/test_cuda.py >"$OUT/py_cuda_tests.log" 2>&1
    r=$?; tail -4 "$OUT/py_cuda_tests.log"; step "pytest tests/python/test_cuda.py" $r
  fi
  if want autograd; then
    timeout 120 "${py[@]}" tests/python/test_autograd.py -k cuda >"$OUT/py_autograd.log" 2>&1
    r=$?; tail -4 "$OUT/py_autograd.log"; step "pytest tests/python/test_autograd.py -k cuda" $r
  fi
  if want cp; then
    timeout 150 "${py[@]}" -s tests/python/test_cp.py -k cuda >"$OUT/py_cp_tests.log" 2>&1
    r=$?; grep -E "err o|passed|failed|skipped" "$OUT/py_cp_tests.log" | tail -12
    step "pytest tests/python/test_cp.py -k cuda (context parallel, ranks on one GPU)" $r
  fi
  if [ "${LAYERS:-0}" = 1 ] && want layers; then
    timeout "${LAYERS_TIMEOUT:-200}" python3 tests/python/bench_layers.py --tokens 8192 2>&1 |
      tee "$OUT/py_layers.log"
    step "layer bench (deltac.nn vs fla's layers)" "${PIPESTATUS[0]}"
  fi
fi
exit $rc

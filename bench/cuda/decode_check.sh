#!/usr/bin/env bash
# The decode round trip on the GPU machine (docs/gpu-roundtrip.md): the
# recurrent kernel's tests (decode pool cases included), the runtime's decode
# and CUDA cases, compute-sanitizer memcheck (+ racecheck on a few cases),
# the decode bench and flash-linear-attention's decode in the same run.
# Usage: bash bench/cuda/decode_check.sh <dir with deltac_cuda_decode_tests
#        (or deltac_cuda_tests), deltac_runtime_tests, deltac_cuda_decode_bench>
#        [fla parent dir]
set -u
d=${1:?binaries dir}
peer=${2:-.peer}
# The recurrent cases alone are a third of the full test binary's size.
t=$d/deltac_cuda_decode_tests
[ -x "$t" ] || t=$d/deltac_cuda_tests
step() { echo "== $1"; shift; timeout "$@"; echo "== rc $?"; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
# Both kernel forms (recurrent_strip.cuh, recurrent_kernel.cuh): the
# library's choice, then the split kernel forced, then without PDL.
step "kernel tests" 150 "$t" \
  --gtest_filter='Cuda/Recurrent.*:Cuda/DecodePool.*:DecodePoolGraph.*:RecurrentArgs.*' \
  2>&1 | grep -E -A3 "Failure|PASSED|FAILED  \]" | head -60
DELTAC_TEST_RECURRENT_FORM=split step "kernel tests, split form" 150 "$t" \
  --gtest_filter='Cuda/Recurrent.*:Cuda/DecodePool.*:DecodePoolGraph.*:RecurrentArgs.*' \
  2>&1 | grep -E -A3 "Failure|PASSED|FAILED  \]" | head -60
DELTAC_TEST_PDL=0 step "kernel tests, no PDL" 60 "$t" \
  --gtest_filter='Cuda/DecodePool.*:DecodePoolGraph.*' \
  2>&1 | grep -E -A3 "Failure|PASSED|FAILED  \]" | head -30
step "runtime tests" 60 "$d/deltac_runtime_tests" \
  --gtest_filter='DecodePoolApi.*:Cuda*' 2>&1 | grep -E -A3 "Failure|PASSED|FAILED  \]" | head -30
step "memcheck kernels" 120 compute-sanitizer --tool memcheck "$t" \
  --gtest_filter='Cuda/DecodePool.*gated*:Cuda/DecodePool.*kda_varlen*:DecodePoolGraph.*:Cuda/Recurrent.*misaligned:Cuda/Recurrent.*tile*' \
  2>&1 | grep -E "ERROR SUMMARY|PASSED|FAILED" | tail -5
step "memcheck runtime" 60 compute-sanitizer --tool memcheck "$d/deltac_runtime_tests" \
  --gtest_filter='DecodePoolApi.*' 2>&1 | grep -E "ERROR SUMMARY|PASSED|FAILED" | tail -5
step "racecheck" 60 compute-sanitizer --tool racecheck "$t" \
  --gtest_filter='Cuda/DecodePool.*gated_accepted_0_to_4_steps:Cuda/DecodePool.*delta_copy_on_write' \
  2>&1 | grep -E "ERROR SUMMARY|RACECHECK SUMMARY|hazard|PASSED|FAILED" | tail -5
step "decode bench" 150 "$d/deltac_cuda_decode_bench" --quick
if [ -d "$peer/fla" ]; then
  PYTHONPATH="$peer" step "fla decode" 120 python3 bench/cuda/fla_decode.py 2>&1 | grep -v Warning
fi

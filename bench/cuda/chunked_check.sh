#!/usr/bin/env bash
# The chunked kernel's GPU round trip in one call (tests, sanitizers, the
# prefill benchmark next to fla). Usage, on the GPU machine:
#   bash bench/cuda/chunked_check.sh BUILD_DIR [full|quick] [prefill_bench.py options]
# (quick: no sanitizers, fewer timing repeats; BENCH_TIMEOUT=s stops the
# benchmark after s seconds, keeping the rows printed so far; SAN_TIMEOUT=s
# bounds each sanitizer run; RECURRENT=0 skips the recurrent tests; SAN=split
# runs the sanitizers on the sequence-split cases and T65 only; MEM_FILTER /
# RACE_FILTER replace the sanitizers' gtest filters)
# BUILD_DIR holds tests/cuda/deltac_cuda_tests and
# bench/cuda/libdeltac_chunked_bench.so; .peer/fla is the peer. Logs: $OUT.
set -u
B=${1:?build dir}
MODE=${2:-full}
shift 2 || shift $#
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
t=$B/tests/cuda/deltac_cuda_tests
rc=0
MEM='Cuda/Chunked.*/*gate_span_edge:Cuda/Chunked.*/*T65:Cuda/Chunked.*/*varlen:Cuda/Chunked.*/*K48_V80:Cuda/Chunked.*/*config*:Cuda/Chunked.*/*vk_layout:Cuda/Chunked.*/*inplace'
RACE='Cuda/Chunked.*/gated_bf16_T65:Cuda/Chunked.*/kda_bf16_T65:Cuda/Chunked.*/kda_bf16_gate_span_edge:Cuda/Chunked.*/*f32_T65:Cuda/Chunked.*/*config1:Cuda/Chunked.*/*config3:Cuda/Chunked.*/*config4'
SPLIT_MEM='Cuda/Chunked.*/*bf16_split8_varlen:Cuda/Chunked.*/*f32_split4_T1000:Cuda/Chunked.*/*bf16_split4_inplace:Cuda/Chunked.*/*split4_narrow:Cuda/Chunked.*/*bf16_split2_T65:Cuda/Chunked.*/*f32_split_default_rule:Cuda/Chunked.*/*f32_split4_vk_layout'
SPLIT_RACE='Cuda/Chunked.*/gated_bf16_split4_T1000:Cuda/Chunked.*/kda_bf16_split2_T65:Cuda/Chunked.*/delta_f32_split8_varlen:Cuda/Chunked.*/gated_bf16_split4_narrow'
if [ "${SAN:-all}" = split ]; then
  MEM="$SPLIT_MEM:Cuda/Chunked.*/gated_bf16_T65:Cuda/Chunked.*/kda_f32_T65"
  RACE="$SPLIT_RACE:Cuda/Chunked.*/gated_bf16_T65"
else
  MEM="$MEM:$SPLIT_MEM"; RACE="$RACE:$SPLIT_RACE"
fi
MEM=${MEM_FILTER:-$MEM}; RACE=${RACE_FILTER:-$RACE}
"$t" --gtest_filter='*Chunked*:*chunked*' >"$OUT/chunked_tests.log" 2>&1; r=$?
grep -E '^\[  (PASSED|FAILED|SKIPPED) |^\[  FAILED' "$OUT/chunked_tests.log" | head -60
echo "== chunked tests: exit $r"; [ $r -eq 0 ] || rc=1
if [ "${RECURRENT:-1}" != 0 ]; then
  "$t" --gtest_filter='Cuda/Recurrent*' >"$OUT/recurrent_tests.log" 2>&1; r=$?
  grep -E '^\[  (PASSED|FAILED) ' "$OUT/recurrent_tests.log" | head -20
  echo "== recurrent tests: exit $r"; [ $r -eq 0 ] || rc=1
fi
if [ "$MODE" = full ] && command -v compute-sanitizer >/dev/null; then
  san=(); [ "${SAN_TIMEOUT:-0}" -gt 0 ] && san=(timeout "$SAN_TIMEOUT")
  ${san[@]+"${san[@]}"} compute-sanitizer --tool memcheck --error-exitcode 9 "$t" \
    --gtest_filter="$MEM" \
    >"$OUT/memcheck.log" 2>&1; r=$?
  echo "== memcheck: exit $r ($(grep -o 'ERROR SUMMARY: [0-9]* errors' "$OUT/memcheck.log" | tail -1))"
  [ $r -eq 0 ] || rc=1
  ${san[@]+"${san[@]}"} compute-sanitizer --tool racecheck --error-exitcode 9 "$t" \
    --gtest_filter="$RACE" \
    >"$OUT/racecheck.log" 2>&1; r=$?
  echo "== racecheck: exit $r ($(grep -o 'RACECHECK SUMMARY: [0-9]* hazard[s]*' "$OUT/racecheck.log" | tail -1))"
  [ $r -eq 0 ] || rc=1
fi
if [ -d .peer/fla ]; then
  to=(); [ "${BENCH_TIMEOUT:-0}" -gt 0 ] && to=(timeout "$BENCH_TIMEOUT")
  PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/.peer ${to[@]+"${to[@]}"} python3 bench/cuda/prefill_bench.py \
    "$B/bench/cuda/libdeltac_chunked_bench.so" $([ "$MODE" = quick ] && echo --quick) "$@" 2>&1 |
    tee "$OUT/prefill_bench.log"
fi
exit $rc

#!/usr/bin/env bash
# The CUDA tuner on the GPU machine, in one call: its GPU test, then a tune of
# the Qwen3-Next layer (GDN, 16 q/k heads, 32 value heads, K = V = 128, bf16)
# with the search compared against exhaustive, its report and database in $OUT.
# Usage: scripts/tune_cuda_check.sh DIR   (DIR holds deltac-tune and
# deltac_autotune_tests built with -DDELTAC_TUNE_CUDA_SPECS=gated:128:128:bf16)
set -u
D=${1:?dir with deltac-tune and deltac_autotune_tests}
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
rc=0
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout 60 "$D/deltac_autotune_tests" --gtest_filter='TuneCuda*' 2>&1 | tee "$OUT/tune_tests.log" |
  grep -E "^bucket|OK|FAILED|SKIPPED|PASSED"
[ "${PIPESTATUS[0]}" -eq 0 ] || rc=1
start=$(date +%s)
timeout 400 "$D/deltac-tune" --target=cuda --variant=gated --heads=16 --v-heads=32 \
  --key-dim=128 --value-dim=128 --in-dtype=bf16 --qk-l2norm --quiet \
  --buckets=1,1024,8192 --decode-batch=64 --compare-exhaustive \
  -o "$OUT/h200_gdn.json" --report="$OUT/h200_gdn.html" 2>&1 | tee "$OUT/tune.log"
[ "${PIPESTATUS[0]}" -eq 0 ] || rc=1
echo "== tune with exhaustive comparison: $(( $(date +%s) - start )) s wall"
exit $rc

#!/usr/bin/env bash
# Compiles tma_ptxas_check.cu (the TMA scan's kernels) for sm_90a with ptxas's
# report and fails where ptxas serialises their warpgroup products (C7518,
# C7519, C7520: a dev build that did so ran 1.7x slower, docs/performance.md
# "The TMA scan") or spills, or where fewer than the three kernels compiled.
# Usage: tma_ptxas_check.sh NVCC SOURCE -I... (no GPU needed).
set -euo pipefail
nvcc=$1 src=$2
shift 2
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
if ! "$nvcc" -std=c++17 -O3 "$@" -gencode=arch=compute_90a,code=sm_90a -Xptxas -v \
    -c "$src" -o "$out/k.o" >"$out/log" 2>&1; then
  cat "$out/log"
  exit 1
fi
n=$(grep -c "Compiling entry function '.*chunked_scan_tma_kernel" "$out/log" || true)
echo "tma scan kernels compiled: $n"
grep -E "Used [0-9]+ registers|spill" "$out/log" | sort | uniq -c
if [ "$n" -ne 3 ]; then
  echo "FAIL: expected 3 kernels"
  exit 1
fi
if grep -E "C7518|C7519|C7520" "$out/log"; then
  echo "FAIL: ptxas serialises the warpgroup products"
  exit 1
fi
if grep -E "[1-9][0-9]* bytes spill (stores|loads)" "$out/log"; then
  echo "FAIL: spills"
  exit 1
fi
echo "PASS"

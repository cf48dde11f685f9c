#!/usr/bin/env bash
# Compiles tma_ptxas_check.cu (the TMA scans' kernels) for sm_90a with ptxas's
# report and fails where ptxas serialises their warpgroup products (C7518,
# C7519, C7520: a dev build that did so ran 1.7x slower, docs/performance.md
# "The TMA scan"), where fewer than the seven kernels compiled, or where one
# spills: none may, but the transposed scan with two warpgroups (168 registers
# at launch for 384 threads; the key split's too) up to 20 bytes (16 before
# the saved states' staged stores, docs/performance.md "Backward (CUDA)",
# version 18).
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
m=$(grep -c "Compiling entry function '.*chunked_scan_tmat_kernel" "$out/log" || true)
echo "tma scan kernels compiled: $n, transposed: $m"
grep -E "Used [0-9]+ registers|spill" "$out/log" | sort | uniq -c
if [ "$n" -ne 3 ] || [ "$m" -ne 4 ]; then
  echo "FAIL: expected 3 TMA scan kernels and 4 transposed"
  exit 1
fi
if grep -E "C7518|C7519|C7520" "$out/log"; then
  echo "FAIL: ptxas serialises the warpgroup products"
  exit 1
fi
# Per kernel: its spill stores against its allowance (20 bytes for the
# transposed scan's two-warpgroup traits, ...Li2ELi2E: NWG 2, 2 stages; the
# key split's among them).
if ! awk '/Compiling entry function/ { two = ($0 ~ /TmatScanTraits.*Li2ELi2E/) }
          /bytes spill stores/ { split($0, f, " "); s = f[5] + 0
                                 if (s > (two ? 20 : 0)) { print "FAIL: spills: " $0; bad = 1 } }
          END { exit bad }' "$out/log"; then
  exit 1
fi
echo "PASS"

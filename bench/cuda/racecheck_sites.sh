#!/usr/bin/env bash
# compute-sanitizer racecheck's reports for one kernel, by site, beside that
# kernel's SASS at each site (on the GPU machine, which has the CUDA tools):
#
#   bash bench/cuda/racecheck_sites.sh TEST_BINARY GTEST_FILTER KERNEL_NAME LIBRARY \
#        [MANGLED_REGEX]
#
# e.g. TEST_BINARY deltac_cuda_backward_tests, GTEST_FILTER '*BackwardSaved*delta_T256*',
# KERNEL_NAME chunked_scan_tmat_kernel, LIBRARY libdeltac_c.so (where the kernel's code
# lives), MANGLED_REGEX 'Li64ELi64E.*' to pick one instance's SASS (default: the first
# function whose name holds KERNEL_NAME). Prints the summary, each distinct report line
# (kind, write site, read sites) with its count, and 4 SASS lines around every site.
# LIBRARY may be any file cuobjdump reads: the 165 MB library's dump takes minutes, so
# pass the instance's object (build/runtime/.../gen/cuda/chunked_<var>_<dtype>_<K>x<V>.cu.o),
# or dump that object elsewhere (PyPI's nvidia-cuda-cuobjdump where the toolkit has none).
set -euo pipefail
[ $# -ge 4 ] || { sed -n 2,12p "$0"; exit 2; }
bin=$1 filter=$2 kernel=$3 lib=$4 pick=${5:-}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
compute-sanitizer --tool racecheck --print-limit 100000 "$bin" --gtest_filter="$filter" \
  > "$out/rc.txt" 2>&1 || true
grep -E "RACECHECK SUMMARY|PASSED|FAILED" "$out/rc.txt" || true
echo "== reports naming $kernel: kind, sites (counts)"
sed -E "s/void [a-zA-Z_:]*($kernel)<[^+]*/\1/" "$out/rc.txt" |
  grep -E "Race reported|and (Read|Write) access" | grep "$kernel" | sed -E 's/=+ *//' |
  sort | uniq -c | sort -rn | head -60
echo "== SASS at those sites"
cuobjdump -sass "$lib" > "$out/sass.txt" 2>/dev/null || true
awk -v k="$kernel" -v p="$pick" '/Function :/ { on = index($0, k) > 0 && (p == "" || $0 ~ p)
                                   if (on && done) on = 0; if (on) { done = 1; print } ; next }
                                 on' "$out/sass.txt" > "$out/k.txt"
echo "$(wc -l < "$out/k.txt") SASS lines"
for pc in $(grep -oE "$kernel\+0x[0-9a-f]+" "$out/rc.txt" | sort -u | sed 's/.*+0x//' | head -32); do
  a=$(printf "%04x" "0x$pc")
  echo "-- +0x$pc"
  grep -B2 -A1 "/\*$a\*/" "$out/k.txt" | sed -E 's/ +/ /g' | cut -c1-120 || true
done

#!/usr/bin/env bash
# Configures and builds deltac into ${DELTAC_BUILD_DIR:-build}. Extra args go
# to cmake's configure step; DELTAC_TARGETS (space-separated) limits the build.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${DELTAC_BUILD_DIR:-$root/build}"
cuda=()
[ -x /usr/local/cuda/bin/nvcc ] && cuda=(-DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc)
# ccache when present (setup installs it): CI reuses the machine, and
# CCACHE_BASEDIR makes a fresh clone at another path hit the same cache.
launch=()
if command -v ccache >/dev/null; then
  export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$root}"
  launch=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache
          -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
fi
# A cold build takes about 3.5 GB; say so up front rather than fail in the link.
mkdir -p "$build"
free_kb=$(df -Pk "$build" | awk 'NR == 2 { print $4 }')
if [ -n "$free_kb" ] && [ "$free_kb" -lt $((4 * 1024 * 1024)) ]; then
  echo "deltac build: warning: only $((free_kb / 1024)) MB free under $build;" \
       "a cold build needs about 3.5 GB (\"No space left on device\" in a link means this)" >&2
fi
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DMLIR_DIR=/usr/lib/llvm-22/lib/cmake/mlir -DLLVM_DIR=/usr/lib/llvm-22/lib/cmake/llvm \
  "${cuda[@]}" "${launch[@]}" "$@" >/dev/null
targets=()
for t in ${DELTAC_TARGETS:-}; do targets+=(--target "$t"); done
cmake --build "$build" -j "$(nproc)" "${targets[@]}"

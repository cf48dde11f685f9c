#!/usr/bin/env bash
# Stages the CPU benchmarks for a run on the GPU host's 16 cores (the run
# tool: `bash .device/isa/run16.sh`, carry [".device/isa"]). Here: builds
# deltac_cpu_bench and deltac_ggml_bench (no -march: they run on any
# x86-64), copies them with the shared libraries the host lacks (benchmark,
# OpenBLAS) and ggml's CPU sources into $DST; there, run16.sh builds ggml
# natively and runs both benchmarks on all cores and on one.
#   GGML_SRC: a ggml checkout (default /work/peer-ggml); GGML_PREFIX: its
#   cmake --install prefix (default $GGML_SRC/install); DST: default
#   <repo>/.device/isa.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
src="${GGML_SRC:-/work/peer-ggml}"
prefix="${GGML_PREFIX:-$src/install}"
dst="${DST:-$root/.device/isa}"
build="${DELTAC_BUILD_DIR:-$root/build}"
DELTAC_BUILD_DIR="$build" DELTAC_TARGETS="deltac_cpu_bench deltac_ggml_bench" \
  bash "$root/scripts/build.sh" -DDELTAC_GGML_PREFIX="$prefix" >/dev/null
rm -rf "$dst"; mkdir -p "$dst/bin" "$dst/lib" "$dst/ggml-src"
cp "$build/bench/cpu/deltac_cpu_bench" "$build/bench/cpu/deltac_ggml_bench" "$dst/bin/"
strip "$dst"/bin/*
for l in libbenchmark.so.1debian libopenblas.so.0 libgfortran.so.5 libquadmath.so.0; do
  cp -L "/lib/x86_64-linux-gnu/$l" "$dst/lib/"
done
(cd "$src" && tar c CMakeLists.txt cmake include src/CMakeLists.txt src/*.c src/*.cpp src/*.h \
  src/ggml-cpu $(cd "$src" && ls ggml*.in 2>/dev/null)) | tar x -C "$dst/ggml-src"
cat > "$dst/run16.sh" <<'RUN'
#!/usr/bin/env bash
# On the GPU host: ggml (CPU backend, native) built here, then both
# benchmarks on all cores and on one; JSON into $OUT.
set -u; cd "$(dirname "$0")"; here=$PWD; tar xJf bl.tar.xz
cmake -S ggml-src -B ggml-build -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON \
  -DBUILD_SHARED_LIBS=ON -DGGML_BUILD_TESTS=OFF -DGGML_BUILD_EXAMPLES=OFF >/dev/null || exit 1
cmake --build ggml-build -j "$(nproc)" >/dev/null || exit 1
export LD_LIBRARY_PATH=$here/lib:$here/ggml-build/src:$here/ggml-build/bin
unset OPENBLAS_CORETYPE OPENBLAS_L2_SIZE
nproc; uptime; lscpu | grep -E 'Model name|^CPU\(s\)|L2|L3'
grep -o -w -E 'avx512f|avx512_bf16|amx_tile' /proc/cpuinfo | sort -u | tr '\n' ' '; echo
f="--benchmark_repetitions=3 --benchmark_enable_random_interleaving=true --benchmark_min_time=0.2"
for t in $(nproc) 2 1; do
  DELTAC_BENCH_THREADS=$t bin/deltac_ggml_bench $f --benchmark_report_aggregates_only=true \
    --benchmark_out="$OUT/ggml_t$t.json" --benchmark_out_format=json | grep median
done
bin/deltac_cpu_bench $f --benchmark_report_aggregates_only=true \
  --benchmark_filter='BM_(Chunked<DELTAC_VARIANT_GATED, (16|32|64)>/T:(4096|8192)|RecurrentPrefill<DELTAC_VARIANT_GATED>/T:(4096|8192)|Decode<DELTAC_VARIANT_GATED>/batch:(1|8|16|64)/heads:16/)' \
  --benchmark_out="$OUT/cpu_all.json" --benchmark_out_format=json | grep median
# The SGEMM ceiling with the core named (OpenBLAS 0.3.21 may not know this
# CPU and fall back to SSE3 kernels): SkylakeX where AVX-512 is present.
core=Haswell; grep -q -w avx512f /proc/cpuinfo && core=SkylakeX
OPENBLAS_CORETYPE=$core bin/deltac_cpu_bench $f --benchmark_report_aggregates_only=true \
  --benchmark_filter='BM_SgemmLarge' \
  --benchmark_out="$OUT/cpu_sgemm.json" --benchmark_out_format=json | grep median
RUN
chmod +x "$dst/run16.sh"
# Binaries and libraries xz-compressed (the run tool carries <= 64 MiB).
(cd "$dst" && tar cf - bin lib | xz -9e -T2 > bl.tar.xz && rm -rf bin lib)
du -sh "$dst"

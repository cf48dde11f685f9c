// Run-time lookup of the chunked-kernel instantiations the GPU tests use.
#ifndef DELTAC_TESTS_CUDA_KERNELS_CHUNKED_H
#define DELTAC_TESTS_CUDA_KERNELS_CHUNKED_H

#include "deltac/params.h"

#include <cuda_runtime.h>

#include <cstddef>

namespace deltac::test {

// deltac::cuda::chunked<Var, K, V, InT, Cfg> and its workspace query.
struct ChunkedFns {
  cudaError_t (*run)(const deltac_fwd_params&, void*, size_t, cudaStream_t,
                     const int32_t*) = nullptr;
  size_t (*ws)(const deltac_fwd_params&) = nullptr;
};

// Configs under test (kernels_chunked.cuh): 0 is the default of each shape
// (the scan's V tile chosen at run time); 1..3 force other knobs and their
// V tile, 4 and 5 the default's widest V tile and half of it, 6 / 7 / 8
// the default with the sequence split forced to 2 / 4 / 8 segments, 9 with
// no split, 10 chunk 32, BV 32, 4 warps split 4 (bf16 K = V = 128; f32
// K = V = 64); 11 the default with the fused launch where it fits (every
// shape); 12 the default with the warp scan (chunked_scan_warp.cuh) where it
// runs (16-bit inputs, K = 64, 128 or 256; every shape, the block scan elsewhere),
// 13 the same with output warps (chunked_stages' scan = 2), 14 / 15 / 16
// the scan's rule (the warp scan where it runs) with the split forced to
// 2 / 4 / 8 segments (every shape), 17 the TMA scan (chunked_stages' scan 3;
// the warp scan where it does not run: tma_scan_device says), 18 the
// transposed TMA scan (scan 4; likewise), 19 / 20 that with the split forced
// to 2 / 4 (GDN: warm-up segments; the others unsplit), 21 scan 5 (the
// block scan with two-term products; f32: the block scan). Every other
// config runs the block scan (chunked_stages' scan = 1), unless
// DELTAC_TEST_WARP_SCAN=1 (or 2, 3, 4) in the environment (read once) asks
// every config for the warp scan (the rule, scan 0, or scan 2: where it runs,
// no split asked for, not fused; 3: the TMA scan where it runs, 4: the
// transposed TMA scan).
inline constexpr int kChunkedConfigs = 6;      // configs 1..5: other knobs
inline constexpr int kChunkedSplitConfigs[] = {6, 7, 8};
inline constexpr int kChunkedNoSplit = 9, kChunkedSplitNarrow = 10, kChunkedFused = 11;
inline constexpr int kChunkedWarp = 12, kChunkedWarpSplitO = 13;
inline constexpr int kChunkedWarpSplit2 = 14, kChunkedWarpSplit4 = 15, kChunkedWarpSplit8 = 16;
inline constexpr int kChunkedTma = 17, kChunkedTmat = 18;
inline constexpr int kChunkedTmatWarm2 = 19, kChunkedTmatWarm4 = 20;
inline constexpr int kChunkedPrecise = 21;

// chunked_stages' scan for every config (harness.cpp; read once): 1 (the
// block scan), 0 (the rule: a TMA or the warp scan) when DELTAC_TEST_WARP_SCAN=1,
// 2, 3 or 4 when it is 2, 3 or 4.
int scan_env();

// Whether this device runs the TMA scan (chunked_scan_tma.cuh) of GDN
// K = V = 128 bf16 (compute capability 9.0, sm_90a code).
bool tma_scan_device();

// The instantiation for (variant, K, V, in_dtype, config), or empty.
ChunkedFns find_chunked_delta(int K, int V, int dtype, int config);
ChunkedFns find_chunked_gated(int K, int V, int dtype, int config);
ChunkedFns find_chunked_kda(int K, int V, int dtype, int config);
ChunkedFns find_chunked(deltac_variant var, int K, int V, int dtype, int config);

}  // namespace deltac::test

#endif  // DELTAC_TESTS_CUDA_KERNELS_CHUNKED_H

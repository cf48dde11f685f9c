// The legal space of the chunked (WY / UT) CUDA forward pass, in plain C++
// (no CUDA headers): the knobs, their values, the shared memory each kernel
// needs, the legality predicate and the default choice. chunked_traits.cuh
// builds the kernels' sizes on it; the kernel catalogue
// (deltac/catalogue.h, family cuda_chunked) checks configs with it.
#ifndef DELTAC_CUDA_CHUNKED_RULES_H
#define DELTAC_CUDA_CHUNKED_RULES_H

#include "deltac/params.h"

#include <cstddef>

namespace deltac::cuda {

// Chunk: tokens per chunk (16, 32 or 64): the intra-chunk matrices are
//   Chunk x Chunk; the scan kernel walks a sequence one chunk at a time.
// BV: the widest V tile of the scan kernel (16, 32 or 64; divides V). The
//   scan runs BV, or BV / 2 or BV / 4 where those are legal too, halving
//   while V / BV x value heads x sequences blocks would leave more than 1/8
//   of the multiprocessors idle (chunked.cuh, chunked_pick_bv).
// Warps: warps per block of the scan kernel (2, 4 or 8).
// Stages: shared-memory buffers of the scan kernel's chunk loads (1: load,
//   then compute; S > 1: chunks c + 1 .. c + S - 1 are copied with cp.async
//   while c computes).
template <int Chunk_, int BV_, int Warps_, int Stages_>
struct ChunkedConfig {
  static constexpr int kChunk = Chunk_;
  static constexpr int kBV = BV_;
  static constexpr int kWarps = Warps_;
  static constexpr int kStages = Stages_;
};

// The legal values of each knob (the catalogue enumerates their product and
// filters it with chunked_legal).
inline constexpr int kChunkedChunks[] = {16, 32, 64};
inline constexpr int kChunkedBVs[] = {16, 32, 64};
inline constexpr int kChunkedWarps[] = {2, 4, 8};
inline constexpr int kChunkedStages[] = {1, 2, 3};
// Split: segments per sequence (1: none). The segments run in parallel,
//   later ones with K extra identity columns; a fold and an output fix-up
//   compose them (chunked_split.cuh). A run-time value, not a template one.
inline constexpr int kChunkedSplits[] = {1, 2, 4, 8, 16};
// The default split keeps at least this many chunks per segment.
inline constexpr int kChunkedSplitMinChunks = 16;
// Shared memory one block may use (sm_90: 227 KB). sm_80 allows 163 KB and
// sm_120 99 KB: pass the device's cudaDevAttrMaxSharedMemoryPerBlockOptin.
inline constexpr size_t kChunkedSmemSm90 = 232448;
// Warps of the intra-chunk (prep) kernel: fixed, not a knob. Its phases are
// short and separated by barriers; 8 warps hide more of their latency.
inline constexpr int kChunkedPrepWarps = 8;

namespace chunked_detail {
constexpr int gcd(int a, int b) { return b == 0 ? a : gcd(b, a % b); }
constexpr int maxi(int a, int b) { return a > b ? a : b; }
constexpr bool one_of(int x, const int* v, int n) {
  for (int i = 0; i < n; ++i)
    if (v[i] == x)
      return true;
  return false;
}
// Padding of every shared-memory row: 16 bytes, in elements of `elem` bytes.
constexpr int pad(int elem) { return 16 / elem; }
}  // namespace chunked_detail

// Shared memory of the intra-chunk kernel, in bytes (elem: bytes of the
// compute type, 2 for bf16/f16 inputs, 4 for f32).
constexpr size_t chunked_prep_smem(int var, int K, int V, int elem, int chunk) {
  using namespace chunked_detail;
  (void)V;
  const size_t C = chunk, LK = K + pad(elem);
  size_t b = 2 * C * LK * elem;                            // k, q (raw)
  b += (var == DELTAC_VARIANT_KDA ? C * (K + 4) : C) * 4;  // gate cumsum (kda rows padded)
  b += 2 * C * (C + 1) * 4;                                // A, T (f32)
  b += 3 * C * 4;                                          // beta, rq, rk
  b += size_t(maxi(chunk / 16 - 1, 1)) * 256 * 4;          // block products of the solve
  if (var == DELTAC_VARIANT_KDA)
    b += (32 + (C - 16)) * LK * elem;                      // decayed k / q rows
  return b;
}

// Shared memory of the scan kernel, in bytes.
constexpr size_t chunked_scan_smem(int var, int K, int elem, int chunk, int bv, int stages) {
  using namespace chunked_detail;
  const size_t C = chunk, LK = K + pad(elem), LC = chunk + pad(elem), LB = bv + pad(elem);
  // Per stage: q, k (kda: a second k) rows, the v tile, T, Aqk; the row
  // factors and the chunk decay in f32.
  const size_t stage =
      ((var == DELTAC_VARIANT_KDA ? 3 : 2) * C * LK + C * LB + 2 * C * LC) * elem +
      (4 * C + size_t(K)) * 4;
  // S (hi, and lo for 16-bit types), the residual, v' and the decayed v'.
  return stage * stages + (size_t(elem == 2 ? 2 : 1) * K * LB + 3 * C * LB) * elem;
}

// Whether (chunk, bv, warps, stages) is a legal config for (variant, K, V,
// bytes of the input type) with `smem` bytes of shared memory per block.
constexpr bool chunked_legal(int var, int K, int V, int in_bytes, int chunk, int bv, int warps,
                             int stages, size_t smem = kChunkedSmemSm90) {
  using namespace chunked_detail;
  if (var < 0 || var > 2 || !(in_bytes == 2 || in_bytes == 4))
    return false;
  if (K < 16 || K > 256 || K % 16 || V < 16 || V > 256 || V % 16)
    return false;
  if (!one_of(chunk, kChunkedChunks, 3) || !one_of(bv, kChunkedBVs, 3) ||
      !one_of(warps, kChunkedWarps, 3) || !one_of(stages, kChunkedStages, 3))
    return false;
  if (V % bv)
    return false;
  const int nb = bv / 8;
  // Output / v' tiles: chunk / 16 row tiles x bv / 8 column tiles.
  const int mw1 = gcd(warps, chunk / 16), nw1 = warps / mw1;
  if (nb % nw1)
    return false;
  // State tiles: K / 16 row tiles x bv / 8 column tiles.
  const int mw3 = gcd(warps, K / 16), nw3 = warps / mw3;
  if (nb % nw3)
    return false;
  // State accumulators per thread: at most 64 floats.
  if ((K / 16 / mw3) * (nb / nw3) * 4 > 64)
    return false;
  if (chunked_prep_smem(var, K, V, in_bytes, chunk) > smem)
    return false;
  if (chunked_scan_smem(var, K, in_bytes, chunk, bv, stages) > smem)
    return false;
  return true;
}

// The default split: 1 while the scan's grid (value heads x sequences x
// V / bv_run blocks) fills 7/8 of the multiprocessors or no V tile divides K
// (bv_split = 0); else the largest S of kChunkedSplits whose grid (segment 0:
// V / bv_split blocks, later segments (V + K) / bv_split) fits one wave on
// `sms` multiprocessors with >= kChunkedSplitMinChunks chunks per segment,
// if that is at least 4.
constexpr int chunked_default_split(int K, int V, long long heads_x_seqs, long long max_chunks,
                                    int bv_run, int bv_split, int sms) {
  if (bv_run <= 0 || bv_split <= 0 || sms <= 0 || heads_x_seqs <= 0)
    return 1;
  if (heads_x_seqs * (V / bv_run) >= (long long)(sms) * 7 / 8)
    return 1;
  int best = 1;
  for (int s : kChunkedSplits) {
    const long long blocks = heads_x_seqs * (V / bv_split + (s - 1) * ((V + K) / bv_split));
    if (s > 1 && blocks <= sms && (max_chunks + s - 1) / s >= kChunkedSplitMinChunks)
      best = s;
  }
  // Two segments do not pay for the identity columns' extra work (GDN 2/8
  // heads 1x32768, H200: S = 2 1.35 ms, none 1.24, S = 4 1.00).
  return best >= 4 ? best : 1;
}

struct ChunkedChoice {
  int chunk, bv, warps, stages;
};

// The default config: chunk 64 before 32 before 16 (kda: 32 first, its
// intra-chunk kernel is half as costly per token at 32: H200, 2026-12-01),
// then BV 64 before 32 before 16 (the scan narrows it at run time), 2 stages
// before 1 (3 measured no faster), 8 warps before 4 before 2; the first
// legal one.
constexpr ChunkedChoice chunked_default(int var, int K, int V, int in_bytes,
                                        size_t smem = kChunkedSmemSm90) {
  const int chunks[] = {64, 32, 16}, chunks_kda[] = {32, 64, 16}, bvs[] = {64, 32, 16},
            warps[] = {8, 4, 2}, stages[] = {2, 1};
  for (int c : var == DELTAC_VARIANT_KDA ? chunks_kda : chunks)
    for (int b : bvs)
      for (int s : stages)
        for (int w : warps)
          if (chunked_legal(var, K, V, in_bytes, c, b, w, s, smem))
            return {c, b, w, s};
  return {0, 0, 0, 0};
}

}  // namespace deltac::cuda

#endif  // DELTAC_CUDA_CHUNKED_RULES_H

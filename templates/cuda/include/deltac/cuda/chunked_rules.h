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
//   compose them (chunked_split.cuh); under the transposed TMA scan (GDN)
//   warm-up segments instead (chunked_warm_split). A run-time value, not a
//   template one.
inline constexpr int kChunkedSplits[] = {1, 2, 4, 8, 16};
// The default split keeps at least this many chunks per segment.
inline constexpr int kChunkedSplitMinChunks = 16;
// Shared memory one block may use (sm_90: 227 KB). sm_80 allows 163 KB and
// sm_120 99 KB: pass the device's cudaDevAttrMaxSharedMemoryPerBlockOptin.
inline constexpr size_t kChunkedSmemSm90 = 232448;
// Warps of the intra-chunk (prep) kernel: fixed, not a knob. Its phases are
// short and separated by barriers; 8 warps hide more of their latency.
inline constexpr int kChunkedPrepWarps = 8;
// Scan: which kernel runs the sequential part (a run-time value).
//   0 the rule (chunked.cuh, chunked_run_plan: 4 or 3 where it takes them,
//     below; else chunked_uses_warp_scan): the warp scan (chunked_scan_warp.cuh:
//     a chain per warp over 16 value columns, two warps each with half of
//     the keys at K = 256; 16-bit inputs, K = 64, 128 or 256, chunk 32 or
//     64; its own V tile of kChunkedWarpBVs and stages, its own split rule
//     (chunked.cuh's chunked_warp_plan), no fused launch) where it runs,
//     else the block scan;
//   1 the block scan (chunked_scan.cuh: reads BV, Warps, Stages, the split
//     and the fused launch);
//   3 the TMA scan (chunked_scan_tma.cuh: warpgroup products with the state
//     in shared memory, 32 value columns a block, stages loaded by TMA;
//     sm_90a, GDN / delta, 16-bit inputs, K = 64 or 128, chunk 64; no split)
//     where it runs, else as 0. The rule takes it where it runs and the warp
//     scan's grid at V tile 32 fits one wave unsplit (chunked.cuh,
//     chunked_run_plan).
//   4 the TMA scan with the state transposed in registers
//     (chunked_scan_tmat.cuh: Sᵀ the register A operand of the products, 64
//     value columns a warpgroup, one or two warpgroups a block; sm_90a, GDN /
//     delta, 16-bit inputs, K = 64 or 128, chunk 64, V a multiple of 64; at
//     K = 256 two warpgroups share 64 columns, half the keys each) where it
//     runs, else as 0. The rule takes it where it runs and its grid leaves at
//     most 1/8 of the SMs idle (chunked_run_plan). It reads the split for GDN
//     only, as warm-up segments (chunked_warm_split below), else none.
//   5 the block scan with two-term products (chunked_scan.cuh, Precise):
//     the residual r, T (its low half written by the intra-chunk kernel)
//     and the update's v' each as hi + lo 16-bit terms, so the f32 state
//     loses nothing to the operands' rounding; no split, no fused launch;
//     the block scan where no V tile fits the device's shared memory.
//     What beta in (0, 2) needs with 16-bit inputs: beta near 2 reflects
//     without decaying and the other scans' bf16 error grows with T
//     (docs/performance.md, "Which fix"). Delta and GDN: f32 inputs run it
//     as 1 (their products are already f32-exact), and so does kda, whose
//     decayed k operands are 16-bit too (two terms there would not fit at
//     K = 256; near beta 2 it stays at ~1.7e-2 over 2000 tokens).
// (2, the warp scan with output warps, is for tests and benchmarks.)
inline constexpr int kChunkedScans[] = {0, 1, 3, 4, 5};
inline constexpr int kChunkedScanPrecise = 5;
// The V tiles the warp scan compiles, widest first.
inline constexpr int kChunkedWarpBVs[] = {64, 32};

// The split, fuse and scan knobs a call runs, whatever its config says. A
// call writing chunk-end states (deltac_options.chunk_states) runs the block
// scan unsplit and unfused (the block scan alone writes them); a call whose
// beta may exceed 1 (deltac_options.allow_neg_eigval, beta_range zero_two)
// where scan 5 runs (precise: chunked_precise_runs) runs it, which writes
// them too.
struct ChunkedKnobs {
  int split, fuse, scan;
};
constexpr ChunkedKnobs chunked_knobs(int split, int fuse, int scan, bool cstates,
                                     bool precise = false) {
  if (precise || scan == kChunkedScanPrecise)
    return ChunkedKnobs{1, 0, kChunkedScanPrecise};
  return cstates ? ChunkedKnobs{1, 0, 1} : ChunkedKnobs{split, fuse, scan};
}

// Whether a grid of `blocks` leaves more than 1/8 of `sms` multiprocessors
// idle: the V tile narrows, the sequence split and a tuned split apply only
// then (chunked.cuh, chunked_default_split, the runtime's select.cpp).
constexpr bool chunked_grid_short(long long blocks, int sms) {
  return sms > 0 && blocks < (long long)(sms) * 7 / 8;
}
// Whether the transposed TMA scan's grid, `heads` (sequences x value heads)
// x V / 64 blocks, fills a GPU of `sms` multiprocessors (known): where the
// rule takes it unforced (chunked.cuh, chunked_run_plan) and where the
// runtime's deltac_saved_states_pay expects the forward to write the states.
constexpr bool chunked_tmat_fills(long long heads, int V, int sms) {
  return sms > 0 && !chunked_grid_short(heads * (V / 64), sms);
}

namespace chunked_detail {
constexpr int gcd(int a, int b) { return b == 0 ? a : gcd(b, a % b); }
constexpr int maxi(int a, int b) { return a > b ? a : b; }
template <int N>
constexpr bool one_of(int x, const int (&v)[N]) {
  for (int e : v)
    if (e == x)
      return true;
  return false;
}
// Padding of every shared-memory row: 16 bytes, in elements of `elem` bytes.
constexpr int pad(int elem) { return 16 / elem; }
}  // namespace chunked_detail

// Row stride (floats) of the intra-chunk kernel's f32 A and T: C + 4 (its
// solve's fragment loads and 8-byte stores then meet few bank conflicts);
// kda keeps C + 1, whose shared memory would otherwise lose a block per
// multiprocessor at chunk 32.
constexpr int chunked_prep_ld(int var, int chunk) {
  return var == DELTAC_VARIANT_KDA ? chunk + 1 : chunk + 4;
}

// Shared memory of the intra-chunk kernel, in bytes (elem: bytes of the
// compute type, 2 for bf16/f16 inputs, 4 for f32).
constexpr size_t chunked_prep_smem(int var, int K, int V, int elem, int chunk) {
  using namespace chunked_detail;
  (void)V;
  const size_t C = chunk, LK = K + pad(elem);
  const size_t raw = 2 * C * LK * elem;  // k, q (raw)
  const size_t at = 2 * C * size_t(chunked_prep_ld(var, chunk)) * 4;  // A, T (f32)
  size_t b = 0;
  if (var == DELTAC_VARIANT_KDA)  // decayed k / q rows; gate cumsum rows padded
    b = raw + (32 + (C - 16)) * LK * elem + at + C * (K + 4) * 4;
  else  // A and T over the raw rows; the gate cumsum
    b = (raw > at ? raw : at) + C * 4;
  b += 3 * C * 4;                              // beta, rq, rk
  b += size_t(chunk == 64 ? 4 : 1) * 256 * 4;  // the solve's block products
  return b;
}

// Shared memory of the scan kernel, in bytes (precise: scan 5's, with T's
// low half per stage and the low halves of r and of the update's v').
constexpr size_t chunked_scan_smem(int var, int K, int elem, int chunk, int bv, int stages,
                                   bool precise = false) {
  using namespace chunked_detail;
  const size_t C = chunk, LK = K + pad(elem), LC = chunk + pad(elem), LB = bv + pad(elem);
  // Per stage: q, k (kda: a second k) rows, the v tile, T, Aqk; the row
  // factors and the chunk decay in f32.
  const size_t stage =
      ((var == DELTAC_VARIANT_KDA ? 3 : 2) * C * LK + C * LB + 2 * C * LC) * elem +
      (4 * C + size_t(K)) * 4;
  // S (hi, and lo for 16-bit types), the residual, v' and the decayed v'.
  const size_t extra = precise ? size_t(stages) * C * LC * elem + 2 * C * LB * elem : 0;
  return stage * stages + (size_t(elem == 2 ? 2 : 1) * K * LB + 3 * C * LB) * elem + extra;
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
  if (!one_of(chunk, kChunkedChunks) || !one_of(bv, kChunkedBVs) ||
      !one_of(warps, kChunkedWarps) || !one_of(stages, kChunkedStages))
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

// Whether scan 5 (the block scan with two-term products) runs for a
// variant and input width: delta or GDN, 16-bit inputs.
constexpr bool chunked_precise_runs(int var, int in_bytes) {
  return in_bytes == 2 && var != DELTAC_VARIANT_KDA;
}
// Whether it runs that config with V tile bv: a legal config whose larger
// shared memory fits `smem`.
constexpr bool chunked_precise_ok(int var, int K, int V, int in_bytes, int chunk, int bv,
                                  int warps, int stages, size_t smem = kChunkedSmemSm90) {
  return chunked_precise_runs(var, in_bytes) && bv >= 16 &&
         chunked_legal(var, K, V, in_bytes, chunk, bv, warps, stages, smem) &&
         chunked_scan_smem(var, K, in_bytes, chunk, bv, stages, true) <= smem;
}

// The default split: 1 while the scan's grid (value heads x sequences x
// V / bv_run blocks) fills 7/8 of the multiprocessors or no V tile divides K
// (bv_split = 0); else the largest S of kChunkedSplits whose grid (segment 0:
// V / bv_split blocks, later segments (V + K) / bv_split) fits one wave on
// `sms` multiprocessors with >= kChunkedSplitMinChunks chunks per segment,
// if that is at least min_split (kChunkedMinSplitBlock / Warp below).
// The block scan: two segments do not pay for the identity columns' extra
// work (GDN 2/8 heads 1x32768, H200: S = 2 1.35 ms, none 1.24, S = 4 1.00);
// the warp scan: they do (0.90, none 1.04, S = 4 0.75).
inline constexpr int kChunkedMinSplitBlock = 4, kChunkedMinSplitWarp = 2;
constexpr int chunked_default_split(int K, int V, long long heads_x_seqs, long long max_chunks,
                                    int bv_run, int bv_split, int sms,
                                    int min_split = kChunkedMinSplitBlock) {
  if (bv_run <= 0 || bv_split <= 0 || sms <= 0 || heads_x_seqs <= 0)
    return 1;
  if (!chunked_grid_short(heads_x_seqs * (V / bv_run), sms))
    return 1;
  int best = 1;
  for (int s : kChunkedSplits) {
    const long long blocks = heads_x_seqs * (V / bv_split + (s - 1) * ((V + K) / bv_split));
    if (s > 1 && blocks <= sms && (max_chunks + s - 1) / s >= kChunkedSplitMinChunks)
      best = s;
  }
  return best >= min_split ? best : 1;
}

// The warm-up split of the transposed TMA scan (GDN; chunked_scan_tma.cuh's
// warm_start): each segment starts from a zero state early enough that the
// gate's decay has forgotten it (to 2^-24), so no identity columns, fold or
// fix-up, but work that grows as the decay weakens (no decay: segment s
// re-runs every chunk before it). The rule's S: the largest of
// kChunkedSplits whose grid (blocks_per_seg = heads x sequences x V / 64)
// fits one wave with >= kChunkedSplitMinChunks chunks a segment; 1 where
// the unsplit grid is not short (chunked_grid_short).
// kChunkedWarmRule: off: a head of weak decay walks back to its sequence's
// start, and that block sets the call (docs/performance.md, session 36).
inline constexpr bool kChunkedWarmRule = false;
constexpr int chunked_warm_split(long long blocks_per_seg, long long max_chunks, int sms) {
  if (!kChunkedWarmRule || blocks_per_seg <= 0 || sms <= 0 ||
      !chunked_grid_short(blocks_per_seg, sms))
    return 1;
  int best = 1;
  for (int s : kChunkedSplits)
    if (blocks_per_seg * s <= sms && (max_chunks + s - 1) / s >= kChunkedSplitMinChunks)
      best = s;
  return best;
}

// Chain warps per 16 value columns of the warp scan: 2 for K = 256 (each
// holds Sᵀ for K / 2 keys: K / 4 registers per thread, as at K = 128), else 1.
constexpr int warp_scan_key_split(int K) { return K > 128 ? 2 : 1; }
// Shared memory of the warp scan: `stages` stages of q, k (kda: and the
// update's k) rows, the v tile, T, Aqk, the row factors and the chunk decay;
// one [C][16] output tile per 16 columns; with output warps (split_o) Sᵀ_hi
// ([2][BV / 16][16][K]) and v'ᵀ ([BV / 16][16][C]); with two chain warps
// per 16 columns their exchange of partial products ([BV / 16][2][3 C / 16]
// tiles of 512 bytes); the mbarriers.
inline constexpr size_t kWarpScanBarBytes = 256;
constexpr size_t warp_scan_stage_bytes(int var, int K, int chunk, int bv) {
  const size_t LK = K + 8, LC = chunk + 8, LB = bv + 8;
  return ((var == DELTAC_VARIANT_KDA ? 3 : 2) * chunk * LK + chunk * LB + 2 * chunk * LC) * 2 +
         (4 * size_t(chunk) + K) * 4;
}
constexpr size_t warp_scan_smem(int var, int K, int chunk, int bv, bool split_o, int stages) {
  const size_t np = size_t(bv / 16);
  return stages * warp_scan_stage_bytes(var, K, chunk, bv) + np * chunk * 24 * 2 +
         (split_o ? (2 * size_t(K + 8) + chunk + 8) * 16 * 2 * np : 0) +
         (warp_scan_key_split(K) == 2 ? np * 2 * size_t(chunk / 8 + chunk / 16) * 512 : 0) +
         kWarpScanBarBytes;
}
// Three stages where they fit in kChunkedSmemSm90 and leave as many blocks
// per multiprocessor (its 1 KB more, each block's 1 KB reserve) as two, else two.
constexpr int warp_scan_stages(int var, int K, int chunk, int bv, bool split_o) {
  const size_t s2 = warp_scan_smem(var, K, chunk, bv, split_o, 2) + 1024;
  const size_t s3 = warp_scan_smem(var, K, chunk, bv, split_o, 3) + 1024;
  const size_t sm = kChunkedSmemSm90 + 1024;
  return s3 <= sm && sm / s3 >= sm / s2 ? 3 : 2;
}

// Whether the warp scan runs (variant, K, V, input bytes, chunk) with V tile
// bv within `smem` bytes of shared memory per block (K = 64, 128 or 256;
// output warps: K <= 128; at most 8 warps of 255 registers, the
// multiprocessor's 64 K, so K = 256 takes V tile 32 only; chunk 16 is left
// to the block scan, one instantiation fewer).
constexpr bool chunked_warp_ok(int var, int K, int V, int in_bytes, int chunk, int bv,
                               size_t smem = kChunkedSmemSm90, bool split_o = false) {
  if (in_bytes != 2 || !(K == 64 || K == 128 || K == 256) || (split_o && K > 128) ||
      !(bv == kChunkedWarpBVs[0] || bv == kChunkedWarpBVs[1]) || V % bv ||
      !(chunk == 32 || chunk == 64) || bv / 16 * warp_scan_key_split(K) + 1 > 8)
    return false;
  return warp_scan_smem(var, K, chunk, bv, split_o, 2) <= kChunkedSmemSm90 &&
         warp_scan_smem(var, K, chunk, bv, split_o,
                        warp_scan_stages(var, K, chunk, bv, split_o)) <= smem;
}
// Warps of a warp-scan block: output warps beside the chain warps (split_o),
// or the chain warps and one producer.
constexpr int warp_scan_warps(int K, int bv, bool split_o) {
  return split_o ? 2 * (bv / 16) : bv / 16 * warp_scan_key_split(K) + 1;
}
// With some V tile.
constexpr bool chunked_warp_runs(int var, int K, int V, int in_bytes, int chunk,
                                 size_t smem = kChunkedSmemSm90) {
  return chunked_warp_ok(var, K, V, in_bytes, chunk, kChunkedWarpBVs[0], smem) ||
         chunked_warp_ok(var, K, V, in_bytes, chunk, kChunkedWarpBVs[1], smem);
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

// The TMA scan (chunked_scan_tma.cuh): one warpgroup of 32 value columns and
// a producer warp a block; a stage holds q, k [C][K] and T, Aqk [C][C]
// (16-bit, 128-byte swizzled), the v tile [C][32] and the row factors and
// decays (f32), 1 KB aligned; per stage 2 of them; the warpgroup's S_hi,
// S_lo [K][32], r, v', fk v' [C][32] (16-bit); 2 mbarriers a stage; 1 KB to
// align the base. H200, GDN 16/32 heads 1x32768: scan 0.63 vs the warp
// scan's 0.85 ms; slower where the grid takes several waves
// (docs/performance.md, "The TMA scan").
inline constexpr int kTmaScanBV = 32, kTmaScanStages = 2, kTmaScanThreads = 160;
constexpr int tma_round1k(int b) { return (b + 1023) / 1024 * 1024; }
constexpr int tma_scan_stage_bytes(int K, int chunk) {
  return tma_round1k(2 * chunk * K * 2 + tma_round1k(chunk * kTmaScanBV * 2) +
                     2 * chunk * chunk * 2 + (4 * chunk + K) * 4);
}
constexpr size_t tma_scan_smem(int K, int chunk) {
  return size_t(kTmaScanStages) * tma_scan_stage_bytes(K, chunk) +
         size_t(tma_round1k(2 * K * 64 + 3 * chunk * 64)) + 16 * kTmaScanStages + 1024;
}
constexpr bool chunked_tma_runs(int var, int K, int V, int in_bytes, int chunk) {
  return var != DELTAC_VARIANT_KDA && in_bytes == 2 && (K == 64 || K == 128) && chunk == 64 &&
         V % kTmaScanBV == 0 && tma_scan_smem(K, chunk) <= kChunkedSmemSm90;
}

// The transposed TMA scan (chunked_scan_tmat.cuh) in three forms: 1 or 2
// warpgroups of 64 value columns a block (K = 64, 128), or kTmatKeySplit
// (K = 256): two warpgroups on the same 64 columns, half the keys each; and a
// producer warp (one warpgroup) or warpgroup (two, its registers given to the
// others). A stage holds q, k [C][K], v [C][cols], T, Aqk [C][C] (16-bit,
// 128-byte swizzled) and the row factors and decays (f32), 1 KB aligned; 2
// stages; 2 mbarriers a stage; 1 KB to align the base.
inline constexpr int kTmatScanStages = 2;
inline constexpr int kTmatKeySplit = 3;
constexpr int tmat_form_cols(int form) { return form == kTmatKeySplit ? 64 : 64 * form; }
constexpr int tmat_form_wgs(int form) { return form == kTmatKeySplit ? 2 : form; }
constexpr int tmat_scan_stage_bytes(int K, int chunk, int cols) {
  return tma_round1k(2 * chunk * K * 2 + tma_round1k(chunk * cols * 2) + 2 * chunk * chunk * 2 +
                     (4 * chunk + K) * 4);
}
constexpr size_t tmat_scan_smem(int K, int chunk, int form) {
  return size_t(kTmatScanStages) * tmat_scan_stage_bytes(K, chunk, tmat_form_cols(form)) +
         16 * kTmatScanStages + 1024;
}
constexpr int tmat_scan_threads(int form) {
  return 128 * tmat_form_wgs(form) + (tmat_form_wgs(form) > 1 ? 128 : 32);
}
// Whether K takes the key split (its Sᵀ does not fit one warpgroup).
constexpr bool tmat_keys_split(int K) { return K == 256; }
constexpr bool chunked_tmat_runs(int var, int K, int V, int in_bytes, int chunk) {
  return var != DELTAC_VARIANT_KDA && in_bytes == 2 && (K == 64 || K == 128 || K == 256) &&
         chunk == 64 && V % 64 == 0 &&
         tmat_scan_smem(K, chunk, tmat_keys_split(K) ? kTmatKeySplit : 2) <= kChunkedSmemSm90;
}

// Whether a call with knob scan (as the catalogue lists it) runs the warp
// scan: scan 0 (the rule) where it runs, whatever split (it splits too) and
// fuse (read as 0). H200: the
// warp scan 1.25-1.38x the block scan (its rule's split included) on GDN
// 16/32 heads K = V = 128 1x32768 and 4x8192, delta K = V = 64 8x4096
// (docs/performance.md, version 11); 1.76x on GDN 16/16 heads K = V = 256
// 1x32768 (version 13). The kernel narrows it to the device's
// shared memory at run time (block scan without a split where it does not fit).
constexpr bool chunked_uses_warp_scan(int var, int K, int V, int in_bytes, int chunk, int scan) {
  return (scan == 0 || scan == 3 || scan == 4) && chunked_warp_runs(var, K, V, in_bytes, chunk);
}

}  // namespace deltac::cuda

#endif  // DELTAC_CUDA_CHUNKED_RULES_H

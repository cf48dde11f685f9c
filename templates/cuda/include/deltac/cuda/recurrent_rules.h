// The legal space of the fused recurrent CUDA kernels (family cuda_recurrent)
// and the rule that picks a kernel form for a call, in plain C++ (no CUDA
// headers): traits.cuh sizes the kernels on it, recurrent.cuh launches the
// precompiled instances by it, the runtime's NVRTC path (cuda_jit.cpp)
// compiles and launches the same forms by it, and the kernel catalogue
// (deltac/catalogue.h) checks configs with it.
#ifndef DELTAC_CUDA_RECURRENT_RULES_H
#define DELTAC_CUDA_RECURRENT_RULES_H

#include "deltac/params.h"

#include <cstdint>

namespace deltac {

// Split-kernel geometry: 4 floats per lane, BV/4 lanes per row, 32/(BV/4)
// rows per warp step.
constexpr int cuda_recurrent_row_groups(int K, int BV) {
  return K / (32 / (BV / 4));
}
// Default V tile: 32 columns where they divide V, else 16, at every batch
// (halving it on small grids measured no faster for f32 states at batch 1
// and slower for bf16 / fp8 ones; H200, GDN 32 value heads K = V = 128: f32
// 2.76-2.81 against 2.67 us, bf16 3.23-3.29 against 2.42; docs/
// performance.md "Decode", the staged kernel by row groups).
constexpr int cuda_recurrent_default_tile(int V) { return V % 32 == 0 ? 32 : 16; }
// Default warps: the fewest of 2, 4, 8 that split the row groups into at
// most 16 per warp (64 state floats per thread): 2 for every K with tile_v
// 16 and for K <= 128 with tile_v 32, else 4. More state per thread puts
// more bytes in flight (H200, GDN 16/32 heads K = V = 128, graph replay:
// tile_v 32 with 2 warps 75.4 / 548.9 us at batch 64 / 512 f32, 49.7 / 358.5
// bf16, against 81.6 / 600.8 and 60.1 / 440.9 with 4; tile_v 16 at batch 1:
// 3.07 us with 2 warps, 3.67 with 4; docs/performance.md, "Decode: state
// pool", version 2; K = 64 and 256 not measured).
// The wide tile (64 columns, kCudaRecurrentWideTile): 2 warps up to K =
// 128, else 4 (the one-token kernels' geometry for 16-bit states).
constexpr int cuda_recurrent_default_warps(int K, int BV) {
  if (BV == 64)
    return K <= 128 ? 2 : 4;
  const int groups = cuda_recurrent_row_groups(K, BV);
  for (int w = 2; w <= 8; w *= 2)
    if (groups % w == 0 && groups / w <= 16)
      return w;
  return 1;
}
// The split kernel's legal warps: whole row groups per warp, at most 16 rows
// (64 floats) per thread (tile_v 16 and 32; cuda_recurrent_knobs_ok says
// which knobs have a kernel for a call).
constexpr bool cuda_recurrent_warps_ok(int K, int BV, int warps) {
  const int groups = cuda_recurrent_row_groups(K, BV);
  return warps >= 1 && groups % warps == 0 && (groups / warps) * 4 <= 64;
}

namespace cuda {

// The strip kernel's geometry (recurrent_strip.cuh, StripTraits): each warp
// owns all K rows of BV / warps columns; a lane holds vec columns (16 bytes
// of f32 state, 16 or 8 of bf16) of K / groups consecutive rows, L lanes per
// row. fits: the geometry exists; ok: at most 64 floats of state per thread
// (several tokens); ok_one: one token keeps it packed, at most 64 words.
struct StripGeom {
  int L, groups, rows;
  bool fits, ok, ok_one;
};
constexpr StripGeom strip_geom(int K, int BV, int warps, int vec) {
  StripGeom s{};
  const int wv = BV / warps;
  s.L = wv / vec;
  s.groups = s.L >= 1 && s.L <= 32 ? 32 / s.L : 1;
  s.rows = K / s.groups;
  s.fits = BV % warps == 0 && s.L >= 1 && s.L <= 32 && wv % vec == 0 && 32 % s.groups == 0 &&
           K % s.groups == 0 && warps * 32 <= 256;
  s.ok = s.fits && s.rows * vec <= 64;
  s.ok_one = s.fits && s.rows * vec * (vec == 8 ? 2 : 4) <= 256;
  return s;
}
// The strip kernel's vec for these knobs: 8 for a bf16 (or fp8) state where
// that geometry exists, else 4; 0 where neither does. one: the one-token kernel.
constexpr int strip_vec(int K, int BV, int warps, bool bf16_state, bool one) {
  const StripGeom g8 = strip_geom(K, BV, warps, 8), g4 = strip_geom(K, BV, warps, 4);
  if (bf16_state && (one ? g8.ok_one : g8.ok))
    return 8;
  return (one ? g4.ok_one : g4.ok) ? 4 : 0;
}

}  // namespace cuda

// The wide V tile: 64 columns a block, for one-token calls of 16-bit and fp8
// states on large grids (cuda_recurrent_tile_for); the strip kernels only.
constexpr int kCudaRecurrentWideTile = 64;

// Whether knobs (tile_v, warps) have a kernel for a call: tile_v 16 and 32
// the split kernel at every call (cuda_recurrent_warps_ok), the wide tile the
// strip kernels' geometry for the state (state_bytes 4, 2 or 1), one: every
// call runs the one-token kernels (recurrent_one_token), else several tokens.
constexpr bool cuda_recurrent_knobs_ok(int K, int BV, int warps, int state_bytes, bool one) {
  if (BV == 16 || BV == 32)
    return cuda_recurrent_warps_ok(K, BV, warps);
  return BV == kCudaRecurrentWideTile && cuda::strip_vec(K, BV, warps, state_bytes <= 2, one) != 0;
}

namespace cuda {

// Whether the stream kernel (recurrent_stream.cuh) has a geometry for these
// knobs: the several-token strip geometry (the state in registers as
// floats) with state rows of whole 16-byte pieces (its cp.async). K and V
// are multiples of 16, so q / k / v rows are too.
constexpr bool stream_geom_ok(int K, int BV, int warps, int vec, int state_bytes) {
  return strip_geom(K, BV, warps, vec).ok && (BV * state_bytes) % 16 == 0 && warps <= 7;
}

namespace detail {

// Which form runs: Auto (the rule below), Split (the split kernel where it
// exists), Strip (the strip kernel where it exists). Tests and benchmarks
// force one.
// Packed: as Strip, but a one-token call keeps its state rows in registers
// (not the staged form below). Stream: the stream kernel where it runs
// (stream_geom_ok, recurrent.cuh's stream_applies), else as Auto.
enum class Form { Auto = 0, Split = 1, Strip = 2, Packed = 3, Stream = 4 };

}  // namespace detail

// The kernel a call runs: the one-token strip kernel (T <= 1 without
// cu_seqlens, state_steps, accepted or the batch-invariant mode), the strip
// kernel, the split kernel (recurrent_kernel.cuh: one block per V tile, warps
// split K; BV 16 or 32) or none (knobs without a kernel for the call).
// Stream: the persistent kernel of recurrent_stream.cuh (sm_90).
enum class RecurrentKernel { None = 0, StripOne = 1, Strip = 2, Split = 3, Stream = 4 };
struct RecurrentChoice {
  RecurrentKernel kernel;
  int vec;  // the strip kernels' vec
};
// A grid of at most this many blocks is small (about one wave): the
// one-token kernels prefetch their state into L2 before the PDL wait there
// (recurrent_strip.cuh, prefetch_state), which made the strip form the
// faster at batch 1 (H200, GDN 16/32 heads K = V = 128: 2.8 against 3.6 us
// f32, docs/performance.md "Decode", version 4).
constexpr int64_t kRecurrentSmallGrid = 1024;
// Under Auto the staged one-token kernel runs on small grids, for an f32
// state on at most this many blocks (recurrent.cuh, recurrent_staged):
// H200, GDN 16/32 heads K = V = 128 at 32 / 2, batch 1 (128 blocks) 2.68
// us staged against 2.75 from registers, batch 8 (1024 blocks) 12.96
// against 11.73 (docs/performance.md "Decode", the staged kernel by row
// groups).
constexpr int64_t kRecurrentStagedF32Grid = 256;

}  // namespace cuda

// The catalogue's default V tile for a call (default_config): the wide tile
// for one-token calls (one, as cuda_recurrent_knobs_ok) of 16-bit and fp8
// states where it divides V on grids of more than kRecurrentSmallGrid blocks
// at 32 columns (blocks32), staged (recurrent.cuh, recurrent_staged). H200,
// GDN 16/32 heads K = V = 128, bf16 state, 64 / 2 staged against 32 / 2:
// 44.19 / 162.14 / 318.82 against 49.36 / 181.22 / 355.52 us at batch 64 /
// 256 / 512 (docs/performance.md "Decode", the staged kernel by row groups).
// Else cuda_recurrent_default_tile.
constexpr int cuda_recurrent_tile_for(int V, int state_bytes, bool one, int64_t blocks32) {
  const bool wide = one && state_bytes <= 2 && V % kCudaRecurrentWideTile == 0 &&
                    blocks32 > cuda::kRecurrentSmallGrid;
  return wide ? kCudaRecurrentWideTile : cuda_recurrent_default_tile(V);
}

namespace cuda {

// Under Auto a token runs the one-token strip kernel where a lane's state
// slice is at least 64 bytes wide, where the grid is small (at most
// kRecurrentSmallGrid blocks) or where the split kernel does not exist, else
// the split kernel; several tokens run the strip kernel where it exists.
// blocks: the call's grid (sequences x value heads x V tiles).
// An fp8 state (state_bytes 1) takes the geometry of a bf16 one (vec 8 where
// it exists) and, for one token, the one-token kernel at every grid size
// (the split kernel reads it 4 bytes a lane).
constexpr RecurrentChoice recurrent_choice(int K, int BV, int warps, int state_bytes, bool one,
                                           detail::Form form, int64_t blocks) {
  using detail::Form;
  if (form == Form::Stream) {
    const int v = strip_vec(K, BV, warps, state_bytes <= 2, false);
    if (v && stream_geom_ok(K, BV, warps, v, state_bytes))
      return {RecurrentKernel::Stream, v};
    form = Form::Auto;
  }
  const bool fp8 = state_bytes == 1;
  const bool split = (BV == 16 || BV == 32) && cuda_recurrent_warps_ok(K, BV, warps);
  const int vec_one = strip_vec(K, BV, warps, state_bytes <= 2, true);
  const int vec = strip_vec(K, BV, warps, state_bytes <= 2, false);
  const bool wide = BV / warps * state_bytes >= 64;
  const bool strip = form == Form::Strip || form == Form::Packed;
  const bool small = blocks <= kRecurrentSmallGrid;
  if (vec_one && one && (strip || !split || (form == Form::Auto && (wide || small || fp8))))
    return {RecurrentKernel::StripOne, vec_one};
  if (vec && !one && (form != Form::Split || !split))
    return {RecurrentKernel::Strip, vec};
  return {split ? RecurrentKernel::Split : RecurrentKernel::None, 0};
}

// Under Auto, calls of several tokens per sequence on a grid of more than
// kRecurrentSmallGrid blocks run the stream kernel where it runs (its
// geometry, recurrent.cuh's stream_applies: 2..8 tokens, no cu_seqlens,
// state_steps or accepted), except kda. H200, GDN 16/32 heads, T = 4,
// batch 64, tile_v 32 / 2 warps: f32 state 93.1 us against 113.7 (the
// strip kernel), bf16 89.9 against 112.5, delta 89.1 against 108.3; kda
// 124.6 against 116.9; one token: f32 82.3 against 74.0 (docs/
// performance.md, "The stream kernel"). The runtime's NVRTC path does not
// compile it (its calls keep the other forms).
constexpr bool stream_auto(int32_t var, bool one, int64_t blocks) {
  return !one && var != DELTAC_VARIANT_KDA && blocks > kRecurrentSmallGrid;
}

// Whether the staged one-token kernel's geometry exists (recurrent_strip.cuh,
// Staged: the state rows land in shared memory by cp.async, not registers):
// its rows take at most 32 KB a block, a lane's row is 8 or 16 bytes (one
// cp.async) and q / k rows are whole 16-byte pieces. recurrent.cuh's
// recurrent_staged says where it runs.
constexpr bool strip_staged_fits(int K, int BV, int warps, int vec, int state_bytes,
                                 int in_bytes) {
  const StripGeom g = strip_geom(K, BV, warps, vec);
  return g.ok_one && g.rows * vec * state_bytes * warps * 32 <= 32768 &&
         (K * in_bytes) % 16 == 0 && (vec * state_bytes == 8 || vec * state_bytes == 16);
}

// Whether the one-token kernel may run (see recurrent_choice). det (batch-
// invariant): never, so that a one-token sequence computes alike alone and
// inside a varlen batch.
inline bool recurrent_one_token(const deltac_fwd_params& p, bool det) {
  return !det && !p.state_steps && !p.accepted && !p.cu_seqlens && p.T <= 1;
}

}  // namespace cuda
}  // namespace deltac

#endif  // DELTAC_CUDA_RECURRENT_RULES_H

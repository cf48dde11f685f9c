// Compile-time tiling of the fused recurrent kernel (FlashAttention-style
// traits: every size is a constexpr, every assumption a static_assert). The
// knobs BV (catalogue knob tile_v) and Warps (warps) are template
// parameters; their legal values and defaults are the catalogue's
// (recurrent_rules.h: cuda_recurrent_warps_ok, cuda_recurrent_default_warps).
#ifndef DELTAC_CUDA_TRAITS_CUH
#define DELTAC_CUDA_TRAITS_CUH

#include "deltac/cuda/recurrent_rules.h"

namespace deltac::cuda {

// One block owns the [K, BV] state tile of one (sequence, value head,
// V-tile). Lane layout inside a warp: kLanesV lanes cover the BV columns of
// a row with one 16-byte vector (4 floats) each, and the warp covers
// kRowsPerStep consecutive rows at a time. Warps split K further; every
// thread keeps kRowsPerThread rows x 4 columns of state in registers.
template <int K_, int V_, int BV_,
          int Warps_ = cuda_recurrent_default_warps(K_, BV_)>
struct RecurrentTraits {
  static constexpr int K = K_;
  static constexpr int V = V_;
  static constexpr int BV = BV_;
  static constexpr int kVec = 4;  // floats per 16-byte access
  static constexpr int kLanesV = BV / kVec;
  static constexpr int kRowsPerStep = 32 / kLanesV;
  static constexpr int kRowGroups = K / kRowsPerStep;
  static constexpr int kWarps = Warps_;
  static constexpr int kThreads = kWarps * 32;
  static constexpr int kRowsPerThread = kRowGroups / kWarps;
  static constexpr int kTiles = V / BV;

  static_assert(K % 16 == 0 && K >= 16 && K <= 256, "K: multiple of 16 in [16, 256]");
  static_assert(V % 16 == 0 && V >= 16 && V <= 256, "V: multiple of 16 in [16, 256]");
  static_assert(BV == 16 || BV == 32, "BV: 16 or 32 columns per block");
  static_assert(V % BV == 0, "BV must divide V");
  static_assert(32 % kLanesV == 0, "a warp covers whole rows");
  static_assert(K % kRowsPerStep == 0, "a warp step must not run past K");
  static_assert(cuda_recurrent_warps_ok(K, BV, kWarps),
                "warps: whole row groups per warp, at most 16 rows per thread");
  static_assert(kRowGroups == cuda_recurrent_row_groups(K, BV), "geometry");
  static_assert(kRowGroups % kWarps == 0, "warps split K evenly");
  static_assert(kRowsPerThread * kVec <= 64, "state tile per thread must fit in registers");
  static_assert(kThreads >= 32 && kThreads <= 256, "block size");
};

// The strip kernel's geometry for the same knobs (recurrent_strip.cuh):
// each warp owns all K rows of WV = BV / Warps columns; a lane holds Vec
// columns (16 bytes of f32 state, 16 or 8 of bf16) of R consecutive rows,
// L lanes per row. `ok`: the geometry exists (else the split kernel runs).
template <int K_, int V_, int BV_, int Warps_, int Vec_>
struct StripTraits {
  static constexpr int K = K_;
  static constexpr int V = V_;
  static constexpr int BV = BV_;
  static constexpr int kWarps = Warps_;
  static constexpr int kThreads = kWarps * 32;
  static constexpr int kVec = Vec_;
  static constexpr StripGeom kGeom = strip_geom(K, BV, kWarps, kVec);
  static constexpr int WV = BV / kWarps;
  static constexpr int L = kGeom.L;
  static constexpr int kGroups = kGeom.groups;
  static constexpr int R = kGeom.rows;
  static constexpr int kTiles = V / BV;
  static constexpr bool fits = kGeom.fits;
  static constexpr bool ok = kGeom.ok;
  static constexpr bool ok_one = kGeom.ok_one;
};

}  // namespace deltac::cuda

#endif  // DELTAC_CUDA_TRAITS_CUH

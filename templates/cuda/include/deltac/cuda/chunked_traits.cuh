// Compile-time configuration of the chunked (WY / UT) CUDA forward pass.
//
//   ChunkedConfig<Chunk, BV, Warps, Stages>  the tuning knobs (every one is read
//                                            by the kernels)
//   ChunkedTraits<Var, K, V, InT, Cfg>       every size the kernels derive from
//                                            them, as constexprs + static_asserts
//   chunked_legal(...)                       the legal space as a constexpr
//                                            predicate over plain ints, for the
//                                            kernel catalogue
//   DefaultChunkedConfig<Var, K, V, InT>     the first legal config of the
//                                            preference order below
#ifndef DELTAC_CUDA_CHUNKED_TRAITS_CUH
#define DELTAC_CUDA_CHUNKED_TRAITS_CUH

#include "deltac/cuda/chunked_rules.h"
#include "deltac/params.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstddef>
#include <type_traits>

namespace deltac::cuda {

// The knobs, their legal values, the shared-memory sizes and the default
// choice are plain C++ in chunked_rules.h (the kernel catalogue reads them).
template <deltac_variant Var, int K, int V, class InT>
using DefaultChunkedConfig =
    ChunkedConfig<chunked_default(Var, K, V, sizeof(InT)).chunk,
                  chunked_default(Var, K, V, sizeof(InT)).bv,
                  chunked_default(Var, K, V, sizeof(InT)).warps,
                  chunked_default(Var, K, V, sizeof(InT)).stages>;

namespace detail {

// Compute (shared-memory and workspace) type: the input type; f32 inputs
// run their products as three TF32 products (f32 accuracy).
template <class InT>
struct IsChunkedInput
    : std::bool_constant<std::is_same_v<InT, float> || std::is_same_v<InT, __nv_bfloat16> ||
                         std::is_same_v<InT, __half>> {};

template <deltac_variant Var, int K_, int V_, class InT, class Cfg>
struct ChunkedTraits {
  static_assert(IsChunkedInput<InT>::value, "InT: float, __nv_bfloat16 or __half");
  using In = InT;
  using Ts = InT;
  static constexpr int K = K_, V = V_;
  static constexpr int C = Cfg::kChunk, BV = Cfg::kBV, kWarps = Cfg::kWarps;
  static constexpr int kStages = Cfg::kStages;
  static constexpr int kThreads = kWarps * 32;
  static constexpr int kPrepWarps = kChunkedPrepWarps, kPrepThreads = kPrepWarps * 32;
  static constexpr bool kKda = Var == DELTAC_VARIANT_KDA;
  static constexpr bool kGated = Var == DELTAC_VARIANT_GATED;
  static constexpr bool kDecay = Var != DELTAC_VARIANT_DELTA;
  static constexpr int kElem = sizeof(Ts);
  // 16-bit types: the state is split into hi + lo halves for K S, where a
  // rounding would be amplified (the residual beta (V - K S) cancels).
  static constexpr bool kSplit = kElem == 2;
  static constexpr int kPad = 16 / kElem;
  static constexpr int LK = K + kPad, LC = C + kPad, LB = BV + kPad;
  static constexpr int kBlocks = C / 16;  // 16-row blocks of a chunk
  static constexpr int LG = K + 4;        // kda gate row (padded against bank conflicts)
  // Scan kernel warp tiling.
  static constexpr int NB = BV / 8;
  static constexpr int MW1 = chunked_detail::gcd(kWarps, C / 16), NW1 = kWarps / MW1;
  static constexpr int MT1 = C / 16 / MW1, NT1 = NB / NW1;  // per warp
  static constexpr int MW3 = chunked_detail::gcd(kWarps, K / 16), NW3 = kWarps / MW3;
  static constexpr int MT3 = K / 16 / MW3, NT3 = NB / NW3;  // per warp
  static constexpr size_t kPrepSmem = chunked_prep_smem(Var, K, V, kElem, C);
  static constexpr int kPrepLD = chunked_prep_ld(Var, C);  // row stride of its f32 A, T
  // 16-bit delta / gated: as many prep blocks per multiprocessor as fit in
  // shared memory (each with its 1 KB reserve), up to 5 (48 registers; the
  // products wait on latency). Else 0: the compiler's choice.
  static constexpr int kPrepFit = int(kChunkedSmemSm90 / (kPrepSmem + 1024));
  static constexpr int kPrepMinBlocks = kElem == 2 && !kKda ? (kPrepFit < 5 ? kPrepFit : 5) : 0;
  static constexpr size_t kScanSmem = chunked_scan_smem(Var, K, kElem, C, BV, kStages);
  // Gate clamp: exp of any sum that includes it is exactly 0 in f32, so a
  // -inf gate (a full reset) never meets (-inf) - (-inf). NaN stays NaN.
  static constexpr float kGateFloor = -128.f;
  // Workspace per (chunk, value head): T and Aqk [C, C] in Ts, four row
  // factors [4, C] and the chunk decay [K] in f32; kda also the decayed
  // q, k operands [C, K] in Ts (three).
  static_assert(chunked_legal(Var, K, V, sizeof(InT), C, BV, kWarps, kStages),
                "illegal ChunkedConfig for this variant, K, V and input type");
};

}  // namespace detail
}  // namespace deltac::cuda

#endif  // DELTAC_CUDA_CHUNKED_TRAITS_CUH

// Compile-time enumeration of one spec's legal CUDA configs into tuner
// instances (deltac/tune_cuda.h). Included by the translation units CMake
// generates from instance.cu.in (one per chunk and tile_v value of a spec,
// so that nvcc compiles them in parallel).
#ifndef DELTAC_TUNE_CUDA_INSTANCES_CUH
#define DELTAC_TUNE_CUDA_INSTANCES_CUH

#include "deltac/cuda/launch.cuh"
#include "deltac/tune_cuda.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <iterator>
#include <type_traits>
#include <utility>
#include <vector>

namespace deltac::tune::cuda {

template <class InT>
constexpr int32_t dtype_of() {
  return std::is_same_v<InT, float> ? DELTAC_F32
         : std::is_same_v<InT, __half> ? DELTAC_F16
                                       : DELTAC_BF16;
}

template <deltac_variant Var, int K, int V, class InT, int Chunk, int BV, int W, int S>
void add_chunked_one(std::vector<Instance> &out) {
  if constexpr (deltac::cuda::chunked_legal(Var, K, V, sizeof(InT), Chunk, BV, W, S)) {
    Instance in;
    in.variant = Var, in.K = K, in.V = V, in.in_dtype = dtype_of<InT>();
    in.config.family = Family::CudaChunked;
    in.config.chunk = Chunk, in.config.tile_v = BV, in.config.warps = W, in.config.stages = S;
    in.run = [](const deltac_fwd_params *p, const KernelConfig *c, void *ws, size_t bytes,
                void *stream) {
      return int(deltac::cuda::chunked_run<Var, K, V, InT, Chunk, BV, W, S>(
          *p, static_cast<cudaStream_t>(stream), ws, bytes, nullptr, false, 0, c->split,
          c->fuse, c->scan));
    };
    in.workspace = [](const deltac_fwd_params *p, const KernelConfig *c) {
      return deltac::cuda::chunked_run_workspace<Var, K, V, InT, Chunk, BV, W, S>(
          *p, false, 0, c->split, c->fuse, c->scan);
    };
    in.kernels = [](const void **out, int max) {
      const auto &k = deltac::cuda::detail::chunked_kernels<
          Var, K, V, InT, deltac::cuda::ChunkedConfig<Chunk, BV, W, S>>();
      const void *all[] = {k.index,    k.prep,     k.scan[0], k.scan[1],  k.scan[2],
                           k.warp[0],  k.warp[1],  k.warp_o[0], k.warp_o[1], k.fold,
                           k.fix,      k.fused[0], k.fused[1], k.fused[2]};
      int n = 0;
      for (const void *h : all)
        if (h && n < max)
          out[n++] = h;
      return n;
    };
    out.push_back(in);
  }
}

template <deltac_variant Var, int K, int V, class InT, int Chunk, int BV, size_t... I>
void add_chunked_ws(std::vector<Instance> &out, std::index_sequence<I...>) {
  using namespace deltac::cuda;
  constexpr int nS = int(std::size(kChunkedStages));
  (add_chunked_one<Var, K, V, InT, Chunk, BV, kChunkedWarps[I / nS], kChunkedStages[I % nS]>(
       out),
   ...);
}

// Every legal (warps, stages) of chunk = kChunkedChunks[CI], tile_v =
// kChunkedBVs[BI]; nothing when an index is past its list or BV does not
// divide V.
template <deltac_variant Var, int K, int V, class InT, size_t CI, size_t BI>
void add_chunked(std::vector<Instance> &out) {
  using namespace deltac::cuda;
  if constexpr (CI < std::size(kChunkedChunks) && BI < std::size(kChunkedBVs)) {
    constexpr int BV = kChunkedBVs[BI];
    if constexpr (V % BV == 0)
      add_chunked_ws<Var, K, V, InT, kChunkedChunks[CI], BV>(
          out, std::make_index_sequence<std::size(kChunkedWarps) * std::size(kChunkedStages)>{});
  }
}

template <deltac_variant Var, int K, int V, class InT, int BV, int W>
void add_recurrent_one(std::vector<Instance> &out) {
  if constexpr (V % BV == 0 && cuda_recurrent_knobs_ok(K, BV, W, 2, true)) {
    Instance in;
    in.variant = Var, in.K = K, in.V = V, in.in_dtype = dtype_of<InT>();
    in.config.family = Family::CudaRecurrent;
    in.config.tile_v = BV, in.config.warps = W;
    in.run = [](const deltac_fwd_params *p, const KernelConfig *, void *, size_t,
                void *stream) {
      return int(deltac::cuda::recurrent_cfg<Var, K, V, InT, BV, W>(
          *p, static_cast<cudaStream_t>(stream)));
    };
    in.workspace = [](const deltac_fwd_params *, const KernelConfig *) { return size_t(0); };
    out.push_back(in);
  }
}

// Every legal (tile_v, warps) of the recurrent family (the catalogue's lists).
template <deltac_variant Var, int K, int V, class InT, size_t... I>
void add_recurrent_all(std::vector<Instance> &out, std::index_sequence<I...>) {
  constexpr KnobValues tv = kFamilies[int(Family::CudaRecurrent)].values[knob_index(kKnobTileV)];
  constexpr KnobValues wv = kFamilies[int(Family::CudaRecurrent)].values[knob_index(kKnobWarps)];
  (add_recurrent_one<Var, K, V, InT, tv.v[I / wv.n], wv.v[I % wv.n]>(out), ...);
}

template <deltac_variant Var, int K, int V, class InT>
void add_recurrent(std::vector<Instance> &out) {
  if constexpr (!std::is_same_v<InT, __half>) {
    constexpr KnobValues tv = kFamilies[int(Family::CudaRecurrent)].values[knob_index(kKnobTileV)];
    constexpr KnobValues wv = kFamilies[int(Family::CudaRecurrent)].values[knob_index(kKnobWarps)];
    add_recurrent_all<Var, K, V, InT>(out, std::make_index_sequence<tv.n * wv.n>{});
  }
}

} // namespace deltac::tune::cuda

#endif // DELTAC_TUNE_CUDA_INSTANCES_CUH

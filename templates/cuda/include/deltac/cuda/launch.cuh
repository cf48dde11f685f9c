// The CUDA kernel families of the catalogue (deltac/catalogue.h) with their
// knobs as template parameters, and the one place that turns a KernelConfig
// into a template instance:
//
//   deltac::cuda::recurrent_cfg<Var, K, V, InT, BV, Warps>(p, stream, skip)
//       family cuda_recurrent: tile_v = BV, warps = Warps
//   deltac::cuda::launch_dims<Var, InT>(config, p, stream, skip, &found)
//       config -> the instance among DELTAC_CUDA_RECURRENT_DIMS (the ones the
//       runtime ships: tile_v 16 and 32 where it divides V, default warps)
//
// p holds device pointers and passed deltac::check_params (cu_seqlens'
// contents are trusted); the config passed deltac::check_config. `skip`, when
// not null, is a device int32: the kernel reads it first and returns without
// writing anything when it is nonzero (set by a device-side check enqueued
// before, so a failed check never needs a host round trip).
#ifndef DELTAC_CUDA_LAUNCH_CUH
#define DELTAC_CUDA_LAUNCH_CUH

#include "deltac/catalogue.h"
#include "deltac/cuda/recurrent.cuh"

namespace deltac::cuda {

template <deltac_variant Var, int K, int V, class InT, int BV, int Warps>
cudaError_t recurrent_cfg(const deltac_fwd_params& p, cudaStream_t stream,
                          const int32_t* skip = nullptr) {
  static_assert(cuda_recurrent_warps_ok(K, BV, Warps), "warps: see the catalogue");
  return detail::recurrent_knobs<Var, K, V, InT, BV, Warps>(p, stream, skip);
}

namespace detail {

// The precompiled instances of one (K, V): tile_v 16 and (when it divides
// V) 32, each with the catalogue's default warps.
template <deltac_variant Var, int K, int V, class InT>
cudaError_t launch_precompiled(const KernelConfig& c, const deltac_fwd_params& p,
                               cudaStream_t stream, const int32_t* skip, bool* found) {
  *found = true;
  if (c.tile_v == 16 && c.warps == cuda_recurrent_default_warps(K, 16))
    return recurrent_cfg<Var, K, V, InT, 16, cuda_recurrent_default_warps(K, 16)>(p, stream,
                                                                                 skip);
  if constexpr (V % 32 == 0) {
    if (c.tile_v == 32 && c.warps == cuda_recurrent_default_warps(K, 32))
      return recurrent_cfg<Var, K, V, InT, 32, cuda_recurrent_default_warps(K, 32)>(
          p, stream, skip);
  }
  *found = false;
  return cudaErrorInvalidValue;
}

}  // namespace detail

// Runs c (family cuda_recurrent) with the precompiled instance for p.K, p.V.
// *found is false (nothing launched) when the runtime has no such instance
// (deltac::precompiled says the same).
template <deltac_variant Var, class InT>
cudaError_t launch_dims(const KernelConfig& c, const deltac_fwd_params& p, cudaStream_t stream,
                        const int32_t* skip, bool* found) {
  *found = false;
  if (c.family != Family::CudaRecurrent)
    return cudaErrorInvalidValue;
#define DELTAC_X(k, v)                                                               \
  if (p.K == k && p.V == v)                                                          \
    return detail::launch_precompiled<Var, k, v, InT>(c, p, stream, skip, found);
  DELTAC_CUDA_RECURRENT_DIMS(DELTAC_X)
#undef DELTAC_X
  return cudaErrorInvalidValue;
}

}  // namespace deltac::cuda

#endif  // DELTAC_CUDA_LAUNCH_CUH

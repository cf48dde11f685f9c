// The cuda_recurrent family's launch points (see deltac/cuda/launch.cuh):
// recurrent_cfg and the runtime's precompiled instance, launch_recurrent.
// Kept apart from the chunked family's so that a unit of one family does
// not compile the other's templates.
#ifndef DELTAC_CUDA_LAUNCH_RECURRENT_CUH
#define DELTAC_CUDA_LAUNCH_RECURRENT_CUH

#include "deltac/catalogue.h"
#include "deltac/cuda/recurrent.cuh"

namespace deltac::cuda {

template <deltac_variant Var, int K, int V, class InT, int BV, int Warps, int StateOnly = -1>
cudaError_t recurrent_cfg(const deltac_fwd_params& p, cudaStream_t stream,
                          const int32_t* skip = nullptr, bool det = false, int32_t route = 0) {
  // Some kernel exists for the knobs (the catalogue's check_config says for
  // which calls: cuda_recurrent_knobs_ok).
  static_assert(cuda_recurrent_knobs_ok(K, BV, Warps, 2, true), "knobs: see the catalogue");
  return detail::recurrent_knobs<Var, K, V, InT, BV, Warps, StateOnly>(
      p, stream, skip, detail::Form::Auto, true, det, route);
}

namespace detail {

// The precompiled recurrent instance of one (K, V, tile_v = BV, state dtype
// SD): the catalogue's default warps.
template <deltac_variant Var, int K, int V, class InT, int BV, int SD>
cudaError_t launch_recurrent(const KernelConfig& c, const deltac_fwd_params& p,
                             cudaStream_t stream, const int32_t* skip, bool* found, bool det,
                             int32_t route) {
  constexpr int W = cuda_recurrent_default_warps(K, BV);
  *found = c.tile_v == BV && c.warps == W && p.state_dtype == SD;
  if (!*found)
    return cudaErrorInvalidValue;
  return recurrent_cfg<Var, K, V, InT, BV, W, SD>(p, stream, skip, det, route);
}

}  // namespace detail

}  // namespace deltac::cuda

#endif  // DELTAC_CUDA_LAUNCH_RECURRENT_CUH

// CUDA kernel selection for one variant over the compiled (K, V, dtype) set.
// Included by cuda_<variant>.cu only, so the variants compile in parallel.
#ifndef DELTAC_RUNTIME_CUDA_LAUNCH_CUH
#define DELTAC_RUNTIME_CUDA_LAUNCH_CUH

#include "cuda_dispatch.h"
#include "deltac/cuda/recurrent.cuh"

namespace deltac {
namespace rt {

template <deltac_variant Var, class InT>
cudaError_t cudaLaunchDtype(const deltac_fwd_params &p, cudaStream_t s,
                            bool *found) {
  *found = true;
#define DELTAC_CASE(KK, VV)                                                    \
  if (p.K == KK && p.V == VV)                                                  \
    return cuda::recurrent<Var, KK, VV, InT>(p, s);
  DELTAC_CUDA_SHAPES(DELTAC_CASE)
#undef DELTAC_CASE
  *found = false;
  return cudaErrorInvalidValue;
}

template <deltac_variant Var>
cudaError_t cudaLaunch(const deltac_fwd_params &p, cudaStream_t s,
                       bool *found) {
  if (p.in_dtype == DELTAC_BF16)
    return cudaLaunchDtype<Var, __nv_bfloat16>(p, s, found);
  return cudaLaunchDtype<Var, float>(p, s, found);
}

} // namespace rt
} // namespace deltac

#endif // DELTAC_RUNTIME_CUDA_LAUNCH_CUH

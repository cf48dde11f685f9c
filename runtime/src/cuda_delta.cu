// CUDA dispatch for the delta variant.
#include "cuda_dispatch.h"

cudaError_t deltac::rt::cuda_launch_delta(const deltac_fwd_params &p,
                                       const KernelConfig &c, cudaStream_t s,
                                       const int32_t *skip, bool *found) {
  return cudaLaunch<DELTAC_VARIANT_DELTA>(p, c, s, skip, found);
}

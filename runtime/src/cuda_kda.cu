// CUDA dispatch for the kda variant.
#include "cuda_dispatch.h"

cudaError_t deltac::rt::cuda_launch_kda(const deltac_fwd_params &p,
                                       const KernelConfig &c, cudaStream_t s,
                                       const int32_t *skip, bool *found) {
  return cudaLaunch<DELTAC_VARIANT_KDA>(p, c, s, skip, found);
}

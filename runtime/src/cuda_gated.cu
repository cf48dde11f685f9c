// CUDA dispatch for the gated variant.
#include "cuda_launch.cuh"

cudaError_t deltac::rt::cuda_launch_gated(const deltac_fwd_params &p,
                                       cudaStream_t s, bool *found) {
  return cudaLaunch<DELTAC_VARIANT_GATED>(p, s, found);
}

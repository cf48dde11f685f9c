// CUDA dispatch for the kda variant.
#include "cuda_launch.cuh"

cudaError_t deltac::rt::cuda_launch_kda(const deltac_fwd_params &p,
                                       cudaStream_t s, bool *found) {
  return cudaLaunch<DELTAC_VARIANT_KDA>(p, s, found);
}

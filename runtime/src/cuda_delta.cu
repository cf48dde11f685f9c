// CUDA dispatch for the delta variant.
#include "cuda_launch.cuh"

cudaError_t deltac::rt::cuda_launch_delta(const deltac_fwd_params &p,
                                       cudaStream_t s, bool *found) {
  return cudaLaunch<DELTAC_VARIANT_DELTA>(p, s, found);
}

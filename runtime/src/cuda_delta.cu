// CUDA dispatch for the delta variant (one file per variant: the instances
// compile in parallel).
#include "cuda_dispatch.h"

cudaError_t deltac::rt::cuda_launch_delta(const deltac_fwd_params &p,
                                          const KernelConfig &c, cudaStream_t s,
                                          const Launch &l, bool *found) {
  return cudaLaunch<DELTAC_VARIANT_DELTA>(p, c, s, l, found);
}

size_t deltac::rt::cuda_workspace_delta(const deltac_fwd_params &p,
                                        const KernelConfig &c, bool det,
                                        int32_t route) {
  return cudaWorkspace<DELTAC_VARIANT_DELTA>(p, c, det, route);
}

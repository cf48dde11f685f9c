// Internal: the per-variant CUDA launchers (cuda_<variant>.cu, through the
// one dispatch point deltac/cuda/launch.cuh) and the device-side value
// check (cuda_check.cu).
#ifndef DELTAC_RUNTIME_CUDA_DISPATCH_H
#define DELTAC_RUNTIME_CUDA_DISPATCH_H

#include "deltac/catalogue.h"
#include "deltac/cuda/launch.cuh"
#include "deltac/params.h"

#include <cuda_runtime.h>

namespace deltac {
namespace rt {

// Launch p (device pointers) with config c on s; skip: see launch.cuh.
// *found is false when no instance exists for c and p's K, V (nothing is
// launched then).
cudaError_t cuda_launch_delta(const deltac_fwd_params &p, const KernelConfig &c,
                              cudaStream_t s, const int32_t *skip, bool *found);
cudaError_t cuda_launch_gated(const deltac_fwd_params &p, const KernelConfig &c,
                              cudaStream_t s, const int32_t *skip, bool *found);
cudaError_t cuda_launch_kda(const deltac_fwd_params &p, const KernelConfig &c,
                            cudaStream_t s, const int32_t *skip, bool *found);

template <deltac_variant Var>
cudaError_t cudaLaunch(const deltac_fwd_params &p, const KernelConfig &c,
                       cudaStream_t s, const int32_t *skip, bool *found) {
  if (p.in_dtype == DELTAC_BF16)
    return cuda::launch_dims<Var, __nv_bfloat16>(c, p, s, skip, found);
  return cuda::launch_dims<Var, float>(c, p, s, skip, found);
}

// Enqueues the checking mode's value check of p (device pointers, passed
// check_params) on s: ORs deltac_check_bit values into *flag (device
// memory). beta_max is 1 or 2. Never synchronises.
cudaError_t cuda_check_values(const deltac_fwd_params &p, float beta_max,
                              int32_t *flag, cudaStream_t s);

} // namespace rt
} // namespace deltac

#endif // DELTAC_RUNTIME_CUDA_DISPATCH_H

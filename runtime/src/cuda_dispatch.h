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

// Launch p (device pointers) with config c on s; skip: see launch.cuh; ws,
// ws_bytes: the workspace (launch.cuh: null = stream-ordered allocation).
// *found is false when no instance exists for c and p's K, V (nothing is
// launched then).
// deterministic: options.deterministic; route: mixed batches (launch.cuh).
struct Launch {
  const int32_t *skip = nullptr;
  bool deterministic = false;
  int32_t route = 0;
  void *ws = nullptr;
  size_t ws_bytes = 0;
};
cudaError_t cuda_launch_delta(const deltac_fwd_params &p, const KernelConfig &c,
                              cudaStream_t s, const Launch &l, bool *found);
cudaError_t cuda_launch_gated(const deltac_fwd_params &p, const KernelConfig &c,
                              cudaStream_t s, const Launch &l, bool *found);
cudaError_t cuda_launch_kda(const deltac_fwd_params &p, const KernelConfig &c,
                            cudaStream_t s, const Launch &l, bool *found);
size_t cuda_workspace_delta(const deltac_fwd_params &p, const KernelConfig &c,
                            bool deterministic, int32_t route);
size_t cuda_workspace_gated(const deltac_fwd_params &p, const KernelConfig &c,
                            bool deterministic, int32_t route);
size_t cuda_workspace_kda(const deltac_fwd_params &p, const KernelConfig &c,
                          bool deterministic, int32_t route);

template <deltac_variant Var>
cudaError_t cudaLaunch(const deltac_fwd_params &p, const KernelConfig &c,
                       cudaStream_t s, const Launch &l, bool *found) {
  if (p.in_dtype == DELTAC_BF16)
    return cuda::launch_dims<Var, __nv_bfloat16>(c, p, s, l.skip, found, l.ws,
                                                 l.ws_bytes, l.deterministic,
                                                 l.route);
  if (p.in_dtype == DELTAC_F16)
    return cuda::launch_dims<Var, __half>(c, p, s, l.skip, found, l.ws,
                                          l.ws_bytes, l.deterministic,
                                                 l.route);
  return cuda::launch_dims<Var, float>(c, p, s, l.skip, found, l.ws,
                                       l.ws_bytes, l.deterministic,
                                                 l.route);
}

template <deltac_variant Var>
size_t cudaWorkspace(const deltac_fwd_params &p, const KernelConfig &c,
                     bool det, int32_t route) {
  if (p.in_dtype == DELTAC_BF16)
    return cuda::workspace_dims<Var, __nv_bfloat16>(c, p, det, route);
  if (p.in_dtype == DELTAC_F16)
    return cuda::workspace_dims<Var, __half>(c, p, det, route);
  return cuda::workspace_dims<Var, float>(c, p, det, route);
}

// Enqueues the checking mode's value check of p (device pointers, passed
// check_params) on s: ORs deltac_check_bit values into *flag (device
// memory). beta_max is 1 or 2. Never synchronises.
cudaError_t cuda_check_values(const deltac_fwd_params &p, float beta_max,
                              int32_t *flag, cudaStream_t s);

} // namespace rt
} // namespace deltac

#endif // DELTAC_RUNTIME_CUDA_DISPATCH_H

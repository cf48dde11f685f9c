// Internal: the definitions of the runtime's precompiled CUDA instances
// (declared in cuda_dispatch.h). Only the generated translation units
// include this (runtime/src/cuda_instance.cu.in), each instantiating one.
#ifndef DELTAC_RUNTIME_CUDA_INSTANCE_CUH
#define DELTAC_RUNTIME_CUDA_INSTANCE_CUH

#include "cuda_dispatch.h"
#include "deltac/cuda/launch.cuh"

namespace deltac {
namespace rt {

template <deltac_variant Var, class InT, int K, int V>
cudaError_t cuda_chunked_instance(const deltac_fwd_params &p, const KernelConfig &c,
                                  cudaStream_t s, const Launch &l, bool *found) {
  return cuda::detail::launch_chunked<Var, K, V, InT>(c, p, s, l.skip, l.ws, l.ws_bytes,
                                                      found, l.deterministic, l.route);
}

template <deltac_variant Var, class InT, int K, int V>
size_t cuda_chunked_workspace(const deltac_fwd_params &p, const KernelConfig &c,
                              bool det, int32_t route) {
  return cuda::detail::workspace_chunked<Var, K, V, InT>(c, p, det, route);
}

template <deltac_variant Var, class InT, int K, int V, int BV, int SD>
cudaError_t cuda_recurrent_instance(const deltac_fwd_params &p, const KernelConfig &c,
                                    cudaStream_t s, const Launch &l, bool *found) {
  return cuda::detail::launch_recurrent<Var, K, V, InT, BV, SD>(c, p, s, l.skip, found,
                                                                l.deterministic, l.route);
}

} // namespace rt
} // namespace deltac

// One instance set: what a generated translation unit holds.
#define DELTAC_CUDA_CHUNKED_INSTANCE(Var, InT, K, V)                           \
  template cudaError_t deltac::rt::cuda_chunked_instance<Var, InT, K, V>(      \
      const deltac_fwd_params &, const deltac::KernelConfig &, cudaStream_t,   \
      const deltac::rt::Launch &, bool *);                                     \
  template size_t deltac::rt::cuda_chunked_workspace<Var, InT, K, V>(          \
      const deltac_fwd_params &, const deltac::KernelConfig &, bool, int32_t);
#define DELTAC_CUDA_RECURRENT_INSTANCE(Var, InT, K, V, BV, SD)                 \
  template cudaError_t deltac::rt::cuda_recurrent_instance<Var, InT, K, V, BV, SD>( \
      const deltac_fwd_params &, const deltac::KernelConfig &, cudaStream_t,   \
      const deltac::rt::Launch &, bool *);

#endif // DELTAC_RUNTIME_CUDA_INSTANCE_CUH

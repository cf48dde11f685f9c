// Internal: the definitions of the runtime's precompiled chunked CUDA
// instances (declared in cuda_dispatch.h). Only the generated translation
// units include this (runtime/src/cuda_instance.cu.in), each instantiating
// one; the recurrent ones are in cuda_instance_recurrent.cuh.
#ifndef DELTAC_RUNTIME_CUDA_INSTANCE_CHUNKED_CUH
#define DELTAC_RUNTIME_CUDA_INSTANCE_CHUNKED_CUH

#include "cuda_dispatch.h"
#include "deltac/cuda/launch_chunked.cuh"

namespace deltac {
namespace rt {

template <deltac_variant Var, class InT, int K, int V>
cudaError_t cuda_chunked_instance(const deltac_fwd_params &p, const KernelConfig &c,
                                  cudaStream_t s, const Launch &l, bool *found) {
  return cuda::detail::launch_chunked<Var, K, V, InT>(c, p, s, l.skip, l.ws, l.ws_bytes,
                                                      found, l.deterministic, l.route,
                                                      l.cstates, l.cstates_count, l.saved);
}

template <deltac_variant Var, class InT, int K, int V>
size_t cuda_chunked_workspace(const deltac_fwd_params &p, const KernelConfig &c,
                              bool det, int32_t route) {
  return cuda::detail::workspace_chunked<Var, K, V, InT>(c, p, det, route);
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

#endif // DELTAC_RUNTIME_CUDA_INSTANCE_CHUNKED_CUH

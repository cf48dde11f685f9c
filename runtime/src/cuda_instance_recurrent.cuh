// Internal: the definitions of the runtime's precompiled recurrent CUDA
// instances (declared in cuda_dispatch.h). Only the generated translation
// units include this (runtime/src/cuda_instance.cu.in), each instantiating
// one; the chunked ones are in cuda_instance_chunked.cuh.
#ifndef DELTAC_RUNTIME_CUDA_INSTANCE_RECURRENT_CUH
#define DELTAC_RUNTIME_CUDA_INSTANCE_RECURRENT_CUH

#include "cuda_dispatch.h"
#include "deltac/cuda/launch_recurrent.cuh"

namespace deltac {
namespace rt {

template <deltac_variant Var, class InT, int K, int V, int BV, int SD>
cudaError_t cuda_recurrent_instance(const deltac_fwd_params &p, const KernelConfig &c,
                                    cudaStream_t s, const Launch &l, bool *found) {
  return cuda::detail::launch_recurrent<Var, K, V, InT, BV, SD>(c, p, s, l.skip, found,
                                                                l.deterministic, l.route);
}

} // namespace rt
} // namespace deltac

// One instance set: what a generated translation unit holds.
#define DELTAC_CUDA_RECURRENT_INSTANCE(Var, InT, K, V, BV, SD)                 \
  template cudaError_t deltac::rt::cuda_recurrent_instance<Var, InT, K, V, BV, SD>( \
      const deltac_fwd_params &, const deltac::KernelConfig &, cudaStream_t,   \
      const deltac::rt::Launch &, bool *);

#endif // DELTAC_RUNTIME_CUDA_INSTANCE_RECURRENT_CUH

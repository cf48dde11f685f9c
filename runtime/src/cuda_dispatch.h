// Internal: the per-variant CUDA launchers (cuda_<variant>.cu) and the
// (K, V) pairs they are compiled for.
#ifndef DELTAC_RUNTIME_CUDA_DISPATCH_H
#define DELTAC_RUNTIME_CUDA_DISPATCH_H

#include "deltac/params.h"

#include <cuda_runtime.h>

// X(K, V) for every compiled pair.
#define DELTAC_CUDA_SHAPES(X)                                                  \
  X(64, 64) X(128, 128) X(256, 256) X(128, 256) X(256, 128)

namespace deltac {
namespace rt {

// Launch p (device pointers) on s. *found is false when no kernel exists for
// p's K, V (nothing is launched then).
cudaError_t cuda_launch_delta(const deltac_fwd_params &p, cudaStream_t s,
                              bool *found);
cudaError_t cuda_launch_gated(const deltac_fwd_params &p, cudaStream_t s,
                              bool *found);
cudaError_t cuda_launch_kda(const deltac_fwd_params &p, cudaStream_t s,
                            bool *found);

} // namespace rt
} // namespace deltac

#endif // DELTAC_RUNTIME_CUDA_DISPATCH_H

// Helpers of the runtime-level CUDA benchmarks: deterministic pseudo-random
// device inputs (no host copy) and a fatal check of CUDA calls.
#ifndef DELTAC_BENCH_CUDA_BENCH_FILL_CUH
#define DELTAC_BENCH_CUDA_BENCH_FILL_CUH

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

namespace deltac::bench {

// Exits with "<tool>: <what>: <CUDA error>" unless e is cudaSuccess.
inline void check(cudaError_t e, const char *tool, const char *what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "%s: %s: %s\n", tool, what, cudaGetErrorString(e));
    std::exit(1);
  }
}

// x[i] in [-0.5, 0.5), a hash of i and seed.
__global__ void fill(__nv_bfloat16 *x, size_t n, unsigned seed) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x) {
    unsigned h = unsigned(i) * 2654435761u ^ seed;
    h ^= h >> 13;
    h *= 0x5bd1e995u;
    x[i] = __float2bfloat16(float(h >> 8) / float(1u << 24) - 0.5f);
  }
}

// x[i] in [lo, hi), a hash of i.
__global__ void fillF(float *x, size_t n, float lo, float hi) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x) {
    unsigned h = unsigned(i) * 2246822519u;
    h ^= h >> 15;
    x[i] = lo + (hi - lo) * float(h >> 8) / float(1u << 24);
  }
}

}  // namespace deltac::bench

#endif  // DELTAC_BENCH_CUDA_BENCH_FILL_CUH

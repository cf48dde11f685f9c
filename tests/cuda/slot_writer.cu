// A predecessor for the decode kernels' PDL path (decode_pool_test.cpp,
// DecodePoolPdl): it lets its dependents start at once, waits, then writes a
// pool's read slots, so that a dependent reading them before its PDL wait
// sees the old values.
#include "slot_writer.h"

namespace deltac::test {
namespace {

__global__ void slot_writer_kernel(int32_t* dst, const int32_t* src, int n, unsigned delay_ns) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" :::);
  uint64_t t0, t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  do {
    __nanosleep(1000);
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  } while (t - t0 < delay_ns);
#endif
  for (int i = threadIdx.x; i < n; i += blockDim.x) dst[i] = src[i];
}

}  // namespace

cudaError_t launch_slot_writer(int32_t* dst, const int32_t* src, int n, unsigned delay_ns,
                               cudaStream_t stream) {
  slot_writer_kernel<<<1, 128, 0, stream>>>(dst, src, n, delay_ns);
  return cudaGetLastError();
}

}  // namespace deltac::test

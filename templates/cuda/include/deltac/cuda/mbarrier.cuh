// Shared-memory mbarriers (PTX), for the kernels that pipeline through them
// (the warp scans, the stream form of the recurrent kernel). Barriers take
// shared-memory addresses (smem_addr). They need sm_80 (sm_90: try_wait);
// on older targets they compile to nothing and their callers must not run
// there.
#ifndef DELTAC_CUDA_MBARRIER_CUH
#define DELTAC_CUDA_MBARRIER_CUH

#include <cstdint>

namespace deltac::cuda::detail {

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
#define DELTAC_MBAR_OK 1
#else
#define DELTAC_MBAR_OK 0
#endif

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void mbar_init(uint32_t bar, int count) {
#if DELTAC_MBAR_OK
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
#endif
}
__device__ __forceinline__ void mbar_arrive(uint32_t bar) {
#if DELTAC_MBAR_OK
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
#endif
}
// Waits until the phase of parity `parity` of the barrier has completed.
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile(
      "{\n .reg .pred p;\n WAIT:\n"
      " mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n"
      " @!p bra WAIT;\n}\n" ::"r"(bar),
      "r"(parity)
      : "memory");
#elif DELTAC_MBAR_OK
  asm volatile(
      "{\n .reg .pred p;\n WAIT:\n"
      " mbarrier.test_wait.parity.shared::cta.b64 p, [%0], %1;\n"
      " @!p bra WAIT;\n}\n" ::"r"(bar),
      "r"(parity)
      : "memory");
#endif
}
// The barrier's arrival (counted in its init count) once this thread's
// cp.async copies so far have landed.
__device__ __forceinline__ void cp_async_mbar_arrive(uint32_t bar) {
#if DELTAC_MBAR_OK
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(bar) : "memory");
#endif
}
}  // namespace deltac::cuda::detail

#endif  // DELTAC_CUDA_MBARRIER_CUH

// Hopper warpgroup products (wgmma, sm_90a only) with both operands in
// shared memory: D[64 x N] (+)= A[64 x 16] B[16 x N] (N 32 or 64), f32 accumulators
// (warp w of the warpgroup holds rows 16 w + g and 16 w + g + 8 of each n8
// tile, the m16n8 C fragment of mma.sync, g = lane / 4); N = 64 likewise. Operands are
// described by 64-bit descriptors: no swizzle (8 x 8 core matrices of 16-byte
// rows; lbo the byte stride between core matrices along K, sbo along M / N)
// or 128-byte swizzle (rows of 128 bytes, 8-row atoms of 1024 bytes at sbo,
// the 16-byte pieces of row r XOR r % 8; the tile 1024-byte aligned).
// TA / TB 0: the operand's rows (M / N) hold K contiguously; 1: its rows are
// K and hold M / N contiguously. Elsewhere (other targets) the products trap.
#ifndef DELTAC_CUDA_WGMMA_CUH
#define DELTAC_CUDA_WGMMA_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define DELTAC_WGMMA_OK 1
#else
#define DELTAC_WGMMA_OK 0
#endif

namespace deltac::cuda::detail {

__device__ __forceinline__ uint64_t wg_desc(uint32_t addr, uint32_t lbo, uint32_t sbo) {
  return uint64_t((addr & 0x3ffff) >> 4) | uint64_t(lbo >> 4) << 16 | uint64_t(sbo >> 4) << 32;
}
__device__ __forceinline__ uint64_t wg_desc_sw128(uint32_t addr, uint32_t lbo, uint32_t sbo) {
  return wg_desc(addr, lbo, sbo) | uint64_t(1) << 62;
}
// Before the first product of a batch, and after other instructions wrote
// registers the products read or accumulate into.
__device__ __forceinline__ void wg_fence() {
#if DELTAC_WGMMA_OK
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void wg_commit() {
#if DELTAC_WGMMA_OK
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#endif
}
// Waits until at most N committed groups are pending.
template <int N>
__device__ __forceinline__ void wg_wait() {
#if DELTAC_WGMMA_OK
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
#endif
}
// Shared-memory writes of the generic proxy (st.shared, stmatrix, cp.async)
// made visible to the products' reads.
__device__ __forceinline__ void fence_proxy_async() {
#if DELTAC_WGMMA_OK
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#endif
}
// Pins accumulators after wg_wait, so that the compiler reads them only
// after the wait.
template <int N>
__device__ __forceinline__ void wg_keep(float (*x)[4]) {
#pragma unroll
  for (int i = 0; i < N; ++i)
#pragma unroll
    for (int e = 0; e < 4; ++e) asm volatile("" : "+f"(x[i][e])::"memory");
}

#define DELTAC_WG_N32_OUT                                                                     \
  "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]), "+f"(d[1][1]), \
      "+f"(d[1][2]), "+f"(d[1][3]), "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]),            \
      "+f"(d[2][3]), "+f"(d[3][0]), "+f"(d[3][1]), "+f"(d[3][2]), "+f"(d[3][3])
#define DELTAC_WG_N32_ASM(TYPE)                                                       \
  "{\n .reg .pred p;\n setp.ne.b32 p, %18, 0;\n"                                      \
  " wgmma.mma_async.sync.aligned.m64n32k16.f32." TYPE "." TYPE " "                   \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}, "         \
  "%16, %17, p, 1, 1, %19, %20;\n}\n"

// d (+)= A B, N = 32 (acc 0: d = A B).
template <class Ts, int TA, int TB>
__device__ __forceinline__ void wgmma_n32(float (*d)[4], uint64_t da, uint64_t db, int acc) {
#if DELTAC_WGMMA_OK
  if constexpr (std::is_same_v<Ts, __half>)
    asm volatile(DELTAC_WG_N32_ASM("f16")
                 : DELTAC_WG_N32_OUT
                 : "l"(da), "l"(db), "r"(acc), "n"(TA), "n"(TB));
  else
    asm volatile(DELTAC_WG_N32_ASM("bf16")
                 : DELTAC_WG_N32_OUT
                 : "l"(da), "l"(db), "r"(acc), "n"(TA), "n"(TB));
#else
  (void)d, (void)da, (void)db, (void)acc;
  __trap();
#endif
}
#define DELTAC_WG_N64_OUT                                                                     \
  DELTAC_WG_N32_OUT, "+f"(d[4][0]), "+f"(d[4][1]), "+f"(d[4][2]), "+f"(d[4][3]),             \
      "+f"(d[5][0]), "+f"(d[5][1]), "+f"(d[5][2]), "+f"(d[5][3]), "+f"(d[6][0]),            \
      "+f"(d[6][1]), "+f"(d[6][2]), "+f"(d[6][3]), "+f"(d[7][0]), "+f"(d[7][1]),            \
      "+f"(d[7][2]), "+f"(d[7][3])
#define DELTAC_WG_N64_ASM(TYPE)                                                       \
  "{\n .reg .pred p;\n setp.ne.b32 p, %34, 0;\n"                                      \
  " wgmma.mma_async.sync.aligned.m64n64k16.f32." TYPE "." TYPE " "                   \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "          \
  "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, " \
  "%32, %33, p, 1, 1, %35, %36;\n}\n"

// d (+)= A B, N = 64.
template <class Ts, int TA, int TB>
__device__ __forceinline__ void wgmma_n64(float (*d)[4], uint64_t da, uint64_t db, int acc) {
#if DELTAC_WGMMA_OK
  if constexpr (std::is_same_v<Ts, __half>)
    asm volatile(DELTAC_WG_N64_ASM("f16")
                 : DELTAC_WG_N64_OUT
                 : "l"(da), "l"(db), "r"(acc), "n"(TA), "n"(TB));
  else
    asm volatile(DELTAC_WG_N64_ASM("bf16")
                 : DELTAC_WG_N64_OUT
                 : "l"(da), "l"(db), "r"(acc), "n"(TA), "n"(TB));
#else
  (void)d, (void)da, (void)db, (void)acc;
  __trap();
#endif
}
#define DELTAC_WG_RS_N64_ASM(TYPE)                                                    \
  "{\n .reg .pred p;\n setp.ne.b32 p, %36, 0;\n"                                      \
  " wgmma.mma_async.sync.aligned.m64n64k16.f32." TYPE "." TYPE " "                   \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "          \
  "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, " \
  "{%32, %33, %34, %35}, %37, p, 1, 1, %38;\n}\n"

// d (+)= A B, N = 64, A from registers: a[0..3] the m16n8k16 A fragment of
// this warp's 16 rows (rows g, g + 8; columns 2 t, + 1 and 2 t + 8, + 9 of
// the 16-deep step, two 16-bit values a register). TB as above.
template <class Ts, int TB>
__device__ __forceinline__ void wgmma_rs_n64(float (*d)[4], const uint32_t (&a)[4], uint64_t db,
                                             int acc) {
#if DELTAC_WGMMA_OK
  if constexpr (std::is_same_v<Ts, __half>)
    asm volatile(DELTAC_WG_RS_N64_ASM("f16")
                 : DELTAC_WG_N64_OUT
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(acc), "l"(db), "n"(TB));
  else
    asm volatile(DELTAC_WG_RS_N64_ASM("bf16")
                 : DELTAC_WG_N64_OUT
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(acc), "l"(db), "n"(TB));
#else
  (void)d, (void)a, (void)db, (void)acc;
  __trap();
#endif
}
#undef DELTAC_WG_RS_N64_ASM
#undef DELTAC_WG_N64_ASM
#undef DELTAC_WG_N64_OUT
#undef DELTAC_WG_N32_ASM
#undef DELTAC_WG_N32_OUT

}  // namespace deltac::cuda::detail

#endif  // DELTAC_CUDA_WGMMA_CUH

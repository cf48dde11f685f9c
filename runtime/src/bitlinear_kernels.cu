// BitLinear on CUDA (fused.h): the numbers of runtime/src/bitlinear.h (the
// CPU kernels) on int8 tensor cores. Activations are quantised per token to
// signed int8 q = clip(round(x s), -128, 127), s = 127 / max(max |x|, eps)
// (round half to even, as torch.round; r = 1 / s, NaN for a row holding a
// NaN or infinity, whose q are 0), padded with zeros to kp; the GEMM sums
// q t exactly in int32 (mma.sync m16n8k32 s8) and writes
// float(sum) * gamma[n] * r[m], the CPU kernels' expression: the same q give
// bit-identical f32 outputs. Up to 16 rows (decode) a block per 8 columns
// reads its fragments from global memory instead of shared tiles.
#include "fused.h"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace deltac {
namespace fused {

namespace {

using bf16 = __nv_bfloat16;

__device__ __forceinline__ float in_f(const float *x, int64_t i) { return x[i]; }
__device__ __forceinline__ float in_f(const bf16 *x, int64_t i) { return __bfloat162float(x[i]); }

// One warp per row: max |x| (and whether every value is finite), then q.
template <typename T>
__global__ void __launch_bounds__(256)
    quantize_kernel(const T *x, int64_t m, int64_t k, int64_t kp, float eps, int8_t *q, float *r) {
  const int64_t row = (int64_t(blockIdx.x) * 256 + threadIdx.x) >> 5;
  const int lane = threadIdx.x & 31;
  if (row >= m) return;
  const T *xr = x + row * k;
  float mx = 0.0f;
  bool finite = true;
  for (int64_t j = lane; j < k; j += 32) {
    const float v = in_f(xr, j);
    finite = finite && isfinite(v);
    mx = fmaxf(mx, fabsf(v));
  }
  for (int o = 16; o > 0; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
  finite = __all_sync(0xffffffffu, finite);
  // bitlinear.cpp's row_scale: s = 127 / max(mx, eps), r = 1 / s in double.
  const float s = finite ? 127.0f / fmaxf(mx, eps) : 0.0f;
  if (lane == 0) r[row] = finite ? float(1.0 / double(s)) : __int_as_float(0x7fc00000);
  int8_t *qr = q + row * kp;
  for (int64_t j = lane; j < kp; j += 32) {
    const float v = j < k && finite ? rintf(in_f(xr, j) * s) : 0.0f;
    qr[j] = int8_t(int(fminf(127.0f, fmaxf(-128.0f, v))));
  }
}

// The GEMM: 128 x 128 output tiles, 8 warps (2 x 4, 64 x 32 each), K in
// steps of 64 bytes through two cp.async stages; rows padded to 80 bytes
// (ldmatrix without bank conflicts).
constexpr int kBM = 128, kBN = 128, kBK = 64, kLD = 80, kThreads = 256;

// The tensor-core instructions need sm_80 or newer; older targets trap.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
#define DELTAC_S8_MMA 0
#else
#define DELTAC_S8_MMA 1
#endif

__device__ __forceinline__ void cp16(void *dst, const void *src, bool ok) {
#if DELTAC_S8_MMA
  const uint32_t d = static_cast<uint32_t>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(d), "l"(src),
               "r"(ok ? 16 : 0));
#else
  __trap();
#endif
}
__device__ __forceinline__ void ldsm4(uint32_t r[4], const void *p) {
#if DELTAC_S8_MMA
  const uint32_t a = static_cast<uint32_t>(__cvta_generic_to_shared(p));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(a));
#else
  __trap();
#endif
}
__device__ __forceinline__ void mma_s8(int c[4], const uint32_t a[4], uint32_t b0, uint32_t b1) {
#if DELTAC_S8_MMA
  asm volatile("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
               "{%8,%9}, {%0,%1,%2,%3};\n"
               : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#else
  __trap();
#endif
}

struct GemmArgs {
  const int8_t *q;
  const float *r;
  const int8_t *t;
  const float *gamma;
  int64_t m, n, kp;
  void *y;
  int64_t ldy, part_cols, part_stride;
};

template <typename TY>
__device__ __forceinline__ void store_y(const GemmArgs &g, int64_t row, int64_t col, float v) {
  if (row >= g.m || col >= g.n) return;
  const int64_t part = col / g.part_cols, c = col % g.part_cols;
  TY *y = static_cast<TY *>(g.y) + part * g.part_stride + row * g.ldy + c;
  if constexpr (sizeof(TY) == 2)
    *y = __float2bfloat16_rn(v);
  else
    *y = v;
}

template <typename TY>
__global__ void __launch_bounds__(kThreads) gemm_kernel(const GemmArgs g) {
  __shared__ __align__(16) int8_t sa[2][kBM * kLD], sb[2][kBN * kLD];
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int wm = warp / 4, wn = warp % 4;
  const int64_t m0 = int64_t(blockIdx.y) * kBM, n0 = int64_t(blockIdx.x) * kBN;
  // Copies: each thread two 16-byte pieces of A and of B per step.
  auto load = [&](int st, int64_t k0) {
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const int e = tid + i * kThreads, row = e / 4, piece = e % 4;
      const int64_t ra = m0 + row, rb = n0 + row;
      cp16(&sa[st][row * kLD + piece * 16], g.q + (ra < g.m ? ra : 0) * g.kp + k0 + piece * 16,
           ra < g.m);
      cp16(&sb[st][row * kLD + piece * 16], g.t + (rb < g.n ? rb : 0) * g.kp + k0 + piece * 16,
           rb < g.n);
    }
    asm volatile("cp.async.commit_group;\n" ::);
  };
  int acc[4][4][4] = {};
  const int steps = int(g.kp / kBK);
  load(0, 0);
  for (int s = 0; s < steps; ++s) {
    if (s + 1 < steps) {
      load((s + 1) & 1, int64_t(s + 1) * kBK);
      asm volatile("cp.async.wait_group 1;\n" ::: "memory");
    } else {
      asm volatile("cp.async.wait_group 0;\n" ::: "memory");
    }
    __syncthreads();
    const int8_t *A = sa[s & 1], *B = sb[s & 1];
#pragma unroll
    for (int kk = 0; kk < kBK; kk += 32) {
      uint32_t a[4][4], b[2][4];
#pragma unroll
      for (int mi = 0; mi < 4; ++mi)  // rows lane % 16, bytes 16 (lane / 16)
        ldsm4(a[mi], A + (wm * 64 + mi * 16 + (lane & 15)) * kLD + kk + (lane >> 4) * 16);
#pragma unroll
      for (int np = 0; np < 2; ++np)  // two n8 tiles: rows lane % 8 + 8 (lane / 16), bytes 16 (lane / 8 % 2)
        ldsm4(b[np], B + (wn * 32 + np * 16 + (lane & 7) + ((lane >> 4) << 3)) * kLD + kk +
                         ((lane >> 3) & 1) * 16);
#pragma unroll
      for (int mi = 0; mi < 4; ++mi)
#pragma unroll
        for (int ni = 0; ni < 4; ++ni)
          mma_s8(acc[mi][ni], a[mi], b[ni >> 1][(ni & 1) * 2], b[ni >> 1][(ni & 1) * 2 + 1]);
    }
    __syncthreads();
  }
  const int gr = lane >> 2, tc = (lane & 3) * 2;
#pragma unroll
  for (int mi = 0; mi < 4; ++mi)
#pragma unroll
    for (int ni = 0; ni < 4; ++ni)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int64_t row = m0 + wm * 64 + mi * 16 + gr + 8 * (e >> 1);
        const int64_t col = n0 + wn * 32 + ni * 8 + tc + (e & 1);
        if (row < g.m && col < g.n)
          store_y<TY>(g, row, col, float(acc[mi][ni][e]) * g.gamma[col] * g.r[row]);
      }
}

// Few rows (decode): a block per 8 output columns and all m <= 16 rows, its
// 8 warps taking every 8th 32-byte step of K (one m16n8k32 tile a step,
// fragments loaded straight from global memory, 4 steps in flight), the
// warps' int32 sums added in shared memory: the weights stream with many
// loads in flight.
constexpr int kSmallM = 16, kSmallWarps = 8;

__global__ void __launch_bounds__(32 * kSmallWarps) gemm_small_kernel(const GemmArgs g, bool bf) {
  __shared__ int part[kSmallWarps][32][4];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, gr = lane >> 2, t4 = (lane & 3) * 4;
  const int64_t n0 = int64_t(blockIdx.x) * 8, col = n0 + gr;
  const bool ok0 = gr < g.m, ok1 = gr + 8 < g.m, okc = col < g.n;
  const int8_t *a0 = g.q + (ok0 ? gr : 0) * g.kp + t4, *a1 = g.q + (ok1 ? gr + 8 : 0) * g.kp + t4;
  const int8_t *b = g.t + (okc ? col : 0) * g.kp + t4;
  auto word = [](const int8_t *p, bool ok) {
    return ok ? __ldg(reinterpret_cast<const uint32_t *>(p)) : 0u;
  };
  int acc[4] = {};
#pragma unroll 4
  for (int64_t k = int64_t(warp) * 32; k < g.kp; k += 32 * kSmallWarps) {
    const uint32_t a[4] = {word(a0 + k, ok0), word(a1 + k, ok1), word(a0 + k + 16, ok0),
                           word(a1 + k + 16, ok1)};
    mma_s8(acc, a, word(b + k, okc), word(b + k + 16, okc));
  }
#pragma unroll
  for (int e = 0; e < 4; ++e) part[warp][lane][e] = acc[e];
  __syncthreads();
  if (warp != 0) return;
  for (int w = 1; w < kSmallWarps; ++w)
#pragma unroll
    for (int e = 0; e < 4; ++e) acc[e] += part[w][lane][e];
  const int tc = (lane & 3) * 2;
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    const int64_t row = gr + 8 * (e >> 1), c = n0 + tc + (e & 1);
    if (row < g.m && c < g.n) {
      const float v = float(acc[e]) * g.gamma[c] * g.r[row];
      if (bf)
        store_y<bf16>(g, row, c, v);
      else
        store_y<float>(g, row, c, v);
    }
  }
}

unsigned blocks(int64_t n, int64_t per) { return unsigned((n + per - 1) / per); }

} // namespace

int bitlinear_quantize(const void *x, bool x_bf16, int64_t m, int64_t k, int64_t kp, float eps,
                       int8_t *q, float *r, void *stream) {
  if (m <= 0) return 0;
  if (k <= 0 || kp < k || kp % 64 || !x || !q || !r) return int(cudaErrorInvalidValue);
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  if (x_bf16)
    quantize_kernel<<<blocks(m, 8), 256, 0, s>>>(static_cast<const bf16 *>(x), m, k, kp, eps, q, r);
  else
    quantize_kernel<<<blocks(m, 8), 256, 0, s>>>(static_cast<const float *>(x), m, k, kp, eps, q,
                                                 r);
  return int(cudaGetLastError());
}

int bitlinear_gemm(const int8_t *q, const float *r, int64_t m, int64_t kp, const int8_t *t,
                   const float *gamma, int64_t n, void *y, bool y_bf16, int64_t ldy,
                   int64_t part_cols, int64_t part_stride, void *stream) {
  if (m <= 0 || n <= 0) return 0;
  if (kp <= 0 || kp % 64 || part_cols <= 0 || !q || !r || !t || !gamma || !y ||
      (part_cols < n && part_stride <= 0) || blocks(m, kBM) > 65535u)
    return int(cudaErrorInvalidValue);
  const GemmArgs g{q, r, t, gamma, m, n, kp, y, ldy, part_cols, part_stride};
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  if (m <= kSmallM) {
    gemm_small_kernel<<<blocks(n, 8), 32 * kSmallWarps, 0, s>>>(g, y_bf16);
    return int(cudaGetLastError());
  }
  const dim3 grid(blocks(n, kBN), blocks(m, kBM));
  if (y_bf16)
    gemm_kernel<bf16><<<grid, kThreads, 0, s>>>(g);
  else
    gemm_kernel<float><<<grid, kThreads, 0, s>>>(g);
  return int(cudaGetLastError());
}

} // namespace fused
} // namespace deltac

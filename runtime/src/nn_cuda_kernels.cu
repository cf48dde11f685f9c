// deltac::nn on CUDA: the layers' elementwise kernels (nn_cuda.h), f32
// arithmetic on f32 or bf16 activations, the formulas of the CPU passes
// (nn_rows.inc) with expf / log1pf of CUDA's math library (not the fast
// intrinsics).
#include "nn_cuda.h"

#include <cuda_bf16.h>

namespace deltac {
namespace nn {
namespace cudanet {
namespace {

__device__ __forceinline__ float load1(const float *p) { return *p; }
__device__ __forceinline__ float load1(const __nv_bfloat16 *p) { return __bfloat162float(*p); }
__device__ __forceinline__ void store1(float *p, float x) { *p = x; }
__device__ __forceinline__ void store1(__nv_bfloat16 *p, float x) { *p = __float2bfloat16(x); }

__device__ __forceinline__ float silu(float x) { return x / (1.0f + expf(-x)); }

__device__ __forceinline__ float warp_sum(float x) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
  return x;
}

// r[j] for a j known only at run time, without spilling r to local memory.
__device__ __forceinline__ float pick(const float (&r)[kMaxConvKernel], int j) {
  float v = 0.0f;
#pragma unroll
  for (int i = 0; i < kMaxConvKernel; ++i)
    if (i == j) v = r[i];
  return v;
}

constexpr int kConvThreads = 128; // channels per block
constexpr int kConvTokens = 64;   // tokens per block (>= kMaxConvKernel)

// One thread per (sequence, channel, run of kConvTokens tokens), the W
// inputs of the window in registers. Threads past the C conv channels
// compute the gates of one value head over the same tokens. Only the blocks
// of the first run read the cached inputs and write the new ones (same
// thread, after reading): the cache is updated in place without a race.
template <typename T> __global__ void __launch_bounds__(kConvThreads) conv_gates_kernel(ConvGates a) {
  const int64_t c = int64_t(blockIdx.x) * kConvThreads + threadIdx.x;
  const int64_t b = blockIdx.z;
  const int64_t t0 = int64_t(blockIdx.y) * kConvTokens;
  const int64_t t1 = t0 + kConvTokens < a.T ? t0 + kConvTokens : a.T;
  const float *y = a.y + b * a.T * a.ldy; // row t of sequence b: y + t * ldy
  if (c < a.C) {
    const int W = a.W;
    float w[kMaxConvKernel], old[kMaxConvKernel], win[kMaxConvKernel];
    const bool first = blockIdx.y == 0;
    float *st = a.state ? a.state + (b * a.C + c) * W : nullptr;
#pragma unroll
    for (int i = 0; i < kMaxConvKernel; ++i) {
      w[i] = i < W ? a.w[c * W + i] : 0.0f;
      old[i] = i < W && first && a.cont ? st[i] : 0.0f;
    }
    // Input j of the sequence: the W cached ones, then this call's tokens.
    auto input = [&](int64_t j) { return j < W ? pick(old, int(j)) : y[(j - W) * a.ldy + c]; };
#pragma unroll
    for (int i = 0; i < kMaxConvKernel; ++i) win[i] = i < W - 1 ? input(t0 + 1 + i) : 0.0f;
    const float bias = a.bias ? a.bias[c] : 0.0f;
    T *dst;
    int64_t ld;
    if (c < a.kd) dst = static_cast<T *>(a.q) + c, ld = a.kd;
    else if (c < 2 * a.kd) dst = static_cast<T *>(a.k) + (c - a.kd), ld = a.kd;
    else dst = static_cast<T *>(a.v) + (c - 2 * a.kd), ld = a.vd;
    dst += b * a.T * ld;
    for (int64_t t = t0; t < t1; ++t) {
      const float now = y[t * a.ldy + c]; // input t + W
      float acc = 0.0f;
#pragma unroll
      for (int i = 0; i < kMaxConvKernel; ++i) {
        if (i == W - 1) win[i] = now;
        if (i < W) acc += w[i] * win[i];
      }
      store1(dst + t * ld, silu(acc + bias));
#pragma unroll
      for (int i = 0; i + 1 < kMaxConvKernel; ++i) win[i] = win[i + 1];
    }
    if (first && st)
      for (int i = 0; i < W; ++i) st[i] = input(a.T + i);
    return;
  }
  const int64_t h = c - a.C;
  if (h >= a.HV) return;
  const float decay = -expf(a.A_log[h]), dt = a.dt_bias[h];
  for (int64_t t = t0; t < t1; ++t) {
    const float *row = y + t * a.ldy;
    const int64_t o = (b * a.T + t) * a.HV + h;
    a.beta[o] = a.beta_scale / (1.0f + expf(-row[a.b_col + h]));
    const float x = row[a.a_col + h] + dt;
    a.g[o] = decay * (x > 20.0f ? x : log1pf(expf(x)));
  }
}

constexpr int kNormThreads = 256; // 8 warps: one (row, head) each
constexpr int kNormPer = 8;       // values per lane: D <= 256

// In and out of a norm may be one buffer (same dtype): each warp reads its
// head into registers before it writes it.
template <typename Tin, typename Tout>
__global__ void __launch_bounds__(kNormThreads)
    gated_rmsnorm_kernel(const Tin *o, Tout *out, const float *z, int64_t ldz, const float *w,
                         int64_t rows, int heads, int D, float eps) {
  const int64_t item = (int64_t(blockIdx.x) * kNormThreads + threadIdx.x) >> 5;
  const int lane = threadIdx.x & 31;
  if (item >= rows * heads) return; // whole warps
  const int64_t r = item / heads, h = item % heads;
  const Tin *op = o + item * D;
  Tout *dst = out + item * D;
  const float *zp = z + r * ldz + h * D;
  float x[kNormPer], ss = 0.0f;
#pragma unroll
  for (int i = 0; i < kNormPer; ++i) {
    const int d = lane + 32 * i;
    x[i] = d < D ? load1(op + d) : 0.0f;
    ss += x[i] * x[i];
  }
  const float rs = 1.0f / sqrtf(warp_sum(ss) / float(D) + eps);
#pragma unroll
  for (int i = 0; i < kNormPer; ++i) {
    const int d = lane + 32 * i;
    if (d < D) store1(dst + d, w[d] * (x[i] * rs) * silu(zp[d]));
  }
}

template <typename Tin, typename Tout>
__global__ void __launch_bounds__(kNormThreads)
    layernorm_gate_kernel(const Tin *o, const Tin *g, Tout *out, const float *w,
                          const float *bias, int64_t rows, int heads, int D, float eps) {
  const int64_t item = (int64_t(blockIdx.x) * kNormThreads + threadIdx.x) >> 5;
  const int lane = threadIdx.x & 31;
  if (item >= rows * heads) return;
  const Tin *op = o + item * D, *gp = g + item * D;
  Tout *dst = out + item * D;
  float x[kNormPer], s = 0.0f;
#pragma unroll
  for (int i = 0; i < kNormPer; ++i) {
    const int d = lane + 32 * i;
    x[i] = d < D ? load1(op + d) : 0.0f;
    s += x[i];
  }
  const float mean = warp_sum(s) / float(D);
  float v = 0.0f;
#pragma unroll
  for (int i = 0; i < kNormPer; ++i)
    if (lane + 32 * i < D) v += (x[i] - mean) * (x[i] - mean);
  const float rstd = 1.0f / sqrtf(warp_sum(v) / float(D) + eps);
#pragma unroll
  for (int i = 0; i < kNormPer; ++i) {
    const int d = lane + 32 * i;
    if (d < D) store1(dst + d, ((x[i] - mean) * rstd * w[d] + bias[d]) * silu(load1(gp + d)));
  }
}

__global__ void sigmoid_kernel(float *x, int64_t n, float scale) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    x[i] = scale / (1.0f + expf(-x[i]));
}

unsigned blocks_for(int64_t items, int per_block) {
  return unsigned((items + per_block - 1) / per_block);
}

} // namespace

cudaError_t conv_gates(const ConvGates &a, cudaStream_t s) {
  const dim3 grid(blocks_for(a.C + a.HV, kConvThreads), blocks_for(a.T, kConvTokens),
                  unsigned(a.B));
  if (a.bf16) conv_gates_kernel<__nv_bfloat16><<<grid, kConvThreads, 0, s>>>(a);
  else conv_gates_kernel<float><<<grid, kConvThreads, 0, s>>>(a);
  return cudaGetLastError();
}

namespace {
using bf16 = __nv_bfloat16;

template <typename Tin, typename Tout>
void norm_launch(const void *o, void *out, const float *z, int64_t ldz, const float *w,
                 int64_t rows, int64_t heads, int64_t D, float eps, cudaStream_t s) {
  gated_rmsnorm_kernel<<<blocks_for(rows * heads, kNormThreads / 32), kNormThreads, 0, s>>>(
      static_cast<const Tin *>(o), static_cast<Tout *>(out), z, ldz, w, rows, int(heads), int(D),
      eps);
}

template <typename Tin, typename Tout>
void ln_launch(const void *o, const void *g, void *out, const float *w, const float *b,
               int64_t rows, int64_t heads, int64_t D, float eps, cudaStream_t s) {
  layernorm_gate_kernel<<<blocks_for(rows * heads, kNormThreads / 32), kNormThreads, 0, s>>>(
      static_cast<const Tin *>(o), static_cast<const Tin *>(g), static_cast<Tout *>(out), w, b,
      rows, int(heads), int(D), eps);
}
} // namespace

cudaError_t gated_rmsnorm(const void *o, bool o_bf16, void *out, bool out_bf16, const float *z,
                          int64_t ldz, const float *w, int64_t rows, int64_t heads, int64_t D,
                          float eps, cudaStream_t s) {
  if (o_bf16 && out_bf16) norm_launch<bf16, bf16>(o, out, z, ldz, w, rows, heads, D, eps, s);
  else if (o_bf16) norm_launch<bf16, float>(o, out, z, ldz, w, rows, heads, D, eps, s);
  else if (out_bf16) norm_launch<float, bf16>(o, out, z, ldz, w, rows, heads, D, eps, s);
  else norm_launch<float, float>(o, out, z, ldz, w, rows, heads, D, eps, s);
  return cudaGetLastError();
}

cudaError_t layernorm_gate(const void *o, const void *g, bool in_bf16, void *out, bool out_bf16,
                           const float *w, const float *b, int64_t rows, int64_t heads, int64_t D,
                           float eps, cudaStream_t s) {
  if (in_bf16 && out_bf16) ln_launch<bf16, bf16>(o, g, out, w, b, rows, heads, D, eps, s);
  else if (in_bf16) ln_launch<bf16, float>(o, g, out, w, b, rows, heads, D, eps, s);
  else if (out_bf16) ln_launch<float, bf16>(o, g, out, w, b, rows, heads, D, eps, s);
  else ln_launch<float, float>(o, g, out, w, b, rows, heads, D, eps, s);
  return cudaGetLastError();
}

cudaError_t sigmoid(float *x, int64_t n, float scale, cudaStream_t s) {
  const int64_t blocks = (n + 255) / 256;
  sigmoid_kernel<<<unsigned(blocks < 4096 ? blocks : 4096), 256, 0, s>>>(x, n, scale);
  return cudaGetLastError();
}

} // namespace cudanet
} // namespace nn
} // namespace deltac

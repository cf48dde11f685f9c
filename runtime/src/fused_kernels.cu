// The layers' fused elementwise kernels (fused.h), f32 arithmetic on f32 or
// bf16 activations, the formulas of the CPU passes (nn_rows.inc) with expf /
// log1pf of CUDA's math library (not the fast intrinsics).
#include "fused.h"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

namespace deltac {
namespace fused {
namespace {

using bf16 = __nv_bfloat16;

__device__ __forceinline__ float load1(const float *p) { return *p; }
__device__ __forceinline__ float load1(const bf16 *p) { return __bfloat162float(*p); }
__device__ __forceinline__ void store1(float *p, float x) { *p = x; }
__device__ __forceinline__ void store1(bf16 *p, float x) { *p = __float2bfloat16(x); }
// A parameter (weights, biases, A_log, dt_bias): bf16 or f32 by a flag.
__device__ __forceinline__ float param(const void *p, bool is_bf16, int64_t i) {
  return is_bf16 ? __bfloat162float(static_cast<const bf16 *>(p)[i])
                 : static_cast<const float *>(p)[i];
}

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
// thread, after reading): the state may be updated in place without a race.
template <typename Ty, typename To>
__global__ void __launch_bounds__(kConvThreads) conv_gates_kernel(ConvGates a) {
  const int64_t c = int64_t(blockIdx.x) * kConvThreads + threadIdx.x;
  const int64_t b = blockIdx.z;
  const int64_t t0 = int64_t(blockIdx.y) * kConvTokens;
  const int64_t t1 = t0 + kConvTokens < a.T ? t0 + kConvTokens : a.T;
  if (c < a.C) {
    const int W = a.W;
    // this channel's column in y
    int64_t col = c;
    if (a.group > 0) {
      if (c < a.kd) col = (c / a.dk) * a.group + c % a.dk;
      else if (c < 2 * a.kd) col = ((c - a.kd) / a.dk) * a.group + a.dk + (c - a.kd) % a.dk;
      else col = ((c - 2 * a.kd) / a.vg) * a.group + 2 * a.dk + (c - 2 * a.kd) % a.vg;
    }
    const Ty *y = static_cast<const Ty *>(a.y) + b * a.T * a.ldy + col; // token t: y[t * ldy]
    float w[kMaxConvKernel], old[kMaxConvKernel], win[kMaxConvKernel];
    const bool first = blockIdx.y == 0;
    const Ty *st_in = a.state_in ? static_cast<const Ty *>(a.state_in) + (b * a.C + c) * W : nullptr;
#pragma unroll
    for (int i = 0; i < kMaxConvKernel; ++i) {
      w[i] = i < W ? param(a.w, a.p_bf16, c * W + i) : 0.0f;
      old[i] = i < W && first && st_in ? load1(st_in + i) : 0.0f;
    }
    // Input j of the sequence: the W earlier ones, then this call's tokens.
    auto input = [&](int64_t j) { return j < W ? pick(old, int(j)) : load1(y + (j - W) * a.ldy); };
#pragma unroll
    for (int i = 0; i < kMaxConvKernel; ++i) win[i] = i < W - 1 ? input(t0 + 1 + i) : 0.0f;
    const float bias = a.bias ? param(a.bias, a.p_bf16, c) : 0.0f;
    To *dst;
    int64_t ld;
    if (c < a.kd) dst = static_cast<To *>(a.q) + c, ld = a.kd;
    else if (c < 2 * a.kd) dst = static_cast<To *>(a.k) + (c - a.kd), ld = a.kd;
    else dst = static_cast<To *>(a.v) + (c - 2 * a.kd), ld = a.vd;
    dst += b * a.T * ld;
    for (int64_t t = t0; t < t1; ++t) {
      const float now = load1(y + t * a.ldy); // input t + W
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
    if (first && a.state_out) {
      Ty *st = static_cast<Ty *>(a.state_out) + (b * a.C + c) * W;
      for (int i = 0; i < W; ++i) store1(st + i, input(a.T + i));
    }
    return;
  }
  const int64_t h = c - a.C;
  if (h >= a.HV) return;
  const float decay = -expf(param(a.A_log, a.p_bf16, h)), dt = param(a.dt_bias, a.p_bf16, h);
  const int64_t bcol = (h / a.ba_heads) * a.ba_group + h % a.ba_heads;
  const Ty *bp = static_cast<const Ty *>(a.b) + b * a.T * a.ldba + bcol;
  const Ty *ap = static_cast<const Ty *>(a.a) + b * a.T * a.ldba + bcol;
  for (int64_t t = t0; t < t1; ++t) {
    const int64_t o = (b * a.T + t) * a.HV + h;
    a.beta[o] = a.beta_scale / (1.0f + expf(-load1(bp + t * a.ldba)));
    const float x = load1(ap + t * a.ldba) + dt;
    a.g[o] = decay * (x > 20.0f ? x : log1pf(expf(x)));
  }
}

constexpr int kNormThreads = 256; // 8 warps: one (row, head) each
constexpr int kNormPer = 8;       // values per lane: D <= 256

// In and out of a norm may be one buffer (same dtype): each warp reads its
// head into registers before it writes it.
template <typename Tin, typename Tout, typename Tz>
__global__ void __launch_bounds__(kNormThreads)
    gated_rmsnorm_kernel(const Tin *o, Tout *out, const Tz *z, int64_t ldz, int64_t z_heads,
                         int64_t z_group, const void *w, bool p_bf16, int64_t rows, int heads,
                         int D, float eps) {
  const int64_t item = (int64_t(blockIdx.x) * kNormThreads + threadIdx.x) >> 5;
  const int lane = threadIdx.x & 31;
  if (item >= rows * heads) return; // whole warps
  const int64_t r = item / heads, h = item % heads;
  const Tin *op = o + item * D;
  Tout *dst = out + item * D;
  const Tz *zp = z + r * ldz + (h / z_heads) * z_group + (h % z_heads) * D;
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
    if (d < D) store1(dst + d, param(w, p_bf16, d) * (x[i] * rs) * silu(load1(zp + d)));
  }
}

template <typename Tin, typename Tout>
__global__ void __launch_bounds__(kNormThreads)
    layernorm_gate_kernel(const Tin *o, const Tin *g, Tout *out, const void *w, const void *bias,
                          bool p_bf16, int64_t rows, int heads, int D, float eps) {
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
    if (d < D)
      store1(dst + d, ((x[i] - mean) * rstd * param(w, p_bf16, d) + param(bias, p_bf16, d)) *
                          silu(load1(gp + d)));
  }
}

template <typename T> __global__ void sigmoid_kernel(const T *x, float *out, int64_t n, float scale) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    out[i] = scale / (1.0f + expf(-load1(x + i)));
}

unsigned blocks_for(int64_t items, int per_block) {
  return unsigned((items + per_block - 1) / per_block);
}

template <typename Tin, typename Tout, typename Tz>
void norm_launch(const void *o, void *out, const void *z, int64_t ldz, int64_t z_heads,
                 int64_t z_group, const void *w, bool p_bf16, int64_t rows, int64_t heads,
                 int64_t D, float eps, cudaStream_t s) {
  gated_rmsnorm_kernel<<<blocks_for(rows * heads, kNormThreads / 32), kNormThreads, 0, s>>>(
      static_cast<const Tin *>(o), static_cast<Tout *>(out), static_cast<const Tz *>(z), ldz,
      z_heads, z_group, w, p_bf16, rows, int(heads), int(D), eps);
}

template <typename Tin, typename Tout>
void ln_launch(const void *o, const void *g, void *out, const void *w, const void *b, bool p_bf16,
               int64_t rows, int64_t heads, int64_t D, float eps, cudaStream_t s) {
  layernorm_gate_kernel<<<blocks_for(rows * heads, kNormThreads / 32), kNormThreads, 0, s>>>(
      static_cast<const Tin *>(o), static_cast<const Tin *>(g), static_cast<Tout *>(out), w, b,
      p_bf16, rows, int(heads), int(D), eps);
}

} // namespace

int conv_gates(const ConvGates &a, void *stream) {
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  const dim3 grid(blocks_for(a.C + a.HV, kConvThreads), blocks_for(a.T, kConvTokens),
                  unsigned(a.B));
  if (a.y_bf16 && a.out_bf16) conv_gates_kernel<bf16, bf16><<<grid, kConvThreads, 0, s>>>(a);
  else if (a.y_bf16) conv_gates_kernel<bf16, float><<<grid, kConvThreads, 0, s>>>(a);
  else if (a.out_bf16) conv_gates_kernel<float, bf16><<<grid, kConvThreads, 0, s>>>(a);
  else conv_gates_kernel<float, float><<<grid, kConvThreads, 0, s>>>(a);
  return int(cudaGetLastError());
}

int gated_rmsnorm(const void *o, bool o_bf16, void *out, bool out_bf16, const void *z,
                  bool z_bf16, int64_t ldz, int64_t z_heads, int64_t z_group, const void *w,
                  bool p_bf16, int64_t rows, int64_t heads, int64_t D, float eps, void *stream) {
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  if (z_bf16 && !(o_bf16 && out_bf16)) return int(cudaErrorInvalidValue);
#define DELTAC_NORM(TI, TO, TZ) \
  norm_launch<TI, TO, TZ>(o, out, z, ldz, z_heads, z_group, w, p_bf16, rows, heads, D, eps, s)
  if (z_bf16) DELTAC_NORM(bf16, bf16, bf16);
  else if (o_bf16 && out_bf16) DELTAC_NORM(bf16, bf16, float);
  else if (o_bf16) DELTAC_NORM(bf16, float, float);
  else if (out_bf16) DELTAC_NORM(float, bf16, float);
  else DELTAC_NORM(float, float, float);
#undef DELTAC_NORM
  return int(cudaGetLastError());
}

int layernorm_gate(const void *o, const void *g, bool in_bf16, void *out, bool out_bf16,
                   const void *w, const void *b, bool p_bf16, int64_t rows, int64_t heads,
                   int64_t D, float eps, void *stream) {
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  if (in_bf16 && out_bf16) ln_launch<bf16, bf16>(o, g, out, w, b, p_bf16, rows, heads, D, eps, s);
  else if (in_bf16) ln_launch<bf16, float>(o, g, out, w, b, p_bf16, rows, heads, D, eps, s);
  else if (out_bf16) ln_launch<float, bf16>(o, g, out, w, b, p_bf16, rows, heads, D, eps, s);
  else ln_launch<float, float>(o, g, out, w, b, p_bf16, rows, heads, D, eps, s);
  return int(cudaGetLastError());
}

int sigmoid(const void *x, bool x_bf16, float *out, int64_t n, float scale, void *stream) {
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  const int64_t blocks = (n + 255) / 256;
  const unsigned grid = unsigned(blocks < 4096 ? blocks : 4096);
  if (x_bf16) sigmoid_kernel<<<grid, 256, 0, s>>>(static_cast<const bf16 *>(x), out, n, scale);
  else sigmoid_kernel<<<grid, 256, 0, s>>>(static_cast<const float *>(x), out, n, scale);
  return int(cudaGetLastError());
}

const char *error_text(int err) { return cudaGetErrorString(cudaError_t(err)); }

} // namespace fused
} // namespace deltac

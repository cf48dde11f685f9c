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
__device__ __forceinline__ float softplus(float x) { return x > 20.0f ? x : log1pf(expf(x)); }

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

// Conv channel c's column in y (q channels, then k, then v; with group > 0
// each row holds groups of dk q, dk k and vg v columns).
__device__ __forceinline__ int64_t conv_column(const ConvGates &a, int64_t c) {
  if (a.group <= 0) return c;
  if (c < a.kd) return (c / a.dk) * a.group + c % a.dk;
  if (c < 2 * a.kd) return ((c - a.kd) / a.dk) * a.group + a.dk + (c - a.kd) % a.dk;
  return ((c - 2 * a.kd) / a.vg) * a.group + 2 * a.dk + (c - 2 * a.kd) % a.vg;
}

// beta and g of value head h over tokens [t0, t1) of sequence b: beta =
// beta_scale sigmoid(b), g = -exp(A_log) softplus(a + dt_bias).
template <typename Ty>
__device__ void gates_run(const ConvGates &a, int64_t h, int64_t b, int64_t t0, int64_t t1) {
  const float decay = -expf(param(a.A_log, a.p_bf16, h)), dt = param(a.dt_bias, a.p_bf16, h);
  const int64_t bcol = (h / a.ba_heads) * a.ba_group + h % a.ba_heads;
  const Ty *bp = static_cast<const Ty *>(a.b) + b * a.T * a.ldba + bcol;
  const Ty *ap = static_cast<const Ty *>(a.a) + b * a.T * a.ldba + bcol;
  for (int64_t t = t0; t < t1; ++t) {
    const int64_t o = (b * a.T + t) * a.HV + h;
    a.beta[o] = a.beta_scale / (1.0f + expf(-load1(bp + t * a.ldba)));
    a.g[o] = decay * softplus(load1(ap + t * a.ldba) + dt);
  }
}

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
    const Ty *y = static_cast<const Ty *>(a.y) + b * a.T * a.ldy + conv_column(a, c); // y[t * ldy]
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
  if (c - a.C < a.HV)
    gates_run<Ty>(a, c - a.C, b, t0, t1);
}

// conv_gates_kernel for bf16 in and out, 8 channels per thread: one 16-byte
// load and store per token (the one-channel kernel moves 2 bytes per thread
// and ran at ~0.5 TB/s), four tokens' loads issued before their arithmetic.
// Same arithmetic in the same order per channel. Taken where every run of
// channels and every row are whole 16-byte vectors (conv8_ok).
constexpr int kConv8 = 8;
constexpr int kConvBatch = 4;  // tokens loaded ahead
constexpr int kConv8Width = 4; // the conv size it is compiled for

__device__ __forceinline__ void unpack8(const uint4 &u, float (&x)[kConv8]) {
  const __nv_bfloat162 *h = reinterpret_cast<const __nv_bfloat162 *>(&u);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 f = __bfloat1622float2(h[i]);
    x[2 * i] = f.x, x[2 * i + 1] = f.y;
  }
}

// KW: the conv size (a.W == KW), a constant so the 8 channels' windows and
// weights stay in registers (4, the usual size: 64 registers).
template <int KW>
__global__ void __launch_bounds__(kConvThreads) conv_gates8_kernel(ConvGates a) {
  const int64_t tid = int64_t(blockIdx.x) * kConvThreads + threadIdx.x;
  const int64_t groups = a.C / kConv8;
  if (tid >= groups) { // the gates: one value head per thread, as conv_gates_kernel
    const int64_t t0 = int64_t(blockIdx.y) * kConvTokens;
    if (tid - groups < a.HV)
      gates_run<bf16>(a, tid - groups, blockIdx.z, t0,
                      t0 + kConvTokens < a.T ? t0 + kConvTokens : a.T);
    return;
  }
  const int64_t c = tid * kConv8; // first of this thread's 8 channels
  const int64_t b = blockIdx.z, t0 = int64_t(blockIdx.y) * kConvTokens;
  const int64_t t1 = t0 + kConvTokens < a.T ? t0 + kConvTokens : a.T;
  constexpr int W = KW;
  const bf16 *y = static_cast<const bf16 *>(a.y) + b * a.T * a.ldy + conv_column(a, c);
  const bool first = blockIdx.y == 0;
  const bf16 *st_in = a.state_in ? static_cast<const bf16 *>(a.state_in) + (b * a.C + c) * W
                                 : nullptr;
  float w[kConv8][KW], win[kConv8][KW], bias[kConv8];
#pragma unroll
  for (int j = 0; j < kConv8; ++j) {
    bias[j] = a.bias ? param(a.bias, a.p_bf16, c + j) : 0.0f;
#pragma unroll
    for (int i = 0; i < KW; ++i) {
      w[j][i] = i < W ? param(a.w, a.p_bf16, (c + j) * W + i) : 0.0f;
      win[j][i] = 0.0f;
    }
  }
  // Input j of channel ch: the W cached ones, then this call's tokens.
  auto input = [&](int ch, int64_t j) {
    if (j < W)
      return first && st_in ? load1(st_in + ch * W + j) : 0.0f;
    return load1(y + (j - W) * a.ldy + ch);
  };
#pragma unroll
  for (int i = 0; i < KW; ++i)
#pragma unroll
    for (int j = 0; j < kConv8; ++j)
      if (i < W - 1) win[j][i] = input(j, t0 + 1 + i);
  bf16 *dst;
  int64_t ld;
  if (c < a.kd) dst = static_cast<bf16 *>(a.q) + c, ld = a.kd;
  else if (c < 2 * a.kd) dst = static_cast<bf16 *>(a.k) + (c - a.kd), ld = a.kd;
  else dst = static_cast<bf16 *>(a.v) + (c - 2 * a.kd), ld = a.vd;
  dst += b * a.T * ld;
  for (int64_t tb = t0; tb < t1; tb += kConvBatch) {
    uint4 in[kConvBatch];
#pragma unroll
    for (int u = 0; u < kConvBatch; ++u)
      if (tb + u < t1) in[u] = *reinterpret_cast<const uint4 *>(y + (tb + u) * a.ldy);
#pragma unroll
    for (int u = 0; u < kConvBatch; ++u) {
      if (tb + u >= t1) continue;
      float now[kConv8], res[kConv8];
      unpack8(in[u], now);
#pragma unroll
      for (int j = 0; j < kConv8; ++j) {
        float acc = 0.0f;
#pragma unroll
        for (int i = 0; i < KW; ++i) {
          if (i == W - 1) win[j][i] = now[j];
          if (i < W) acc += w[j][i] * win[j][i];
        }
        res[j] = silu(acc + bias[j]);
#pragma unroll
        for (int i = 0; i + 1 < KW; ++i) win[j][i] = win[j][i + 1];
      }
      uint4 out;
      __nv_bfloat162 *o2 = reinterpret_cast<__nv_bfloat162 *>(&out);
#pragma unroll
      for (int i = 0; i < 4; ++i) o2[i] = __floats2bfloat162_rn(res[2 * i], res[2 * i + 1]);
      *reinterpret_cast<uint4 *>(dst + (tb + u) * ld) = out;
    }
  }
  // The last W inputs; in place (state_out == state_in) index T + i > i is
  // read before it is written, and each thread owns its 8 channels' rows.
  if (first && a.state_out) {
    bf16 *st = static_cast<bf16 *>(a.state_out) + (b * a.C + c) * W;
    for (int j = 0; j < kConv8; ++j)
      for (int i = 0; i < W; ++i) store1(st + j * W + i, input(j, a.T + i));
  }
}

// Whether conv_gates8_kernel takes a: bf16 in and out, every channel run
// (q/k of dk, v of vg, within rows of group) and every row stride a whole
// number of 8-channel vectors, 16-byte aligned pointers, conv size 4.
bool conv8_ok(const ConvGates &a) {
  auto al = [](const void *p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; };
  const bool runs = a.group > 0 ? a.dk % kConv8 == 0 && a.vg % kConv8 == 0 &&
                                      a.group % kConv8 == 0
                                : true;
  return a.y_bf16 && a.out_bf16 && runs && a.C % kConv8 == 0 && a.kd % kConv8 == 0 &&
         a.vd % kConv8 == 0 && a.ldy % kConv8 == 0 && al(a.y) && al(a.q) && al(a.k) &&
         al(a.v) && a.W == kConv8Width;
}

constexpr int kNormThreads = 256; // 8 warps: one (row, head) each
constexpr int kNormPer = 8;       // values per lane: D <= 256

// In and out of a norm may be one buffer (same dtype): each warp reads its
// head into registers before it writes it.
template <typename Tin, typename Tout, typename Tz>
__global__ void __launch_bounds__(kNormThreads)
    gated_rmsnorm_kernel(const Tin *o, Tout *out, const Tz *z, int64_t ldz, int64_t z_heads,
                         int64_t z_group, const void *w, bool p_bf16, int64_t rows, int heads,
                         int D, float eps, bool sigmoid_gate) {
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
    if (d >= D) continue;
    const float zd = load1(zp + d), gate = sigmoid_gate ? 1.0f / (1.0f + expf(-zd)) : silu(zd);
    store1(dst + d, param(w, p_bf16, d) * (x[i] * rs) * gate);
  }
}

// gated_rmsnorm_kernel for bf16 o, out and z with D = 32 * PER: each lane
// reads and writes PER contiguous values in one vector access (the strided
// kernel above moves 2 bytes per lane per access).
template <int PER> struct Vec;
template <> struct Vec<2> { using T = uint32_t; };
template <> struct Vec<4> { using T = uint2; };
template <> struct Vec<8> { using T = uint4; };

template <int PER>
__global__ void __launch_bounds__(kNormThreads)
    gated_rmsnorm_vec_kernel(const bf16 *o, bf16 *out, const bf16 *z, int64_t ldz,
                             int64_t z_heads, int64_t z_group, const void *w, bool p_bf16,
                             int64_t rows, int heads, float eps) {
  using V = typename Vec<PER>::T;
  constexpr int D = 32 * PER;
  const int64_t item = (int64_t(blockIdx.x) * kNormThreads + threadIdx.x) >> 5;
  const int lane = threadIdx.x & 31;
  if (item >= rows * heads) return; // whole warps
  const int64_t r = item / heads, h = item % heads;
  const int d0 = lane * PER;
  const bf16 *zp = z + r * ldz + (h / z_heads) * z_group + (h % z_heads) * D + d0;
  V xv = *reinterpret_cast<const V *>(o + item * D + d0);
  const V zv = *reinterpret_cast<const V *>(zp);
  const bf16 *xb = reinterpret_cast<const bf16 *>(&xv), *zb = reinterpret_cast<const bf16 *>(&zv);
  float x[PER], ss = 0.0f;
#pragma unroll
  for (int i = 0; i < PER; ++i) {
    x[i] = __bfloat162float(xb[i]);
    ss += x[i] * x[i];
  }
  const float rs = 1.0f / sqrtf(warp_sum(ss) / float(D) + eps);
  V ov;
  bf16 *ob = reinterpret_cast<bf16 *>(&ov);
#pragma unroll
  for (int i = 0; i < PER; ++i)
    ob[i] = __float2bfloat16(param(w, p_bf16, d0 + i) * (x[i] * rs) *
                             silu(__bfloat162float(zb[i])));
  *reinterpret_cast<V *>(out + item * D + d0) = ov;
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

// One thread per g channel, then one per beta (grid-stride).
__global__ void kda_gates_kernel(float *g, const float *b, int64_t ldb, const float *A_log,
                                 const float *dt_bias, float *beta, int64_t rows, int64_t H,
                                 int64_t D) {
  const int64_t hd = H * D, ng = rows * hd, n = ng + rows * H;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    if (i < ng) {
      const int64_t c = i % hd;
      g[i] = -expf(A_log[c / D]) * softplus(g[i] + dt_bias[c]);
    } else {
      const int64_t j = i - ng, r = j / H;
      beta[j] = 1.0f / (1.0f + expf(-b[r * ldb + j % H]));
    }
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
                 int64_t D, float eps, bool sigmoid_gate, cudaStream_t s) {
  gated_rmsnorm_kernel<<<blocks_for(rows * heads, kNormThreads / 32), kNormThreads, 0, s>>>(
      static_cast<const Tin *>(o), static_cast<Tout *>(out), static_cast<const Tz *>(z), ldz,
      z_heads, z_group, w, p_bf16, rows, int(heads), int(D), eps, sigmoid_gate);
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
  if (conv8_ok(a)) {
    const dim3 grid8(blocks_for(a.C / kConv8 + a.HV, kConvThreads), blocks_for(a.T, kConvTokens),
                     unsigned(a.B));
    conv_gates8_kernel<kConv8Width><<<grid8, kConvThreads, 0, s>>>(a);
    return int(cudaGetLastError());
  }
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
                  bool p_bf16, int64_t rows, int64_t heads, int64_t D, float eps, void *stream,
                  bool sigmoid_gate) {
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  if (z_bf16 && !(o_bf16 && out_bf16)) return int(cudaErrorInvalidValue);
#define DELTAC_NORM(TI, TO, TZ)                                                                   \
  norm_launch<TI, TO, TZ>(o, out, z, ldz, z_heads, z_group, w, p_bf16, rows, heads, D, eps,      \
                          sigmoid_gate, s)
  const int per = int(D / 32);
  auto al = [per](const void *p) { return (reinterpret_cast<uintptr_t>(p) & (2 * per - 1)) == 0; };
  if (z_bf16 && !sigmoid_gate && D % 32 == 0 && (per == 2 || per == 4 || per == 8) &&
      ldz % per == 0 && z_group % per == 0 && al(o) && al(out) && al(z)) {
    const unsigned grid = blocks_for(rows * heads, kNormThreads / 32);
    auto go = [&](auto kern) {
      kern<<<grid, kNormThreads, 0, s>>>(static_cast<const bf16 *>(o), static_cast<bf16 *>(out),
                                         static_cast<const bf16 *>(z), ldz, z_heads, z_group, w,
                                         p_bf16, rows, int(heads), eps);
    };
    if (per == 2) go(gated_rmsnorm_vec_kernel<2>);
    else if (per == 4) go(gated_rmsnorm_vec_kernel<4>);
    else go(gated_rmsnorm_vec_kernel<8>);
  } else if (z_bf16) DELTAC_NORM(bf16, bf16, bf16);
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

int kda_gates(float *g, const float *b, int64_t ldb, const float *A_log, const float *dt_bias,
              float *beta, int64_t rows, int64_t H, int64_t D, void *stream) {
  const int64_t blocks = (rows * H * (D + 1) + 255) / 256;
  kda_gates_kernel<<<unsigned(blocks < 8192 ? blocks : 8192), 256, 0,
                     static_cast<cudaStream_t>(stream)>>>(g, b, ldb, A_log, dt_bias, beta, rows,
                                                          H, D);
  return int(cudaGetLastError());
}

const char *error_text(int err) { return cudaGetErrorString(cudaError_t(err)); }

} // namespace fused
} // namespace deltac

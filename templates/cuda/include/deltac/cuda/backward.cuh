// The CUDA backward of the delta rule (contract: deltac/backward.h):
//
//   deltac::cuda::bwd::workspace<Var, K>(p, &bytes)
//   deltac::cuda::bwd::backward<Var, K>(p, stream, workspace, workspace_bytes)
//
// p holds device pointers (cu_seqlens too; its contents are trusted) and
// passed the runtime's checks; in_dtype F32, BF16 or F16 (dout: out_dtype),
// g, beta, states and dg, dbeta, dh0 f32. K = 64, 128 or 256; any V (tiles
// of kBV columns, the rest masked). Everything is enqueued on `stream`: no
// host synchronisation, no allocation when a workspace is given (else one
// from the stream-ordered allocator, as the forward's chunked family).
//
// Kernels: (qk_l2norm) 1 / |x| per token and q/k head; the sweep
// (backward_kernel.cuh) into f32 accumulators of dq^, dk^ (summed over the
// value heads of a q/k head) and into dbeta, dg (zeroed first); a last
// kernel applies the L2 norm's backward, dx = r (dx^ - x^ (x^ . dx^)), and
// writes dq, dk in in_dtype.
#ifndef DELTAC_CUDA_BACKWARD_CUH
#define DELTAC_CUDA_BACKWARD_CUH

#include "deltac/backward_rules.h"
#include "deltac/cuda/backward_kernel.cuh"

#include <cuda_runtime.h>

#include <cmath>

namespace deltac::cuda::bwd {

// Eight consecutive elements of dtype dt from element i of p; vec: one
// 16-byte load (16-bit) or two (f32), p + i then 16-byte aligned.
__device__ __forceinline__ void ld8(const void* p, int dt, int64_t i, bool vec, float x[8]) {
  if (vec && dt != DELTAC_F32) {
    const uint4 u = *reinterpret_cast<const uint4*>(static_cast<const uint16_t*>(p) + i);
    const uint32_t w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const unsigned short lo = w[e] & 0xffffu, hi = w[e] >> 16;
      x[2 * e] = dt == DELTAC_BF16 ? __uint_as_float(uint32_t(lo) << 16) : __half2float(__ushort_as_half(lo));
      x[2 * e + 1] = dt == DELTAC_BF16 ? __uint_as_float(uint32_t(hi) << 16) : __half2float(__ushort_as_half(hi));
    }
  } else if (vec) {
    const float4 u = *reinterpret_cast<const float4*>(static_cast<const float*>(p) + i);
    const float4 v = *reinterpret_cast<const float4*>(static_cast<const float*>(p) + i + 4);
    x[0] = u.x, x[1] = u.y, x[2] = u.z, x[3] = u.w, x[4] = v.x, x[5] = v.y, x[6] = v.z, x[7] = v.w;
  } else {
#pragma unroll
    for (int e = 0; e < 8; ++e) x[e] = ld(p, dt, i + e);
  }
}

// The L2 norm's 1/|x| from s = sum x^2 (deltac/params.h: x / sqrt(s + 1e-6)).
__device__ __forceinline__ float inv_norm(float s) { return 1.0f / sqrtf(s + 1e-6f); }

// 1 / sqrt(sum x^2 + 1e-6) of each [K] row of q and k: K / 8 lanes a row,
// eight elements a lane (vec: q and k 16-byte aligned), 256 / K rows a warp.
template <int K>
__global__ void rnorm_kernel(const __grid_constant__ Args a, float* rq, float* rk, int64_t rows,
                             bool vec) {
  constexpr int L = K / 8, RW = 32 / L;
  static_assert(K % 8 == 0 && L <= 32 && (L & (L - 1)) == 0, "K / 8 lanes a row");
  const int lane = threadIdx.x % 32, li = lane % L;
  const int64_t row = (int64_t(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32) * RW + lane / L;
  float sq = 0.0f, sk = 0.0f;
  if (row < rows) {
    float x[8], y[8];
    ld8(a.p.q, a.p.in_dtype, row * K + li * 8, vec, x);
    ld8(a.p.k, a.p.in_dtype, row * K + li * 8, vec, y);
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      sq += x[e] * x[e];
      sk += y[e] * y[e];
    }
  }
#pragma unroll
  for (int m = L / 2; m > 0; m /= 2) {
    sq += __shfl_xor_sync(0xffffffffu, sq, m);
    sk += __shfl_xor_sync(0xffffffffu, sk, m);
  }
  if (row < rows && li == 0) {
    rq[row] = inv_norm(sq);
    rk[row] = inv_norm(sk);
  }
}

// Enqueues rnorm_kernel over the rows of q and k.
template <int K>
void rnorm(const Args& a, float* rq, float* rk, int64_t rows, cudaStream_t s) {
  constexpr int kWarps = 8, kRows = kWarps * (256 / K);  // rows a block
  const bool vec = (reinterpret_cast<uintptr_t>(a.p.q) | reinterpret_cast<uintptr_t>(a.p.k)) % 16 == 0;
  rnorm_kernel<K><<<unsigned((rows + kRows - 1) / kRows), kWarps * 32, 0, s>>>(a, rq, rk, rows, vec);
}

// dq, dk from the accumulators (one warp per token and q/k head).
template <int K>
__global__ void finish_kernel(const __grid_constant__ Args a, int64_t rows) {
  const int64_t row = int64_t(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= rows) return;
  const deltac_bwd_params& p = a.p;
  for (int which = 0; which < 2; ++which) {
    const float* acc = (which ? a.dka : a.dqa) + row * K;
    const void* x = which ? p.k : p.q;
    void* out = which ? p.dk : p.dq;
    float g[K / 32];
#pragma unroll
    for (int e = 0; e < K / 32; ++e) g[e] = acc[e * 32 + lane];
    if (a.rq) {
      const float r = (which ? a.rk : a.rq)[row];
      float xh[K / 32], dot = 0.0f;
#pragma unroll
      for (int e = 0; e < K / 32; ++e) {
        xh[e] = ld(x, p.in_dtype, row * K + e * 32 + lane) * r;
        dot += xh[e] * g[e];
      }
#pragma unroll
      for (int m = 16; m > 0; m /= 2) dot += __shfl_xor_sync(0xffffffffu, dot, m);
#pragma unroll
      for (int e = 0; e < K / 32; ++e) g[e] = r * (g[e] - xh[e] * dot);
    }
#pragma unroll
    for (int e = 0; e < K / 32; ++e) st(out, p.in_dtype, row * K + e * 32 + lane, g[e]);
  }
}

// Where the workspace's parts lie (bytes from its start) and the grid.
struct Layout {
  size_t ckpt = 0, sub = 0, dqa = 0, dka = 0, rq = 0, rk = 0, total = 0;
  int grid = 0;
};

inline size_t align256(size_t x) { return size_t(bwd_align256(x)); }

template <deltac_variant Var, int K>
cudaError_t layout(const deltac_bwd_params& p, Layout* out) {
  using L = Smem<Var, K>;
  auto kern = sweep_kernel<Var, K>;
  cudaError_t e = cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       int(L::bytes));
  if (e != cudaSuccess) return e;
  int dev = 0, sms = 0, per_sm = 0;
  if ((e = cudaGetDevice(&dev)) != cudaSuccess) return e;
  if ((e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev)) != cudaSuccess)
    return e;
  e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kern, kThreads, L::bytes);
  if (e != cudaSuccess) return e;
  const int N = p.cu_seqlens ? p.N : p.B;
  const int nvt = (p.V + kBV - 1) / kBV;
  const int64_t tasks = int64_t(N) * p.HV * nvt;
  const int64_t tokens = int64_t(p.B) * p.T;
  const int64_t resident = int64_t(sms) * (per_sm > 0 ? per_sm : 1);
  out->grid = int(tasks < resident ? tasks : resident);
  const size_t tile = size_t(K) / 4 * kThreads * sizeof(float);  // one saved tile
  const size_t slots = size_t(tokens / kChunk) + size_t(N) + 1;
  size_t o = 0;
  out->ckpt = o;
  o += align256(slots * p.HV * nvt * tile);
  out->sub = o;
  o += align256(size_t(out->grid > 0 ? out->grid : 1) * (kChunk / sub_len<K>()) * tile);
  out->dqa = o;
  o += align256(size_t(tokens) * p.H * K * sizeof(float));
  out->dka = o;
  o += align256(size_t(tokens) * p.H * K * sizeof(float));
  if (p.qk_l2norm) {
    out->rq = o;
    o += align256(size_t(tokens) * p.H * sizeof(float));
    out->rk = o;
    o += align256(size_t(tokens) * p.H * sizeof(float));
  }
  out->total = o;
  return cudaSuccess;
}

template <deltac_variant Var, int K>
cudaError_t workspace(const deltac_bwd_params& p, size_t* bytes) {
  Layout l;
  const cudaError_t e = layout<Var, K>(p, &l);
  *bytes = e == cudaSuccess ? l.total : 0;
  return e;
}

namespace detail {

template <deltac_variant Var, int K>
cudaError_t run(const deltac_bwd_params& p, const Layout& l, char* ws, cudaStream_t s) {
  Args a{};
  a.p = p;
  a.scale = p.scale != 0.0f ? p.scale : float(1.0 / std::sqrt(double(K)));
  a.nvt = (p.V + kBV - 1) / kBV;
  const int N = p.cu_seqlens ? p.N : p.B;
  a.tasks = int64_t(N) * p.HV * a.nvt;
  a.ckpt = reinterpret_cast<float*>(ws + l.ckpt);
  a.sub = reinterpret_cast<float*>(ws + l.sub);
  a.dqa = reinterpret_cast<float*>(ws + l.dqa);
  a.dka = reinterpret_cast<float*>(ws + l.dka);
  const int64_t tokens = int64_t(p.B) * p.T, rows = tokens * p.H;
  const size_t acc = size_t(rows) * K * sizeof(float);
  cudaError_t e;
  if ((e = cudaMemsetAsync(a.dqa, 0, acc, s)) != cudaSuccess) return e;
  if ((e = cudaMemsetAsync(a.dka, 0, acc, s)) != cudaSuccess) return e;
  if ((e = cudaMemsetAsync(p.dbeta, 0, size_t(tokens) * p.HV * sizeof(float), s)) != cudaSuccess)
    return e;
  if (Var != DELTAC_VARIANT_DELTA) {
    const size_t dg = size_t(tokens) * p.HV * (Var == DELTAC_VARIANT_KDA ? K : 1) * sizeof(float);
    if ((e = cudaMemsetAsync(p.dg, 0, dg, s)) != cudaSuccess) return e;
  }
  constexpr int kRowsPerBlock = 8;  // warps of the per-row kernels
  const unsigned row_blocks = unsigned((rows + kRowsPerBlock - 1) / kRowsPerBlock);
  if (p.qk_l2norm && rows > 0) {
    float* rq = reinterpret_cast<float*>(ws + l.rq);
    float* rk = reinterpret_cast<float*>(ws + l.rk);
    rnorm<K>(a, rq, rk, rows, s);
    a.rq = rq;
    a.rk = rk;
  }
  if (l.grid > 0)
    sweep_kernel<Var, K><<<l.grid, kThreads, Smem<Var, K>::bytes, s>>>(a);
  if (rows > 0) finish_kernel<K><<<row_blocks, kRowsPerBlock * 32, 0, s>>>(a, rows);
  return cudaGetLastError();
}

}  // namespace detail

template <deltac_variant Var, int K>
cudaError_t backward(const deltac_bwd_params& p, cudaStream_t stream, void* ws = nullptr,
                     size_t ws_bytes = 0) {
  static_assert(K == 64 || K == 128 || K == 256, "K: 64, 128 or 256");
  Layout l;
  cudaError_t e = layout<Var, K>(p, &l);
  if (e != cudaSuccess) return e;
  if (ws) {
    if (ws_bytes < l.total || reinterpret_cast<uintptr_t>(ws) % 256) return cudaErrorInvalidValue;
    return detail::run<Var, K>(p, l, static_cast<char*>(ws), stream);
  }
  void* own = nullptr;
  if ((e = cudaMallocAsync(&own, l.total ? l.total : 256, stream)) != cudaSuccess) return e;
  e = detail::run<Var, K>(p, l, static_cast<char*>(own), stream);
  const cudaError_t f = cudaFreeAsync(own, stream);
  return e != cudaSuccess ? e : f;
}

}  // namespace deltac::cuda::bwd

#endif  // DELTAC_CUDA_BACKWARD_CUH

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

#include "deltac/cuda/backward_kernel.cuh"

#include <cuda_runtime.h>

#include <cmath>

namespace deltac::cuda::bwd {

// 1 / sqrt(sum x^2 + 1e-6) of each [K] row of q and k (one warp per row).
template <int K>
__global__ void rnorm_kernel(const __grid_constant__ Args a, float* rq, float* rk, int64_t rows) {
  const int64_t row = int64_t(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= rows) return;
  float sq = 0.0f, sk = 0.0f;
#pragma unroll
  for (int e = 0; e < K / 32; ++e) {
    const float x = ld(a.p.q, a.p.in_dtype, row * K + e * 32 + lane);
    const float y = ld(a.p.k, a.p.in_dtype, row * K + e * 32 + lane);
    sq += x * x;
    sk += y * y;
  }
#pragma unroll
  for (int m = 16; m > 0; m /= 2) {
    sq += __shfl_xor_sync(0xffffffffu, sq, m);
    sk += __shfl_xor_sync(0xffffffffu, sk, m);
  }
  if (lane == 0) {
    rq[row] = 1.0f / sqrtf(sq + 1e-6f);
    rk[row] = 1.0f / sqrtf(sk + 1e-6f);
  }
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

inline size_t align256(size_t x) { return (x + 255) / 256 * 256; }

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
    rnorm_kernel<K><<<row_blocks, kRowsPerBlock * 32, 0, s>>>(a, rq, rk, rows);
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

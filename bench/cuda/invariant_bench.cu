// Cost of the batch-invariant mode (deltac_options.deterministic) through
// the runtime: each row times one deltac_forward call (device pointers,
// cu_seqlens on the device or a plain B x T call, caller workspace) with
// the option off and on,
// both as CUDA-graph replay (20 replays per timing, 5 warm-up, median of 15
// timings, CUDA events). GDN, bf16 in/out, f32 state in place, q/k L2 norm.
//   deltac_cuda_invariant_bench
#include "bench_fill.cuh"
#include "bench_graph.cuh"
#include "deltac/runtime.h"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace {

using deltac::bench::fill;
using deltac::bench::fillF;

void check(cudaError_t e, const char *what) { deltac::bench::check(e, "invariant_bench", what); }

struct Row {
  const char *name;
  int H, HV, mode;
  std::vector<int> lens;  // one varlen call
  bool plain = false;     // equal lengths as a B x T call (no cu_seqlens)
};

std::vector<int> rep(int n, int len) { return std::vector<int>(size_t(n), len); }

// Median ms of one call (graph replay); the run info of the call.
double timeCall(const Row &r, bool det, deltac_run_info *info) {
  const int K = 128, V = 128, N = int(r.lens.size());
  std::vector<long long> cu{0};
  for (int l : r.lens)
    cu.push_back(cu.back() + l);
  const int T = int(cu.back());
  const size_t qn = size_t(T) * r.H * K, vn = size_t(T) * r.HV * V, bn = size_t(T) * r.HV,
               sn = size_t(N) * r.HV * K * V;
  __nv_bfloat16 *q, *k, *v, *o;
  float *g, *beta, *h;
  long long *dcu;
  check(cudaMalloc(&q, qn * 2), "malloc");
  check(cudaMalloc(&k, qn * 2), "malloc");
  check(cudaMalloc(&v, vn * 2), "malloc");
  check(cudaMalloc(&o, vn * 2), "malloc");
  check(cudaMalloc(&g, bn * 4), "malloc");
  check(cudaMalloc(&beta, bn * 4), "malloc");
  check(cudaMalloc(&h, sn * 4), "malloc");
  check(cudaMalloc(&dcu, cu.size() * 8), "malloc");
  check(cudaMemcpy(dcu, cu.data(), cu.size() * 8, cudaMemcpyHostToDevice), "copy");
  fill<<<256, 256>>>(q, qn, 1);
  fill<<<256, 256>>>(k, qn, 2);
  fill<<<256, 256>>>(v, vn, 3);
  fillF<<<256, 256>>>(g, bn, -0.1f, 0.f);
  fillF<<<256, 256>>>(beta, bn, 0.f, 1.f);
  fillF<<<256, 256>>>(h, sn, -0.01f, 0.01f);
  deltac_fwd_params p{};
  p.variant = DELTAC_VARIANT_GATED;
  p.B = 1, p.T = T, p.H = r.H, p.HV = r.HV, p.K = K, p.V = V, p.N = N;
  p.in_dtype = p.out_dtype = DELTAC_BF16;
  p.state_dtype = DELTAC_F32;
  p.q = q, p.k = k, p.v = v, p.g = g, p.beta = beta, p.h0 = h, p.ht = h, p.o = o;
  p.cu_seqlens = reinterpret_cast<const int64_t *>(dcu);
  if (r.plain)
    p.B = N, p.T = r.lens[0], p.cu_seqlens = nullptr;
  p.qk_l2norm = 1;
  cudaStream_t s;
  check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "stream");
  deltac_options opt = deltac_default_options();
  opt.device = DELTAC_DEVICE_CUDA;
  opt.device_pointers = 1;
  opt.mode = r.mode;
  opt.deterministic = det ? 1 : 0;
  opt.cuda_stream = s;
  const float med = deltac::bench::time_runtime_call(p, opt, s, "invariant_bench", info);
  for (void *x : {(void *)q, (void *)k, (void *)v, (void *)o, (void *)g, (void *)beta,
                  (void *)h, (void *)dcu})
    cudaFree(x);
  cudaStreamDestroy(s);
  return med;
}

}  // namespace

int main() {
  check(cudaFree(nullptr), "context");
  const int A = DELTAC_MODE_AUTO, R = DELTAC_MODE_RECURRENT;
  std::vector<int> mixed = rep(4, 2048);
  for (int i = 0; i < 60; ++i)
    mixed.push_back(1);
  std::vector<int> mixed2 = rep(8, 1000);
  for (int i = 0; i < 56; ++i)
    mixed2.insert(mixed2.begin() + (i * 7) % int(mixed2.size()), 1 + i % 4);
  const Row rows[] = {
      {"16/32 heads 1x32768 (auto)", 16, 32, A, rep(1, 32768)},
      {"16/32 heads 4x8192 (auto)", 16, 32, A, rep(4, 8192)},
      {"2/8 heads 1x32768 (auto)", 2, 8, A, rep(1, 32768)},
      {"2/8 heads 8x1024 (auto)", 2, 8, A, rep(8, 1024)},
      {"16/32 heads 4x2048 + 60x1 (auto)", 16, 32, A, mixed},
      {"16/32 heads 64x1 varlen (auto)", 16, 32, A, rep(64, 1)},
      {"16/32 heads 8x1000 + 56x(1..4) (auto)", 16, 32, A, mixed2},
      {"16/32 heads decode B=1 T=1 (auto)", 16, 32, A, rep(1, 1), true},
      {"16/32 heads decode B=64 T=1 (auto)", 16, 32, A, rep(64, 1), true},
      {"16/32 heads decode B=1 T=1 (recurrent)", 16, 32, R, rep(1, 1), true},
      {"16/32 heads decode B=64 T=1 (recurrent)", 16, 32, R, rep(64, 1), true},
      {"16/32 heads verify B=64 T=4 (auto)", 16, 32, A, rep(64, 4), true},
  };
  std::printf("%-40s %12s %12s %8s  %s\n", "GDN K=V=128 bf16", "off ms", "on ms",
              "on/off", "family off -> on");
  for (const Row &r : rows) {
    deltac_run_info i0{}, i1{};
    const double off = timeCall(r, false, &i0), on = timeCall(r, true, &i1);
    auto mixed = [](const deltac_run_info &i) {
      return i.note && std::strstr(i.note, "mixed batch") ? " + cuda_recurrent (mixed)" : "";
    };
    std::printf("%-40s %12.4f %12.4f %8.2f  %s tile_v=%d%s -> %s tile_v=%d%s\n", r.name, off,
                on, on / off, i0.family, i0.tile_v, mixed(i0), i1.family, i1.tile_v, mixed(i1));
  }
  return 0;
}

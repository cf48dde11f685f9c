// Cost of running a (K, V) with no precompiled instance padded to one that
// exists (runtime/src/cuda_pad.cu): each row times one deltac_forward call of
// the padded shape and one of the instance's own shape (device pointers,
// caller workspace, CUDA-graph replay: 20 replays per timing, 5 warm-up,
// median of 15 timings, CUDA events). GDN (gated), bf16 in/out, f32 state in
// place, q/k L2 norm, 16/32 heads. Decode rows also time the recurrent
// kernel compiled at run time for the exact dims (NVRTC, runtime/src/
// cuda_jit.cu; padded = DELTAC_JIT=0) and the first call's wall time
// (the compile, or the disk cache's read when a run before wrote it).
//   deltac_cuda_pad_bench
#include "bench_fill.cuh"
#include "bench_graph.cuh"
#include "deltac/runtime.h"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

using deltac::bench::fill;
using deltac::bench::fillF;

void check(cudaError_t e, const char *what) { deltac::bench::check(e, "pad_bench", what); }

// Median ms of one call of B sequences of T tokens (graph replay); *first:
// the wall ms of the first call (null: not measured).
double timeCall(int K, int V, int B, int T, deltac_run_info *info, double *first = nullptr) {
  const int H = 16, HV = 32;
  const size_t tok = size_t(B) * T, qn = tok * H * K, vn = tok * HV * V, bn = tok * HV,
               sn = size_t(B) * HV * K * V;
  __nv_bfloat16 *q, *k, *v, *o;
  float *g, *beta, *h;
  check(cudaMalloc(&q, qn * 2), "malloc");
  check(cudaMalloc(&k, qn * 2), "malloc");
  check(cudaMalloc(&v, vn * 2), "malloc");
  check(cudaMalloc(&o, vn * 2), "malloc");
  check(cudaMalloc(&g, bn * 4), "malloc");
  check(cudaMalloc(&beta, bn * 4), "malloc");
  check(cudaMalloc(&h, sn * 4), "malloc");
  fill<<<256, 256>>>(q, qn, 1);
  fill<<<256, 256>>>(k, qn, 2);
  fill<<<256, 256>>>(v, vn, 3);
  fillF<<<256, 256>>>(g, bn, -0.1f, 0.f);
  fillF<<<256, 256>>>(beta, bn, 0.f, 1.f);
  fillF<<<256, 256>>>(h, sn, -0.01f, 0.01f);
  deltac_fwd_params p{};
  p.variant = DELTAC_VARIANT_GATED;
  p.B = B, p.T = T, p.H = H, p.HV = HV, p.K = K, p.V = V, p.N = B;
  p.in_dtype = p.out_dtype = DELTAC_BF16;
  p.state_dtype = DELTAC_F32;
  p.q = q, p.k = k, p.v = v, p.g = g, p.beta = beta, p.h0 = h, p.ht = h, p.o = o;
  p.qk_l2norm = 1;
  cudaStream_t s;
  check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "stream");
  deltac_options opt = deltac_default_options();
  opt.device = DELTAC_DEVICE_CUDA;
  opt.device_pointers = 1;
  opt.cuda_stream = s;
  if (first) {
    check(cudaStreamSynchronize(s), "sync");
    const auto t0 = std::chrono::steady_clock::now();
    if (deltac_forward(&p, &opt) != 0) {
      std::fprintf(stderr, "pad_bench: %s\n", deltac_last_error());
      std::exit(1);
    }
    check(cudaStreamSynchronize(s), "sync");
    *first = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                 .count();
  }
  const float med = deltac::bench::time_runtime_call(p, opt, s, "pad_bench", info);
  for (void *x : {(void *)q, (void *)k, (void *)v, (void *)o, (void *)g, (void *)beta,
                  (void *)h})
    cudaFree(x);
  cudaStreamDestroy(s);
  return med;
}

}  // namespace

int main() {
  check(cudaFree(nullptr), "context");
  struct Row {
    const char *name;
    int K, V, Kp, Vp, B, T;
  } rows[] = {
      {"prefill 1x8192", 96, 96, 128, 128, 1, 8192},
      {"prefill 1x8192", 112, 128, 128, 128, 1, 8192},
      {"prefill 1x8192", 80, 160, 128, 256, 1, 8192},
      {"prefill 1x8192", 32, 32, 64, 64, 1, 8192},
      {"decode B=64 T=1", 96, 96, 128, 128, 64, 1},
      {"decode B=64 T=1", 112, 128, 128, 128, 64, 1},
      {"decode B=256 T=1", 96, 96, 128, 128, 256, 1},
      {"decode B=64 T=1", 64, 80, 64, 128, 64, 1},
      {"decode B=1 T=1", 96, 96, 128, 128, 1, 1},
      {"verify B=64 T=4", 96, 96, 128, 128, 64, 4},
  };
  std::printf("%-18s %9s %10s %10s %9s %10s %7s %7s %9s  %s\n", "GDN bf16 16/32 heads",
              "K/V", "padded ms", "jit ms", "Kp/Vp", "native ms", "pad/nat", "jit/nat",
              "first ms", "family");
  for (const Row &r : rows) {
    deltac_run_info i0{}, i1{}, i2{};
    setenv("DELTAC_JIT", "0", 1);
    const double pad = timeCall(r.K, r.V, r.B, r.T, &i0);
    const std::string note = i0.note ? i0.note : ""; // valid until the next call
    unsetenv("DELTAC_JIT");
    const bool decode = r.T <= 16;
    double first = 0, jit = 0;
    std::string jnote;
    if (decode) {
      jit = timeCall(r.K, r.V, r.B, r.T, &i2, &first);
      jnote = i2.note ? i2.note : "";
    }
    const double own = timeCall(r.Kp, r.Vp, r.B, r.T, &i1);
    std::printf("%-18s %4d/%-4d %10.4f %10.4f %4d/%-4d %10.4f %7.2f %7.2f %9.1f  %s (%s)%s%s\n",
                r.name, r.K, r.V, pad, jit, r.Kp, r.Vp, own, pad / own, jit / own, first,
                i0.family, note.c_str(), decode ? "; jit: " : "", jnote.c_str());
  }
  return 0;
}

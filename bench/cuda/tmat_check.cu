// The transposed TMA scan (chunked_scan_tmat.cuh) beside the TMA scan and the
// rule's scan, on the same workspace: correctness against the float64
// reference (small shapes, fresh seed, DELTAC_TEST_SEED replays) and against
// the TMA scan (large shapes), then the scans' times (CUDA events, median).
// GDN, K = V = 128, bf16 inputs, f32 state, h0 in / ht out, q / k L2 norm.
//   deltac_tmat_check [--quick]   (CMake target deltac_tmat_check)
#include "deltac/cuda/chunked.cuh"
#include "deltac/cuda/chunked_scan_tmat.cuh"
#include "deltac/reference.h"
#include "deltac/test_seed.h"

#include "bench_fill.cuh"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace {

using bf16 = __nv_bfloat16;
namespace dc = deltac::cuda;
namespace dd = deltac::cuda::detail;
constexpr deltac_variant kVar = DELTAC_VARIANT_GATED;
constexpr int K = 128, V = 128;
using Cfg = dc::DefaultChunkedConfig<kVar, K, V, bf16>;

void ck(cudaError_t e, const char* what) { deltac::bench::check(e, "tmat_check", what); }

template <int NWG, bool PP = (NWG > 1)>
using Tt = dd::TmatScanTraits<kVar, K, V, bf16, NWG, 2, PP>;

// The transposed scan on a workspace the intra-chunk kernel filled.
template <int NWG, bool PP = (NWG > 1)>
cudaError_t tmat_scan(const deltac_fwd_params& p, void* ws_base, cudaStream_t st) {
  const dd::ChunkedKernels& k = dd::chunked_kernels<kVar, K, V, bf16, Cfg>();
  dd::ChunkedWs<bf16> ws;
  dd::chunked_carve<bf16>(k, p, ws_base, &ws, 1);
  dd::TmaScanMaps maps;
  cudaError_t e = dd::chunked_tma_maps<bf16>(k, p, ws, &maps, 64, true);
  if (e != cudaSuccess)
    return e;
  auto fn = &dd::chunked_scan_tmat_kernel<kVar, Tt<NWG, PP>>;
  static bool attr = false;
  if (!attr) {
    if ((e = cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                  int(Tt<NWG, PP>::kSmem))) != cudaSuccess)
      return e;
    attr = true;
  }
  using T = Tt<NWG, PP>;
  fn<<<dim3(V / T::BV, p.HV, p.N), T::kThreads, T::kSmem, st>>>(p, ws, maps);
  return cudaGetLastError();
}

struct Bufs {
  void *q = nullptr, *k = nullptr, *v = nullptr, *o = nullptr, *ws = nullptr;
  float *g = nullptr, *beta = nullptr, *h0 = nullptr, *ht = nullptr;
  int64_t* cu = nullptr;
  size_t ws_bytes = 0;
  ~Bufs() {
    for (void* x : {q, k, v, o, ws, (void*)g, (void*)beta, (void*)h0, (void*)ht, (void*)cu})
      cudaFree(x);
  }
};

deltac_fwd_params make(int B, int T, int H, int HV, int N) {
  deltac_fwd_params p{};
  p.variant = kVar;
  p.B = B, p.T = T, p.H = H, p.HV = HV, p.K = K, p.V = V, p.N = N;
  p.in_dtype = p.out_dtype = DELTAC_BF16;
  p.state_dtype = DELTAC_F32;
  p.qk_l2norm = 1;
  return p;
}

void alloc(deltac_fwd_params& p, Bufs& b) {
  const size_t tok = size_t(p.B) * p.T;
  ck(cudaMalloc(&b.q, tok * p.H * K * 2), "q");
  ck(cudaMalloc(&b.k, tok * p.H * K * 2), "k");
  ck(cudaMalloc(&b.v, tok * p.HV * V * 2), "v");
  ck(cudaMalloc(&b.o, tok * p.HV * V * 2), "o");
  ck(cudaMalloc(&b.g, tok * p.HV * 4), "g");
  ck(cudaMalloc(&b.beta, tok * p.HV * 4), "beta");
  ck(cudaMalloc(&b.h0, size_t(p.N) * p.HV * K * V * 4), "h0");
  ck(cudaMalloc(&b.ht, size_t(p.N) * p.HV * K * V * 4), "ht");
  p.q = b.q, p.k = b.k, p.v = b.v, p.o = b.o, p.g = b.g, p.beta = b.beta;
  p.h0 = b.h0, p.ht = b.ht;
}

void workspace(const deltac_fwd_params& p, Bufs& b) {
  b.ws_bytes = dc::chunked_workspace_bytes<kVar, K, V, bf16, Cfg>(p, 1);
  ck(cudaMalloc(&b.ws, b.ws_bytes), "workspace");
}

// Runs `which` (0 the rule's scan, 3 the TMA scan, 10 + NWG the transposed
// scan) after the intra-chunk kernel (stages 1) or alone on the workspace
// (scan_only).
cudaError_t run(int which, const deltac_fwd_params& p, Bufs& b, cudaStream_t st,
                bool scan_only) {
  cudaError_t e = cudaSuccess;
  if (which < 10)
    return dd::chunked_stages<kVar, K, V, bf16, Cfg>(p, b.ws, b.ws_bytes, st, scan_only ? 2 : 3,
                                                     nullptr, 0, 1, 0, 0, which);
  if (!scan_only &&
      (e = dd::chunked_stages<kVar, K, V, bf16, Cfg>(p, b.ws, b.ws_bytes, st, 1, nullptr, 0, 1,
                                                     0, 0, 3)) != cudaSuccess)
    return e;
  return which == 11   ? tmat_scan<1>(p, b.ws, st)
         : which == 12 ? tmat_scan<2>(p, b.ws, st)
                       : tmat_scan<2, false>(p, b.ws, st);
}

// 0 the rule's scan, 3 the TMA scan, 11 / 12 the transposed one with one /
// two warpgroups, 13 two without turns.
const char* name_of(int which) {
  return which == 0    ? "rule"
         : which == 3  ? "tma"
         : which == 11 ? "tmat1"
         : which == 12 ? "tmat2"
                       : "tmat2-noturns";
}

double rel(const std::vector<float>& x, const std::vector<double>& r) {
  return deltac::ref::rel_rms(x.data(), r);
}
double rel16(const std::vector<uint16_t>& x, const std::vector<double>& r) {
  return deltac::ref::rel_rms(x.data(), r);
}

int failures = 0;

// o and ht of the last run against the references: the errors printed, a
// failure counted above 5e-3.
void report(const Bufs& b, size_t on, size_t hn, const std::vector<double>& oref,
            const std::vector<double>& htref, const std::string& label) {
  std::vector<uint16_t> o(on);
  std::vector<float> ht(hn);
  ck(cudaMemcpy(o.data(), b.o, on * 2, cudaMemcpyDeviceToHost), "o");
  ck(cudaMemcpy(ht.data(), b.ht, hn * 4, cudaMemcpyDeviceToHost), "ht");
  const double eo = rel16(o, oref), eh = rel(ht, htref);
  const bool ok = eo <= 5e-3 && eh <= 5e-3;
  failures += !ok;
  std::printf(" %s o %.2e ht %.2e%s", label.c_str(), eo, eh, ok ? "" : " FAIL");
}

// A small problem: random host inputs, the float64 reference, each scan.
void small_case(const char* name, int H, int HV, std::vector<int64_t> lens, bool varlen,
                float gmin, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(-1.f, 1.f), ub(0.02f, 0.98f), ug(gmin, 0.f);
  int64_t total = 0;
  for (auto l : lens) total += l;
  const int N = int(lens.size());
  const int B = varlen ? 1 : N, T = varlen ? int(total) : int(lens[0]);
  deltac_fwd_params p = make(B, T, H, HV, N);
  Bufs b;
  alloc(p, b);
  std::vector<int64_t> cu(N + 1, 0);
  for (int n = 0; n < N; ++n) cu[n + 1] = cu[n] + lens[n];
  if (varlen) {
    ck(cudaMalloc(&b.cu, cu.size() * 8), "cu");
    ck(cudaMemcpy(b.cu, cu.data(), cu.size() * 8, cudaMemcpyHostToDevice), "cu");
    p.cu_seqlens = b.cu;
  }
  const size_t tok = size_t(total);
  auto rnd16 = [&](size_t n) {
    std::vector<uint16_t> x(n);
    for (auto& e : x) e = deltac::ref::float_to_bf16(u(rng));
    return x;
  };
  std::vector<uint16_t> q = rnd16(tok * H * K), k = rnd16(tok * H * K), v = rnd16(tok * HV * V);
  std::vector<float> g(tok * HV), beta(tok * HV), h0(size_t(N) * HV * K * V);
  for (auto& e : g) e = ug(rng);
  for (auto& e : beta) e = ub(rng);
  for (auto& e : h0) e = 0.3f * u(rng);
  ck(cudaMemcpy(b.q, q.data(), q.size() * 2, cudaMemcpyHostToDevice), "q");
  ck(cudaMemcpy(b.k, k.data(), k.size() * 2, cudaMemcpyHostToDevice), "k");
  ck(cudaMemcpy(b.v, v.data(), v.size() * 2, cudaMemcpyHostToDevice), "v");
  ck(cudaMemcpy(b.g, g.data(), g.size() * 4, cudaMemcpyHostToDevice), "g");
  ck(cudaMemcpy(b.beta, beta.data(), beta.size() * 4, cudaMemcpyHostToDevice), "beta");
  ck(cudaMemcpy(b.h0, h0.data(), h0.size() * 4, cudaMemcpyHostToDevice), "h0");
  deltac_fwd_params ph = p;
  ph.q = q.data(), ph.k = k.data(), ph.v = v.data(), ph.g = g.data(), ph.beta = beta.data();
  ph.h0 = h0.data(), ph.cu_seqlens = varlen ? cu.data() : nullptr;
  std::vector<double> oref, htref;
  deltac::ref::forward(ph, &oref, &htref);
  workspace(p, b);
  std::printf("%-28s", name);
  for (int which : {3, 11, 12, 13}) {
    ck(cudaMemset(b.o, 0xff, tok * HV * V * 2), "poison o");
    ck(cudaMemset(b.ht, 0xff, size_t(N) * HV * K * V * 4), "poison ht");
    ck(run(which, p, b, nullptr, false), "run");
    ck(cudaDeviceSynchronize(), "sync");
    report(b, tok * HV * V, size_t(N) * HV * K * V, oref, htref, std::string(" ") + name_of(which));
  }
  std::printf("\n");
}

float median(std::vector<float> x) {
  std::sort(x.begin(), x.end());
  return x[x.size() / 2];
}

// A large problem: device inputs; the transposed scan against the TMA scan,
// then each scan's time alone on the workspace and with the intra-chunk kernel.
void large_case(int B, int T, int H, int HV, int reps) {
  deltac_fwd_params p = make(B, T, H, HV, B);
  Bufs b;
  alloc(p, b);
  const size_t tok = size_t(B) * T;
  using deltac::bench::fill;
  using deltac::bench::fillF;
  fill<<<1024, 256>>>(static_cast<bf16*>(b.q), tok * H * K, 1);
  fill<<<1024, 256>>>(static_cast<bf16*>(b.k), tok * H * K, 2);
  fill<<<1024, 256>>>(static_cast<bf16*>(b.v), tok * HV * V, 3);
  fillF<<<1024, 256>>>(b.g, tok * HV, -0.1f, 0.f);
  fillF<<<1024, 256>>>(b.beta, tok * HV, 0.05f, 0.95f);
  fillF<<<1024, 256>>>(b.h0, size_t(B) * HV * K * V, -0.2f, 0.2f);
  workspace(p, b);
  cudaStream_t st;
  ck(cudaStreamCreate(&st), "stream");
  std::vector<uint16_t> o3(tok * HV * V);
  std::vector<float> h3(size_t(B) * HV * K * V);
  ck(run(3, p, b, st, false), "tma");
  ck(cudaStreamSynchronize(st), "sync");
  ck(cudaMemcpy(o3.data(), b.o, o3.size() * 2, cudaMemcpyDeviceToHost), "o");
  ck(cudaMemcpy(h3.data(), b.ht, h3.size() * 4, cudaMemcpyDeviceToHost), "ht");
  std::vector<double> o3d(o3.size()), h3d(h3.begin(), h3.end());
  for (size_t i = 0; i < o3.size(); ++i) o3d[i] = deltac::ref::bf16_to_float(o3[i]);
  std::printf("B %d T %d heads %d/%d:", B, T, H, HV);
  for (int which : {11, 12, 13}) {
    ck(cudaMemset(b.o, 0xff, o3.size() * 2), "poison");
    ck(run(which, p, b, st, false), "tmat");
    ck(cudaStreamSynchronize(st), "sync");
    report(b, o3.size(), h3.size(), o3d, h3d, std::string(name_of(which)) + " vs tma:");
  }
  std::printf("\n");
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0), cudaEventCreate(&e1);
  for (bool scan_only : {true, false}) {
    std::printf("  %s (ms):", scan_only ? "scan alone" : "intra-chunk + scan");
    for (int which : {0, 3, 11, 12, 13}) {
      std::vector<float> ms;
      for (int r = 0; r < reps + 3; ++r) {
        cudaEventRecord(e0, st);
        ck(run(which, p, b, st, scan_only), "timed run");
        cudaEventRecord(e1, st);
        ck(cudaEventSynchronize(e1), "event");
        float t = 0;
        cudaEventElapsedTime(&t, e0, e1);
        if (r >= 3)
          ms.push_back(t);
      }
      std::printf(" %s %.3f", name_of(which), median(ms));
    }
    std::printf("\n");
  }
  cudaStreamDestroy(st);
}

}  // namespace

int main(int argc, char** argv) {
  const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  int dev = 0;
  cudaDeviceProp prop{};
  if (cudaGetDevice(&dev) != cudaSuccess || cudaGetDeviceProperties(&prop, dev) != cudaSuccess) {
    std::printf("no CUDA device\n");
    return 0;
  }
  std::printf("%s\n", prop.name);
  if (prop.major != 9 || prop.minor != 0) {
    std::printf("the TMA scans need sm_90a: nothing run\n");
    return 0;
  }
  const uint64_t seed = deltac::test_seed();
  std::printf("%s\n", deltac::test_seed_note(seed).c_str());
  uint64_t s = seed;
  small_case("T1 2/4", 2, 4, {1}, false, -0.1f, s++);
  small_case("T63 2/4", 2, 4, {63}, false, -0.1f, s++);
  small_case("T64 2/2", 2, 2, {64}, false, -0.1f, s++);
  small_case("T65 1/8", 1, 8, {65}, false, -0.1f, s++);
  small_case("T300 2/4 gates to -8", 2, 4, {300}, false, -8.f, s++);
  small_case("B2 T200 2/4", 2, 4, {200, 200}, false, -0.1f, s++);
  small_case("varlen 1,70,129,64,1 2/4", 2, 4, {1, 70, 129, 64, 1}, true, -0.1f, s++);
  small_case("T1000 4/4 delta-like gates", 4, 4, {1000}, false, -1e-4f, s++);
  large_case(4, 8192, 16, 32, quick ? 5 : 20);
  large_case(1, 32768, 16, 32, quick ? 5 : 20);
  if (!quick) {
    large_case(8, 4096, 16, 32, 20);
    large_case(1, 32768, 32, 32, 20);
  }
  std::printf("%s\n", failures ? "FAILED" : "PASSED");
  return failures ? 1 : 0;
}

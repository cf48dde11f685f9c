// Decode benchmark of deltac::cuda::recurrent: T = 1, K = V = 128, bf16
// inputs, f32 state updated in place. The state is rotated among enough
// copies that their total exceeds twice the L2, so every call reads its
// state from HBM. Timed as CUDA-graph replays (and as plain launches) with
// CUDA events after a warm-up; medians are printed.
#include "deltac/cuda/recurrent.cuh"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

namespace {

#define CHECK(call)                                                                  \
  do {                                                                               \
    cudaError_t e_ = (call);                                                         \
    if (e_ != cudaSuccess) {                                                         \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call,             \
                   cudaGetErrorString(e_));                                          \
      std::exit(1);                                                                  \
    }                                                                                \
  } while (0)

constexpr int kK = 128, kV = 128;
using In = __nv_bfloat16;

template <class T>
T* upload(const std::vector<T>& host) {
  T* d = nullptr;
  CHECK(cudaMalloc(&d, host.size() * sizeof(T)));
  CHECK(cudaMemcpy(d, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice));
  return d;
}

float median(std::vector<float> x) {
  std::sort(x.begin(), x.end());
  return x[x.size() / 2];
}

struct Row {
  float graph_us, launch_us;
  int copies;
};

template <deltac_variant Var>
Row bench(int batch, int heads, size_t l2_bytes, std::mt19937& rng) {
  const size_t tokens = batch, nqk = tokens * heads * kK, nv = tokens * heads * kV;
  const size_t nstate = size_t(batch) * heads * kK * kV;
  const size_t state_bytes = nstate * 4;
  // Enough state copies that they do not fit in L2 together.
  const int copies = int(std::min<size_t>(256, std::max<size_t>(1, 2 * l2_bytes / state_bytes + 1)));

  std::normal_distribution<float> normal(0.f, 1.f);
  std::uniform_real_distribution<float> unit(0.f, 1.f);
  std::vector<In> q(nqk), k(nqk), v(nv);
  for (auto& x : q) x = __float2bfloat16(normal(rng));
  for (auto& x : k) x = __float2bfloat16(normal(rng));
  for (auto& x : v) x = __float2bfloat16(normal(rng));
  std::vector<float> beta(tokens * heads), g(Var == DELTAC_VARIANT_KDA ? nqk : tokens * heads);
  for (auto& x : beta) x = unit(rng);
  for (auto& x : g) x = -0.1f * unit(rng);
  std::vector<float> h0(nstate);
  for (auto& x : h0) x = 0.1f * normal(rng);

  In *dq = upload(q), *dk = upload(k), *dv = upload(v), *dout = nullptr;
  float *dbeta = upload(beta), *dg = upload(g);
  CHECK(cudaMalloc(&dout, nv * sizeof(In)));
  std::vector<float*> states(copies);
  for (auto& s : states) s = upload(h0);

  deltac_fwd_params p{};
  p.variant = Var;
  p.B = batch, p.T = 1, p.H = heads, p.HV = heads, p.K = kK, p.V = kV, p.N = batch;
  p.in_dtype = p.out_dtype = DELTAC_BF16;
  p.state_dtype = DELTAC_F32;
  p.state_layout = DELTAC_STATE_KV;
  p.q = dq, p.k = dk, p.v = dv, p.o = dout, p.beta = dbeta;
  p.g = Var == DELTAC_VARIANT_DELTA ? nullptr : dg;
  p.qk_l2norm = 1;

  cudaStream_t stream;
  CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  auto launch_all = [&] {
    for (float* s : states) {
      p.h0 = s, p.ht = s;
      CHECK((deltac::cuda::recurrent<Var, kK, kV, In>(p, stream)));
    }
  };
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  launch_all();
  CHECK(cudaStreamEndCapture(stream, &graph));
  CHECK(cudaGraphInstantiate(&exec, graph, 0));

  cudaEvent_t e0, e1;
  CHECK(cudaEventCreate(&e0));
  CHECK(cudaEventCreate(&e1));
  auto time_it = [&](auto&& body) {
    for (int i = 0; i < 3; ++i) body();  // warm-up
    CHECK(cudaStreamSynchronize(stream));
    std::vector<float> ms;
    for (int i = 0; i < 15; ++i) {
      CHECK(cudaEventRecord(e0, stream));
      body();
      CHECK(cudaEventRecord(e1, stream));
      CHECK(cudaEventSynchronize(e1));
      float t = 0;
      CHECK(cudaEventElapsedTime(&t, e0, e1));
      ms.push_back(t);
    }
    return median(ms) * 1000.f / copies;
  };
  Row r;
  r.copies = copies;
  r.graph_us = time_it([&] { CHECK(cudaGraphLaunch(exec, stream)); });
  r.launch_us = time_it(launch_all);

  CHECK(cudaGraphExecDestroy(exec));
  CHECK(cudaGraphDestroy(graph));
  CHECK(cudaEventDestroy(e0));
  CHECK(cudaEventDestroy(e1));
  CHECK(cudaStreamDestroy(stream));
  for (float* s : states) CHECK(cudaFree(s));
  for (void* d : {(void*)dq, (void*)dk, (void*)dv, (void*)dout, (void*)dbeta, (void*)dg})
    CHECK(cudaFree(d));
  return r;
}

// Device-to-device copy rate of a 1 GiB buffer (bytes read + written): the
// ceiling the state traffic is compared against.
double copy_gbs() {
  const size_t bytes = size_t(1) << 30;
  void *a = nullptr, *b = nullptr;
  CHECK(cudaMalloc(&a, bytes));
  CHECK(cudaMalloc(&b, bytes));
  CHECK(cudaMemset(a, 1, bytes));
  cudaEvent_t e0, e1;
  CHECK(cudaEventCreate(&e0));
  CHECK(cudaEventCreate(&e1));
  std::vector<float> ms;
  for (int i = 0; i < 13; ++i) {
    CHECK(cudaEventRecord(e0));
    CHECK(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice));
    CHECK(cudaEventRecord(e1));
    CHECK(cudaEventSynchronize(e1));
    float t = 0;
    CHECK(cudaEventElapsedTime(&t, e0, e1));
    if (i >= 3)
      ms.push_back(t);
  }
  CHECK(cudaEventDestroy(e0));
  CHECK(cudaEventDestroy(e1));
  CHECK(cudaFree(a));
  CHECK(cudaFree(b));
  return 2.0 * bytes / (median(ms) * 1e6);
}

}  // namespace

int main() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
    std::printf("no CUDA device: nothing to benchmark\n");
    return 0;
  }
  cudaDeviceProp prop;
  CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf("%s, %d SMs, L2 %d MB; T=1, K=V=%d, bf16 in/out, f32 state in place\n",
              prop.name, prop.multiProcessorCount, prop.l2CacheSize >> 20, kK);
  std::printf("device-to-device copy (read + write): %.0f GB/s\n", copy_gbs());
  std::printf("%-6s %5s %6s %8s %10s %10s %10s\n", "var", "heads", "batch", "copies",
              "graph_us", "launch_us", "state_GB/s");
  std::mt19937 rng(1234);
  const char* names[] = {"delta", "gated", "kda"};
  for (int var = 0; var < 3; ++var) {
    for (int heads : {16, 32}) {
      for (int batch : {1, 8, 64, 256}) {
        Row r = var == 0   ? bench<DELTAC_VARIANT_DELTA>(batch, heads, prop.l2CacheSize, rng)
                : var == 1 ? bench<DELTAC_VARIANT_GATED>(batch, heads, prop.l2CacheSize, rng)
                           : bench<DELTAC_VARIANT_KDA>(batch, heads, prop.l2CacheSize, rng);
        // State read once and written once per call.
        const double bytes = 2.0 * batch * heads * kK * kV * 4;
        std::printf("%-6s %5d %6d %8d %10.2f %10.2f %10.1f\n", names[var], heads, batch,
                    r.copies, r.graph_us, r.launch_us, bytes / (r.graph_us * 1e3));
      }
    }
  }
  return 0;
}

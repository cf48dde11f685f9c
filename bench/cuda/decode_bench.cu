// Decode benchmark of deltac::cuda::recurrent: K = V = 128, bf16 inputs, the
// state f32 or bf16, contiguous or a shuffled state pool, updated in place;
// next to an SM-driven copy kernel on the same bytes (the bandwidth ceiling). The state is rotated among enough
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
#include <string>
#include <utility>
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

// Median per-call time of body() (which enqueues `calls` calls on stream),
// after a warm-up, with CUDA events: replayed from one captured graph, or
// launched plainly.
template <class Body>
float time_with(cudaStream_t stream, Body&& body, int calls) {
  cudaEvent_t e0, e1;
  CHECK(cudaEventCreate(&e0));
  CHECK(cudaEventCreate(&e1));
  for (int i = 0; i < 3; ++i) body();
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
  CHECK(cudaEventDestroy(e0));
  CHECK(cudaEventDestroy(e1));
  return median(ms) * 1000.f / calls;
}

template <class Launch>
float time_graph(cudaStream_t stream, Launch&& launch_all, int calls) {
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  launch_all();
  CHECK(cudaStreamEndCapture(stream, &graph));
  CHECK(cudaGraphInstantiate(&exec, graph, 0));
  const float us = time_with(stream, [&] { CHECK(cudaGraphLaunch(exec, stream)); }, calls);
  CHECK(cudaGraphExecDestroy(exec));
  CHECK(cudaGraphDestroy(graph));
  return us;
}

template <class Launch>
float time_plain(cudaStream_t stream, Launch&& launch_all, int calls) {
  return time_with(stream, launch_all, calls);
}

// One decode shape: q/k heads H, value heads HV, T tokens per sequence, the
// state f32 or bf16, contiguous (h0 = ht = [batch, HV, K, V]) or a pool of
// `batch` slots addressed through a shuffled read_slots (same bytes, the
// indirection only).
struct Shape {
  int H, HV, batch, T;
  bool bf16_state, pool;
  int bv = 0;     // V-tile width, 0: the kernel's choice
  int warps = 0;  // with bv: warps per block, 0: the catalogue's default
};

// The instance with both knobs fixed (cuda_recurrent's recurrent_cfg).
template <deltac_variant Var>
cudaError_t run_knobs(const deltac_fwd_params& p, cudaStream_t st, int bv, int warps) {
  using deltac::cuda::detail::recurrent_knobs;
#define DELTAC_K(B, W) \
  if (bv == B && warps == W) return recurrent_knobs<Var, kK, kV, In, B, W>(p, st, nullptr);
  DELTAC_K(32, 2) DELTAC_K(32, 4) DELTAC_K(32, 8) DELTAC_K(16, 1) DELTAC_K(16, 2) DELTAC_K(16, 4)
#undef DELTAC_K
  return cudaErrorInvalidValue;
}

template <deltac_variant Var>
Row bench(const Shape& s, size_t l2_bytes, std::mt19937& rng) {
  const int batch = s.batch, heads = s.HV;
  const size_t tokens = size_t(batch) * s.T, nqk = tokens * s.H * kK, nv = tokens * heads * kV;
  const size_t nstate = size_t(batch) * heads * kK * kV;
  const size_t state_bytes = nstate * (s.bf16_state ? 2 : 4);
  // Enough state copies that they do not fit in L2 together.
  const int copies = int(std::min<size_t>(256, std::max<size_t>(1, 2 * l2_bytes / state_bytes + 1)));

  std::normal_distribution<float> normal(0.f, 1.f);
  std::uniform_real_distribution<float> unit(0.f, 1.f);
  std::vector<In> q(nqk), k(nqk), v(nv);
  for (auto& x : q) x = __float2bfloat16(normal(rng));
  for (auto& x : k) x = __float2bfloat16(normal(rng));
  for (auto& x : v) x = __float2bfloat16(normal(rng));
  std::vector<float> beta(tokens * heads), g(Var == DELTAC_VARIANT_KDA ? tokens * heads * kK : tokens * heads);
  for (auto& x : beta) x = unit(rng);
  for (auto& x : g) x = -0.1f * unit(rng);
  std::vector<float> h0(nstate);
  for (auto& x : h0) x = 0.1f * normal(rng);
  std::vector<__nv_bfloat16> h0b(s.bf16_state ? nstate : 0);
  for (size_t i = 0; i < h0b.size(); ++i) h0b[i] = __float2bfloat16(h0[i]);
  std::vector<int32_t> slots(batch);
  for (int i = 0; i < batch; ++i) slots[i] = i;
  std::shuffle(slots.begin(), slots.end(), rng);

  In *dq = upload(q), *dk = upload(k), *dv = upload(v), *dout = nullptr;
  float *dbeta = upload(beta), *dg = upload(g);
  int32_t* dslots = upload(slots);
  CHECK(cudaMalloc(&dout, nv * sizeof(In)));
  std::vector<void*> states(copies);
  for (auto& st : states)
    st = s.bf16_state ? static_cast<void*>(upload(h0b)) : static_cast<void*>(upload(h0));

  deltac_fwd_params p{};
  p.variant = Var;
  p.B = batch, p.T = s.T, p.H = s.H, p.HV = heads, p.K = kK, p.V = kV, p.N = batch;
  p.in_dtype = p.out_dtype = DELTAC_BF16;
  p.state_dtype = s.bf16_state ? DELTAC_BF16 : DELTAC_F32;
  p.state_layout = DELTAC_STATE_KV;
  p.q = dq, p.k = dk, p.v = dv, p.o = dout, p.beta = dbeta;
  p.g = Var == DELTAC_VARIANT_DELTA ? nullptr : dg;
  p.qk_l2norm = 1;
  if (s.pool) {
    p.num_slots = batch;
    p.read_slots = dslots;
  }

  cudaStream_t stream;
  CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  auto launch_all = [&] {
    for (void* st : states) {
      p.h0 = st, p.ht = st;
      if (s.warps)
        CHECK(run_knobs<Var>(p, stream, s.bv, s.warps));
      else
        CHECK((deltac::cuda::detail::recurrent_bv<Var, kK, kV, In>(p, stream, s.bv)));
    }
  };
  Row r;
  r.copies = copies;
  r.graph_us = time_graph(stream, launch_all, copies);
  r.launch_us = time_plain(stream, launch_all, copies);
  CHECK(cudaStreamDestroy(stream));
  for (void* st : states) CHECK(cudaFree(st));
  for (void* d : {(void*)dq, (void*)dk, (void*)dv, (void*)dout, (void*)dbeta, (void*)dg,
                  (void*)dslots})
    CHECK(cudaFree(d));
  return r;
}

// An SM-driven copy: 16-byte loads and stores, grid-stride.
__global__ void copy_kernel(const float4* __restrict__ src, float4* __restrict__ dst, size_t n) {
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x)
    dst[i] = src[i];
}

// The copy kernel's rate (bytes read + written per second) on `bytes`
// bytes, rotated over buffers like the decode states, in graph replay.
double copy_gbs(size_t bytes, size_t l2_bytes, int sms) {
  const int copies = int(std::min<size_t>(64, std::max<size_t>(1, 2 * l2_bytes / bytes + 1)));
  std::vector<float4*> src(copies), dst(copies);
  for (int i = 0; i < copies; ++i) {
    CHECK(cudaMalloc(&src[i], bytes));
    CHECK(cudaMalloc(&dst[i], bytes));
    CHECK(cudaMemset(src[i], 1, bytes));
  }
  cudaStream_t stream;
  CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  const size_t n = bytes / 16;
  auto run = [&] {
    for (int i = 0; i < copies; ++i)
      copy_kernel<<<sms * 8, 256, 0, stream>>>(src[i], dst[i], n);
    CHECK(cudaGetLastError());
  };
  const double us = time_graph(stream, run, copies);
  CHECK(cudaStreamDestroy(stream));
  for (int i = 0; i < copies; ++i) {
    CHECK(cudaFree(src[i]));
    CHECK(cudaFree(dst[i]));
  }
  return 2.0 * bytes / (us * 1e3);
}

}  // namespace

int main(int argc, char** argv) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
    std::printf("no CUDA device: nothing to benchmark\n");
    return 0;
  }
  const bool quick = argc > 1 && std::string(argv[1]) == "--quick";
  cudaDeviceProp prop;
  CHECK(cudaGetDeviceProperties(&prop, 0));
  const size_t l2 = prop.l2CacheSize;
  std::printf("%s, %d SMs, L2 %zu MB; K=V=%d, bf16 in/out, state updated in place\n",
              prop.name, prop.multiProcessorCount, l2 >> 20, kK);
  std::printf("%-6s %3s %3s %5s %2s %5s %4s %4s %6s %9s %9s %10s %8s %9s\n", "var", "H", "HV",
              "batch", "T", "state", "pool", "bv/w", "copies", "graph_us", "launch_us",
              "state_GB/s", "copy_GB/s", "of_copy");
  std::mt19937 rng(1234);
  const char* names[] = {"delta", "gated", "kda"};
  std::vector<std::pair<int, Shape>> shapes;
  // GDN 16 q/k heads, 32 value heads: the issue's shapes.
  for (int batch : {1, 64, 256, 512})
    for (bool bf16 : {false, true})
      for (bool pool : {false, true}) shapes.push_back({1, Shape{16, 32, batch, 1, bf16, pool}});
  for (bool bf16 : {false, true})
    for (bool pool : {false, true}) shapes.push_back({1, Shape{16, 32, 64, 4, bf16, pool}});
  // The knobs (tile_v / warps) against the catalogue's default.
  for (int batch : {64, 512})
    for (bool bf16 : {false, true})
      for (auto [bv, w] : {std::pair{32, 2}, {16, 1}})
        shapes.push_back({1, Shape{16, 32, batch, 1, bf16, false, bv, w}});
  for (bool bf16 : {false, true})
    shapes.push_back({1, Shape{16, 32, 64, 4, bf16, true, 32, 2}});
  shapes.push_back({1, Shape{16, 32, 1, 1, false, false, 16, 2}});
  if (!quick)
    for (int var : {0, 2})
      for (int batch : {1, 64}) shapes.push_back({var, Shape{16, 32, batch, 1, false, false}});
  for (auto& [var, s] : shapes) {
    Row r = var == 0   ? bench<DELTAC_VARIANT_DELTA>(s, l2, rng)
            : var == 1 ? bench<DELTAC_VARIANT_GATED>(s, l2, rng)
                       : bench<DELTAC_VARIANT_KDA>(s, l2, rng);
    // State read once and written once per call.
    const double bytes = double(s.batch) * s.HV * kK * kV * (s.bf16_state ? 2 : 4);
    const double gbs = 2.0 * bytes / (r.graph_us * 1e3);
    const double cgbs = copy_gbs(size_t(bytes), l2, prop.multiProcessorCount);
    std::printf("%-6s %3d %3d %5d %2d %5s %4s %2d/%d %6d %9.2f %9.2f %10.1f %8.1f %8.0f%%\n",
                names[var], s.H, s.HV, s.batch, s.T, s.bf16_state ? "bf16" : "f32",
                s.pool ? "yes" : "no", s.bv, s.warps, r.copies, r.graph_us, r.launch_us, gbs, cgbs,
                100.0 * gbs / cgbs);
    std::fflush(stdout);
  }
  return 0;
}

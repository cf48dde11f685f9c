// Decode benchmark of deltac::cuda::recurrent: K = V = 128, bf16 inputs, the
// state f32, bf16 or fp8 e4m3, contiguous or a shuffled state pool, updated in place;
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
#include <map>
#include <tuple>
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
using deltac::cuda::detail::Form;

struct Shape {
  int H, HV, batch, T;
  bool bf16_state, pool;
  int bv = 0;     // V-tile width, 0: the kernel's choice
  int warps = 0;  // with bv: warps per block, 0: the catalogue's default
  Form form = Form::Auto;  // strip (the default where it fits) or split kernel
  bool pdl = true;         // programmatic dependent launch
  bool fp8_state = false;  // e4m3 (bf16_state false), scale 1/16 per head
  int stages = 0;          // the stream kernel's ring, 0: its rule
  bool no_h0 = false, no_ht = false;  // without the state's load / store
};

size_t state_elem_bytes(const Shape& s) { return s.fp8_state ? 1 : s.bf16_state ? 2 : 4; }
const char* state_name(const Shape& s) { return s.fp8_state ? "fp8" : s.bf16_state ? "bf16" : "f32"; }

// The instance with both knobs fixed (cuda_recurrent's recurrent_cfg).
template <deltac_variant Var>
cudaError_t run_knobs(const deltac_fwd_params& p, cudaStream_t st, const Shape& s) {
  using deltac::cuda::detail::recurrent_knobs;
#define DELTAC_K(B, W)                                                                 \
  if (s.bv == B && s.warps == W)                                                       \
    return recurrent_knobs<Var, kK, kV, In, B, W>(p, st, nullptr, s.form, s.pdl);
  DELTAC_K(32, 1) DELTAC_K(32, 2) DELTAC_K(32, 4) DELTAC_K(32, 8) DELTAC_K(16, 1) DELTAC_K(16, 2)
  DELTAC_K(16, 4) DELTAC_K(64, 2) DELTAC_K(64, 4) DELTAC_K(128, 4) DELTAC_K(128, 8)
#undef DELTAC_K
  return cudaErrorInvalidValue;
}

// Deterministic state values in [-0.2, 0.2), filled on the device.
template <class T>
__global__ void fill_state(T* x, size_t n, uint32_t seed) {
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x) {
    uint32_t h = uint32_t(i) * 2654435761u ^ seed;
    h ^= h >> 15, h *= 2246822519u, h ^= h >> 13;
    const float f = 0.4f * (float(h >> 8) * (1.f / 16777216.f) - 0.5f);
    if constexpr (sizeof(T) == 4)
      x[i] = f;
    else if constexpr (sizeof(T) == 1)
      x[i] = __nv_fp8_e4m3(16.f * f);  // the bench's state_scale is 1/16
    else
      x[i] = __float2bfloat16(f);
  }
}

// --pool-in-order: pool rows read slot n for sequence n (the indirection
// alone, against the shuffled order's scattered slots).
bool g_pool_in_order = false;

template <deltac_variant Var>
Row bench(const Shape& s, size_t l2_bytes, std::mt19937& rng) {
  const int batch = s.batch, heads = s.HV;
  const size_t tokens = size_t(batch) * s.T, nqk = tokens * s.H * kK, nv = tokens * heads * kV;
  const size_t nstate = size_t(batch) * heads * kK * kV;
  const size_t state_bytes = nstate * state_elem_bytes(s);
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
  std::vector<int32_t> slots(batch);
  for (int i = 0; i < batch; ++i) slots[i] = i;
  if (!g_pool_in_order) std::shuffle(slots.begin(), slots.end(), rng);

  In *dq = upload(q), *dk = upload(k), *dv = upload(v), *dout = nullptr;
  float *dbeta = upload(beta), *dg = upload(g);
  int32_t* dslots = upload(slots);
  CHECK(cudaMalloc(&dout, nv * sizeof(In)));
  std::vector<void*> states(copies);
  for (int c = 0; c < copies; ++c) {
    CHECK(cudaMalloc(&states[c], state_bytes));
    if (s.fp8_state)
      fill_state<<<1024, 256>>>(static_cast<__nv_fp8_e4m3*>(states[c]), nstate, 17u + c);
    else if (s.bf16_state)
      fill_state<<<1024, 256>>>(static_cast<__nv_bfloat16*>(states[c]), nstate, 17u + c);
    else
      fill_state<<<1024, 256>>>(static_cast<float*>(states[c]), nstate, 17u + c);
    CHECK(cudaGetLastError());
  }
  CHECK(cudaDeviceSynchronize());

  deltac_fwd_params p{};
  p.variant = Var;
  p.B = batch, p.T = s.T, p.H = s.H, p.HV = heads, p.K = kK, p.V = kV, p.N = batch;
  p.in_dtype = p.out_dtype = DELTAC_BF16;
  p.state_dtype = s.fp8_state ? DELTAC_FP8_E4M3 : s.bf16_state ? DELTAC_BF16 : DELTAC_F32;
  std::vector<float> sscale(heads, 1.f / 16.f);
  float* dsscale = upload(sscale);
  p.state_scale = s.fp8_state ? dsscale : nullptr;
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
  deltac::cuda::detail::stream_stages_override = s.stages;
  auto launch_all = [&] {
    for (void* st : states) {
      p.h0 = s.no_h0 ? nullptr : st, p.ht = s.no_ht ? nullptr : st;
      if (s.warps)
        CHECK(run_knobs<Var>(p, stream, s));
      else
        CHECK((deltac::cuda::detail::recurrent_bv<Var, kK, kV, In>(p, stream, s.bv, s.form,
                                                                   s.pdl)));
    }
  };
  Row r;
  r.copies = copies;
  r.graph_us = time_graph(stream, launch_all, copies);
  r.launch_us = time_plain(stream, launch_all, copies);
  CHECK(cudaStreamDestroy(stream));
  for (void* st : states) CHECK(cudaFree(st));
  for (void* d : {(void*)dq, (void*)dk, (void*)dv, (void*)dout, (void*)dbeta, (void*)dg,
                  (void*)dslots, (void*)dsscale})
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

// The batch-1 floor: a one-token step's grid (GDN 16/32 heads, K = V = 128,
// f32 state: 128 blocks of 64 threads, 16 KB of state a block) without its
// arithmetic, launched as the decode kernels are (PDL, graph replay).
// Mode 0: the PDL wait only. 1: + the block's state prefetched into L2
// before the wait, then read, negated and written back in place (16-byte
// accesses, a warp's 512 contiguous bytes each). 2: as 1, scaled by a
// value from the block's q row summed over the warp (a load and a reduction
// before the stores, as the decode kernel has).
template <int Mode>
__global__ void __launch_bounds__(64) floor_kernel(float4* state, const In* q) {
  constexpr int kPer = 16;  // float4 a thread
  float4* mine = state + size_t(blockIdx.x) * 64 * kPer;
  if constexpr (Mode >= 1) {
    const uintptr_t a = reinterpret_cast<uintptr_t>(mine + threadIdx.x * kPer);
    asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(a), "r"(uint32_t(16 * kPer))
                 : "memory");
  }
  deltac::cuda::detail::pdl_enter();
  if constexpr (Mode >= 1) {
    float4 x[kPer];
#pragma unroll
    for (int i = 0; i < kPer; ++i) x[i] = mine[i * 64 + threadIdx.x];
    float f = -1.f;
    if constexpr (Mode == 2) {
      f = __bfloat162float(q[(blockIdx.x / 8) * kK + (threadIdx.x % 32) * 4]);
      f = deltac::cuda::detail::reduce_rows<1>(f) == 12345.f ? 2.f : -1.f;
    }
#pragma unroll
    for (int i = 0; i < kPer; ++i) {
      x[i].x *= f, x[i].y *= f, x[i].z *= f, x[i].w *= f;
      mine[i * 64 + threadIdx.x] = x[i];
    }
  }
}

void bench_floor(size_t l2_bytes) {
  constexpr int kBlocks = 128;
  const size_t bytes = size_t(kBlocks) * 64 * 16 * 16;  // 2 MB: 32 heads of 128 x 128 f32
  const int copies = int(2 * l2_bytes / bytes + 1);
  std::vector<float4*> states(copies);
  for (auto& st : states) {
    CHECK(cudaMalloc(&st, bytes));
    CHECK(cudaMemset(st, 0, bytes));
  }
  In* q = nullptr;
  CHECK(cudaMalloc(&q, 16 * kK * sizeof(In)));
  CHECK(cudaMemset(q, 0, 16 * kK * sizeof(In)));
  cudaStream_t stream;
  CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  auto run = [&](auto kernel, bool pdl) {
    return time_graph(stream, [&] {
      for (float4* st : states)
        CHECK(deltac::cuda::detail::launch_ex(kernel, kBlocks, 64, stream, pdl, st,
                                              static_cast<const In*>(q)));
    }, copies);
  };
  const char* what[] = {"PDL wait only", "+ state prefetched, read, written", "+ a q row reduced"};
  for (bool pdl : {true, false}) {
    const float us[] = {run(floor_kernel<0>, pdl), run(floor_kernel<1>, pdl),
                        run(floor_kernel<2>, pdl)};
    for (int m = 0; m < 3; ++m)
      std::printf("floor %-34s pdl %d: %6.2f us per step (graph replay, %d copies)\n", what[m],
                  int(pdl), us[m], copies);
  }
  CHECK(cudaStreamDestroy(stream));
  for (auto* st : states) CHECK(cudaFree(st));
  CHECK(cudaFree(q));
}

}  // namespace

int main(int argc, char** argv) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
    std::printf("no CUDA device: nothing to benchmark\n");
    return 0;
  }
  // --quick: the first 62 rows; --rows=I,J,..: only those rows (0-based, as
  // listed without options; for a profiler run); --floor: the batch-1 floor
  // rows first; --pool-in-order: pools with slot n for sequence n.
  bool quick = false, floor = false;
  std::vector<int> only;
  for (int a = 1; a < argc; ++a) {
    const std::string arg = argv[a];
    if (arg == "--quick") {
      quick = true;
    } else if (arg == "--floor") {
      floor = true;
    } else if (arg == "--pool-in-order") {
      g_pool_in_order = true;
    } else if (arg.rfind("--rows=", 0) == 0) {
      for (size_t i = 7; i < arg.size();) {
        size_t e = arg.find(',', i);
        if (e == std::string::npos)
          e = arg.size();
        const std::string num = arg.substr(i, e - i);
        if (num.empty() || num.find_first_not_of("0123456789") != std::string::npos) {
          std::fprintf(stderr, "--rows: '%s' is not a row number\n", num.c_str());
          return 2;
        }
        only.push_back(std::atoi(num.c_str()));
        i = e + 1;
      }
    } else {
      std::fprintf(stderr, "usage: %s [--quick] [--floor] [--pool-in-order] [--rows=I,J,..]\n",
                   argv[0]);
      return 2;
    }
  }
  cudaDeviceProp prop;
  CHECK(cudaGetDeviceProperties(&prop, 0));
  const size_t l2 = prop.l2CacheSize;
  std::printf("%s, %d SMs, L2 %zu MB; K=V=%d, bf16 in/out, state updated in place\n",
              prop.name, prop.multiProcessorCount, l2 >> 20, kK);
  std::printf("%-6s %3s %3s %5s %2s %5s %4s %5s %5s %3s %6s %9s %9s %10s %8s %8s\n", "var", "H",
              "HV", "batch", "T", "state", "pool", "bv/w", "form", "pdl", "copies", "graph_us",
              "launch_us", "state_GB/s", "copy_GB/s", "of_copy");
  if (floor)
    bench_floor(l2);
  std::mt19937 rng(1234);
  const char* names[] = {"delta", "gated", "kda"};
  std::vector<std::pair<int, Shape>> shapes;
  auto add = [&](int var, Shape s) { shapes.push_back({var, s}); };
  // GDN 16 q/k heads, 32 value heads: the issue's shapes, default kernel.
  for (int batch : {1, 64, 256, 512})
    for (bool bf16 : {false, true})
      for (bool pool : {false, true}) add(1, Shape{16, 32, batch, 1, bf16, pool});
  for (bool bf16 : {false, true})
    for (bool pool : {false, true}) add(1, Shape{16, 32, 64, 4, bf16, pool});
  // Small batches: the default knobs, tile_v 32 / 2 warps under each form
  // (auto; split; the one-token strip kernel from registers: packd; staged:
  // strip), and 16 / 2 split (version 3's batch-1 choice).
  for (int batch : {1, 8})
    for (bool bf16 : {false, true}) {
      add(1, Shape{16, 32, batch, 1, bf16, false});
      for (Form f : {Form::Auto, Form::Split, Form::Packed, Form::Strip}) {
        Shape s{16, 32, batch, 1, bf16, false, 32, 2};
        s.form = f;
        add(1, s);
      }
    }
  // tile_v 64 (not a catalogue knob): 128 or 256 contiguous bytes of a row
  // per block, registers (packd) or staged (strip).
  for (int batch : {1, 64, 512})
    for (bool bf16 : {false, true})
      for (int w : {2, 4})
        for (Form f : {Form::Packed, Form::Strip}) {
          if (batch == 1 && w == 2)
            continue;
          Shape s{16, 32, batch, 1, bf16, false, 64, w};
          s.form = f;
          add(1, s);
        }
  for (bool bf16 : {false, true}) add(1, Shape{16, 32, 64, 4, bf16, false, 64, 4});
  // Before: the split kernel (version 1), same binary, default knobs.
  for (int T : {1, 4})
    for (bool pool : {false, true}) {
      Shape s{16, 32, 64, T, false, pool};
      s.form = Form::Split;
      add(1, s);
    }
  for (int batch : {1, 512})
    for (bool bf16 : {false, true}) {
      Shape s{16, 32, batch, 1, bf16, false};
      s.form = Form::Split;
      add(1, s);
    }
  // The knobs (tile_v / warps), each form; (32, 1) is strip-only (bf16).
  const std::pair<int, int> knobs[] = {{32, 2}, {32, 4}, {16, 1}, {16, 2}, {32, 1}};
  for (int batch : {1, 64, 512})
    for (bool bf16 : {false, true})
      for (auto [bv, w] : knobs)
        for (Form f : {Form::Split, Form::Strip}) {
          if (w == 1 && bv == 32 && (!bf16 || f == Form::Split))
            continue;
          Shape s{16, 32, batch, 1, bf16, false, bv, w};
          s.form = f;
          add(1, s);
        }
  // Pool against contiguous at the knobs that measured fastest.
  for (int batch : {1, 64, 512})
    for (auto [bf16, bv, w] : {std::tuple{false, 32, 2}, {false, 16, 1}, {true, 32, 2},
                               {true, 32, 1}})
      for (bool pool : {false, true}) add(1, Shape{16, 32, batch, 1, bf16, pool, bv, w});
  // Several tokens (staged inputs), each form.
  for (bool bf16 : {false, true})
    for (auto [bv, w] : {std::pair{32, 2}, {32, 4}, {16, 1}, {16, 2}})
      for (Form f : {Form::Split, Form::Strip}) {
        Shape s{16, 32, 64, 4, bf16, false, bv, w};
        s.form = f;
        add(1, s);
      }
  for (int T : {2, 8}) add(1, Shape{16, 32, 64, T, false, false, 32, 4});
  // Without programmatic dependent launch.
  for (auto [batch, bf16, bv, w] : {std::tuple{1, false, 0, 0}, {1, true, 0, 0},
                                    {1, false, 16, 1}, {1, false, 32, 2}, {1, true, 32, 2},
                                    {64, false, 32, 2}}) {
    Shape s{16, 32, batch, 1, bf16, false, bv, w};
    s.pdl = false;
    add(1, s);
  }
  for (int var : {0, 2})
    for (int batch : {1, 64}) add(var, Shape{16, 32, batch, 1, false, false});
  // fp8 e4m3 states (the one-token strip kernel at T = 1): default knobs,
  // contiguous and pooled, T = 1 and 4.
  for (int batch : {1, 64, 256, 512})
    for (bool pool : {false, true}) {
      Shape s{16, 32, batch, 1, false, pool};
      s.fp8_state = true;
      add(1, s);
    }
  {
    Shape s{16, 32, 64, 4, false, false};
    s.fp8_state = true;
    add(1, s);
  }
  // fp8 under each one-token form and tile_v 64 (rows 182..).
  for (int batch : {1, 64, 512})
    for (auto [bv, w, f] : {std::tuple{32, 2, Form::Packed}, {32, 2, Form::Strip},
                            {64, 2, Form::Packed}, {64, 2, Form::Strip}}) {
      Shape s{16, 32, batch, 1, false, false, bv, w};
      s.fp8_state = true, s.form = f;
      add(1, s);
    }
  // The stream kernel (rows 194..): f32 / bf16 / fp8 states, contiguous and
  // pooled, T = 1 and 4, at its knobs; the default rows above are the
  // comparison (same shapes).
  for (int batch : {1, 64, 256, 512})
    for (int st : {0, 1, 2})
      for (bool pool : {false, true})
        for (auto [bv, w] : {std::pair{32, 2}, {64, 4}}) {
          Shape s{16, 32, batch, 1, st == 1, pool, bv, w};
          s.fp8_state = st == 2, s.form = Form::Stream;
          add(1, s);
        }
  for (int st : {0, 1})
    for (bool pool : {false, true})
      for (auto [bv, w] : {std::pair{32, 2}, {64, 4}, {32, 4}}) {
        Shape s{16, 32, 64, 4, st == 1, pool, bv, w};
        s.form = Form::Stream;
        add(1, s);
      }
  for (int var : {0, 2})
    for (int T : {1, 4}) {
      Shape s{16, 32, 64, T, false, false, 32, 2};
      s.form = Form::Stream;
      add(var, s);
      add(var, Shape{16, 32, 64, T, false, false});
    }
  // The stream kernel's ring: 1..6 stages (its rule: about 96 KB a block).
  for (auto [batch, st, T, bv, w] : {std::tuple{64, 0, 1, 32, 2}, {512, 0, 1, 32, 2},
                                     {64, 1, 1, 64, 4}, {512, 1, 1, 64, 4},
                                     {64, 2, 1, 64, 4}, {512, 2, 1, 64, 4}, {64, 0, 4, 32, 2}})
    for (int stages : {1, 2, 3, 4, 6}) {
      Shape s{16, 32, batch, T, st == 1, false, bv, w};
      s.fp8_state = st == 2, s.form = Form::Stream, s.stages = stages;
      add(1, s);
    }
  // Batch 1 without the state's load, its store or both (rows 297..): what
  // each costs a step.
  for (auto [bf16, bv, w] : {std::tuple{false, 0, 0}, {true, 32, 2}})
    for (int m = 0; m < 4; ++m) {
      Shape s{16, 32, 1, 1, bf16, false, bv, w};
      s.no_h0 = m & 1, s.no_ht = m & 2;
      add(1, s);
    }
  // tile_v 64 (not a catalogue value), contiguous and pooled, at the large
  // batches (rows 305..): f32 on 4 warps, bf16 on 2 (staged) and 4 warps.
  for (int batch : {64, 256, 512})
    for (auto [bf16, w, f] : {std::tuple{false, 4, Form::Auto}, {true, 4, Form::Auto},
                              {true, 2, Form::Strip}})
      for (bool pool : {false, true}) {
        Shape s{16, 32, batch, 1, bf16, pool, 64, w};
        s.form = f;
        add(1, s);
      }
  // A whole head a block (tile_v 128, rows 323..): the pool's slot load once
  // per 64 KB (f32) instead of 16; f32 on 8 warps, bf16 on 4 (staged) and 8.
  for (int batch : {64, 256, 512})
    for (auto [bf16, w, f] : {std::tuple{false, 8, Form::Auto}, {true, 4, Form::Strip},
                              {true, 8, Form::Auto}, {true, 8, Form::Strip}})
      for (bool pool : {false, true}) {
        Shape s{16, 32, batch, 1, bf16, pool, 128, w};
        s.form = f;
        add(1, s);
      }
  if (!only.empty()) {
    std::vector<std::pair<int, Shape>> picked;
    for (int i : only) {
      if (i < 0 || i >= int(shapes.size())) {
        std::fprintf(stderr, "--rows: %d is not a row (0..%zu)\n", i, shapes.size() - 1);
        return 2;
      }
      picked.push_back(shapes[size_t(i)]);
    }
    shapes = picked;
  } else if (quick) {
    shapes.resize(62);
  }
  std::map<size_t, double> copy_rate;  // bytes -> copy kernel GB/s, measured once
  for (auto& [var, s] : shapes) {
    // Knobs without a kernel for this call (tile_v 64 / 2 warps with an f32
    // state has neither a strip geometry nor a split kernel): say so, go on.
    if (s.warps) {
      const int64_t grid = int64_t(s.batch) * s.HV * (kV / s.bv);
      const bool one = s.T <= 1;
      if (deltac::cuda::recurrent_choice(kK, s.bv, s.warps, int(state_elem_bytes(s)), one,
                                         s.form, grid)
              .kernel == deltac::cuda::RecurrentKernel::None) {
        std::printf("%-6s %3d %3d %5d %2d %5s %4s %2d/%-2d  no kernel for these knobs\n",
                    names[var], s.H, s.HV, s.batch, s.T, state_name(s),
                    s.pool ? "yes" : "no", s.bv, s.warps);
        continue;
      }
    }
    Row r = var == 0   ? bench<DELTAC_VARIANT_DELTA>(s, l2, rng)
            : var == 1 ? bench<DELTAC_VARIANT_GATED>(s, l2, rng)
                       : bench<DELTAC_VARIANT_KDA>(s, l2, rng);
    // State read once and written once per call.
    const double bytes = double(s.batch) * s.HV * kK * kV * state_elem_bytes(s);
    const double gbs = 2.0 * bytes / (r.graph_us * 1e3);
    auto it = copy_rate.find(size_t(bytes));
    if (it == copy_rate.end())
      it = copy_rate.emplace(size_t(bytes), copy_gbs(size_t(bytes), l2, prop.multiProcessorCount))
               .first;
    const double cgbs = it->second;
    const char* form = s.form == Form::Split    ? "split"
                       : s.form == Form::Strip  ? "strip"
                       : s.form == Form::Packed ? "packd"
                       : s.form == Form::Stream ? "strm"
                                                : "auto";
    std::printf("%-6s %3d %3d %5d %2d %5s %4s %2d/%-2d %5s %3d %6d %9.2f %9.2f %10.1f %8.1f %7.0f%%",
                names[var], s.H, s.HV, s.batch, s.T, state_name(s),
                s.pool ? "yes" : "no", s.bv, s.warps, form, int(s.pdl), r.copies, r.graph_us,
                r.launch_us, gbs, cgbs, 100.0 * gbs / cgbs);
    if (s.stages)
      std::printf("  stages %d", s.stages);
    if (s.no_h0 || s.no_ht)
      std::printf("  without%s%s", s.no_h0 ? " h0" : "", s.no_ht ? " ht" : "");
    std::printf("\n");
    std::fflush(stdout);
  }
  return 0;
}

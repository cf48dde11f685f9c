// deltac against ggml's GATED_DELTA_NET CPU op (Google Benchmark), side by
// side in one binary: gated, f32, K = V = 128, 16 heads, prefill (one
// sequence of T tokens) and decode (batch B, one token each). Built only when
// -DDELTAC_GGML_PREFIX names a ggml install (bench/cpu/CMakeLists.txt); ggml
// is never part of this repository. Run with interleaving, e.g.
//   deltac_ggml_bench --benchmark_repetitions=5 \
//     --benchmark_enable_random_interleaving=true --benchmark_report_aggregates_only=true
//
// deltac runs through the C API with mode auto (the family, knobs and
// instruction set its rule picks; the label says which), q/k L2 norm fused,
// initial state in, final state out (decode: in place, as an inference loop),
// with the state in deltac's KV layout and in ggml's own (VK), its buffers
// 64-byte aligned as PyTorch and ggml's CPU backend allocate them; decode
// rows "mis:1" put the state 16 bytes past a cache line (plain malloc's
// alignment for large blocks) to show what that costs.
// ggml runs its op alone (its q/k inputs are already unit vectors; llama.cpp
// normalises them with separate ggml_l2_norm ops, rows "l2norm" add them),
// state in, the new state written to the op's output (llama.cpp then copies
// it back into its cache: not counted). Both on threads() threads.
#include "aligned.h"
#include "deltac/runtime.h"

#include <benchmark/benchmark.h>
#include <ggml-cpu.h>
#include <ggml.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace {

constexpr int kHeads = 16, kD = 128, kDecodeSteps = 16;
// Threads of both sides: DELTAC_BENCH_THREADS (default 2, the issue's
// comparison; e.g. 16 on a 16-core host).
int threads() {
  static const int n = [] {
    const char* e = std::getenv("DELTAC_BENCH_THREADS");
    const int x = e ? std::atoi(e) : 0;
    return x > 0 ? x : 2;
  }();
  return n;
}

using deltac::bench::Buf;

struct Inputs {
  Buf q, k, v, g, beta, h0, o, ht;
};

// Rows of q and k are unit vectors (so the op alone sees what llama.cpp's
// graph feeds it); g = log-decay in [-0.1, 0], beta in [0, 1].
Inputs make_inputs(int B, int T) {
  Inputs in;
  std::mt19937 rng(42);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::uniform_real_distribution<float> ud(0.0f, 1.0f);
  const size_t rows = size_t(B) * T * kHeads;
  for (auto* x : {&in.q, &in.k, &in.v}) {
    x->resize(rows * kD);
    for (auto& e : *x) e = nd(rng);
  }
  for (auto* x : {&in.q, &in.k})
    for (size_t r = 0; r < rows; ++r) {
      double s = 0;
      for (int i = 0; i < kD; ++i) s += double((*x)[r * kD + i]) * (*x)[r * kD + i];
      const float inv = float(1.0 / std::sqrt(s));
      for (int i = 0; i < kD; ++i) (*x)[r * kD + i] *= inv;
    }
  in.g.resize(rows);
  in.beta.resize(rows);
  for (auto& e : in.g) e = -0.1f * ud(rng);
  for (auto& e : in.beta) e = ud(rng);
  in.h0.resize(size_t(B) * kHeads * kD * kD);
  for (auto& e : in.h0) e = 0.1f * nd(rng);
  in.o.resize(rows * kD);
  in.ht.resize(in.h0.size());
  return in;
}

void counters(benchmark::State& st, int B, int T) {
  st.counters["tokens_per_s"] =
      benchmark::Counter(double(B) * T, benchmark::Counter::kIsIterationInvariantRate);
}

// st.range: B, T, layout (0: KV, deltac's default; 1: VK, ggml's own: its
// state row j is value j's K keys), mis (1: the state 16 bytes past a line).
void BM_Deltac(benchmark::State& st) {
  const int B = int(st.range(0)), T = int(st.range(1));
  const bool vk = st.range(2) != 0;
  const size_t mis = st.range(3) ? 4 : 0;  // floats
  Inputs in = make_inputs(B, T);
  if (mis) {  // the same values, shifted
    in.h0.insert(in.h0.begin(), mis, 0.0f);
    in.ht.insert(in.ht.begin(), mis, 0.0f);
  }
  deltac_fwd_params p{};
  p.variant = DELTAC_VARIANT_GATED;
  p.B = p.N = B;
  p.T = T;
  p.H = p.HV = kHeads;
  p.K = p.V = kD;
  p.in_dtype = p.out_dtype = p.state_dtype = DELTAC_F32;
  p.state_layout = vk ? DELTAC_STATE_VK : DELTAC_STATE_KV;
  p.q = in.q.data(), p.k = in.k.data(), p.v = in.v.data();
  p.g = in.g.data(), p.beta = in.beta.data();
  p.h0 = in.h0.data() + mis;
  p.ht = (T == 1 ? in.h0.data() : in.ht.data()) + mis;  // decode: in place
  p.o = in.o.data();
  p.qk_l2norm = 1;
  p.threads = threads();
  deltac_options opt = deltac_default_options();
  opt.device = DELTAC_DEVICE_CPU;
  deltac_run_info info{};
  if (deltac_forward_info(&p, &opt, &info) != 0) {
    st.SkipWithError(deltac_last_error());
    return;
  }
  st.SetLabel(std::string(info.family) + (info.chunk ? " chunk=" + std::to_string(info.chunk) : "") +
              (info.tile_v ? " tile_v=" + std::to_string(info.tile_v) : "") + " isa=" + info.isa +
              (vk ? " layout=vk" : " layout=kv"));
  // Decode cycles through kDecodeSteps tokens: one token repeated would
  // decay the in-place state towards denormals (ggml's state input is
  // never updated, so it cannot).
  Inputs steps = T == 1 ? make_inputs(B * kDecodeSteps, 1) : Inputs{};
  const size_t row = size_t(B) * kHeads;
  int s = 0;
  for (auto _ : st) {
    if (T == 1) {
      p.q = steps.q.data() + s * row * kD, p.k = steps.k.data() + s * row * kD;
      p.v = steps.v.data() + s * row * kD;
      p.g = steps.g.data() + s * row, p.beta = steps.beta.data() + s * row;
      s = s + 1 == kDecodeSteps ? 0 : s + 1;
    }
    deltac_forward(&p, &opt);
    benchmark::DoNotOptimize(in.o.data());
  }
  counters(st, B, T);
}

// st.range: B, T, l2norm (1: the graph also normalises q and k).
void BM_Ggml(benchmark::State& st) {
  const int B = int(st.range(0)), T = int(st.range(1));
  const bool l2 = st.range(2) != 0;
  Inputs in = make_inputs(B, T);
  const size_t rows = size_t(B) * T * kHeads;
  size_t bytes = (3 * rows * kD + 2 * rows + in.h0.size() * 2 + rows * kD) * sizeof(float);
  if (l2)
    bytes += 2 * rows * kD * sizeof(float);
  ggml_init_params ip{bytes + (size_t(64) << 20), nullptr, false};
  ggml_context* ctx = ggml_init(ip);
  auto t4 = [&](int64_t a, int64_t b, int64_t c, int64_t d, const Buf& src) {
    ggml_tensor* t = ggml_new_tensor_4d(ctx, GGML_TYPE_F32, a, b, c, d);
    std::memcpy(t->data, src.data(), ggml_nbytes(t));
    return t;
  };
  ggml_tensor* q = t4(kD, kHeads, T, B, in.q);
  ggml_tensor* k = t4(kD, kHeads, T, B, in.k);
  ggml_tensor* v = t4(kD, kHeads, T, B, in.v);
  ggml_tensor* g = t4(1, kHeads, T, B, in.g);
  ggml_tensor* beta = t4(1, kHeads, T, B, in.beta);
  ggml_tensor* s0 = t4(kD, kD, kHeads, B, in.h0);
  if (l2) {
    q = ggml_l2_norm(ctx, q, 1e-6f);
    k = ggml_l2_norm(ctx, k, 1e-6f);
  }
  ggml_tensor* out = ggml_gated_delta_net(ctx, q, k, v, g, beta, s0, 1);
  ggml_cgraph* gf = ggml_new_graph(ctx);
  ggml_build_forward_expand(gf, out);
  ggml_cplan plan = ggml_graph_plan(gf, threads(), nullptr);
  std::vector<uint8_t> work(plan.work_size + 64);
  plan.work_data = work.data();
  st.SetLabel(l2 ? "ggml l2norm+gated_delta_net" : "ggml gated_delta_net");
  for (auto _ : st) {
    if (ggml_graph_compute(gf, &plan) != GGML_STATUS_SUCCESS) {
      st.SkipWithError("ggml_graph_compute failed");
      break;
    }
    benchmark::DoNotOptimize(out->data);
  }
  counters(st, B, T);
  ggml_free(ctx);
}

void shapes(benchmark::internal::Benchmark* b, bool ggml) {
  for (auto bt : {std::pair{1, 4096}, std::pair{1, 8192}, std::pair{1, 1}, std::pair{8, 1}})
    for (int x : {0, 1})  // ggml: l2norm; deltac: layout
      for (int mis : {0, 1}) {
        if (mis && (ggml || bt.second > 1))
          continue;
        if (ggml)
          b->Args({bt.first, bt.second, x});
        else
          b->Args({bt.first, bt.second, x, mis});
      }
  if (ggml)
    b->ArgNames({"B", "T", "l2norm"});
  else
    b->ArgNames({"B", "T", "layout", "mis"});
  b->UseRealTime()->Unit(benchmark::kMicrosecond);
}

BENCHMARK(BM_Deltac)->Apply([](benchmark::internal::Benchmark* b) { shapes(b, false); });
BENCHMARK(BM_Ggml)->Apply([](benchmark::internal::Benchmark* b) { shapes(b, true); });

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv))
    return 1;
  benchmark::AddCustomContext("threads", std::to_string(threads()));
  benchmark::AddCustomContext("deltac_cpu_env", deltac_environment(DELTAC_DEVICE_CPU));
  benchmark::AddCustomContext("ggml_cpu_has_avx512", std::to_string(ggml_cpu_has_avx512()));
  benchmark::AddCustomContext("ggml_version", std::string(ggml_version()) + " " + ggml_commit());
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

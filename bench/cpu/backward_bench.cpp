// The CPU backward (deltac_backward) against the forward (deltac_forward, the
// runtime's default CPU kernel) on the same problem: tokens_per_s of each;
// the backward's time / the forward's is the ratio docs/performance.md
// reports. f32, q/k L2 norm, h0 and dht given, 16 heads, K = V = 128 unless
// named. Backward args: T, chunk (the sweep: tokens between saved states;
// the chunked form: tokens per chunk), threads.
#include "deltac/runtime.h"

#include <benchmark/benchmark.h>

#include <cstdint>
#include <random>
#include <vector>

namespace {

constexpr int kHeads = 16, kD = 128;

struct Problem {
  std::vector<float> q, k, v, g, beta, h0, o, ht, dout, dht;
  std::vector<float> dq, dk, dv, dg, dbeta, dh0;
  deltac_fwd_params f{};
  deltac_bwd_params b{};
};

Problem make(deltac_variant var, int T, int threads, int chunk) {
  Problem pr;
  std::mt19937 rng(42);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::uniform_real_distribution<float> ud(0.0f, 1.0f);
  const size_t tok = size_t(T), nqk = tok * kHeads * kD, ns = size_t(kHeads) * kD * kD;
  for (auto* x : {&pr.q, &pr.k, &pr.v, &pr.dout}) {
    x->resize(nqk);
    for (auto& e : *x) e = nd(rng);
  }
  pr.beta.resize(tok * kHeads);
  for (auto& e : pr.beta) e = ud(rng);
  if (var != DELTAC_VARIANT_DELTA) {
    pr.g.resize(tok * kHeads * (var == DELTAC_VARIANT_KDA ? kD : 1));
    for (auto& e : pr.g) e = -0.1f * ud(rng);
  }
  for (auto* x : {&pr.h0, &pr.dht}) {
    x->resize(ns);
    for (auto& e : *x) e = 0.1f * nd(rng);
  }
  pr.o.resize(nqk), pr.ht.resize(ns);
  pr.dq.resize(nqk), pr.dk.resize(nqk), pr.dv.resize(nqk);
  pr.dg.resize(pr.g.size()), pr.dbeta.resize(pr.beta.size()), pr.dh0.resize(ns);
  deltac_fwd_params& f = pr.f;
  f.variant = var;
  f.B = 1, f.T = T, f.H = f.HV = kHeads, f.K = f.V = kD, f.N = 1;
  f.in_dtype = f.out_dtype = f.state_dtype = DELTAC_F32;
  f.q = pr.q.data(), f.k = pr.k.data(), f.v = pr.v.data();
  f.g = pr.g.empty() ? nullptr : pr.g.data();
  f.beta = pr.beta.data(), f.h0 = pr.h0.data(), f.o = pr.o.data(), f.ht = pr.ht.data();
  f.qk_l2norm = 1, f.threads = threads;
  deltac_bwd_params& b = pr.b;
  b.variant = var;
  b.B = 1, b.T = T, b.H = b.HV = kHeads, b.K = b.V = kD, b.N = 1;
  b.in_dtype = b.out_dtype = DELTAC_F32;
  b.q = f.q, b.k = f.k, b.v = f.v, b.g = f.g, b.beta = f.beta, b.h0 = f.h0;
  b.dout = pr.dout.data(), b.dht = pr.dht.data();
  b.dq = pr.dq.data(), b.dk = pr.dk.data(), b.dv = pr.dv.data();
  b.dg = pr.g.empty() ? nullptr : pr.dg.data();
  b.dbeta = pr.dbeta.data(), b.dh0 = pr.dh0.data();
  b.qk_l2norm = 1, b.threads = threads, b.chunk = chunk;
  return pr;
}

void tokens(benchmark::State& st, int T) {
  st.counters["tokens_per_s"] =
      benchmark::Counter(T, benchmark::Counter::kIsIterationInvariantRate);
}

// st.range: T, threads.
template <deltac_variant Var>
void BM_Forward(benchmark::State& st) {
  const int T = int(st.range(0));
  Problem pr = make(Var, T, int(st.range(1)), 0);
  deltac_options opt = deltac_default_options();
  opt.device = DELTAC_DEVICE_CPU;
  for (auto _ : st)
    if (deltac_forward(&pr.f, &opt) != 0) st.SkipWithError(deltac_last_error());
  tokens(st, T);
}

// st.range: T, chunk, threads.
template <deltac_variant Var>
void BM_Backward(benchmark::State& st) {
  const int T = int(st.range(0));
  Problem pr = make(Var, T, int(st.range(2)), int(st.range(1)));
  for (auto _ : st)
    if (deltac_backward(&pr.b, nullptr) != 0) st.SkipWithError(deltac_last_error());
  tokens(st, T);
}

#define DELTAC_BWD_BENCH(Var)                                                    \
  BENCHMARK_TEMPLATE(BM_Forward, Var)                                            \
      ->ArgNames({"T", "threads"})->Args({2048, 0})->Args({2048, 1})             \
      ->Unit(benchmark::kMillisecond)->UseRealTime();                            \
  BENCHMARK_TEMPLATE(BM_Backward, Var)                                           \
      ->ArgNames({"T", "chunk", "threads"})->Args({2048, 0, 0})->Args({2048, 0, 1}) \
      ->Unit(benchmark::kMillisecond)->UseRealTime();

DELTAC_BWD_BENCH(DELTAC_VARIANT_DELTA)
DELTAC_BWD_BENCH(DELTAC_VARIANT_GATED)
DELTAC_BWD_BENCH(DELTAC_VARIANT_KDA)
// The chunk sweep: the sweep's saved-state interval (kda), the chunked
// form's chunk (gated; 0 = 64), 1 thread.
BENCHMARK_TEMPLATE(BM_Backward, DELTAC_VARIANT_KDA)
    ->ArgNames({"T", "chunk", "threads"})
    ->Args({2048, 8, 1})->Args({2048, 32, 1})
    ->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_TEMPLATE(BM_Backward, DELTAC_VARIANT_GATED)
    ->ArgNames({"T", "chunk", "threads"})
    ->Args({2048, 16, 1})->Args({2048, 32, 1})->Args({2048, 128, 1})
    ->Unit(benchmark::kMillisecond)->UseRealTime();
// Long sequences (the chunked form's case), 1 thread.
BENCHMARK_TEMPLATE(BM_Backward, DELTAC_VARIANT_GATED)
    ->ArgNames({"T", "chunk", "threads"})->Args({8192, 0, 1})
    ->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();

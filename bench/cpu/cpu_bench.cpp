// CPU kernel benchmarks (Google Benchmark). Counters:
//   tokens_per_s  tokens processed per second (B * T)
//   GFLOPs        GFLOP/s, counted as in docs/performance.md:
//                 recurrent 2 * 3KV per token and value head,
//                 chunked   2 * (3KV + C(K+V)) per token and value head,
//                 sgemm     2 * M * N * K.
// OpenBLAS cblas_sgemm on the chunked form's block shapes is the ceiling.
#include "aligned.h"
#include "deltac/convert.h"
#include "deltac/cpu/isa.h"
#include "deltac/flops.h"

#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#ifdef DELTAC_HAVE_OPENBLAS
#include <cblas.h>
#include <omp.h>
#endif

namespace {

using deltac::bench::Buf;  // 64-byte aligned (aligned.h)

struct Problem {
  Buf q, k, v, g, beta, h0, o, ht;
  deltac_fwd_params p{};
};

Problem make_problem(deltac_variant var, int B, int T, int H, int K, int V,
                     bool state) {
  Problem pr;
  std::mt19937 rng(42);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::uniform_real_distribution<float> ud(0.0f, 1.0f);
  const size_t rows = size_t(B) * T;
  pr.q.resize(rows * H * K);
  pr.k.resize(rows * H * K);
  pr.v.resize(rows * H * V);
  for (auto* vec : {&pr.q, &pr.k, &pr.v})
    for (auto& x : *vec) x = nd(rng);
  pr.beta.resize(rows * H);
  for (auto& x : pr.beta) x = ud(rng);
  if (var != DELTAC_VARIANT_DELTA) {
    pr.g.resize(rows * H * (var == DELTAC_VARIANT_KDA ? K : 1));
    for (auto& x : pr.g) x = -0.1f * ud(rng);
  }
  pr.o.resize(rows * H * V);
  if (state) {
    pr.h0.resize(size_t(B) * H * K * V);
    for (auto& x : pr.h0) x = 0.1f * nd(rng);
    pr.ht.resize(pr.h0.size());
  }
  deltac_fwd_params& p = pr.p;
  p.variant = var;
  p.B = B;
  p.T = T;
  p.H = p.HV = H;
  p.K = K;
  p.V = V;
  p.N = B;
  p.in_dtype = p.out_dtype = p.state_dtype = DELTAC_F32;
  p.state_layout = DELTAC_STATE_KV;
  p.q = pr.q.data();
  p.k = pr.k.data();
  p.v = pr.v.data();
  p.g = pr.g.empty() ? nullptr : pr.g.data();
  p.beta = pr.beta.data();
  p.h0 = state ? pr.h0.data() : nullptr;
  p.o = pr.o.data();
  p.ht = state ? pr.ht.data() : nullptr;
  p.scale = 0.0f;
  p.qk_l2norm = 1;
  p.threads = 0;
  return pr;
}

void set_counters(benchmark::State& st, double tokens, double flops) {
  st.counters["tokens_per_s"] =
      benchmark::Counter(tokens, benchmark::Counter::kIsIterationInvariantRate);
  st.counters["GFLOPs"] =
      benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

constexpr int kPrefillT = 8192, kHeads = 16, kD = 128;

// The instance a benchmark runs: its "isa" argument (deltac::CpuIsa: 0
// generic, 1 avx2, 2 avx512), skipped when this CPU lacks it; the label
// names it. Both instances in one binary, so that runs with
// --benchmark_enable_random_interleaving compare them under the same load.
bool use_isa(benchmark::State& st, int64_t arg, deltac::cpu::isa::Isa* out) {
  *out = static_cast<deltac::cpu::isa::Isa>(arg);
  if (!deltac::cpu::isa::supported(*out)) {
    st.SkipWithError("instruction set not supported by this CPU");
    return false;
  }
  st.SetLabel(deltac::cpu::isa::name(*out));
  return true;
}

// st.range: T, threads (0 = all cores), isa.
template <deltac_variant Var, int Chunk>
void BM_Chunked(benchmark::State& st) {
  const int T = int(st.range(0));
  Problem pr = make_problem(Var, 1, T, kHeads, kD, kD, true);
  pr.p.threads = int(st.range(1));
  deltac::cpu::isa::Isa isa;
  if (!use_isa(st, st.range(2), &isa))
    return;
  for (auto _ : st) {
    deltac::cpu::isa::forward(Var, Chunk, pr.p, isa);
    benchmark::DoNotOptimize(pr.o.data());
  }
  set_counters(st, T, double(T) * kHeads * deltac::chunked_flops_per_token(kD, kD, Chunk));
}

// st.range: T, threads, isa.
template <deltac_variant Var>
void BM_RecurrentPrefill(benchmark::State& st) {
  const int T = int(st.range(0));
  Problem pr = make_problem(Var, 1, T, kHeads, kD, kD, true);
  pr.p.threads = int(st.range(1));
  deltac::cpu::isa::Isa isa;
  if (!use_isa(st, st.range(2), &isa))
    return;
  for (auto _ : st) {
    deltac::cpu::isa::forward(Var, 0, pr.p, isa);
    benchmark::DoNotOptimize(pr.o.data());
  }
  set_counters(st, T, double(T) * kHeads * deltac::recurrent_flops_per_token(kD, kD));
}

// Decode: T = 1, batch st.range(0), heads st.range(1), state updated in
// place (ht = h0, as an inference loop does), threads st.range(2) (0 = all
// cores), isa st.range(3), state layout st.range(4) (0 KV, 1 VK: ggml's and
// llama.cpp's). Iterations cycle through kDecodeSteps different
// input tokens (with one token repeated, the state decays towards a fixed
// point and passes through denormals). state_GBps counts the state read and
// written once each.
constexpr int kDecodeSteps = 16;

template <deltac_variant Var>
void BM_Decode(benchmark::State& st) {
  const int B = int(st.range(0)), H = int(st.range(1));
  Problem pr = make_problem(Var, B, 1, H, kD, kD, true);
  Problem in = make_problem(Var, B * kDecodeSteps, 1, H, kD, kD, false);
  pr.p.ht = pr.h0.data();
  pr.p.threads = int(st.range(2));
  pr.p.state_layout = st.range(4) ? DELTAC_STATE_VK : DELTAC_STATE_KV;
  const size_t gw = Var == DELTAC_VARIANT_KDA ? kD : 1;
  int s = 0;
  deltac::cpu::isa::Isa isa;
  if (!use_isa(st, st.range(3), &isa))
    return;
  for (auto _ : st) {
    const size_t row = size_t(s) * B * H;  // first (token, head) of step s
    pr.p.q = in.q.data() + row * kD;
    pr.p.k = in.k.data() + row * kD;
    pr.p.v = in.v.data() + row * kD;
    pr.p.beta = in.beta.data() + row;
    if (!in.g.empty())
      pr.p.g = in.g.data() + row * gw;
    deltac::cpu::isa::forward(Var, 0, pr.p, isa);
    benchmark::DoNotOptimize(pr.h0.data());
    s = s + 1 == kDecodeSteps ? 0 : s + 1;
  }
  set_counters(st, B, double(B) * H * deltac::recurrent_flops_per_token(kD, kD));
  st.counters["state_GBps"] = benchmark::Counter(
      2.0 * B * H * kD * kD * 4 * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

// bf16 against f32 inputs (q, k, v; f32 g, beta, out and state): the
// kernels widen bf16 rows to f32 as they read them (common.h, load_row), so
// this is the cost of that conversion. st.range: mode (0 recurrent, else the
// chunk), T, bf16, isa; threads 1.
template <deltac_variant Var>
void BM_InDtype(benchmark::State& st) {
  const int mode = int(st.range(0)), T = int(st.range(1));
  Problem pr = make_problem(Var, 1, T, kHeads, kD, kD, true);
  pr.p.threads = 1;
  std::vector<uint16_t> in[3];
  if (st.range(2)) {
    const Buf* src[3] = {&pr.q, &pr.k, &pr.v};
    const void** dst[3] = {&pr.p.q, &pr.p.k, &pr.p.v};
    for (int i = 0; i < 3; ++i) {
      in[i].resize(src[i]->size());
      for (size_t j = 0; j < in[i].size(); ++j) in[i][j] = deltac::f32_to_bf16((*src[i])[j]);
      *dst[i] = in[i].data();
    }
    pr.p.in_dtype = DELTAC_BF16;
  }
  deltac::cpu::isa::Isa isa;
  if (!use_isa(st, st.range(3), &isa))
    return;
  for (auto _ : st) {
    deltac::cpu::isa::forward(Var, mode, pr.p, isa);
    benchmark::DoNotOptimize(pr.o.data());
  }
  set_counters(st, T, 0.0);
}

// Every x86-64 instance from avx2 up (rows of instances the CPU lacks are
// skipped), generic elsewhere.
std::vector<int64_t> isa_args() {
#if defined(__x86_64__)
  return {int64_t(deltac::CpuIsa::avx2), int64_t(deltac::CpuIsa::avx512)};
#else
  return {int64_t(deltac::CpuIsa::generic)};
#endif
}

void chunked_args(benchmark::internal::Benchmark* b) {
  for (int64_t isa : isa_args())
    for (int threads : {0, 1}) b->Args({kPrefillT, threads, isa});
  b->ArgNames({"T", "threads", "isa"})->Unit(benchmark::kMillisecond)->UseRealTime();
}
// Gated (both forms): the lengths where Mode::Auto chooses between them.
void gated_length_args(benchmark::internal::Benchmark* b) {
  for (int64_t isa : isa_args())
    for (int threads : {0, 1})
      for (int T : {256, 1024, 4096, kPrefillT}) b->Args({T, threads, isa});
  b->ArgNames({"T", "threads", "isa"})->Unit(benchmark::kMillisecond)->UseRealTime();
}
void recurrent_args(benchmark::internal::Benchmark* b) {
  for (int64_t isa : isa_args()) {
    b->Args({4096, 0, isa})->Args({8192, 0, isa})->Args({4096, 1, isa});
  }
  b->ArgNames({"T", "threads", "isa"})->Unit(benchmark::kMillisecond)->UseRealTime();
}

BENCHMARK_TEMPLATE(BM_Chunked, DELTAC_VARIANT_DELTA, 64)->Apply(chunked_args);
BENCHMARK_TEMPLATE(BM_Chunked, DELTAC_VARIANT_GATED, 64)->Apply(gated_length_args);
BENCHMARK_TEMPLATE(BM_Chunked, DELTAC_VARIANT_KDA, 64)->Apply(chunked_args);
BENCHMARK_TEMPLATE(BM_Chunked, DELTAC_VARIANT_GATED, 32)->Apply(gated_length_args);
BENCHMARK_TEMPLATE(BM_Chunked, DELTAC_VARIANT_GATED, 16)->Apply(chunked_args);
BENCHMARK_TEMPLATE(BM_RecurrentPrefill, DELTAC_VARIANT_DELTA)->Apply(recurrent_args);
BENCHMARK_TEMPLATE(BM_RecurrentPrefill, DELTAC_VARIANT_GATED)->Apply(gated_length_args);
BENCHMARK_TEMPLATE(BM_RecurrentPrefill, DELTAC_VARIANT_KDA)->Apply(recurrent_args);

void in_dtype_args(benchmark::internal::Benchmark* b) {
  for (int64_t isa : isa_args())
    for (int mode : {0, 64})
      for (int bf16 : {0, 1}) b->Args({mode, 4096, bf16, isa});
  b->ArgNames({"mode", "T", "bf16", "isa"})->Unit(benchmark::kMillisecond)->UseRealTime();
}
BENCHMARK_TEMPLATE(BM_InDtype, DELTAC_VARIANT_GATED)->Apply(in_dtype_args);

void decode_args(benchmark::internal::Benchmark* b) {
  for (int64_t isa : isa_args())
    for (int threads : {0, 1})
      for (int H : {16, 32})
        for (int B : {1, 2, 4, 8, 16, 32, 64})
          for (int layout : {0, 1}) b->Args({B, H, threads, isa, layout});
  b->ArgNames({"batch", "heads", "threads", "isa", "layout"})->UseRealTime();
}
BENCHMARK_TEMPLATE(BM_Decode, DELTAC_VARIANT_DELTA)->Apply(decode_args);
BENCHMARK_TEMPLATE(BM_Decode, DELTAC_VARIANT_GATED)->Apply(decode_args);
BENCHMARK_TEMPLATE(BM_Decode, DELTAC_VARIANT_KDA)->Apply(decode_args);

// The ceiling of a decode step: one in-place pass over the same state bytes
// as BM_Decode (batch x heads x 128 x 128 f32: x = a x + c, read and written
// once, as decode reads h0 and writes ht), each thread on the same
// contiguous slice every call (as the decode kernel keeps its slices). The
// widest of AVX-512 / AVX2 / SSE2 the CPU has (target_clones).
__attribute__((target_clones("avx512f", "avx2", "default"))) void
stream_pass(float* x, int64_t n, int threads) {
#pragma omp parallel for schedule(static) num_threads(threads)
  for (int64_t i = 0; i < n; ++i) x[i] = x[i] * 0.999f + 1e-3f;
}

void BM_StateStream(benchmark::State& st) {
  const int B = int(st.range(0)), H = int(st.range(1));
  const int threads = st.range(2) ? int(st.range(2)) : omp_get_num_procs();
  const int64_t n = int64_t(B) * H * kD * kD;
  std::vector<float> x(size_t(n), 0.5f);
  for (auto _ : st) {
    stream_pass(x.data(), n, threads);
    benchmark::DoNotOptimize(x.data());
  }
  st.counters["state_GBps"] = benchmark::Counter(
      2.0 * double(n) * 4 * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_StateStream)->Apply([](benchmark::internal::Benchmark* b) {
  for (int threads : {0, 1})
    for (int B : {1, 8, 64}) b->Args({B, 16, threads});
  b->ArgNames({"batch", "heads", "threads"})->UseRealTime();
});

#ifdef DELTAC_HAVE_OPENBLAS
// `batch` independent M x N x K products, spread over OpenMP threads with
// single-threaded OpenBLAS (as the chunked kernel spreads heads).
void BM_SgemmBatched(benchmark::State& st) {
  const int M = int(st.range(0)), N = int(st.range(1)), K = int(st.range(2));
  const int batch = int(st.range(3)), threads = int(st.range(4));
  openblas_set_num_threads(1);
  std::vector<float> a(size_t(batch) * M * K, 0.5f), b(size_t(batch) * K * N, 0.25f),
      c(size_t(batch) * M * N);
  for (auto _ : st) {
#pragma omp parallel for schedule(static) num_threads(threads)
    for (int i = 0; i < batch; ++i)
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, N, K, 1.0f,
                  a.data() + size_t(i) * M * K, K, b.data() + size_t(i) * K * N, N,
                  0.0f, c.data() + size_t(i) * M * N, N);
    benchmark::DoNotOptimize(c.data());
  }
  set_counters(st, 0.0, 2.0 * M * N * K * batch);
}
BENCHMARK(BM_SgemmBatched)
    ->Args({64, 128, 128, 2048, 2})
    ->Args({128, 128, 64, 2048, 2})
    ->Args({128, 128, 128, 1024, 2})
    ->Args({64, 128, 128, 1024, 1})
    ->ArgNames({"M", "N", "K", "batch", "threads"})
    ->UseRealTime();

// One large product on `threads` OpenBLAS threads (0 = all cores).
void BM_SgemmLarge(benchmark::State& st) {
  const int n = int(st.range(0));
  const int threads = st.range(1) ? int(st.range(1)) : omp_get_num_procs();
  openblas_set_num_threads(threads);
  std::vector<float> a(size_t(n) * n, 0.5f), b(size_t(n) * n, 0.25f), c(size_t(n) * n);
  for (auto _ : st) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a.data(),
                n, b.data(), n, 0.0f, c.data(), n);
    benchmark::DoNotOptimize(c.data());
  }
  set_counters(st, 0.0, 2.0 * double(n) * n * n);
}
BENCHMARK(BM_SgemmLarge)->ArgNames({"n", "threads"})->Args({1024, 0})->Args({1024, 2})->Args({1024, 1})->Unit(benchmark::kMillisecond)->UseRealTime();
#endif

}  // namespace

// BENCHMARK_MAIN, plus the context: the instruction set chosen (each
// kernel benchmark's label and "isa" argument is the instance it ran,
// deltac/cpu/isa.h)
// and, for the SGEMM ceiling, the OpenBLAS core type (set OPENBLAS_CORETYPE
// in the benchmark command, e.g. SkylakeX on AVX-512 machines: OpenBLAS
// 0.3.21 may detect a recent CPU as an old core and run SSE3 kernels).
int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv))
    return 1;
  namespace isa = deltac::cpu::isa;
  benchmark::AddCustomContext("deltac_cpu_isa", isa::name(isa::active()));
  std::string rule;  // the instance the catalogue's rule runs each family with
  for (deltac::Family f : {deltac::Family::CpuRecurrent, deltac::Family::CpuDecode,
                           deltac::Family::CpuChunked})
    rule += std::string(rule.empty() ? "" : " ") + deltac::family_info(f).name + "=" +
            isa::name(isa::for_family(f));
  benchmark::AddCustomContext("deltac_cpu_rule", rule);
#if defined(DELTAC_HAVE_OPENBLAS)
  const char* ct = std::getenv("OPENBLAS_CORETYPE");
  benchmark::AddCustomContext("openblas_coretype_env", ct ? ct : "(unset)");
  benchmark::AddCustomContext("openblas_config", openblas_get_config());
  benchmark::AddCustomContext("openblas_core", openblas_get_corename());
#endif
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

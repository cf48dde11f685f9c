// BitLinear's int8 GEMM (runtime/src/bitlinear.h) against OpenBLAS
// cblas_sgemm of the same shape (y [M, N] = x [M, K] W^T), on the layers'
// shapes: DeltaNetAttention's stacked q/k/v/g (N = 8208 with beta: the f32
// projection's width) and out_proj (2048 x 2048), prompt (M = 1024) and
// decode (M = 1), 1 and 2 threads. bitlinear_gemm: the GEMM on quantised
// activations; bitlinear_linear: quantisation + GEMM (what Linear::forward
// costs); sgemm: the f32 GEMM the layer ran before (and sgemv for M = 1,
// what it runs now for one row). Counter gflops = 2 M N K
// / time. The JSON context names the kernel that ran (bitlinear_kernel;
// DELTAC_CPU_ISA=generic|avx2|avx512 forces one) and OpenBLAS's core.
#include "bitlinear.h"

#include <benchmark/benchmark.h>
#include <cblas.h>

#include <cstdio>
#include <random>
#include <vector>

namespace {

namespace bl = deltac::nn::bitlinear;

struct Problem {
  int64_t M, N, K;
  std::vector<float> x, w, y;
  bl::Weights packed;
  bl::Acts acts;
  Problem(int64_t m, int64_t n, int64_t k) : M(m), N(n), K(k) {
    std::mt19937_64 rng(1);
    std::normal_distribution<float> nd(0, 1);
    x.resize(size_t(M * K));
    w.resize(size_t(N * K));
    y.resize(size_t(M * N));
    for (float &v : x) v = nd(rng);
    for (float &v : w) v = nd(rng) * 0.02f;
    packed = bl::pack(w.data(), N, K, 1e-5f);
    bl::quantize(bl::active(), x.data(), M, K, 1e-5f, &acts);
  }
};

void finish(benchmark::State &st, const Problem &p, const char *label) {
  st.counters["gflops"] = benchmark::Counter(2.0 * double(p.M * p.N * p.K),
                                             benchmark::Counter::kIsIterationInvariantRate,
                                             benchmark::Counter::kIs1000);
  st.SetLabel(label);
}

void bitlinear_gemm(benchmark::State &st) {
  Problem p(st.range(0), st.range(1), st.range(2));
  const int threads = int(st.range(3));
  for (auto _ : st) {
    bl::gemm(bl::active(), p.acts, p.packed, p.y.data(), p.N, threads);
    benchmark::DoNotOptimize(p.y.data());
  }
  finish(st, p, bl::name(bl::active()));
}

void bitlinear_linear(benchmark::State &st) {
  Problem p(st.range(0), st.range(1), st.range(2));
  const int threads = int(st.range(3));
  for (auto _ : st) {
    bl::quantize(bl::active(), p.x.data(), p.M, p.K, 1e-5f, &p.acts);
    bl::gemm(bl::active(), p.acts, p.packed, p.y.data(), p.N, threads);
    benchmark::DoNotOptimize(p.y.data());
  }
  finish(st, p, bl::name(bl::active()));
}

void sgemm(benchmark::State &st) {
  Problem p(st.range(0), st.range(1), st.range(2));
  openblas_set_num_threads(int(st.range(3)));
  for (auto _ : st) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, int(p.M), int(p.N), int(p.K), 1.0f,
                p.x.data(), int(p.K), p.w.data(), int(p.K), 0.0f, p.y.data(), int(p.N));
    benchmark::DoNotOptimize(p.y.data());
  }
  finish(st, p, "openblas");
}

// M = 1 (decode) through sgemv, what Linear::forward calls for one row.
void sgemv(benchmark::State &st) {
  Problem p(1, st.range(1), st.range(2));
  openblas_set_num_threads(int(st.range(3)));
  for (auto _ : st) {
    cblas_sgemv(CblasRowMajor, CblasNoTrans, int(p.N), int(p.K), 1.0f, p.w.data(), int(p.K),
                p.x.data(), 1, 0.0f, p.y.data(), 1);
    benchmark::DoNotOptimize(p.y.data());
  }
  finish(st, p, "openblas");
}

void shapes(benchmark::internal::Benchmark *b) {
  b->ArgNames({"M", "N", "K", "threads"});
  for (int threads : {1, 2})
    for (auto s : {std::vector<int64_t>{1024, 8208, 2048}, {1, 8208, 2048}, {1024, 2048, 2048},
                   {1, 2048, 2048}})
      b->Args({s[0], s[1], s[2], threads});
  b->UseRealTime()->Unit(benchmark::kMillisecond);
}

BENCHMARK(bitlinear_gemm)->Apply(shapes);
BENCHMARK(bitlinear_linear)->Apply(shapes);
BENCHMARK(sgemm)->Apply(shapes);
BENCHMARK(sgemv)->Apply([](benchmark::internal::Benchmark *b) {
  b->ArgNames({"M", "N", "K", "threads"});
  for (int threads : {1, 2})
    for (int64_t n : {8208, 2048}) b->Args({1, n, 2048, threads});
  b->UseRealTime()->Unit(benchmark::kMillisecond);
});

} // namespace

int main(int argc, char **argv) {
  benchmark::Initialize(&argc, argv);
  benchmark::AddCustomContext("bitlinear_kernel", bl::name(bl::active()));
  benchmark::AddCustomContext("openblas_core", openblas_get_corename());
  std::printf("bitlinear kernel: %s, OpenBLAS core: %s\n", bl::name(bl::active()),
              openblas_get_corename());
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

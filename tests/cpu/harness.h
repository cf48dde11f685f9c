// Test harness for the CPU kernels: random inputs for a Case, the kernel
// chosen by variant and mode, and comparison with the float64 reference.
#ifndef DELTAC_TESTS_CPU_HARNESS_H
#define DELTAC_TESTS_CPU_HARNESS_H

#include "deltac/cpu/forward.h"
#include "deltac/reference.h"
#include "deltac/test_seed.h"

#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace deltac::test {

using KernelFn = void (*)(const deltac_fwd_params&);

struct Case {
  deltac_variant var = DELTAC_VARIANT_DELTA;
  int mode = 0;  // 0: recurrent, else chunk size 16 / 32 / 64
  int B = 1, T = 16, H = 2, HV = 2, K = 32, V = 32;
  std::vector<int64_t> lens;  // non-empty: varlen (cu_seqlens), B = 1
  bool bf16_in = false, bf16_out = false;
  int layout = DELTAC_STATE_KV;
  bool h0 = true, ht = true, l2norm = true;
  float scale = 0.0f;  // 0: 1/sqrt(K)
  float beta_lo = 0.0f, beta_hi = 1.0f;
  float g_lo = -1.0f, g_hi = 0.0f;
  float g_spike = 0.0f;  // if < 0: each gate is g_spike with probability 1/8
  int threads = 0;
  bool inplace = false;  // ht aliases h0 (state updated in place)
};

// Host buffers for one call.
struct Data {
  std::vector<float> q, k, v, g, beta, h0, o, ht;
  std::vector<uint16_t> qb, kb, vb, ob;
  std::vector<int64_t> cu;
  deltac_fwd_params p{};
  int64_t rows = 0;  // B * T tokens
  int N = 0;
};

Data make_data(const Case& c, std::mt19937_64& rng);
// Zeroes the outputs of d (o, ht) with NaN sentinels so unwritten values fail.
void poison_outputs(Data* d);
KernelFn kernel_for(deltac_variant var, int mode);

struct Errors {
  double o = 0.0, ht = 0.0;
  uint64_t seed = 0;  // of the inputs: SCOPED_TRACE(seed_note(e.seed))
};
// Runs fn (default: kernel_for(c.var, c.mode)) on inputs drawn from a
// fresh_seed() and returns the relative RMS errors against
// deltac::ref::forward, with the seed.
Errors run_vs_reference(const Case& c, KernelFn fn = nullptr);
// Largest tolerated error for a case's o (bf16 output: 5e-3, else 1e-5).
double o_tolerance(const Case& c);
std::string describe(const Case& c);
// The seed of one random problem: DELTAC_TEST_SEED when set, else fresh
// (deltac/test_seed.h). Every randomized test draws its inputs from such a
// seed and puts SCOPED_TRACE(seed_note(seed)) in scope of its checks, so a
// failure prints "DELTAC_TEST_SEED=<n>" and
//   DELTAC_TEST_SEED=<n> deltac_cpu_tests --gtest_filter=<test>
// replays it.
inline uint64_t fresh_seed() { return deltac::test_seed(); }
inline std::string seed_note(uint64_t seed) { return deltac::test_seed_note(seed); }

}  // namespace deltac::test

#endif  // DELTAC_TESTS_CPU_HARNESS_H

// One GPU test case of the recurrent or the chunked kernel: random inputs,
// the float64 reference on the host, the kernel on the device, relative RMS
// errors.
#ifndef DELTAC_TESTS_CUDA_HARNESS_H
#define DELTAC_TESTS_CUDA_HARNESS_H

#include "deltac/params.h"

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

namespace deltac::test {

struct Case {
  std::string name;
  deltac_variant var = DELTAC_VARIANT_GATED;
  int K = 128, V = 128;
  bool bf16 = false;
  int B = 2, T = 4, H = 2, HV = 4;
  std::vector<int64_t> cu_seqlens;  // empty: B sequences of T tokens
  bool h0 = true, ht = true;
  bool inplace = false;    // ht and h0 are one buffer
  bool misaligned = false; // v, o, h0, ht offset by one element
  int layout = DELTAC_STATE_KV;
  int l2norm = 1;
  float scale = 0.f;  // 0: 1/sqrt(K)
  float beta_lo = 0.f, beta_hi = 1.f;
  float g_lo = -1.f, g_hi = 0.f;  // log-decay range (gated, kda)
  int bv = 0;                      // V-tile width, 0: the kernel's choice
  bool f16 = false;                // f16 inputs and output (bf16 must be false)
  bool chunked = false;            // run deltac::cuda::chunked instead of recurrent
  int config = 0;                  // chunked config index (kernels_chunked.cuh), 0: default
  int neg_inf_at = -1;             // token whose gate is -inf (all heads, channels)
  int nan_at = -1;                 // token whose v holds a NaN (value head 0, column 0)
};

// gtest prints a case by its name (ctest lists the discovered cases so).
inline void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

struct Result {
  std::string error;  // non-empty: the run failed before any comparison
  double o_err = 0, ht_err = 0;
  bool o_finite = true, ht_finite = true;
  bool repeat_identical = true;  // a second run gave bit-identical outputs
  // Every element the reference makes non-finite is non-finite here too
  // (NaN in, never finite garbage out).
  bool nan_kept = true;
  std::vector<float> o, ht;  // the outputs as f32 (first run)
};

// Whether a CUDA device can be used here (driver present, count > 0).
bool have_gpu();

// Runs `c` with fresh random inputs (seeded from `seed`) and compares with
// deltac::ref::forward. Outputs are poisoned with NaN before each run.
Result run_case(const Case& c, uint64_t seed);

// ||a - b|| / ||b||.
double rel_diff(const std::vector<float>& a, const std::vector<float>& b);

// The seed of a randomized test: DELTAC_TEST_SEED, else a fresh one.
uint64_t test_seed();

}  // namespace deltac::test

#endif  // DELTAC_TESTS_CUDA_HARNESS_H

// Random delta-rule inputs for the runtime-level CUDA tests (batch-invariant
// mode, mixed batches): unit q/k rows, normal v, beta in (0, 1), gates in
// (-0.2, 0] (per key channel for kda), initial states; and their bytes in the
// call's input dtype.
#ifndef DELTAC_TESTS_CUDA_BATCH_INPUTS_H
#define DELTAC_TESTS_CUDA_BATCH_INPUTS_H

#include "deltac/params.h"
#include "deltac/reference.h"
#include "deltac/tuning_db.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace deltac::test_inputs {

// Test-name part of a (variant, bf16 inputs) pair: "gated_bf16", "kda_f32".
inline std::string variant_dtype(int variant, bool bf16) {
  return std::string(variant_name(variant)) + (bf16 ? "_bf16" : "_f32");
}

struct Inputs {
  std::vector<float> q, k, v, g, beta, h0;  // g empty for delta
};

// T tokens (H q/k heads of K, HV value heads of V) and N initial states,
// drawn from seed.
inline Inputs draw_inputs(int variant, int T, int N, int H, int HV, int K, int V, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> n01(0.f, 1.f);
  std::uniform_real_distribution<float> u01(0.f, 1.f);
  Inputs in;
  for (auto *x : {&in.q, &in.k}) {
    x->resize(size_t(T) * H * K);
    for (size_t r = 0; r < x->size() / K; ++r) {
      double s = 0;
      for (int i = 0; i < K; ++i)
        s += double((*x)[r * K + i] = n01(rng)) * (*x)[r * K + i];
      for (int i = 0; i < K; ++i)
        (*x)[r * K + i] = float((*x)[r * K + i] / std::sqrt(s));
    }
  }
  in.v.resize(size_t(T) * HV * V);
  for (float &x : in.v)
    x = n01(rng);
  in.beta.resize(size_t(T) * HV);
  for (float &x : in.beta)
    x = u01(rng);
  if (variant != DELTAC_VARIANT_DELTA) {
    in.g.resize(size_t(T) * HV * (variant == DELTAC_VARIANT_KDA ? K : 1));
    for (float &x : in.g)
      x = -0.2f * u01(rng);
  }
  in.h0.resize(size_t(N) * HV * K * V);
  for (float &x : in.h0)
    x = 0.3f * n01(rng);
  return in;
}

// x as bf16 (rounded) or f32 bytes.
inline std::vector<uint8_t> as_bytes(const std::vector<float> &x, bool bf16) {
  std::vector<uint8_t> b(x.size() * (bf16 ? 2 : 4));
  for (size_t i = 0; i < x.size(); ++i) {
    if (bf16) {
      const uint16_t h = ref::float_to_bf16(x[i]);
      std::memcpy(&b[2 * i], &h, 2);
    } else {
      std::memcpy(&b[4 * i], &x[i], 4);
    }
  }
  return b;
}

}  // namespace deltac::test_inputs

#endif  // DELTAC_TESTS_CUDA_BATCH_INPUTS_H

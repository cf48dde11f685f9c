// BitLinear int8 GEMM: packing, the kernel choice and the threaded driver
// (bitlinear.h); the per-ISA kernels are in bitlinear_<isa>.cpp.
#include "bitlinear.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <stdexcept>

namespace deltac {
namespace nn {
namespace bitlinear {

#if defined(__x86_64__)
#define DELTAC_BITLINEAR_X86 1
#else
#define DELTAC_BITLINEAR_X86 0
#endif

const char *name(Kernel k) {
  switch (k) {
  case Kernel::avx512vnni: return "avx512vnni";
  case Kernel::avx2: return "avx2";
  default: return "generic";
  }
}

bool supported(Kernel k) {
#if DELTAC_BITLINEAR_X86
  __builtin_cpu_init();
  // What bitlinear_avx2.cpp and nn_rows_avx2.cpp are compiled for (x86-64-v3).
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
                    __builtin_cpu_supports("bmi") && __builtin_cpu_supports("bmi2") &&
                    __builtin_cpu_supports("popcnt");
  switch (k) {
  case Kernel::generic: return true;
  case Kernel::avx2: return avx2;
  case Kernel::avx512vnni:
    return avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vnni");
  }
  return false;
#else
  return k == Kernel::generic;
#endif
}

static Kernel choose() {
  Kernel best = Kernel::generic;
  for (Kernel k : {Kernel::avx2, Kernel::avx512vnni})
    if (supported(k)) best = k;
  const char *e = std::getenv("DELTAC_CPU_ISA");
  if (!e || !*e) return best;
  // The delta-rule kernels' names (deltac/cpu/isa.h): avx512 means VNNI here.
  Kernel want = best;
  if (!std::strcmp(e, "generic")) want = Kernel::generic;
  else if (!std::strcmp(e, "avx2")) want = Kernel::avx2;
  else if (!std::strcmp(e, "avx512")) want = Kernel::avx512vnni;
  if (supported(want)) return want;
  // isa.cpp warns about a bad or unsupported value; avx512 without VNNI
  // (AVX-512 F only) quietly takes the best kernel there is.
  return best;
}

Kernel active() {
  static const Kernel k = choose();
  return k;
}

void Bytes::resize(size_t n) {
  size = n;
  const size_t bytes = std::max<size_t>(64, (n + 63) / 64 * 64);
  auto *q = static_cast<uint8_t *>(std::aligned_alloc(64, bytes));
  if (!q) throw std::bad_alloc();
  p = std::unique_ptr<uint8_t[], void (*)(uint8_t *)>(q, [](uint8_t *x) { std::free(x); });
}

Weights pack(const float *w, int64_t n, int64_t k, float eps) {
  Weights p;
  p.n = n;
  p.k = k;
  p.kp = padded(k);
  double s = 0;
  for (int64_t i = 0; i < n * k; ++i) s += std::fabs(w[i]);
  const float gamma = std::max(float(s / double(std::max<int64_t>(1, n * k))), eps);
  p.t.resize(size_t(n * p.kp));
  p.gamma.assign(size_t(n), gamma);
  p.wsum.assign(size_t(n), 0);
  auto *t = reinterpret_cast<int8_t *>(p.t.data());
  for (int64_t r = 0; r < n; ++r) {
    int32_t sum = 0;
    for (int64_t i = 0; i < p.kp; ++i) {
      // A NaN weight makes gamma NaN: every output NaN, as in PyTorch.
      const float q = i < k ? std::nearbyint(w[r * k + i] / gamma) : 0.0f;
      const int8_t v = q >= 1.0f ? 1 : q <= -1.0f ? -1 : 0;
      t[r * p.kp + i] = v;
      sum += v;
    }
    p.wsum[size_t(r)] = sum;
  }
  return p;
}

Weights concat(const Weights &a, const Weights &b) {
  if (a.k != b.k) throw std::invalid_argument("bitlinear::concat: different in_features");
  Weights c;
  c.n = a.n + b.n;
  c.k = a.k;
  c.kp = a.kp;
  c.t.resize(size_t(c.n * c.kp));
  std::memcpy(c.t.data(), a.t.data(), size_t(a.n * a.kp));
  std::memcpy(c.t.data() + a.n * a.kp, b.t.data(), size_t(b.n * b.kp));
  c.gamma = a.gamma;
  c.gamma.insert(c.gamma.end(), b.gamma.begin(), b.gamma.end());
  c.wsum = a.wsum;
  c.wsum.insert(c.wsum.end(), b.wsum.begin(), b.wsum.end());
  return c;
}

float row_scale(float maxabs, float eps, float *s) {
  if (!(maxabs <= std::numeric_limits<float>::max())) { // NaN or inf
    *s = 0.0f;
    return std::numeric_limits<float>::quiet_NaN();
  }
  *s = 127.0f / std::max(maxabs, eps);
  return float(1.0 / double(*s));
}

void quantize(Kernel kern, const float *x, int64_t m, int64_t k, float eps, Acts *out) {
  out->m = m;
  out->kp = padded(k);
  if (out->a.size < size_t(m * out->kp)) out->a.resize(size_t(m * out->kp));
  out->r.resize(size_t(m));
  switch (kern) {
#if DELTAC_BITLINEAR_X86
  case Kernel::avx512vnni: // its quantisation is avx2's (not the hot part)
  case Kernel::avx2: quantize_rows_avx2(x, m, k, out->kp, eps, out->a.data(), out->r.data()); return;
#endif
  default: quantize_rows_generic(x, m, k, out->kp, eps, out->a.data(), out->r.data());
  }
}

void gemm(Kernel kern, const Acts &a, const Weights &w, float *y, int64_t ldy, int threads) {
  if (a.kp != w.kp) throw std::invalid_argument("bitlinear::gemm: activations and weights differ in K");
  if (a.m <= 0 || w.n <= 0) return;
  const GemmArgs g{a.a.data(), a.r.data(), reinterpret_cast<const int8_t *>(w.t.data()),
                   w.gamma.data(), w.wsum.data(), a.m, a.kp, y, ldy};
  void (*block)(const GemmArgs &, int64_t, int64_t) = gemm_block_generic;
#if DELTAC_BITLINEAR_X86
  if (kern == Kernel::avx2) block = gemm_block_avx2;
  if (kern == Kernel::avx512vnni) block = gemm_block_avx512vnni;
#endif
  // Column blocks of 64 weight rows (64 x kp bytes: 128 KB at K = 2048, in
  // L2) shared out over the threads; each block runs over all rows.
  const int64_t nb = kBlock, blocks = (w.n + nb - 1) / nb;
  int nt = threads > 0 ? threads : omp_get_max_threads();
  nt = int(std::max<int64_t>(1, std::min<int64_t>(nt, blocks)));
  // Under ~64 M multiply-adds (decode: 1 x 8208 x 2048 is 17 M, ~2 ms on one
  // core) one thread: on the shared 2-core machine a second thread's wake-up
  // cost more than it saved (docs/performance.md, "C++ layers (CPU)").
  if (double(a.m) * double(w.n) * double(w.kp) < 64.0 * 1024 * 1024) nt = 1;
  if (nt == 1) {
    for (int64_t b = 0; b < blocks; ++b) block(g, b * nb, std::min(w.n, (b + 1) * nb));
    return;
  }
#pragma omp parallel for schedule(static) num_threads(nt)
  for (int64_t b = 0; b < blocks; ++b) block(g, b * nb, std::min(w.n, (b + 1) * nb));
}

} // namespace bitlinear
} // namespace nn
} // namespace deltac

// BitLinear (BitNet b1.58) through int8 GEMMs: ternary weights {-1, 0, 1}
// with one absmean scale per matrix, packed once at load, times 8-bit per-
// token absmax activations, int32 sums scaled back to f32. The numbers are
// python/deltac/nn/bitlinear.py's (the quantised values; the products and
// sums are exact integers here, where the f32 GEMM on the dequantised
// values rounds).
//
// Layout: activations are stored as u8 = q + 128 (q in [-127, 127]) and
// weights as s8, both K-contiguous and padded with zeros (weights) / 128
// (activations) to kp, a multiple of 64. Every kernel sums a_u8 * w_s8 and
// subtracts 128 * sum(w) per output column (wsum, precomputed) to get
// sum(q * w). Why the offset: x86's u8 x s8 instructions (AVX2 vpmaddubsw,
// AVX-512 VNNI vpdpbusd) need one unsigned operand; making the activations
// unsigned once per token costs one add per element, against a sign fix-up
// (vpabsb + vpsignb) per product in the other common scheme.
//
// Kernels (one per instruction set, bitlinear_<isa>.cpp, chosen once from
// cpuid): generic (scalar), avx2 (vpmaddubsw, int16 sums widened every 64
// steps), avx512vnni (vpdpbusd; only when cpuid reports AVX-512 F/BW/VNNI).
// DELTAC_CPU_ISA=generic|avx2|avx512 forces one, as for the delta-rule
// kernels (deltac/cpu/isa.h).
#ifndef DELTAC_NN_BITLINEAR_H
#define DELTAC_NN_BITLINEAR_H

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace deltac {
namespace nn {
namespace bitlinear {

enum class Kernel { generic = 0, avx2 = 1, avx512vnni = 2 };
const char *name(Kernel k);
bool supported(Kernel k); // compiled in and supported by this CPU
Kernel active();          // the best supported, or DELTAC_CPU_ISA's; fixed at first call

// 64-byte aligned bytes (whole cache lines for the kernels' loads).
struct Bytes {
  std::unique_ptr<uint8_t[], void (*)(uint8_t *)> p{nullptr, nullptr};
  size_t size = 0;
  void resize(size_t n); // contents not kept
  uint8_t *data() const { return p.get(); }
};

inline int64_t padded(int64_t k) { return (k + 63) / 64 * 64; }
// gemm hands the kernels blocks of at most this many columns.
constexpr int64_t kBlock = 64;

// Packed ternary weights [n, kp] with a scale per row (the matrix's gamma:
// rows of several matrices stacked keep their own).
struct Weights {
  int64_t n = 0, k = 0, kp = 0;
  Bytes t;                   // int8 {-1, 0, 1}, [n, kp]
  std::vector<float> gamma;  // [n]
  std::vector<int32_t> wsum; // [n]: sum of row n of t
};
// bitlinear.py weight_quant of the [n, k] matrix w: gamma = max(mean |w|,
// eps), t = clip(round(w / gamma), -1, 1).
Weights pack(const float *w, int64_t n, int64_t k, float eps);
// Rows of a then b (same k).
Weights concat(const Weights &a, const Weights &b);

// Quantised activations [m, kp]: u8 = clip(round(x * s), -128, 127) + 128 per
// token, s = 127 / max(max |x|, eps); r = 1 / s (NaN for a row with a NaN or
// infinite value: its outputs are NaN, as in PyTorch).
struct Acts {
  int64_t m = 0, kp = 0;
  Bytes a;
  std::vector<float> r;
};
void quantize(Kernel kern, const float *x, int64_t m, int64_t k, float eps, Acts *out);

// y [m, n] (row stride ldy) = float(sum_k q[m][k] t[n][k]) * gamma[n] * r[m].
// threads <= 0: omp_get_max_threads().
void gemm(Kernel kern, const Acts &a, const Weights &w, float *y, int64_t ldy, int threads);

// Per-ISA entry points (bitlinear_<isa>.cpp). gemm_block: rows [0, m) x
// columns [n0, n1) of gemm, n1 - n0 <= kBlock; quantize_rows: rows [0, m) of
// quantize into out->a / r.
struct GemmArgs {
  const uint8_t *a;
  const float *r;
  const int8_t *t;
  const float *gamma;
  const int32_t *wsum;
  int64_t m, kp;
  float *y;
  int64_t ldy;
};
void gemm_block_generic(const GemmArgs &g, int64_t n0, int64_t n1);
void gemm_block_avx2(const GemmArgs &g, int64_t n0, int64_t n1);
void gemm_block_avx512vnni(const GemmArgs &g, int64_t n0, int64_t n1);
void quantize_rows_generic(const float *x, int64_t m, int64_t k, int64_t kp, float eps,
                           uint8_t *a, float *r);
void quantize_rows_avx2(const float *x, int64_t m, int64_t k, int64_t kp, float eps,
                        uint8_t *a, float *r); // also avx512vnni's

// The scale of one row: r = 1 / s, or NaN when max |x| is not finite.
float row_scale(float maxabs, float eps, float *s);

} // namespace bitlinear
} // namespace nn
} // namespace deltac

#endif

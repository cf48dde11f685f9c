// Float vectors for the CPU kernels: W = 16 lanes (512 bits) where the
// target has AVX-512F, else W = 8 (256 bits). GCC/Clang vector extensions, so
// the code is portable; with AVX2+FMA or AVX-512F every op maps to one
// instruction. Kernels are written in W; every vector loop runs over a
// multiple of 16 floats (K, V, tiles and chunks are), so both widths fit.
//
// DELTAC_CPU_NS names the inline namespace the kernels live in: the
// runtime's per-instruction-set builds (deltac/cpu/isa.h) compile these
// headers once per target under different names, so no two targets' code
// shares a symbol. Default: the one instance of code that includes these
// headers directly (generated kernels, tests of the templates).
#ifndef DELTAC_CPU_SIMD_H
#define DELTAC_CPU_SIMD_H

#include <cstdint>
#include <cstring>

// What the kernels may use: from the compiler's flags, unless a per-target
// translation unit (templates/cpu/src/isa_target.inc) sets them: under
// `#pragma GCC target`, GCC's C++ front end does not define __AVX2__ & co.
#ifndef DELTAC_CPU_AVX512
#if defined(__AVX512F__)
#define DELTAC_CPU_AVX512 1
#else
#define DELTAC_CPU_AVX512 0
#endif
#endif
#ifndef DELTAC_CPU_FMA  // AVX2 + FMA (implied by DELTAC_CPU_AVX512 = 1)
#if defined(__FMA__) || DELTAC_CPU_AVX512
#define DELTAC_CPU_FMA 1
#else
#define DELTAC_CPU_FMA 0
#endif
#endif
#ifndef DELTAC_CPU_AVX
#if defined(__AVX__) || DELTAC_CPU_FMA
#define DELTAC_CPU_AVX 1
#else
#define DELTAC_CPU_AVX 0
#endif
#endif

// AArch64: Advanced SIMD (with FMA) is the baseline, so the generic instance
// uses it; W stays 8 (GCC splits each vector into two 128-bit registers).
#ifndef DELTAC_CPU_NEON
#if defined(__aarch64__) && defined(__ARM_NEON)
#define DELTAC_CPU_NEON 1
#else
#define DELTAC_CPU_NEON 0
#endif
#endif

#if DELTAC_CPU_AVX
#include <immintrin.h>
#endif
#if DELTAC_CPU_NEON
#include <arm_neon.h>
#endif

#ifndef DELTAC_CPU_NS
#define DELTAC_CPU_NS isa_default
#endif

// Without AVX, GCC warns that 32-byte vector arguments change the ABI; these
// helpers are inline and never cross a library boundary.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wpsabi"
#endif

namespace deltac::cpu { inline namespace DELTAC_CPU_NS { namespace simd {

#if DELTAC_CPU_AVX512
constexpr int W = 16;
#else
constexpr int W = 8;
#endif
typedef float vf __attribute__((vector_size(4 * W)));
typedef int32_t vi __attribute__((vector_size(4 * W)));
typedef uint32_t vu __attribute__((vector_size(4 * W)));

inline vf load(const float* p) {
  vf r;
  std::memcpy(&r, p, sizeof r);
  return r;
}
inline void store(float* p, vf x) { std::memcpy(p, &x, sizeof x); }
// (Not vf{} + x: 0 + x cannot be folded without -ffast-math, -0 + 0 = +0.)
#if DELTAC_CPU_AVX512
inline vf set1(float x) { return vf{x, x, x, x, x, x, x, x, x, x, x, x, x, x, x, x}; }
#else
inline vf set1(float x) { return vf{x, x, x, x, x, x, x, x}; }
#endif
inline vf zero() { return vf{}; }
// The bits of x as a To of the same size.
template <typename To, typename From>
inline To as(From x) {
  static_assert(sizeof(To) == sizeof(From), "as: same size");
  To r;
  std::memcpy(&r, &x, sizeof r);
  return r;
}

// W 8- or 16-bit values zero-extended to 32 bits (GCC makes scalar code of
// __builtin_convertvector from a narrow vector, so the x86 widening loads).
template <typename T>  // uint8_t or uint16_t
inline vu widen(const T* p) {
  static_assert(sizeof(T) == 1 || sizeof(T) == 2, "widen: 8- or 16-bit values");
#if DELTAC_CPU_AVX512
  if constexpr (sizeof(T) == 1)
    return vu(_mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
  else
    return vu(_mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))));
#elif DELTAC_CPU_FMA
  if constexpr (sizeof(T) == 1)
    return vu(_mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
  else
    return vu(_mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
#else
  vu r;
  for (int i = 0; i < W; ++i) r[i] = p[i];
  return r;
#endif
}

// W bf16 values (raw bits) as f32: exact.
typedef uint16_t vh __attribute__((vector_size(2 * W)));
inline vf load_bf16(const uint16_t* p) { return as<vf>(widen(p) << 16); }
// x rounded to bf16, to nearest even; a NaN stays a quiet NaN (bit for bit
// deltac::f32_to_bf16).
inline void store_bf16(uint16_t* p, vf x) {
  const vu u = as<vu>(x);
  const vu r = (u & 0x7fffffffu) > 0x7f800000u
                   ? (u >> 16) | 0x40u
                   : (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  const vh h = __builtin_convertvector(r, vh);
  std::memcpy(p, &h, sizeof h);
}

// W fp8 e4m3 bytes as f32: exact, bit for bit deltac::fp8e4m3_to_f32
// (exponent 0 subnormal, 0x7f / 0xff NaN).
typedef uint8_t vb __attribute__((vector_size(W)));
inline vf load_fp8e4m3(const uint8_t* p) {
  const vu w = widen(p), a = w & 0x7fu;
  const vu sub = as<vu>(__builtin_convertvector(vi(a), vf) * (1.0f / 512.0f));
  vu r = a < 8u ? sub : (a << 20) + (120u << 23);
  r = a == 0x7fu ? vu{} + 0x7fc00000u : r;
  r |= (w & 0x80u) << 24;
  return as<vf>(r);
}
// x as e4m3, to nearest even, finite values past 448 saturated, inf and NaN
// NaN: bit for bit deltac::f32_to_fp8e4m3.
inline void store_fp8e4m3(uint8_t* p, vf x) {
  const vu u = as<vu>(x);
  const vu a = u & 0x7fffffffu;
  const vf af = as<vf>(a);
  // Below 2^-6: steps of 2^-9, rounded to nearest even by the 1.5 2^23 trick.
  const vf sf = (af * 512.0f + 12582912.0f) - 12582912.0f;
  const vu sub = vu(__builtin_convertvector(sf, vi));
  // Normal: 3 mantissa bits, nearest even; past 448 (0x7e) saturated.
  vu n = ((a + 0x7ffffu + ((a >> 20) & 1u)) >> 20) - (120u << 3);
  n = n > 0x7eu ? vu{} + 0x7eu : n;
  vu r = a < 0x3c800000u ? sub : n;
  r = a >= 0x7f800000u ? vu{} + 0x7fu : r;
  r |= (u >> 24) & 0x80u;
  const vb out = __builtin_convertvector(r, vb);
  std::memcpy(p, &out, sizeof out);
}

// a * b + c, fused when the target has FMA.
inline vf fma(vf a, vf b, vf c) {
#if DELTAC_CPU_AVX512
  return _mm512_fmadd_ps(a, b, c);
#elif DELTAC_CPU_FMA
  return _mm256_fmadd_ps(a, b, c);
#elif DELTAC_CPU_NEON
  float32x4_t x[W / 4], y[W / 4], z[W / 4];
  std::memcpy(x, &a, sizeof a);
  std::memcpy(y, &b, sizeof b);
  std::memcpy(z, &c, sizeof c);
  for (int i = 0; i < W / 4; ++i) z[i] = vfmaq_f32(z[i], x[i], y[i]);
  vf r;
  std::memcpy(&r, z, sizeof r);
  return r;
#else
  return a * b + c;
#endif
}

inline float hsum(vf x) {
  float s = 0.0f;
  for (int i = 0; i < W; ++i) s += x[i];
  return s;
}

// Lane-wise max / min; b where either is NaN (as x86 maxps / minps).
inline vf vmax(vf a, vf b) { return a > b ? a : b; }
inline vf vmin(vf a, vf b) { return a < b ? a : b; }

// exp(x), relative error ~2 ulp (Cephes expf polynomial). Returns 0 for
// x < -87.3 (no denormals) and for -inf, +inf from x ~ 88.38 up (n = 128
// below: the last ~0.34 below ln(FLT_MAX) overflow early) and for +inf, and
// NaN for NaN: a NaN is never turned into a finite value. NaN costs nothing
// extra: the clamps are written so that it passes through them (x86
// max/min return their second operand when one is NaN) and the polynomial
// keeps it.
inline vf exp(vf x) {
  const vf lo = set1(-87.3f);
  const vi under = x < lo;  // -inf too; false for NaN
  x = vmin(set1(89.0f), vmax(lo, x));  // NaN stays NaN
  // n = round(x / ln2) <= 128, r = x - n ln2 (two-part ln2).
  vf fx = fma(x, set1(1.44269504088896341f), set1(0.5f));
  vi n = __builtin_convertvector(fx, vi);
  vf fn = __builtin_convertvector(n, vf);
  fn = fn > fx ? fn - 1.0f : fn;  // floor
  n = __builtin_convertvector(fn, vi);
  vf r = fma(fn, set1(-0.693359375f), x);
  r = fma(fn, set1(2.12194440e-4f), r);
  vf y = set1(1.9875691500e-4f);
  y = fma(y, r, set1(1.3981999507e-3f));
  y = fma(y, r, set1(8.3334519073e-3f));
  y = fma(y, r, set1(4.1665795894e-2f));
  y = fma(y, r, set1(1.6666665459e-1f));
  y = fma(y, r, set1(5.0000001201e-1f));
  y = fma(y, r * r, r + 1.0f);
  // 2^n; n = 128 gives the bits of +inf. (Unsigned: a NaN lane's n is
  // INT_MIN, and its y is NaN whatever p2 is.)
  const vf p2 = as<vf>((vu)(n + 127) << 23);
  return as<vf>(as<vi>(y * p2) & ~under);
}

}}}  // namespace deltac::cpu::DELTAC_CPU_NS::simd

#endif  // DELTAC_CPU_SIMD_H

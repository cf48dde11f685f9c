// 8-wide float vectors for the CPU kernels. GCC/Clang vector extensions, so
// the code is portable; with AVX2+FMA every op maps to one instruction.
#ifndef DELTAC_CPU_SIMD_H
#define DELTAC_CPU_SIMD_H

#include <cstdint>
#include <cstring>

#if defined(__FMA__)
#include <immintrin.h>
#endif

// Without AVX, GCC warns that 32-byte vector arguments change the ABI; these
// helpers are inline and never cross a library boundary.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wpsabi"
#endif

namespace deltac::cpu::simd {

typedef float v8 __attribute__((vector_size(32)));
typedef int32_t v8i __attribute__((vector_size(32)));
typedef uint32_t v8u __attribute__((vector_size(32)));
constexpr int W = 8;

inline v8 load(const float* p) {
  v8 r;
  std::memcpy(&r, p, sizeof r);
  return r;
}
inline void store(float* p, v8 x) { std::memcpy(p, &x, sizeof x); }
inline v8 set1(float x) { return v8{x, x, x, x, x, x, x, x}; }
inline v8 zero() { return v8{}; }

// a * b + c, fused when the target has FMA.
inline v8 fma(v8 a, v8 b, v8 c) {
#if defined(__FMA__)
  return _mm256_fmadd_ps(a, b, c);
#else
  return a * b + c;
#endif
}

inline float hsum(v8 x) {
  float s = 0.0f;
  for (int i = 0; i < W; ++i) s += x[i];
  return s;
}

// Lane-wise max / min; b where either is NaN (as x86 maxps / minps).
inline v8 vmax(v8 a, v8 b) { return a > b ? a : b; }
inline v8 vmin(v8 a, v8 b) { return a < b ? a : b; }

// exp(x), relative error ~2 ulp (Cephes expf polynomial). Returns 0 for
// x < -87.3 (no denormals) and for -inf, +inf from x ~ 88.38 up (n = 128
// below: the last ~0.34 below ln(FLT_MAX) overflow early) and for +inf, and
// NaN for NaN: a NaN is never turned into a finite value. NaN costs nothing
// extra: the clamps are written so that it passes through them (x86
// max/min return their second operand when one is NaN) and the polynomial
// keeps it.
inline v8 exp(v8 x) {
  const v8 lo = set1(-87.3f);
  const v8i under = x < lo;  // -inf too; false for NaN
  x = vmin(set1(89.0f), vmax(lo, x));  // NaN stays NaN
  // n = round(x / ln2) <= 128, r = x - n ln2 (two-part ln2).
  v8 fx = fma(x, set1(1.44269504088896341f), set1(0.5f));
  v8i n = __builtin_convertvector(fx, v8i);
  v8 fn = __builtin_convertvector(n, v8);
  fn = fn > fx ? fn - 1.0f : fn;  // floor
  n = __builtin_convertvector(fn, v8i);
  v8 r = fma(fn, set1(-0.693359375f), x);
  r = fma(fn, set1(2.12194440e-4f), r);
  v8 y = set1(1.9875691500e-4f);
  y = fma(y, r, set1(1.3981999507e-3f));
  y = fma(y, r, set1(8.3334519073e-3f));
  y = fma(y, r, set1(4.1665795894e-2f));
  y = fma(y, r, set1(1.6666665459e-1f));
  y = fma(y, r, set1(5.0000001201e-1f));
  y = fma(y, r * r, r + 1.0f);
  // 2^n; n = 128 gives the bits of +inf. (Unsigned: a NaN lane's n is
  // INT_MIN, and its y is NaN whatever p2 is.)
  const v8u bits = (v8u)(n + 127) << 23;
  v8 p2;
  std::memcpy(&p2, &bits, sizeof p2);
  v8 res = y * p2;
  v8i rb;
  std::memcpy(&rb, &res, sizeof rb);
  rb &= ~under;
  std::memcpy(&res, &rb, sizeof res);
  return res;
}

}  // namespace deltac::cpu::simd

#endif  // DELTAC_CPU_SIMD_H

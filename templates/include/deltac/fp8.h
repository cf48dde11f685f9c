// FP8 E4M3 ("e4m3fn", OCP) states in portable C++: the CPU kernels, the
// float64 reference and the tests encode and decode with these; the CUDA
// kernels use the hardware conversions of cuda_fp8.h, which round the same
// way (to nearest even, finite values saturated), with inf mapped to NaN as
// here (convert.cuh). params.h defines the state_scale convention.
#ifndef DELTAC_FP8_H
#define DELTAC_FP8_H

#include <cmath>
#include <cstdint>
#include <cstring>

namespace deltac {

// The e4m3 byte's value: sign, 4 exponent bits (bias 7), 3 mantissa bits;
// exponent 0 is subnormal (m / 8 * 2^-6); 0x7f / 0xff are NaN.
inline float fp8e4m3_to_f32(uint8_t b) {
  const uint32_t e = (b >> 3) & 0xfu, m = b & 7u;
  const bool neg = b & 0x80u;
  if (e == 15 && m == 7)
    return neg ? -NAN : NAN;
  float x;
  if (e == 0) {
    x = std::ldexp(float(m), -9);
  } else {
    const uint32_t u = ((e + 120u) << 23) | (m << 20);
    std::memcpy(&x, &u, 4);
  }
  return neg ? -x : x;
}

// x rounded to the nearest e4m3 value (ties to even); finite values beyond
// the range saturate to +-448; inf and NaN give NaN.
inline uint8_t f32_to_fp8e4m3(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  const uint8_t sign = uint8_t((u >> 24) & 0x80u);
  const uint32_t a = u & 0x7fffffffu;
  if (a >= 0x7f800000u)  // inf or NaN
    return sign | 0x7fu;
  if (a >= 0x43e00000u)  // >= 448: 448 itself, or past the range
    return sign | 0x7eu;
  if (a < 0x3c800000u) {  // below 2^-6: subnormal, steps of 2^-9
    float f;
    std::memcpy(&f, &a, 4);
    return sign | uint8_t(std::nearbyint(f * 512.0f));  // 8 is 2^-6 itself
  }
  const uint32_t r = (a + 0x7ffffu + ((a >> 20) & 1u)) >> 20;  // 3 mantissa bits, RNE
  const uint32_t b = r - (120u << 3);
  return sign | uint8_t(b > 0x7eu ? 0x7eu : b);
}

}  // namespace deltac

#endif  // DELTAC_FP8_H

// Scalar conversions between f32 and the 16-bit storage types (raw uint16_t
// bits), shared by the runtime, the CPU kernels, the reference and the code
// deltac generates.
#ifndef DELTAC_CONVERT_H
#define DELTAC_CONVERT_H

#include <cmath>
#include <cstdint>
#include <cstring>

namespace deltac {

// bf16 bits are the top half of an f32.
inline float bf16_to_f32(uint16_t x) {
  uint32_t u = uint32_t(x) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// Round to nearest even; NaN stays a (quiet) NaN.
inline uint16_t f32_to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u)
    return uint16_t((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return uint16_t(u >> 16);
}

// IEEE half -> f32, exact (subnormals, infinities and NaN included).
inline float f16_to_f32(uint16_t h) {
  int e = (h >> 10) & 0x1f, m = h & 0x3ff;
  float mag = e == 0    ? std::ldexp(float(m), -24)
              : e == 31 ? (m ? NAN : INFINITY)
                        : std::ldexp(float(m | 0x400), e - 25);
  return (h & 0x8000) ? -mag : mag;
}

// f32 -> IEEE half, round to nearest even; overflow gives infinity.
inline uint16_t f32_to_f16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  uint16_t sign = uint16_t((u >> 16) & 0x8000u);
  u &= 0x7fffffffu;
  if (u > 0x7f800000u)
    return sign | 0x7e00u;
  if (u >= 0x477ff000u) // rounds to infinity
    return sign | 0x7c00u;
  if (u < 0x38800000u) { // half subnormal: units of 2^-24
    float a;
    std::memcpy(&a, &u, 4);
    return sign | uint16_t(std::nearbyint(a * 16777216.0f));
  }
  uint32_t r = u + 0xfffu + ((u >> 13) & 1u);
  return sign | uint16_t((r >> 13) - (112u << 10));
}

} // namespace deltac

#endif // DELTAC_CONVERT_H

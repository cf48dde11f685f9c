// Loads and stores of the kernel's element types, always computing in f32.
#ifndef DELTAC_CUDA_CONVERT_CUH
#define DELTAC_CUDA_CONVERT_CUH

#include <cuda_bf16.h>
#include <cuda_fp8.h>

#include <cstdint>
#include <type_traits>

namespace deltac::cuda::detail {

__device__ __forceinline__ float to_float(float x) { return x; }
__device__ __forceinline__ float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }

// FP8 E4M3 states (params.h): the value times the head's scale is applied by
// the kernels (fp8_scale_of); here the bare e4m3 <-> f32 conversions.
// Decoding is exact (through f16); encoding rounds to nearest even and
// saturates finite values (cvt .satfinite), and maps inf to NaN as the
// non-finite rule and deltac/fp8.h do.
template <class T>
inline constexpr bool kFp8State = std::is_same_v<T, __nv_fp8_e4m3>;
__device__ __forceinline__ float to_float(__nv_fp8_e4m3 x) {
  return __half2float(__half(__nv_cvt_fp8_to_halfraw(x.__x, __NV_E4M3)));
}
__device__ __forceinline__ uint32_t fp8_bits(float x) {
  const uint32_t b = __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3);
  return isinf(x) ? (b | 0x7fu) : b;
}
// Four e4m3 bytes of a word (element 0 lowest) as floats, and back.
__device__ __forceinline__ void fp8x4_to_f32(uint32_t w, float* out) {
  const float2 a = __half22float2(
      __half2(__nv_cvt_fp8x2_to_halfraw2(__nv_fp8x2_storage_t(w & 0xffffu), __NV_E4M3)));
  const float2 b = __half22float2(
      __half2(__nv_cvt_fp8x2_to_halfraw2(__nv_fp8x2_storage_t(w >> 16), __NV_E4M3)));
  out[0] = a.x, out[1] = a.y, out[2] = b.x, out[3] = b.y;
}
__device__ __forceinline__ uint32_t f32_to_fp8x4(const float* in) {
  return fp8_bits(in[0]) | fp8_bits(in[1]) << 8 | fp8_bits(in[2]) << 16 | fp8_bits(in[3]) << 24;
}
// The fp8 state scale of value head j and its reciprocal (1 without
// state_scale; unused for other state types).
__device__ __forceinline__ float fp8_scale_of(const float* state_scale, int j) {
  return state_scale ? state_scale[j] : 1.f;
}

// Four consecutive elements p[0..3] as floats. `vec` says p is aligned to
// four elements (16 bytes for f32, 8 for bf16); otherwise scalar loads.
__device__ __forceinline__ void load4(const float* p, bool vec, float out[4]) {
  if (vec) {
    float4 x = *reinterpret_cast<const float4*>(p);
    out[0] = x.x, out[1] = x.y, out[2] = x.z, out[3] = x.w;
  } else {
    for (int i = 0; i < 4; ++i) out[i] = p[i];
  }
}

__device__ __forceinline__ void load4(const __nv_bfloat16* p, bool vec, float out[4]) {
  if (vec) {
    uint2 raw = *reinterpret_cast<const uint2*>(p);
    __nv_bfloat162 a = *reinterpret_cast<__nv_bfloat162*>(&raw.x);
    __nv_bfloat162 b = *reinterpret_cast<__nv_bfloat162*>(&raw.y);
    float2 fa = __bfloat1622float2(a), fb = __bfloat1622float2(b);
    out[0] = fa.x, out[1] = fa.y, out[2] = fb.x, out[3] = fb.y;
  } else {
    for (int i = 0; i < 4; ++i) out[i] = __bfloat162float(p[i]);
  }
}

__device__ __forceinline__ void load4(const __nv_fp8_e4m3* p, bool vec, float out[4]) {
  if (vec) {
    fp8x4_to_f32(*reinterpret_cast<const uint32_t*>(p), out);
  } else {
    for (int i = 0; i < 4; ++i) out[i] = to_float(p[i]);
  }
}

// Global memory only. __stwb keeps the 16-byte store: with a plain float4
// store the optimizer merged both branches into the scalar one.
__device__ __forceinline__ void store4(float* p, bool vec, const float in[4]) {
  if (vec) {
    __stwb(reinterpret_cast<float4*>(p), make_float4(in[0], in[1], in[2], in[3]));
  } else {
    for (int i = 0; i < 4; ++i) p[i] = in[i];
  }
}

__device__ __forceinline__ void store4(__nv_bfloat16* p, bool vec, const float in[4]) {
  __nv_bfloat162 a = __floats2bfloat162_rn(in[0], in[1]);
  __nv_bfloat162 b = __floats2bfloat162_rn(in[2], in[3]);
  if (vec) {
    uint2 raw;
    raw.x = *reinterpret_cast<uint32_t*>(&a);
    raw.y = *reinterpret_cast<uint32_t*>(&b);
    *reinterpret_cast<uint2*>(p) = raw;
  } else {
    p[0] = a.x, p[1] = a.y, p[2] = b.x, p[3] = b.y;
  }
}

__device__ __forceinline__ void store4(__nv_fp8_e4m3* p, bool vec, const float in[4]) {
  const uint32_t w = f32_to_fp8x4(in);
  if (vec) {
    *reinterpret_cast<uint32_t*>(p) = w;
  } else {
    for (int i = 0; i < 4; ++i) p[i].__x = uint8_t(w >> (8 * i));
  }
}

// Sum over the lanes of a warp whose index differs in bits >= `first`.
template <int First>
__device__ __forceinline__ float reduce_rows(float x) {
#pragma unroll
  for (int off = First; off < 32; off <<= 1)
    x += __shfl_xor_sync(0xffffffffu, x, off);
  return x;
}

}  // namespace deltac::cuda::detail

#endif  // DELTAC_CUDA_CONVERT_CUH

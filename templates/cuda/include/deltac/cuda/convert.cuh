// Loads and stores of the kernel's element types, always computing in f32.
#ifndef DELTAC_CUDA_CONVERT_CUH
#define DELTAC_CUDA_CONVERT_CUH

#include <cuda_bf16.h>

#include <cstdint>

namespace deltac::cuda::detail {

__device__ __forceinline__ float to_float(float x) { return x; }
__device__ __forceinline__ float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }

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

// NVRTC shim (embedded, runtime/src/jit_include): NVRTC declares the CUDA
// math functions itself; this adds the C macros it lacks.
#ifndef DELTAC_JIT_MATH_H
#define DELTAC_JIT_MATH_H
#define INFINITY __builtin_bit_cast(float, 0x7f800000u)
#define NAN __builtin_bit_cast(float, 0x7fc00000u)
#define HUGE_VALF INFINITY
#define HUGE_VAL __builtin_bit_cast(double, 0x7ff0000000000000ull)
#endif

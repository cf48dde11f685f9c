// The CPU kernels for AVX2 + FMA (x86-64-v3; see deltac/cpu/isa.h).
#define DELTAC_CPU_NS isa_avx2
#define DELTAC_ISA_PRAGMA "avx2,fma,f16c,bmi,bmi2,lzcnt,popcnt,movbe"
#define DELTAC_CPU_AVX512 0
#define DELTAC_CPU_FMA 1
#define DELTAC_CPU_AVX 1
#include "isa_target.inc"
static_assert(deltac::cpu::isa_avx2::simd::W == 8, "avx2: 8-float vectors");

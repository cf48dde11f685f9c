// The CPU kernels for AVX-512 (x86-64-v4; see deltac/cpu/isa.h).
#define DELTAC_CPU_NS isa_avx512
#define DELTAC_ISA_PRAGMA \
  "avx2,fma,f16c,bmi,bmi2,lzcnt,popcnt,movbe,avx512f,avx512bw,avx512vl,avx512dq,avx512cd"
#define DELTAC_CPU_AVX512 1
#define DELTAC_CPU_FMA 1
#define DELTAC_CPU_AVX 1
#include "isa_target.inc"
static_assert(deltac::cpu::isa_avx512::simd::W == 16, "avx512: 16-float vectors");

// The CPU backward for AVX2 + FMA (x86-64-v3; see backward_target.inc).
#define DELTAC_CPU_NS bwd_avx2
#define DELTAC_BWD_PRAGMA "avx2,fma,f16c,bmi,bmi2,lzcnt,popcnt,movbe"
#define DELTAC_CPU_AVX512 0
#define DELTAC_CPU_FMA 1
#define DELTAC_CPU_AVX 1
#include "backward_target.inc"

// The CPU backward for AVX-512 (x86-64-v4; see backward_target.inc).
#define DELTAC_CPU_NS bwd_avx512
#define DELTAC_BWD_PRAGMA \
  "avx2,fma,f16c,bmi,bmi2,lzcnt,popcnt,movbe,avx512f,avx512bw,avx512vl,avx512dq,avx512cd"
#define DELTAC_CPU_AVX512 1
#define DELTAC_CPU_FMA 1
#define DELTAC_CPU_AVX 1
#include "backward_target.inc"

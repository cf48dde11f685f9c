// The CPU backward for the compiler's baseline (see backward_target.inc).
#define DELTAC_CPU_NS bwd_generic
#define DELTAC_CPU_AVX512 0
#define DELTAC_CPU_FMA 0
#define DELTAC_CPU_AVX 0
#include "backward_target.inc"

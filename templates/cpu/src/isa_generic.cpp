// The CPU kernels for the compiler's baseline target (see deltac/cpu/isa.h).
#define DELTAC_CPU_NS isa_generic
#define DELTAC_CPU_AVX512 0
#define DELTAC_CPU_FMA 0
#define DELTAC_CPU_AVX 0
#include "isa_target.inc"

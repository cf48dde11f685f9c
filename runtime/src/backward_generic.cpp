// The CPU backward for the compiler's baseline (see backward_target.inc).
#define DELTAC_CPU_NS bwd_generic
#include "backward_target.inc"

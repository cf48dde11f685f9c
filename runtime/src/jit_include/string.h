// NVRTC shim (embedded, runtime/src/jit_include): memcpy and memset are
// device built-ins under NVRTC; nothing to declare.
#ifndef DELTAC_JIT_STRING_H
#define DELTAC_JIT_STRING_H
#include <stddef.h>
#endif

// NVRTC shim (embedded, runtime/src/jit_include): size_t and ptrdiff_t.
// NVRTC predefines both (and NULL); redeclaring a typedef as the same type
// is legal. No offsetof: NVRTC has no __builtin_offsetof.
#ifndef DELTAC_JIT_STDDEF_H
#define DELTAC_JIT_STDDEF_H
typedef decltype(sizeof(0)) size_t;
typedef decltype((char *)0 - (char *)0) ptrdiff_t;
#endif

// Run-time choice of the CPU kernels' instruction set (x86-64): the same
// templates (deltac/cpu/launch.h) are compiled once per target, each in its
// own translation unit and inline namespace (DELTAC_CPU_NS, see simd.h), under
// `#pragma GCC target` (no -march: the library runs on every x86-64), and
// this is the one dispatch point between them. The target is chosen once, at
// the first call, from cpuid: the widest the CPU (and OS) supports, unless
// DELTAC_CPU_ISA=generic|avx2|avx512 forces one (tests; a forced target
// the CPU lacks falls back to the best one, with a warning on stderr).
//
//   generic  the compiler's baseline (x86-64: SSE2), W = 8 emulated
//   avx2     AVX2 + FMA + F16C + BMI2 (x86-64-v3), W = 8
//   avx512   x86-64-v3 + AVX-512 F/BW/VL/DQ/CD (x86-64-v4), W = 16
//
// Link deltac_cpu_isa. Code that includes deltac/cpu/launch.h directly
// (generated kernels) gets one instance compiled with its own flags instead.
#ifndef DELTAC_CPU_ISA_H
#define DELTAC_CPU_ISA_H

#include "deltac/catalogue.h"
#include "deltac/params.h"

namespace deltac::cpu::isa {

enum class Isa { generic = 0, avx2 = 1, avx512 = 2 };

const char* name(Isa i);             // "generic", "avx2", "avx512"
bool supported(Isa i);               // compiled in and supported by this CPU
Isa best();                          // the widest supported target
Isa active();                        // best(), or DELTAC_CPU_ISA; fixed at first call
// The target that runs family f: active(), except that cpu_recurrent (the
// multi-token recurrence) runs avx2's 256-bit instance when avx512 is
// active: measured faster on Zen 4 (docs/performance.md, "CPU AVX-512").
Isa for_family(Family f);

// deltac::cpu::launch_dims<Var>(c, p, specialized) of the active target.
bool launch_dims(deltac_variant var, const KernelConfig& c,
                 const deltac_fwd_params& p, bool* specialized);
// The active target's recurrent<Var> (mode 0) or chunked<Var, mode> (mode
// 16, 32, 64), with the compile-time K/V instance of DELTAC_CPU_DIMS that
// fits p (else dims from p). False when mode is none of these.
bool forward(deltac_variant var, int mode, const deltac_fwd_params& p);

}  // namespace deltac::cpu::isa

#endif  // DELTAC_CPU_ISA_H

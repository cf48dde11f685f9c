// Run-time choice of the CPU kernels' instruction set (x86-64; elsewhere the
// generic instance alone): the same
// templates (deltac/cpu/launch.h) are compiled once per target, each in its
// own translation unit and inline namespace (DELTAC_CPU_NS, see simd.h), under
// `#pragma GCC target` (no -march: the library runs on every x86-64), and
// this is the one dispatch point between them. The target is chosen once, at
// the first call, from cpuid: the widest the CPU (and OS) supports, unless
// DELTAC_CPU_ISA=generic|avx2|avx512 forces one (tests; a forced target
// the CPU lacks falls back to the best one, with a warning on stderr).
//
//   generic  the compiler's baseline, W = 8 (x86-64: SSE2, emulated; AArch64:
//            Advanced SIMD with FMA, two 128-bit registers a vector)
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

// The catalogue owns the instruction sets and the per-ISA rule
// (deltac/catalogue.h: CpuIsa, kCpuRules); this is their run-time side.
using Isa = CpuIsa;

const char* name(Isa i);             // "generic", "avx2", "avx512"
bool supported(Isa i);               // compiled in and supported by this CPU
Isa best();                          // the widest supported target
Isa active();                        // best(), or DELTAC_CPU_ISA; fixed at first call
// The core runs 512-bit vectors as two 256-bit halves (AMD family 19h with
// AVX-512: Zen 4): the catalogue's rule then has its own avx512 row.
bool split512();
// The instance the catalogue's rule runs family f with at active()
// (cpu_rule(active(), split512()).family_isa): e.g. cpu_recurrent on avx2 while
// avx512 is active, where that measured faster.
Isa for_family(Family f);
// The problem fields this side knows: cpu_isa = active(), cpu_split512.
inline void set_problem(Problem* p) {
  p->cpu_isa = active();
  p->cpu_split512 = split512();
}

// deltac::cpu::launch_dims<Var>(c, p, specialized) of instance `run`; false
// (nothing ran) when this CPU lacks it. The runtime checks first that run
// is no wider than active() (deltac::check_cpu_isa).
bool launch_dims(deltac_variant var, const KernelConfig& c,
                 const deltac_fwd_params& p, bool* specialized, Isa run);
// As above with for_family(c.family).
bool launch_dims(deltac_variant var, const KernelConfig& c,
                 const deltac_fwd_params& p, bool* specialized);
// Instance run's recurrent<Var> (mode 0) or chunked<Var, mode> (mode 16,
// 32, 64), with the compile-time K/V instance of DELTAC_CPU_DIMS that fits
// p (else dims from p). False when mode is none of these or this CPU lacks
// instance run.
bool forward(deltac_variant var, int mode, const deltac_fwd_params& p, Isa run);
// As above with for_family of the family mode runs for p (decode for calls
// of at most one token per sequence, else recurrent or chunked).
bool forward(deltac_variant var, int mode, const deltac_fwd_params& p);

}  // namespace deltac::cpu::isa

#endif  // DELTAC_CPU_ISA_H

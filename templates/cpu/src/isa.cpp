// The one run-time dispatch point between the CPU kernels' targets
// (deltac/cpu/isa.h).
#include "deltac/cpu/isa.h"

#include <cstdio>
#include <cstdlib>
#if DELTAC_CPU_ISA_X86
#include <cpuid.h>
#endif
#include <cstring>

namespace deltac::cpu::isa {
namespace detail {
#define DELTAC_ISA_DECLARE(ns)                                                  \
  bool launch_dims_##ns(deltac_variant, const KernelConfig&,                    \
                        const deltac_fwd_params&, bool*);                       \
  bool forward_##ns(deltac_variant, int, const deltac_fwd_params&);
DELTAC_ISA_DECLARE(isa_generic)
#if DELTAC_CPU_ISA_X86
DELTAC_ISA_DECLARE(isa_avx2)
DELTAC_ISA_DECLARE(isa_avx512)
#endif
#undef DELTAC_ISA_DECLARE
}  // namespace detail

const char* name(Isa i) { return cpu_isa_name(i); }

bool supported(Isa i) {
#if DELTAC_CPU_ISA_X86
  __builtin_cpu_init();
  const bool v3 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
                  __builtin_cpu_supports("bmi") && __builtin_cpu_supports("bmi2") &&
                  __builtin_cpu_supports("popcnt");
  switch (i) {
    case Isa::generic: return true;
    case Isa::avx2: return v3;
    case Isa::avx512:
      return v3 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
             __builtin_cpu_supports("avx512cd");
  }
  return false;
#else
  return i == Isa::generic;
#endif
}

Isa best() {
  if (supported(Isa::avx512))
    return Isa::avx512;
  if (supported(Isa::avx2))
    return Isa::avx2;
  return Isa::generic;
}

static Isa choose() {
  const Isa b = best();
  const char* e = std::getenv("DELTAC_CPU_ISA");
  if (!e || !*e)
    return b;
  for (Isa i : {Isa::generic, Isa::avx2, Isa::avx512}) {
    if (std::strcmp(e, name(i)) != 0)
      continue;
    if (supported(i))
      return i;
    std::fprintf(stderr, "deltac: DELTAC_CPU_ISA=%s: not supported by this CPU, using %s\n",
                 e, name(b));
    return b;
  }
  std::fprintf(stderr, "deltac: DELTAC_CPU_ISA=%s: not generic, avx2 or avx512, using %s\n",
               e, name(b));
  return b;
}

Isa active() {
  static const Isa a = choose();
  return a;
}

bool split512() {
#if DELTAC_CPU_ISA_X86
  static const bool s = [] {
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (!__get_cpuid(0, &a, &b, &c, &d))
      return false;
    const bool amd = b == 0x68747541 && d == 0x69746e65 && c == 0x444d4163;  // "AuthenticAMD"
    if (!amd || !__get_cpuid(1, &a, &b, &c, &d))
      return false;
    const unsigned base = (a >> 8) & 0xf, ext = (a >> 20) & 0xff;
    const unsigned family = base == 0xf ? base + ext : base;
    return family == 0x19 && supported(Isa::avx512);  // Zen 4 (Zen 3 has no AVX-512)
  }();
  return s;
#else
  return false;
#endif
}

Isa for_family(Family f) {
  return cpu_rule(active(), split512()).family_isa[static_cast<int>(f)];
}

// The family recurrent<Var> (mode 0) takes: decode when no sequence is
// longer than one token (as deltac::cpu::detail::decode_applies).
static Family mode_family(int mode, const deltac_fwd_params& p) {
  if (mode != 0)
    return Family::CpuChunked;
  if (!p.cu_seqlens)
    return p.T <= 1 ? Family::CpuDecode : Family::CpuRecurrent;
  for (int n = 0; n < p.N; ++n)
    if (p.cu_seqlens[n + 1] - p.cu_seqlens[n] > 1)
      return Family::CpuRecurrent;
  return Family::CpuDecode;
}

// Whether this CPU can run instance i (a wider one would fault).
static bool runnable(Isa i) {
  static const int widest = static_cast<int>(best());
  return static_cast<int>(i) <= widest;
}

bool launch_dims(deltac_variant var, const KernelConfig& c,
                 const deltac_fwd_params& p, bool* specialized, Isa run) {
  if (!runnable(run))
    return false;
  switch (run) {
#if DELTAC_CPU_ISA_X86
    case Isa::avx512: return detail::launch_dims_isa_avx512(var, c, p, specialized);
    case Isa::avx2: return detail::launch_dims_isa_avx2(var, c, p, specialized);
#endif
    default: return detail::launch_dims_isa_generic(var, c, p, specialized);
  }
}

bool launch_dims(deltac_variant var, const KernelConfig& c,
                 const deltac_fwd_params& p, bool* specialized) {
  return launch_dims(var, c, p, specialized, for_family(c.family));
}

bool forward(deltac_variant var, int mode, const deltac_fwd_params& p, Isa run) {
  if (!runnable(run))
    return false;
  switch (run) {
#if DELTAC_CPU_ISA_X86
    case Isa::avx512: return detail::forward_isa_avx512(var, mode, p);
    case Isa::avx2: return detail::forward_isa_avx2(var, mode, p);
#endif
    default: return detail::forward_isa_generic(var, mode, p);
  }
}

bool forward(deltac_variant var, int mode, const deltac_fwd_params& p) {
  return forward(var, mode, p, for_family(mode_family(mode, p)));
}

}  // namespace deltac::cpu::isa

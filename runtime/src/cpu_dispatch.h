// CPU kernel selection for one variant: dynamic dims plus compile-time
// K = V = 128 and K = V = 64. Included by cpu_<variant>.cpp only, so that
// the three variants compile in parallel.
#ifndef DELTAC_RUNTIME_CPU_DISPATCH_H
#define DELTAC_RUNTIME_CPU_DISPATCH_H

#include "deltac/cpu/forward.h"

namespace deltac {
namespace rt {

template <deltac_variant Var, int KC, int VC>
void cpuRunDims(const deltac_fwd_params &p, int chunk) {
  switch (chunk) {
  case 16:
    cpu::chunked<Var, 16, KC, VC>(p);
    break;
  case 32:
    cpu::chunked<Var, 32, KC, VC>(p);
    break;
  case 64:
    cpu::chunked<Var, 64, KC, VC>(p);
    break;
  default:
    cpu::recurrent<Var, KC, VC>(p);
    break;
  }
}

template <deltac_variant Var>
bool cpuRun(const deltac_fwd_params &p, int chunk) {
  if (p.K == 128 && p.V == 128) {
    cpuRunDims<Var, 128, 128>(p, chunk);
    return true;
  }
  if (p.K == 64 && p.V == 64) {
    cpuRunDims<Var, 64, 64>(p, chunk);
    return true;
  }
  cpuRunDims<Var, 0, 0>(p, chunk);
  return false;
}

} // namespace rt
} // namespace deltac

#endif // DELTAC_RUNTIME_CPU_DISPATCH_H

// CPU dispatch for the gated variant.
#include "cpu_dispatch.h"
#include "dispatch.h"

bool deltac::rt::cpu_run_gated(const deltac_fwd_params &p, int chunk) {
  return cpuRun<DELTAC_VARIANT_GATED>(p, chunk);
}

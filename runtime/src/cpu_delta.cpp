// CPU dispatch for the delta variant.
#include "cpu_dispatch.h"
#include "dispatch.h"

bool deltac::rt::cpu_run_delta(const deltac_fwd_params &p, int chunk) {
  return cpuRun<DELTAC_VARIANT_DELTA>(p, chunk);
}

// CPU dispatch for the kda variant.
#include "cpu_dispatch.h"
#include "dispatch.h"

bool deltac::rt::cpu_run_kda(const deltac_fwd_params &p, int chunk) {
  return cpuRun<DELTAC_VARIANT_KDA>(p, chunk);
}

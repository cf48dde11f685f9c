// CPU dispatch for the delta variant: the one dispatch point of deltac/cpu/launch.h.
#include "deltac/cpu/launch.h"
#include "dispatch.h"

bool deltac::rt::cpu_run_delta(const deltac_fwd_params &p, const KernelConfig &c,
                          bool *specialized) {
  return cpu::launch_dims<DELTAC_VARIANT_DELTA>(c, p, specialized);
}

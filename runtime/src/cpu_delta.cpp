// CPU dispatch for the delta variant: the one dispatch point of
// deltac/cpu/isa.h (the instruction set chosen at run time).
#include "deltac/cpu/isa.h"
#include "dispatch.h"

bool deltac::rt::cpu_run_delta(const deltac_fwd_params &p, const KernelConfig &c,
                          CpuIsa isa, bool *specialized) {
  return cpu::isa::launch_dims(DELTAC_VARIANT_DELTA, c, p, specialized, isa);
}

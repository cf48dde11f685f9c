// CPU dispatch for the gated variant: the one dispatch point of
// deltac/cpu/isa.h (the instruction set chosen at run time).
#include "deltac/cpu/isa.h"
#include "dispatch.h"

bool deltac::rt::cpu_run_gated(const deltac_fwd_params &p, const KernelConfig &c,
                          CpuIsa isa, bool *specialized) {
  return cpu::isa::launch_dims(DELTAC_VARIANT_GATED, c, p, specialized, isa);
}

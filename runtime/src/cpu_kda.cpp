// CPU dispatch for the kda variant: the one dispatch point of
// deltac/cpu/isa.h (the instruction set chosen at run time).
#include "deltac/cpu/isa.h"
#include "dispatch.h"

bool deltac::rt::cpu_run_kda(const deltac_fwd_params &p, const KernelConfig &c,
                          CpuIsa isa, bool *specialized) {
  return cpu::isa::launch_dims(DELTAC_VARIANT_KDA, c, p, specialized, isa);
}

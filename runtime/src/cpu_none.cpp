// Used only while deltac/cpu/forward.h does not exist: CPU runs fail.
#include "dispatch.h"

#include <stdexcept>

namespace deltac {
namespace rt {
static bool missing() {
  throw std::runtime_error("this build has no CPU kernels "
                           "(deltac/cpu/forward.h was missing)");
}
bool cpu_run_delta(const deltac_fwd_params &, int) { return missing(); }
bool cpu_run_gated(const deltac_fwd_params &, int) { return missing(); }
bool cpu_run_kda(const deltac_fwd_params &, int) { return missing(); }
} // namespace rt
} // namespace deltac

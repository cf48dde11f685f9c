// CUDA entry points of a build without CUDA: nothing is available.
#include "dispatch.h"

namespace deltac {
namespace rt {

bool cuda_built() { return false; }
bool cuda_available() { return false; }
int cuda_sm_count() { return 0; }
int cuda_cc() { return 0; }
bool cuda_jit_enabled(Family, std::string *why) {
  if (why)
    *why = "this build of deltac has no CUDA support";
  return false;
}
void cuda_env(std::map<std::string, std::string> *) {}
size_t cuda_workspace_size(const deltac_fwd_params &, const KernelConfig &, bool,
                           int32_t, const Pad &) {
  return 0;
}
bool cuda_run(const deltac_fwd_params &, const KernelConfig &,
              const deltac_options &, std::string *error, const Mixed &,
              const Pad &) {
  *error = "this build of deltac has no CUDA support";
  return false;
}

} // namespace rt
} // namespace deltac

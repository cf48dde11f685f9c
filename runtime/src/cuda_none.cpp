// CUDA entry points of a build without CUDA: nothing is available.
#include "dispatch.h"

namespace deltac {
namespace rt {

bool cuda_built() { return false; }
bool cuda_available() { return false; }
bool cuda_supports(const deltac_fwd_params &) { return false; }
bool cuda_run(const deltac_fwd_params &, const deltac_options &,
              std::string *error) {
  *error = "this build of deltac has no CUDA support";
  return false;
}

} // namespace rt
} // namespace deltac

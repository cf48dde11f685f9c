// The CUDA backward of a build without CUDA: nothing is available.
#include "cuda_backward.h"

namespace deltac::rt {

std::string cuda_backward_unsupported(const deltac_bwd_params &) {
  return "this build of deltac has no CUDA support";
}
bool cuda_backward_workspace(const deltac_bwd_params &, size_t *bytes, std::string *error) {
  *bytes = 0;
  *error = "this build of deltac has no CUDA support";
  return false;
}
bool cuda_backward(const deltac_bwd_params &, void *, void *, size_t, std::string *error) {
  *error = "this build of deltac has no CUDA support";
  return false;
}

}  // namespace deltac::rt

// The CUDA backend of the tuner in a build without CUDA (bench.h).
#include "bench.h"
#include "deltac/tune_cuda.h"

namespace deltac::tune {

std::string cuda::usable(int32_t *sm_count) {
  *sm_count = 0;
  return "this build has no CUDA (nvcc was not found at configure time)";
}
int cuda::device_count() { return 0; }
std::unique_ptr<Bench> cuda_bench(const Spec &, const Settings &, int32_t, int32_t) {
  return nullptr;
}
std::unique_ptr<Checker> cuda_checker(const Spec &, const Settings &, int64_t) {
  return nullptr;
}
std::unique_ptr<BackwardBench> cuda_backward_bench(const Spec &, const Settings &, int32_t,
                                                   int32_t, std::string *why) {
  *why = "this build has no CUDA";
  return nullptr;
}
std::string cuda_backward_check(const Spec &, const Settings &, int32_t, int32_t, bool,
                                double *err) {
  *err = 0;
  return "this build has no CUDA";
}

} // namespace deltac::tune

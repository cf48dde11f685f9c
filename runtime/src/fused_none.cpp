// The fused kernels (fused.h) in a build without CUDA: every call fails.
#include "fused.h"

namespace deltac {
namespace fused {

namespace {
constexpr int kNoCuda = -1;
} // namespace

int conv_gates(const ConvGates &, void *) { return kNoCuda; }
int gated_rmsnorm(const void *, bool, void *, bool, const void *, bool, int64_t, int64_t,
                  int64_t, const void *, bool, int64_t, int64_t, int64_t, float, void *, bool) {
  return kNoCuda;
}
int kda_gates(float *, const float *, int64_t, const float *, const float *, float *, int64_t,
              int64_t, int64_t, void *) {
  return kNoCuda;
}
int layernorm_gate(const void *, const void *, bool, void *, bool, const void *, const void *,
                   bool, int64_t, int64_t, int64_t, float, void *) {
  return kNoCuda;
}
int sigmoid(const void *, bool, float *, int64_t, float, void *) { return kNoCuda; }
int bitlinear_quantize(const void *, bool, int64_t, int64_t, int64_t, float, int8_t *, float *,
                       void *) {
  return kNoCuda;
}
int bitlinear_gemm(const int8_t *, const float *, int64_t, int64_t, const int8_t *, const float *,
                   int64_t, void *, bool, int64_t, int64_t, int64_t, void *) {
  return kNoCuda;
}
const char *error_text(int) { return "this build of deltac has no CUDA support"; }

} // namespace fused
} // namespace deltac

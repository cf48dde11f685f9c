// The layers' elementwise passes for AVX2 + FMA (nn_rows.h, nn_rows.inc),
// compiled under `#pragma GCC target` after the standard headers; ops()
// returns them only when cpuid reports AVX2 (through bitlinear::active()).
#include "bitlinear.h"
#include "nn_rows.h"

#include <cmath>
#include <cstdint>

namespace deltac {
namespace nn {
namespace rows {

#if defined(__x86_64__)
#pragma GCC push_options
#pragma GCC target("avx2,fma,bmi,bmi2,popcnt")
#include "nn_rows.inc"
#pragma GCC pop_options
const Ops avx2_ops{"avx2", conv_silu, gated_rmsnorm, sigmoid_rmsnorm, layernorm_gate,
                 sigmoid, scaled_softplus};

const Ops &ops() {
  return bitlinear::active() == bitlinear::Kernel::generic ? generic_ops : avx2_ops;
}
#else
const Ops &ops() { return generic_ops; }
#endif

} // namespace rows
} // namespace nn
} // namespace deltac

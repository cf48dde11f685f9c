// The layers' elementwise passes for any CPU (nn_rows.h, nn_rows.inc).
#include "nn_rows.h"

#include <cmath>
#include <cstdint>

namespace deltac {
namespace nn {
namespace rows {
// The 32-byte vectors never cross a call boundary (all inlined), so the
// note that their ABI differs without AVX does not apply.
#pragma GCC diagnostic ignored "-Wpsabi"
#include "nn_rows.inc"

const Ops generic_ops{"generic", conv_silu, gated_rmsnorm, sigmoid_rmsnorm, layernorm_gate,
                    sigmoid, scaled_softplus};

} // namespace rows
} // namespace nn
} // namespace deltac

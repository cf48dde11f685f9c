#include "kernels.cuh"

namespace deltac::test {

KernelFn find_gated(int K, int V, bool bf16) {
  return find_in<DELTAC_VARIANT_GATED>(TestShapes{}, K, V, bf16);
}

}  // namespace deltac::test

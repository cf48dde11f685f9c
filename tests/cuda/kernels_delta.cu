#include "kernels.cuh"

namespace deltac::test {

KernelFn find_delta(int K, int V, bool bf16) {
  return find_in<DELTAC_VARIANT_DELTA>(TestShapes{}, K, V, bf16);
}

}  // namespace deltac::test

#include "kernels.cuh"

namespace deltac::test {

KernelFn find_kda(int K, int V, bool bf16) {
  return find_in<DELTAC_VARIANT_KDA>(TestShapes{}, K, V, bf16);
}

}  // namespace deltac::test

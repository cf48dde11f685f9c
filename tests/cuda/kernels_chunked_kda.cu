#include "kernels_chunked.cuh"

namespace deltac::test {

ChunkedFns find_chunked_kda(int K, int V, int dtype, int config) {
  return find_chunked_in<DELTAC_VARIANT_KDA>(ChunkedShapes{}, K, V, dtype, config);
}

}  // namespace deltac::test

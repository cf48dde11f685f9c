#include "kernels_chunked.cuh"

namespace deltac::test {

ChunkedFns find_chunked_gated(int K, int V, int dtype, int config) {
  return find_chunked_in<DELTAC_VARIANT_GATED>(ChunkedShapes{}, K, V, dtype, config);
}

bool tma_scan_device() {
  using D = cuda::DefaultChunkedConfig<DELTAC_VARIANT_GATED, 128, 128, __nv_bfloat16>;
  return cuda::detail::chunked_tma_device(
      cuda::detail::chunked_kernels<DELTAC_VARIANT_GATED, 128, 128, __nv_bfloat16, D>());
}

}  // namespace deltac::test

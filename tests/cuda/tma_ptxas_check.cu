// The TMA scans' kernels (chunked_scan_tma.cuh, chunked_scan_tmat.cuh),
// instantiated alone for tma_ptxas_check.sh, which reads ptxas's report on them.
#include "deltac/cuda/chunked.cuh"

namespace {
namespace dcd = deltac::cuda::detail;
template <deltac_variant Var, int K, int V, class T>
const void* tma_kernel() {
  using Tt = dcd::TmaScanTraits<Var, K, V, T, 1, deltac::cuda::kTmaScanStages>;
  return reinterpret_cast<const void*>(&dcd::chunked_scan_tma_kernel<Var, Tt>);
}
template <deltac_variant Var, int K, int V, class T, int NWG, int KS = 1>
const void* tmat_kernel() {
  using Tt =
      dcd::TmatScanTraits<Var, K, V, T, NWG, deltac::cuda::kTmatScanStages, (KS == 1 && NWG > 1), KS>;
  return reinterpret_cast<const void*>(&dcd::chunked_scan_tmat_kernel<Var, Tt>);
}
}  // namespace

const void* deltac_tma_ptxas_kernels[] = {
    tma_kernel<DELTAC_VARIANT_GATED, 128, 128, __nv_bfloat16>(),
    tma_kernel<DELTAC_VARIANT_DELTA, 64, 64, __nv_bfloat16>(),
    tma_kernel<DELTAC_VARIANT_GATED, 128, 128, __half>(),
    tmat_kernel<DELTAC_VARIANT_GATED, 128, 128, __nv_bfloat16, 1>(),
    tmat_kernel<DELTAC_VARIANT_GATED, 128, 128, __nv_bfloat16, 2>(),
    tmat_kernel<DELTAC_VARIANT_DELTA, 64, 64, __nv_bfloat16, 1>(),
    tmat_kernel<DELTAC_VARIANT_GATED, 256, 256, __nv_bfloat16, 2, 2>(),
};

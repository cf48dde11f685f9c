// deltac::nn on CUDA in a build without CUDA: the constructors say so.
#include "deltac/nn_cuda.h"

namespace deltac {
namespace nn {

namespace {
[[noreturn]] void no_cuda(const char *layer) {
  throw Error(std::string(layer) + ": this build of deltac has no CUDA support");
}
} // namespace

struct CudaDeltaNetAttention::Impl {};
struct CudaGatedDeltaNet::Impl {};
struct CudaKimiDeltaAttention::Impl {};

CudaDeltaNetAttention::CudaDeltaNetAttention(const DeltaNetConfig &config, const SafeTensors &,
                                             const std::string &, const CudaOptions &)
    : cfg_(config) {
  no_cuda("CudaDeltaNetAttention");
}
CudaDeltaNetAttention::~CudaDeltaNetAttention() = default;
void CudaDeltaNetAttention::forward(const DeviceTensor &, const DeviceTensor &, void *) {
  no_cuda("CudaDeltaNetAttention");
}
const float *CudaDeltaNetAttention::state() const { return nullptr; }

CudaGatedDeltaNetCache::~CudaGatedDeltaNetCache() = default;

CudaGatedDeltaNet::CudaGatedDeltaNet(const GatedDeltaNetConfig &config, const SafeTensors &,
                                     const std::string &, const CudaOptions &)
    : cfg_(config) {
  no_cuda("CudaGatedDeltaNet");
}
CudaGatedDeltaNet::~CudaGatedDeltaNet() = default;
void CudaGatedDeltaNet::forward(const DeviceTensor &, const DeviceTensor &,
                                CudaGatedDeltaNetCache *, void *) {
  no_cuda("CudaGatedDeltaNet");
}

CudaKimiDeltaAttention::CudaKimiDeltaAttention(const KimiDeltaAttentionConfig &config,
                                               const SafeTensors &, const std::string &,
                                               const CudaOptions &)
    : cfg_(config) {
  no_cuda("CudaKimiDeltaAttention");
}
CudaKimiDeltaAttention::~CudaKimiDeltaAttention() = default;
void CudaKimiDeltaAttention::forward(const DeviceTensor &, const DeviceTensor &,
                                     CudaGatedDeltaNetCache *, void *) {
  no_cuda("CudaKimiDeltaAttention");
}

} // namespace nn
} // namespace deltac

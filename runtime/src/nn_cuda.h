// Internal pieces of deltac::nn on CUDA (deltac/nn_cuda.h): device memory,
// the cuBLAS GEMM, the delta-rule call through deltac_forward
// (nn_cuda_common.cpp); the elementwise kernels are fused.h's.
#ifndef DELTAC_NN_CUDA_INTERNAL_H
#define DELTAC_NN_CUDA_INTERNAL_H

#include "deltac/nn_cuda.h"
#include "fused.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <string>
#include <vector>

namespace deltac {
namespace nn {
namespace cudanet {

// Throws Error("<layer>: <what> failed: <name> (<text>)") unless e is success.
void check(cudaError_t e, const char *layer, const std::string &what);

// One device allocation, freed by the destructor.
struct DeviceMem {
  void *p = nullptr;
  size_t bytes = 0;
  DeviceMem() = default;
  DeviceMem(const DeviceMem &) = delete;
  DeviceMem &operator=(const DeviceMem &) = delete;
  ~DeviceMem();
  // At least n bytes (contents lost when it grows: the device is
  // synchronised, the old block freed and a new one allocated).
  void reserve(size_t n, const char *layer, const char *what);
  template <typename T> T *as(size_t byte_offset = 0) const {
    return reinterpret_cast<T *>(static_cast<char *>(p) + byte_offset);
  }
};

// Host floats to the device, as f32 or rounded to bf16 (to nearest even).
void upload(DeviceMem *m, const std::vector<float> &v, bool bf16, const char *layer,
            const char *what);

// Host bytes to the device as they are.
void upload_bytes(DeviceMem *m, const void *p, size_t bytes, const char *layer, const char *what);

// Sub-buffers of one scratch allocation at 256-byte aligned offsets.
struct Carve {
  size_t total = 0;
  size_t take(size_t bytes) {
    const size_t off = total;
    total += (bytes + 255) / 256 * 256;
    return off;
  }
};

// The current device for the life of the object (restored after).
struct DeviceGuard {
  int previous = -1;
  DeviceGuard(int device, const char *layer);
  ~DeviceGuard();
};

// The layer's device (the current one at construction); throws Error when
// none is usable.
int layer_device(const char *layer);

// Throws Error unless opt.dtype is float32 or bfloat16.
void check_options(const CudaOptions &opt, const char *layer);

// Throws Error naming `name` unless t is a [B, T, hidden] tensor of dtype in
// device memory of `device` (B, T > 0; like: its shape must equal like's).
void check_tensor(const DeviceTensor &t, const char *name, const char *layer, int64_t hidden,
                  ElemType dtype, int device, const DeviceTensor *like = nullptr);

// cuBLAS: one handle with its own workspace (no allocation per call).
class Blas {
public:
  Blas(const char *layer, bool tf32);
  ~Blas();
  Blas(const Blas &) = delete;
  Blas &operator=(const Blas &) = delete;
  void set_stream(cudaStream_t s);
  // y [rows, n] (row stride ldy) = x [rows, k] W^T with W [n, k]; x and W
  // bf16 or f32 (bf16_in), y f32 or the input's dtype (f32_out); f32
  // accumulation. batch > 1: W and y advance by w_stride / y_stride
  // elements per batch entry (x is shared). ldx: x's row stride (0: k).
  void gemm(const void *x, const void *w, void *y, int64_t rows, int64_t n, int64_t k,
            int64_t ldy, bool bf16_in, bool f32_out, int batch = 1, int64_t w_stride = 0,
            int64_t y_stride = 0, int64_t ldx = 0);

private:
  const char *layer_;
  cublasHandle_t h_ = nullptr;
  cublasComputeType_t compute_;
  DeviceMem ws_;
};

// One delta-rule call through deltac_forward on device pointers (mode auto,
// qk L2 norm in the kernel, scale 1/sqrt(K), f32 state in place: h0 == ht
// when both are given). ws: the chunked kernel's workspace, grown here.
struct RuleCall {
  int32_t variant;
  int64_t B, T, H, HV, K, V;
  bool bf16;
  const void *q, *k, *v;
  const float *beta, *g; // g: [B, T, HV], kda [B, T, HV, K]
  float *state;    // [B, HV, K, V] or null
  bool read_state; // the state holds the previous call's
  void *o;
  bool beta_two = false; // beta may exceed 1 (deltac_options.allow_neg_eigval)
};
void run_rule(const RuleCall &c, cudaStream_t s, DeviceMem *ws, const char *layer);

// The elementwise kernels: fused.h (fused_kernels.cu, in the runtime, shared
// with the C API deltac/fused_ops.h); they return a cudaError_t as an int.
using fused::kMaxConvKernel;

} // namespace cudanet
} // namespace nn
} // namespace deltac

#endif

// deltac::nn on CUDA: DeltaNetAttention, GatedDeltaNet and
// KimiDeltaAttention (deltac/nn.h) run
// forward on device tensors, with the weights of the same safetensors file
// uploaded (and stacked, as the CPU layers stack them) once at load.
// Projections through cuBLAS (bf16 with f32 accumulation, or f32 without
// TF32), the delta rule through deltac_forward on device pointers (mode
// auto), the conv, gates and norms as CUDA kernels of our own. Every call is
// enqueued on the caller's stream without host synchronisation; a layer
// keeps its scratch (and the state, decoder mode) in device memory and
// allocates only when a call is larger than any before it. Errors throw
// deltac::nn::Error naming the tensor or field, as the CPU layers do.
// Library deltac_nn_cuda; in a build without CUDA, or on a machine without
// a usable GPU, the constructors throw Error saying so. docs/nn.md.
#ifndef DELTAC_NN_CUDA_H
#define DELTAC_NN_CUDA_H

#include "deltac/bind.h" // ElemType
#include "deltac/nn.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace deltac {
namespace nn {

// A tensor in CUDA device memory the caller owns: dense, C order.
struct DeviceTensor {
  void *data = nullptr;
  ElemType dtype = ElemType::BF16; // F32 or BF16
  std::vector<int64_t> shape;
};

struct CudaOptions {
  // The activations' dtype (x, y) and the projection weights' on the
  // device: BF16 (GEMMs in bf16 with f32 accumulation) or F32.
  ElemType dtype = ElemType::BF16;
  // F32 only: let cuBLAS use TF32 tensor cores (off: full f32 products).
  bool tf32 = false;
  // BF16 only: run the delta rule on f32 q, k, v, o (the projections write
  // f32; the kernel's f32 path) instead of bf16. The bf16 rule is faster
  // and its own bf16 rounding (up to 5e-3 relative RMS by the kernel tests)
  // is most of the layer's error; docs/nn.md has both.
  bool f32_rule = false;
};

class CudaDeltaNetAttention {
public:
  // The CPU layer's config and weights (same names, checks and messages);
  // use_bitnet is refused (BitLinear runs on the CPU only). Uses the
  // current CUDA device.
  CudaDeltaNetAttention(const DeltaNetConfig &config, const SafeTensors &weights,
                        const std::string &prefix = "", const CudaOptions &options = {});
  ~CudaDeltaNetAttention();
  CudaDeltaNetAttention(const CudaDeltaNetAttention &) = delete;
  CudaDeltaNetAttention &operator=(const CudaDeltaNetAttention &) = delete;

  // x [B, T, hidden] -> y [B, T, hidden], both device memory of options'
  // dtype (y may be x). stream: a cudaStream_t (null: the default stream).
  // Decoder mode continues the state (zero when none) and keeps the final
  // one in device memory. Not thread-safe on one object.
  void forward(const DeviceTensor &x, const DeviceTensor &y, void *stream = nullptr);
  void reset_state() { state_batch_ = 0; }
  // Decoder mode: the state [B, H, D, D] f32 in device memory (valid after
  // the stream's work), null when none.
  const float *state() const;
  int64_t state_batch() const { return state_batch_; }
  const DeltaNetConfig &config() const { return cfg_; }
  int64_t head_dim() const { return D_; }

  struct Impl;

private:
  DeltaNetConfig cfg_;
  int64_t H_ = 0, D_ = 0, state_batch_ = 0;
  std::unique_ptr<Impl> impl_;
};

// The decode state of one CUDA GatedDeltaNet or KimiDeltaAttention layer, in
// device memory: conv [B, conv_dim, W] and recurrent [B, HV, K, V], f32 (the
// layouts of GatedDeltaNetCache). Updated in place by each forward; memory
// kept across reset() and freed by the destructor. One cache belongs to one
// layer (and its device).
class CudaGatedDeltaNetCache {
public:
  CudaGatedDeltaNetCache() = default;
  ~CudaGatedDeltaNetCache();
  CudaGatedDeltaNetCache(const CudaGatedDeltaNetCache &) = delete;
  CudaGatedDeltaNetCache &operator=(const CudaGatedDeltaNetCache &) = delete;

  bool empty() const { return batch_ == 0; }
  int64_t batch() const { return batch_; }
  void reset() { batch_ = 0; }
  const float *conv() const { return batch_ ? conv_ : nullptr; }
  const float *recurrent() const { return batch_ ? rec_ : nullptr; }

private:
  friend class CudaGatedDeltaNet;
  friend class CudaKimiDeltaAttention;
  // A forward's start: whether it continues the held states (throws, naming
  // layer, on another batch or another layer's shapes); room for the states
  // when it does not.
  bool begin(int64_t batch, size_t conv_n, size_t rec_n, const char *layer);
  // A forward's end: the states it wrote are held.
  void hold(int64_t batch, size_t conv_n, size_t rec_n) {
    batch_ = batch, conv_n_ = conv_n, rec_n_ = rec_n;
  }
  int64_t batch_ = 0;
  float *conv_ = nullptr, *rec_ = nullptr;
  size_t conv_cap_ = 0, rec_cap_ = 0; // floats allocated
  size_t conv_n_ = 0, rec_n_ = 0;     // floats of the held states
};

class CudaGatedDeltaNet {
public:
  // The CPU layer's config and weights (every layout). Uses the current
  // CUDA device.
  CudaGatedDeltaNet(const GatedDeltaNetConfig &config, const SafeTensors &weights,
                    const std::string &prefix = "", const CudaOptions &options = {});
  ~CudaGatedDeltaNet();
  CudaGatedDeltaNet(const CudaGatedDeltaNet &) = delete;
  CudaGatedDeltaNet &operator=(const CudaGatedDeltaNet &) = delete;

  // hidden [B, T, hidden] -> y [B, T, hidden], device memory of options'
  // dtype (y may be x). cache null: a prompt from zero states; else
  // continues *cache when it holds states and stores the new ones. Not
  // thread-safe on one object.
  void forward(const DeviceTensor &x, const DeviceTensor &y,
               CudaGatedDeltaNetCache *cache = nullptr, void *stream = nullptr);
  const GatedDeltaNetConfig &config() const { return cfg_; }
  int64_t conv_dim() const { return conv_dim_; }

  struct Impl;

private:
  GatedDeltaNetConfig cfg_;
  int64_t key_dim_ = 0, value_dim_ = 0, conv_dim_ = 0;
  std::unique_ptr<Impl> impl_;
};

// KimiDeltaAttention (deltac/nn.h) on device tensors: the CPU layer's config
// and weights, the layouts and options of CudaGatedDeltaNet.
class CudaKimiDeltaAttention {
public:
  CudaKimiDeltaAttention(const KimiDeltaAttentionConfig &config, const SafeTensors &weights,
                         const std::string &prefix = "", const CudaOptions &options = {});
  ~CudaKimiDeltaAttention();
  CudaKimiDeltaAttention(const CudaKimiDeltaAttention &) = delete;
  CudaKimiDeltaAttention &operator=(const CudaKimiDeltaAttention &) = delete;

  // As CudaGatedDeltaNet::forward (the cache: conv [B, 3 H D, W],
  // recurrent [B, H, D, D]).
  void forward(const DeviceTensor &x, const DeviceTensor &y,
               CudaGatedDeltaNetCache *cache = nullptr, void *stream = nullptr);
  const KimiDeltaAttentionConfig &config() const { return cfg_; }

  struct Impl;

private:
  KimiDeltaAttentionConfig cfg_;
  std::unique_ptr<Impl> impl_;
};

} // namespace nn
} // namespace deltac

#endif // DELTAC_NN_CUDA_H

// deltac::nn: the PyTorch layers of python/deltac/nn in C++ (forward only,
// CPU, float32), with weights from a safetensors file written from the
// modules' state_dict (the same parameter names, optionally under a prefix
// such as "model.layers.3.linear_attn."). Projections run through OpenBLAS
// (cblas_sgemm) or, BitLinear, int8 GEMMs, the delta rule through
// deltac_forward. Errors (a missing or
// misshapen weight, a bad config, a bad input shape, a kernel error) throw
// deltac::nn::Error with a one-line message naming the tensor or field.
// The same layers on CUDA device tensors: deltac/nn_cuda.h. docs/nn.md has
// the API and the math.
#ifndef DELTAC_NN_H
#define DELTAC_NN_H

#include "deltac/safetensors.h"

#include <array>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace deltac {
namespace nn {

struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// A dense float32 tensor, C order.
struct Tensor {
  std::vector<int64_t> shape;
  std::vector<float> data;
};

namespace bitlinear {
struct Weights;
}

// A row-major linear layer y = x W^T (no bias), optionally BitNet b1.58
// (ternary weights with an absmean scale, 8-bit per-token activations, the
// numbers of python/deltac/nn/bitlinear.py): then an int8 GEMM of our own
// (AVX2 / AVX-512 VNNI / generic, runtime/src/bitlinear.h) on the ternary
// weights packed at load, instead of OpenBLAS's sgemm.
struct Linear {
  int64_t in = 0, out = 0;
  bool bitnet = false;
  int32_t threads = 0;  // BitNet GEMM threads (0: OpenMP's default)
  std::vector<float> w; // [out, in]; empty for BitNet
  std::shared_ptr<const bitlinear::Weights> bits; // BitNet: packed at load
  // y [rows, out] = x [rows, in] W^T (ldy: row stride of y).
  void forward(const float *x, int64_t rows, float *y, int64_t ldy) const;
};

// python/deltac/nn/deltanet.py, DeltaNetAttention.
struct DeltaNetConfig {
  int64_t hidden_size = 1024;
  int64_t num_heads = 8;
  bool use_bitnet = false;
  std::string mode = "encoder"; // or "decoder" (keeps the state between calls)
  float norm_eps = 1e-5f;       // nn.LayerNorm's default
  int32_t threads = 0;          // delta-rule kernel threads (0: all cores)
};

class DeltaNetAttention {
public:
  DeltaNetAttention(const DeltaNetConfig &config, const SafeTensors &weights,
                    const std::string &prefix = "");
  // x [B, T, hidden] -> [B, T, hidden]. Decoder mode continues the cached
  // state (zero when none) and keeps the final one. Not thread-safe on one
  // object (the state and the reused scratch buffers).
  Tensor forward(const Tensor &x);
  void reset_state() { state_.clear(); state_batch_ = 0; }
  // Decoder mode: the cached state [B, H, D, D] (empty when none).
  const std::vector<float> &state() const { return state_; }
  const DeltaNetConfig &config() const { return cfg_; }
  int64_t head_dim() const { return D_; }

private:
  friend class CudaDeltaNetAttention; // deltac/nn_cuda.h: uploads the weights
  DeltaNetConfig cfg_;
  int64_t H_ = 0, D_ = 0, total_ = 0;
  Linear qkvg_;            // q || k || v || g rows
  Linear beta_, out_;
  std::vector<float> norm_w_, norm_b_;
  std::vector<float> state_;
  int64_t state_batch_ = 0;
  std::array<std::vector<float>, 6> ws_; // scratch, reused across calls
};

// python/deltac/nn/gated_deltanet.py, GatedDeltaNet (names as in
// transformers' Qwen3-Next / Qwen3.5 / OLMo-Hybrid).
struct GatedDeltaNetConfig {
  int64_t hidden_size = 2048;
  int64_t num_k_heads = 16;    // linear_num_key_heads
  int64_t num_v_heads = 32;    // linear_num_value_heads
  int64_t head_k_dim = 128;    // linear_key_head_dim
  int64_t head_v_dim = 128;    // linear_value_head_dim
  int64_t conv_kernel = 4;     // linear_conv_kernel_dim
  float rms_norm_eps = 1e-6f;  // olmo_hybrid: 1e-5 (its o_norm)
  bool allow_neg_eigval = false;
  std::string layout = "qwen3_next"; // "qwen3_5", "olmo_hybrid"
  int32_t threads = 0;
};

// The decode state of one GatedDeltaNet or KimiDeltaAttention layer: conv
// [B, conv_dim, W] (the last W conv inputs, q || k || v channels) and
// recurrent [B, HV, K, V].
struct GatedDeltaNetCache {
  int64_t batch = 0; // 0: empty (the next call is a prompt)
  std::vector<float> conv, recurrent;
  bool empty() const { return batch == 0; }
  void reset() { batch = 0; conv.clear(); recurrent.clear(); }
};

class GatedDeltaNet {
public:
  GatedDeltaNet(const GatedDeltaNetConfig &config, const SafeTensors &weights,
                const std::string &prefix = "");
  // hidden [B, T, hidden] -> [B, T, hidden]. cache null: a prompt from zero
  // states; else continues *cache when it holds states and stores the new ones.
  // Not thread-safe on one object (it reuses its scratch buffers).
  Tensor forward(const Tensor &x, GatedDeltaNetCache *cache = nullptr);
  const GatedDeltaNetConfig &config() const { return cfg_; }

private:
  friend class CudaGatedDeltaNet; // deltac/nn_cuda.h: uploads the weights
  GatedDeltaNetConfig cfg_;
  int64_t key_dim_ = 0, value_dim_ = 0, conv_dim_ = 0;
  Linear in_;  // rows: q || k || v || z || b || a (fused layouts reordered)
  Linear out_;
  std::vector<float> conv_w_; // [conv_dim, W]
  std::vector<float> conv_wt_; // [W, conv_dim] (token-major conv)
  std::vector<float> conv_b_; // [conv_dim] or empty
  std::vector<float> A_log_, dt_bias_, norm_w_;
  std::array<std::vector<float>, 10> ws_; // scratch, reused across calls
};

// python/deltac/nn/kda.py, KimiDeltaAttention (Kimi-Linear's KDA mixer: a
// GatedDeltaNet with per-channel decay; Kimi-Linear's parameter names: q_proj,
// k_proj, v_proj, q_conv1d, k_conv1d, v_conv1d, A_log [1, 1, H, 1], f_a_proj,
// f_b_proj, dt_bias [H * D], b_proj, g_a_proj, g_b_proj, o_norm.weight,
// o_proj). Defaults: Kimi-Linear-48B-A3B's KDA layers.
struct KimiDeltaAttentionConfig {
  int64_t hidden_size = 2304;
  int64_t num_heads = 32;      // linear_attn_config["num_heads"] (q, k and v)
  int64_t head_dim = 128;      // linear_attn_config["head_dim"] (K = V)
  int64_t conv_kernel = 4;     // linear_attn_config["short_conv_kernel_size"]
  float rms_norm_eps = 1e-5f;  // o_norm's eps
  int32_t threads = 0;         // delta-rule kernel threads (0: all cores)
};

class KimiDeltaAttention {
public:
  KimiDeltaAttention(const KimiDeltaAttentionConfig &config, const SafeTensors &weights,
                     const std::string &prefix = "");
  // hidden [B, T, hidden] -> [B, T, hidden], as GatedDeltaNet::forward (the
  // cache: conv [B, 3 H D, W], recurrent [B, H, D, D]). Not thread-safe on
  // one object.
  Tensor forward(const Tensor &x, GatedDeltaNetCache *cache = nullptr);
  const KimiDeltaAttentionConfig &config() const { return cfg_; }

private:
  friend class CudaKimiDeltaAttention; // deltac/nn_cuda.h: uploads the weights
  KimiDeltaAttentionConfig cfg_;
  int64_t hd_ = 0;             // H * D
  Linear in_;                  // rows: q || k || v || b || f_a || g_a
  Linear f_b_, g_b_, out_;     // decay and output-gate up-projections, o_proj
  std::vector<float> conv_w_;  // [3 H D, W] (q || k || v)
  std::vector<float> conv_wt_; // [W, 3 H D] (token-major conv)
  std::vector<float> A_log_, dt_bias_, norm_w_;
  std::array<std::vector<float>, 11> ws_; // scratch, reused across calls
};

// Config from a safetensors file's __metadata__ (the keys of the Python
// configs: hidden_size, num_heads, mode, use_bitnet / linear_num_key_heads,
// ...; absent keys keep the defaults). Throws Error on a malformed value.
DeltaNetConfig deltanet_config(const std::map<std::string, std::string> &meta);
GatedDeltaNetConfig gated_deltanet_config(const std::map<std::string, std::string> &meta);
// hidden_size, rms_norm_eps and linear_attn_config's keys at the top level:
// num_heads, head_dim, short_conv_kernel_size.
KimiDeltaAttentionConfig kda_config(const std::map<std::string, std::string> &meta);

} // namespace nn
} // namespace deltac

#endif // DELTAC_NN_H

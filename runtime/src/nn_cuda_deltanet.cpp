// deltac::nn::CudaDeltaNetAttention: DeltaNetAttention (nn_deltanet.cpp) on
// device tensors. One batched GEMM writes q, k, v and g as four dense
// tensors (the stacked weight's four parts), a second one the betas. With
// use_bitnet the q / k / v / g and out projections are BitLinear: the CPU
// layer's packed ternary weights and scales on the device, the activations
// quantised per token, an int8 tensor-core GEMM (fused.h, bitlinear_*).
#include "bitlinear.h"
#include "fused.h"
#include "nn_cuda.h"

#include "deltac/runtime.h"

namespace deltac {
namespace nn {

using namespace cudanet;

namespace {
constexpr const char *kName = "CudaDeltaNetAttention";
} // namespace

struct CudaDeltaNetAttention::Impl {
  int device;
  bool bf16;      // activations and weights
  bool rule_bf16; // q, k, v, g, o
  Blas blas;
  DeviceMem w_qkvg, w_beta, w_out, norm_w, norm_b; // weights
  // BitLinear: ternary int8 weights [rows, kp] and their scales [rows].
  bool bit = false;
  int64_t kp_in = 0, kp_out = 0;
  DeviceMem t_qkvg, g_qkvg, t_out, g_out;
  DeviceMem scratch, ws, state;
  Impl(int dev, bool bf, bool rule_bf, bool tf32)
      : device(dev), bf16(bf), rule_bf16(rule_bf), blas(kName, tf32) {}
};

CudaDeltaNetAttention::CudaDeltaNetAttention(const DeltaNetConfig &config,
                                             const SafeTensors &w, const std::string &prefix,
                                             const CudaOptions &opt)
    : cfg_(config) {
  check_options(opt, kName);
  const bool bf16 = opt.dtype == ElemType::BF16, rule_bf16 = bf16 && !opt.f32_rule;
  DeltaNetAttention cpu(config, w, prefix); // the CPU layer's checks, loading and stacking
  H_ = cpu.H_;
  D_ = cpu.D_;
  if (!deltac_cuda_supports(DELTAC_VARIANT_DELTA, int32_t(D_), int32_t(D_),
                            rule_bf16 ? DELTAC_BF16 : DELTAC_F32))
    throw Error(std::string(kName) + ": head_dim = " + std::to_string(D_) +
                ": this build has no CUDA delta-rule kernel for K = V = " + std::to_string(D_) +
                " (deltac_cuda_supports)");
  impl_ = std::make_unique<Impl>(layer_device(kName), bf16, rule_bf16, opt.tf32);
  Impl &m = *impl_;
  if (config.use_bitnet) {
    const bitlinear::Weights &a = *cpu.qkvg_.bits, &b = *cpu.out_.bits;
    m.bit = true;
    m.kp_in = a.kp;
    m.kp_out = b.kp;
    upload_bytes(&m.t_qkvg, a.t.data(), size_t(a.n * a.kp), kName, "q/k/v/g_proj ternary weights");
    upload(&m.g_qkvg, a.gamma, false, kName, "q/k/v/g_proj scales");
    upload_bytes(&m.t_out, b.t.data(), size_t(b.n * b.kp), kName, "out_proj ternary weights");
    upload(&m.g_out, b.gamma, false, kName, "out_proj scales");
  } else {
    upload(&m.w_qkvg, cpu.qkvg_.w, bf16, kName, "q/k/v/g_proj weights");
    upload(&m.w_out, cpu.out_.w, bf16, kName, "out_proj weight");
  }
  upload(&m.w_beta, cpu.beta_.w, bf16, kName, "beta_proj weight");
  upload(&m.norm_w, cpu.norm_w_, false, kName, "norm.weight");
  upload(&m.norm_b, cpu.norm_b_, false, kName, "norm.bias");
}

CudaDeltaNetAttention::~CudaDeltaNetAttention() = default;

const float *CudaDeltaNetAttention::state() const {
  return state_batch_ ? impl_->state.as<float>() : nullptr;
}

void CudaDeltaNetAttention::forward(const DeviceTensor &x, const DeviceTensor &y, void *stream) {
  Impl &m = *impl_;
  const ElemType dt = m.bf16 ? ElemType::BF16 : ElemType::F32;
  const int64_t hs = cfg_.hidden_size;
  DeviceGuard guard(m.device, kName);
  check_tensor(x, "x", kName, hs, dt, m.device);
  check_tensor(y, "y", kName, hs, dt, m.device, &x);
  const int64_t B = x.shape[0], T = x.shape[1], H = H_, D = D_, n = H * D, rows = B * T;
  const bool decoder = cfg_.mode == "decoder";
  if (decoder && state_batch_ && state_batch_ != B)
    throw Error(std::string(kName) + ": the cached decoder state has batch " +
                std::to_string(state_batch_) + " but x has batch " + std::to_string(B) +
                ": call reset_state() to start new sequences");
  // Rule tensors (q, k, v, g, o) of the rule's dtype; the norm writes the
  // activations' dtype (in place over o when they are the same).
  const size_t re = m.rule_bf16 ? 2 : 4, e = m.bf16 ? 2 : 4;
  const bool apart = re != e;
  Carve cv;
  const size_t qkvg_at = cv.take(size_t(4 * rows * n) * re), beta_at = cv.take(size_t(rows * H) * 4),
               o_at = cv.take(size_t(rows * n) * re), n_at = apart ? cv.take(size_t(rows * n) * e) : o_at;
  // BitLinear: the quantised activations of either projection and their scales.
  const int64_t kp = m.kp_in > m.kp_out ? m.kp_in : m.kp_out;
  const size_t q8_at = m.bit ? cv.take(size_t(rows * kp)) : 0,
               r_at = m.bit ? cv.take(size_t(rows) * 4) : 0;
  m.scratch.reserve(cv.total, kName, "scratch");
  char *qkvg = m.scratch.as<char>(qkvg_at), *o = m.scratch.as<char>(o_at),
       *normed = m.scratch.as<char>(n_at);
  float *beta = m.scratch.as<float>(beta_at);
  const size_t part = size_t(rows * n) * re; // q, k, v, g one after the other

  cudaStream_t s = static_cast<cudaStream_t>(stream);
  m.blas.set_stream(s);
  int8_t *q8 = m.scratch.as<int8_t>(q8_at);
  float *r8 = m.scratch.as<float>(r_at);
  // BitLinear y = x W^T: quantise x [rows, in], the int8 GEMM into y's parts.
  auto bitlinear = [&](const void *in, int64_t k, int64_t kpad, const DeviceMem &t,
                       const DeviceMem &g, int64_t outs, void *out, bool out_bf16, int64_t part,
                       const char *what) {
    check(cudaError_t(fused::bitlinear_quantize(in, m.bf16, rows, k, kpad, 1e-5f, q8, r8, s)),
          kName, std::string(what) + ": BitLinear quantisation launch");
    check(cudaError_t(fused::bitlinear_gemm(q8, r8, rows, kpad, t.as<int8_t>(), g.as<float>(),
                                            outs, out, out_bf16, part, part,
                                            int64_t(part) * rows, s)),
          kName, std::string(what) + ": BitLinear GEMM launch");
  };
  if (m.bit)
    bitlinear(x.data, hs, m.kp_in, m.t_qkvg, m.g_qkvg, 4 * n, qkvg, m.rule_bf16, n,
              "q/k/v/g_proj");
  else
    m.blas.gemm(x.data, m.w_qkvg.p, qkvg, rows, n, hs, n, m.bf16, !m.rule_bf16, 4, n * hs,
                rows * n);
  m.blas.gemm(x.data, m.w_beta.p, beta, rows, H, hs, H, m.bf16, true);
  check(cudaError_t(fused::sigmoid(beta, false, beta, rows * H, 1.0f, s)), kName,
        "sigmoid kernel launch");
  float *state = nullptr;
  if (decoder) {
    m.state.reserve(size_t(B * H * D * D) * 4, kName, "decoder state");
    state = m.state.as<float>();
  }
  run_rule({DELTAC_VARIANT_DELTA, B, T, H, H, D, D, m.rule_bf16, qkvg, qkvg + part, qkvg + 2 * part,
            beta, nullptr, state, state_batch_ != 0, o},
           s, &m.ws, kName);
  check(cudaError_t(fused::layernorm_gate(o, qkvg + 3 * part, m.rule_bf16, normed, m.bf16,
                                          m.norm_w.as<float>(), m.norm_b.as<float>(), false, rows,
                                          H, D, cfg_.norm_eps, s)),
        kName, "layernorm kernel launch");
  if (m.bit)
    bitlinear(normed, n, m.kp_out, m.t_out, m.g_out, hs, y.data, m.bf16, hs, "out_proj");
  else
    m.blas.gemm(normed, m.w_out.p, y.data, rows, hs, n, hs, m.bf16, false);
  if (decoder) state_batch_ = B;
}

} // namespace nn
} // namespace deltac

// deltac::nn::CudaKimiDeltaAttention: KimiDeltaAttention (nn_kda.cpp) on
// device tensors. The stacked input projection (rows q || k || v || b ||
// f_a || g_a) writes one f32 matrix; the conv kernel of CudaGatedDeltaNet
// (no gates) fills the rule's q, k, v; the low-rank up-projections f_b, g_b
// read f_a, g_a from that matrix (f32 GEMMs, their weights f32 in either
// dtype); one kernel turns f_b's output into the decays g in place and b into
// beta; the gated RMSNorm runs with the sigmoid gate.
#include "nn_cuda.h"

#include "deltac/runtime.h"

namespace deltac {
namespace nn {

using namespace cudanet;

namespace {
constexpr const char *kName = "CudaKimiDeltaAttention";
} // namespace

struct CudaKimiDeltaAttention::Impl {
  int device;
  bool bf16;      // activations and the in / out projection weights
  bool rule_bf16; // q, k, v, o
  Blas blas;
  int64_t hd = 0;
  DeviceMem w_in, w_out, f_b, g_b, conv_w, A_log, dt_bias, norm_w; // weights
  DeviceMem scratch, ws;
  Impl(int dev, bool bf, bool rule_bf, bool tf32)
      : device(dev), bf16(bf), rule_bf16(rule_bf), blas(kName, tf32) {}
};

CudaKimiDeltaAttention::CudaKimiDeltaAttention(const KimiDeltaAttentionConfig &config,
                                               const SafeTensors &w, const std::string &prefix,
                                               const CudaOptions &opt)
    : cfg_(config) {
  check_options(opt, kName);
  const bool bf16 = opt.dtype == ElemType::BF16, rule_bf16 = bf16 && !opt.f32_rule;
  KimiDeltaAttention cpu(config, w, prefix); // the CPU layer's checks and loading
  cfg_ = cpu.cfg_;
  if (cfg_.conv_kernel > kMaxConvKernel)
    throw Error(std::string(kName) + ": short_conv_kernel_size = " +
                std::to_string(cfg_.conv_kernel) + ": the CUDA conv takes at most " +
                std::to_string(kMaxConvKernel));
  const int32_t D = int32_t(cfg_.head_dim);
  if (!deltac_cuda_supports(DELTAC_VARIANT_KDA, D, D, rule_bf16 ? DELTAC_BF16 : DELTAC_F32))
    throw Error(std::string(kName) + ": head_dim = " + std::to_string(D) +
                ": this build has no CUDA kda kernel for it (deltac_cuda_supports)");
  impl_ = std::make_unique<Impl>(layer_device(kName), bf16, rule_bf16, opt.tf32);
  Impl &m = *impl_;
  m.hd = cpu.hd_;
  upload(&m.w_in, cpu.in_.w, bf16, kName, "input projection weights");
  upload(&m.w_out, cpu.out_.w, bf16, kName, "o_proj weight");
  upload(&m.f_b, cpu.f_b_.w, false, kName, "f_b_proj weight");
  upload(&m.g_b, cpu.g_b_.w, false, kName, "g_b_proj weight");
  upload(&m.conv_w, cpu.conv_w_, false, kName, "conv1d weights");
  upload(&m.A_log, cpu.A_log_, false, kName, "A_log");
  upload(&m.dt_bias, cpu.dt_bias_, false, kName, "dt_bias");
  upload(&m.norm_w, cpu.norm_w_, false, kName, "o_norm weight");
}

CudaKimiDeltaAttention::~CudaKimiDeltaAttention() = default;

void CudaKimiDeltaAttention::forward(const DeviceTensor &x, const DeviceTensor &y,
                                     CudaGatedDeltaNetCache *cache, void *stream) {
  Impl &m = *impl_;
  const auto &c = cfg_;
  const ElemType dt = m.bf16 ? ElemType::BF16 : ElemType::F32;
  DeviceGuard guard(m.device, kName);
  check_tensor(x, "x", kName, c.hidden_size, dt, m.device);
  check_tensor(y, "y", kName, c.hidden_size, dt, m.device, &x);
  const int64_t B = x.shape[0], T = x.shape[1], rows = B * T;
  const int64_t H = c.num_heads, D = c.head_dim, W = c.conv_kernel, hd = m.hd, C = 3 * hd;
  const size_t conv_n = size_t(B * C * W), rec_n = size_t(B * H * D * D);
  const bool cont = cache && cache->begin(B, conv_n, rec_n, kName);
  const int64_t ncol = C + H + 2 * D; // q, k, v, b, f_a, g_a
  const size_t re = m.rule_bf16 ? 2 : 4, e = m.bf16 ? 2 : 4;
  Carve cv;
  const size_t y_at = cv.take(size_t(rows * ncol) * 4), q_at = cv.take(size_t(rows * hd) * re),
               k_at = cv.take(size_t(rows * hd) * re), v_at = cv.take(size_t(rows * hd) * re),
               g_at = cv.take(size_t(rows * hd) * 4), gate_at = cv.take(size_t(rows * hd) * 4),
               beta_at = cv.take(size_t(rows * H) * 4), o_at = cv.take(size_t(rows * hd) * re),
               n_at = re != e ? cv.take(size_t(rows * hd) * e) : o_at;
  m.scratch.reserve(cv.total, kName, "scratch");
  float *proj = m.scratch.as<float>(y_at), *g = m.scratch.as<float>(g_at),
        *gate = m.scratch.as<float>(gate_at), *beta = m.scratch.as<float>(beta_at);
  void *q = m.scratch.as<void>(q_at), *k = m.scratch.as<void>(k_at),
       *v = m.scratch.as<void>(v_at), *o = m.scratch.as<void>(o_at),
       *normed = m.scratch.as<void>(n_at);

  cudaStream_t s = static_cast<cudaStream_t>(stream);
  m.blas.set_stream(s);
  m.blas.gemm(x.data, m.w_in.p, proj, rows, ncol, c.hidden_size, ncol, m.bf16, true);
  fused::ConvGates a{}; // the conv alone: no gate heads (HV = 0)
  a.y = proj, a.y_bf16 = false;
  a.ldy = ncol, a.group = 0;
  a.w = m.conv_w.as<float>();
  a.p_bf16 = false;
  a.state_in = cont ? cache->conv_ : nullptr;
  a.state_out = cache ? cache->conv_ : nullptr;
  a.q = q, a.k = k, a.v = v;
  a.out_bf16 = m.rule_bf16;
  a.B = B, a.T = T, a.C = C, a.kd = hd, a.vd = hd;
  a.W = int32_t(W);
  check(cudaError_t(fused::conv_gates(a, s)), kName, "conv kernel launch");
  m.blas.gemm(proj + C + H, m.f_b.p, g, rows, hd, D, hd, false, true, 1, 0, 0, ncol);
  m.blas.gemm(proj + C + H + D, m.g_b.p, gate, rows, hd, D, hd, false, true, 1, 0, 0, ncol);
  check(cudaError_t(fused::kda_gates(g, proj + C, ncol, m.A_log.as<float>(),
                                     m.dt_bias.as<float>(), beta, rows, H, D, s)),
        kName, "gates kernel launch");
  run_rule({DELTAC_VARIANT_KDA, B, T, H, H, D, D, m.rule_bf16, q, k, v, beta, g,
            cache ? cache->rec_ : nullptr, cont, o},
           s, &m.ws, kName);
  check(cudaError_t(fused::gated_rmsnorm(o, m.rule_bf16, normed, m.bf16, gate, false, hd, H, 0,
                                         m.norm_w.as<float>(), false, rows, H, D,
                                         c.rms_norm_eps, s, true)),
        kName, "norm kernel launch");
  m.blas.gemm(normed, m.w_out.p, y.data, rows, c.hidden_size, hd, c.hidden_size, m.bf16, false);
  if (cache) cache->hold(B, conv_n, rec_n);
}

} // namespace nn
} // namespace deltac

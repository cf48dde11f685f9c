// deltac::nn::CudaGatedDeltaNet: GatedDeltaNet (nn_gated.cpp) on device
// tensors. The stacked input projection (rows q || k || v || z || b || a,
// every layout reordered at load by the CPU layer) writes one f32 matrix;
// one kernel runs the conv + silu into the delta rule's q, k, v and the
// gates into beta, g; the gated RMSNorm reads z from that matrix.
#include "nn_cuda.h"

#include "deltac/runtime.h"

namespace deltac {
namespace nn {

using namespace cudanet;

namespace {
constexpr const char *kName = "CudaGatedDeltaNet";

// *p with at least n floats (reallocated, contents lost, when it grows).
void reserve_floats(float **p, size_t *cap, size_t n, const char *layer, const char *what) {
  if (n <= *cap) return;
  if (*p) {
    check(cudaDeviceSynchronize(), layer, std::string("growing ") + what);
    cudaFree(*p);
    *p = nullptr;
    *cap = 0;
  }
  check(cudaMalloc(reinterpret_cast<void **>(p), n * 4), layer,
        "cudaMalloc of " + std::to_string(n * 4) + " bytes (" + what + ")");
  *cap = n;
}
} // namespace

CudaGatedDeltaNetCache::~CudaGatedDeltaNetCache() {
  if (conv_) cudaFree(conv_);
  if (rec_) cudaFree(rec_);
}

bool CudaGatedDeltaNetCache::begin(int64_t B, size_t conv_n, size_t rec_n, const char *layer) {
  if (batch_ != 0) {
    if (batch_ != B)
      throw Error(std::string(layer) + ": the cached state has batch " + std::to_string(batch_) +
                  " but x has batch " + std::to_string(B));
    if (conv_n_ != conv_n || rec_n_ != rec_n)
      throw Error(std::string(layer) + ": the cache holds states of another layer's shape (" +
                  std::to_string(conv_n_) + " conv and " + std::to_string(rec_n_) +
                  " recurrent floats; this layer's are " + std::to_string(conv_n) + " and " +
                  std::to_string(rec_n) + ")");
    return true;
  }
  reserve_floats(&conv_, &conv_cap_, conv_n, layer, "conv state");
  reserve_floats(&rec_, &rec_cap_, rec_n, layer, "recurrent state");
  return false;
}

struct CudaGatedDeltaNet::Impl {
  int device;
  bool bf16;      // activations and weights
  bool rule_bf16; // q, k, v, o
  Blas blas;
  DeviceMem w_in, w_out, conv_w, conv_b, A_log, dt_bias, norm_w; // weights
  bool conv_bias = false;
  DeviceMem scratch, ws;
  Impl(int dev, bool bf, bool rule_bf, bool tf32)
      : device(dev), bf16(bf), rule_bf16(rule_bf), blas(kName, tf32) {}
};

CudaGatedDeltaNet::CudaGatedDeltaNet(const GatedDeltaNetConfig &config, const SafeTensors &w,
                                     const std::string &prefix, const CudaOptions &opt)
    : cfg_(config) {
  check_options(opt, kName);
  const bool bf16 = opt.dtype == ElemType::BF16, rule_bf16 = bf16 && !opt.f32_rule;
  GatedDeltaNet cpu(config, w, prefix); // the CPU layer's checks, loading and reordering
  cfg_ = cpu.cfg_;
  key_dim_ = cpu.key_dim_;
  value_dim_ = cpu.value_dim_;
  conv_dim_ = cpu.conv_dim_;
  if (cfg_.conv_kernel > kMaxConvKernel)
    throw Error(std::string(kName) + ": linear_conv_kernel_dim = " +
                std::to_string(cfg_.conv_kernel) + ": the CUDA conv takes at most " +
                std::to_string(kMaxConvKernel));
  if (!deltac_cuda_supports(DELTAC_VARIANT_GATED, int32_t(cfg_.head_k_dim),
                            int32_t(cfg_.head_v_dim), rule_bf16 ? DELTAC_BF16 : DELTAC_F32))
    throw Error(std::string(kName) + ": head dims K = " + std::to_string(cfg_.head_k_dim) +
                ", V = " + std::to_string(cfg_.head_v_dim) +
                ": this build has no CUDA delta-rule kernel for them (deltac_cuda_supports)");
  impl_ = std::make_unique<Impl>(layer_device(kName), bf16, rule_bf16, opt.tf32);
  Impl &m = *impl_;
  upload(&m.w_in, cpu.in_.w, bf16, kName, "input projection weights");
  upload(&m.w_out, cpu.out_.w, bf16, kName, "output projection weight");
  upload(&m.conv_w, cpu.conv_w_, false, kName, "conv1d weights");
  m.conv_bias = !cpu.conv_b_.empty();
  if (m.conv_bias) upload(&m.conv_b, cpu.conv_b_, false, kName, "conv1d.bias");
  upload(&m.A_log, cpu.A_log_, false, kName, "A_log");
  upload(&m.dt_bias, cpu.dt_bias_, false, kName, "dt_bias");
  upload(&m.norm_w, cpu.norm_w_, false, kName, "norm weight");
}

CudaGatedDeltaNet::~CudaGatedDeltaNet() = default;

void CudaGatedDeltaNet::forward(const DeviceTensor &x, const DeviceTensor &y,
                                CudaGatedDeltaNetCache *cache, void *stream) {
  Impl &m = *impl_;
  const auto &c = cfg_;
  const ElemType dt = m.bf16 ? ElemType::BF16 : ElemType::F32;
  DeviceGuard guard(m.device, kName);
  check_tensor(x, "x", kName, c.hidden_size, dt, m.device);
  check_tensor(y, "y", kName, c.hidden_size, dt, m.device, &x);
  const int64_t B = x.shape[0], T = x.shape[1], rows = B * T;
  const int64_t H = c.num_k_heads, HV = c.num_v_heads, Dk = c.head_k_dim, Dv = c.head_v_dim,
                W = c.conv_kernel, C = conv_dim_, kd = key_dim_, vd = value_dim_;
  const size_t conv_n = size_t(B * C * W), rec_n = size_t(B * HV * Dk * Dv);
  const bool cont = cache && cache->begin(B, conv_n, rec_n, kName);
  const int64_t ncol = C + vd + 2 * HV; // q, k, v, z, b, a
  // Rule tensors (q, k, v, o) of the rule's dtype; the norm writes the
  // activations' dtype (in place over o when they are the same).
  const size_t re = m.rule_bf16 ? 2 : 4, e = m.bf16 ? 2 : 4;
  Carve cv;
  const size_t y_at = cv.take(size_t(rows * ncol) * 4), q_at = cv.take(size_t(rows * kd) * re),
               k_at = cv.take(size_t(rows * kd) * re), v_at = cv.take(size_t(rows * vd) * re),
               beta_at = cv.take(size_t(rows * HV) * 4), g_at = cv.take(size_t(rows * HV) * 4),
               o_at = cv.take(size_t(rows * vd) * re),
               n_at = re != e ? cv.take(size_t(rows * vd) * e) : o_at;
  m.scratch.reserve(cv.total, kName, "scratch");
  float *proj = m.scratch.as<float>(y_at), *beta = m.scratch.as<float>(beta_at),
        *g = m.scratch.as<float>(g_at);
  void *q = m.scratch.as<void>(q_at), *k = m.scratch.as<void>(k_at),
       *v = m.scratch.as<void>(v_at), *o = m.scratch.as<void>(o_at),
       *normed = m.scratch.as<void>(n_at);

  cudaStream_t s = static_cast<cudaStream_t>(stream);
  m.blas.set_stream(s);
  m.blas.gemm(x.data, m.w_in.p, proj, rows, ncol, c.hidden_size, ncol, m.bf16, true);
  fused::ConvGates a{};
  a.y = proj, a.y_bf16 = false;
  a.ldy = ncol, a.group = 0;
  a.w = m.conv_w.as<float>();
  a.bias = m.conv_bias ? m.conv_b.as<float>() : nullptr;
  a.p_bf16 = false;
  a.state_in = cache && cont ? cache->conv_ : nullptr;
  a.state_out = cache ? cache->conv_ : nullptr;
  a.q = q, a.k = k, a.v = v;
  a.out_bf16 = m.rule_bf16;
  a.B = B, a.T = T, a.C = C, a.kd = kd, a.vd = vd;
  a.W = int32_t(W);
  a.HV = HV;
  a.b = proj + C + vd, a.a = proj + C + vd + HV;
  a.ldba = ncol, a.ba_heads = HV, a.ba_group = 0;
  a.A_log = m.A_log.as<float>();
  a.dt_bias = m.dt_bias.as<float>();
  a.beta_scale = c.allow_neg_eigval ? 2.0f : 1.0f;
  a.beta = beta, a.g = g;
  check(cudaError_t(fused::conv_gates(a, s)), kName, "conv kernel launch");
  run_rule({DELTAC_VARIANT_GATED, B, T, H, HV, Dk, Dv, m.rule_bf16, q, k, v, beta, g,
            cache ? cache->rec_ : nullptr, cont, o, c.allow_neg_eigval},
           s, &m.ws, kName);
  check(cudaError_t(fused::gated_rmsnorm(o, m.rule_bf16, normed, m.bf16, proj + C, false, ncol,
                                         HV, 0, m.norm_w.as<float>(), false, rows, HV, Dv,
                                         c.rms_norm_eps, s)),
        kName, "norm kernel launch");
  m.blas.gemm(normed, m.w_out.p, y.data, rows, c.hidden_size, vd, c.hidden_size, m.bf16, false);
  if (cache) cache->hold(B, conv_n, rec_n);
}

} // namespace nn
} // namespace deltac

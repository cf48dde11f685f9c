// deltac::nn: Linear (OpenBLAS; BitNet b1.58 through bitlinear.h), weight
// loading, the kernel call through the binder, configs from safetensors
// metadata.
#include "nn_internal.h"

#include "bitlinear.h"

#include "deltac/bind.h"
#include "deltac/runtime.h"

#include <cblas.h>

#include <algorithm>

namespace deltac {
namespace nn {
namespace detail {

std::vector<float> load(const SafeTensors &w, const std::string &name,
                        const std::vector<int64_t> &shape) {
  std::vector<float> out;
  std::string err;
  if (!w.get_f32(name, shape, &out, &err)) throw Error(err);
  return out;
}

Linear load_linear(const SafeTensors &w, const std::string &name, int64_t in,
                   int64_t out, bool bitnet) {
  Linear l;
  l.in = in;
  l.out = out;
  l.bitnet = bitnet;
  l.w = load(w, name, {out, in});
  if (bitnet) {
    l.bits = std::make_shared<bitlinear::Weights>(bitlinear::pack(l.w.data(), out, in, 1e-5f));
    l.w = {};
  }
  return l;
}

Linear stack(const std::vector<Linear> &parts) {
  Linear l = parts.at(0);
  for (size_t i = 1; i < parts.size(); ++i) {
    if (parts[i].bitnet != l.bitnet) throw Error("stack: BitLinear mixed with Linear");
    l.out += parts[i].out;
    if (l.bitnet)
      l.bits = std::make_shared<bitlinear::Weights>(bitlinear::concat(*l.bits, *parts[i].bits));
    else
      l.w.insert(l.w.end(), parts[i].w.begin(), parts[i].w.end());
  }
  return l;
}

void check_input(const Tensor &x, int64_t hidden, const char *layer) {
  const auto &s = x.shape;
  if (s.size() != 3 || s[2] != hidden || s[0] <= 0 || s[1] <= 0)
    throw Error(std::string(layer) + ": x has shape " + shape_string(s) +
                ": expected (batch, seq, " + std::to_string(hidden) + ")");
  if (int64_t(x.data.size()) != s[0] * s[1] * s[2])
    throw Error(std::string(layer) + ": x holds " + std::to_string(x.data.size()) +
                " values, its shape " + shape_string(s) + " needs " +
                std::to_string(s[0] * s[1] * s[2]));
}

Tensor project_out(const Linear &proj, const float *o, int64_t B, int64_t T, int64_t hidden) {
  Tensor out;
  out.shape = {B, T, hidden};
  out.data.resize(size_t(B * T * hidden));
  proj.forward(o, B * T, out.data.data(), hidden);
  return out;
}

void run_kernel(const KernelCall &c) {
  ForwardTensors t;
  t.variant = c.variant;
  auto arg = [](const float *p, std::vector<int64_t> shape, const char *label) {
    TensorArg a;
    a.data = p;
    a.dtype = ElemType::F32;
    a.shape = std::move(shape);
    a.label = label;
    return a;
  };
  t.q = arg(c.q, {c.B, c.T, c.H, c.K}, "q");
  t.k = arg(c.k, {c.B, c.T, c.H, c.K}, "k");
  t.v = arg(c.v, {c.B, c.T, c.HV, c.V}, "v");
  t.beta = arg(c.beta, {c.B, c.T, c.HV}, "beta");
  if (c.g && c.variant == DELTAC_VARIANT_KDA) t.g = arg(c.g, {c.B, c.T, c.HV, c.K}, "g");
  else if (c.g) t.g = arg(c.g, {c.B, c.T, c.HV}, "g");
  if (c.h0) t.h0 = arg(c.h0, {c.B, c.HV, c.K, c.V}, "h0");
  t.o = arg(c.o, {c.B, c.T, c.HV, c.V}, "o");
  if (c.ht) t.ht = arg(c.ht, {c.B, c.HV, c.K, c.V}, "ht");
  t.qk_l2norm = 1;
  t.threads = c.threads;
  deltac_fwd_params p;
  std::string err;
  if (!bind_params(t, &p, &err)) throw Error("delta-rule kernel: " + err);
  if (deltac_forward(&p, nullptr) != 0)
    throw Error(std::string("delta-rule kernel: ") + deltac_last_error());
}

} // namespace detail

void Linear::forward(const float *x, int64_t rows, float *y, int64_t ldy) const {
  if (rows <= 0 || out <= 0) return;
  if (!bitnet && rows == 1) { // decode: OpenBLAS's sgemv is ~4x its M = 1 sgemm here
    cblas_sgemv(CblasRowMajor, CblasNoTrans, int(out), int(in), 1.0f, w.data(), int(in), x, 1,
                0.0f, y, 1);
    return;
  }
  if (!bitnet) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, int(rows), int(out), int(in),
                1.0f, x, int(in), w.data(), int(in), 0.0f, y, int(ldy));
    return;
  }
  // bitlinear.py activation_quant per token, then the int8 GEMM.
  thread_local bitlinear::Acts acts; // scratch, reused across calls
  const bitlinear::Kernel kern = bitlinear::active();
  bitlinear::quantize(kern, x, rows, in, 1e-5f, &acts);
  bitlinear::gemm(kern, acts, *bits, y, ldy, threads);
}

namespace {
int64_t meta_int(const std::map<std::string, std::string> &m, const char *key, int64_t def) {
  auto it = m.find(key);
  if (it == m.end()) return def;
  try {
    size_t pos = 0;
    const long long v = std::stoll(it->second, &pos);
    if (pos == it->second.size()) return v;
  } catch (...) {
  }
  throw Error(std::string("config: ") + key + " = '" + it->second + "': expected an integer");
}
float meta_float(const std::map<std::string, std::string> &m, const char *key, float def) {
  auto it = m.find(key);
  if (it == m.end()) return def;
  try {
    size_t pos = 0;
    const float v = std::stof(it->second, &pos);
    if (pos == it->second.size()) return v;
  } catch (...) {
  }
  throw Error(std::string("config: ") + key + " = '" + it->second + "': expected a number");
}
bool meta_bool(const std::map<std::string, std::string> &m, const char *key, bool def) {
  auto it = m.find(key);
  if (it == m.end()) return def;
  const std::string &v = it->second;
  if (v == "1" || v == "true" || v == "True") return true;
  if (v == "0" || v == "false" || v == "False") return false;
  throw Error(std::string("config: ") + key + " = '" + v + "': expected true or false");
}
std::string meta_str(const std::map<std::string, std::string> &m, const char *key,
                     const std::string &def) {
  auto it = m.find(key);
  return it == m.end() ? def : it->second;
}
} // namespace

DeltaNetConfig deltanet_config(const std::map<std::string, std::string> &m) {
  DeltaNetConfig c;
  c.hidden_size = meta_int(m, "hidden_size", c.hidden_size);
  c.num_heads = meta_int(m, "num_heads", c.num_heads);
  c.use_bitnet = meta_bool(m, "use_bitnet", c.use_bitnet);
  c.mode = meta_str(m, "mode", c.mode);
  return c;
}

GatedDeltaNetConfig gated_deltanet_config(const std::map<std::string, std::string> &m) {
  GatedDeltaNetConfig c;
  c.hidden_size = meta_int(m, "hidden_size", c.hidden_size);
  c.num_k_heads = meta_int(m, "linear_num_key_heads", c.num_k_heads);
  c.num_v_heads = meta_int(m, "linear_num_value_heads", c.num_v_heads);
  c.head_k_dim = meta_int(m, "linear_key_head_dim", c.head_k_dim);
  c.head_v_dim = meta_int(m, "linear_value_head_dim", c.head_v_dim);
  c.conv_kernel = meta_int(m, "linear_conv_kernel_dim", c.conv_kernel);
  c.layout = meta_str(m, "layout", c.layout);
  c.rms_norm_eps = meta_float(m, "rms_norm_eps", c.layout == "olmo_hybrid" ? 1e-5f : c.rms_norm_eps);
  c.allow_neg_eigval = meta_bool(m, "linear_allow_neg_eigval", c.allow_neg_eigval);
  return c;
}

KimiDeltaAttentionConfig kda_config(const std::map<std::string, std::string> &m) {
  KimiDeltaAttentionConfig c;
  c.hidden_size = meta_int(m, "hidden_size", c.hidden_size);
  c.num_heads = meta_int(m, "num_heads", c.num_heads);
  c.head_dim = meta_int(m, "head_dim", c.head_dim);
  c.conv_kernel = meta_int(m, "short_conv_kernel_size", c.conv_kernel);
  c.rms_norm_eps = meta_float(m, "rms_norm_eps", c.rms_norm_eps);
  return c;
}

} // namespace nn
} // namespace deltac

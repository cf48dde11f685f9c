// The C API of the fused layer kernels (deltac/fused_ops.h): argument checks,
// then one launch through fused.h.
#include "deltac/fused_ops.h"

#include "dispatch.h"
#include "fused.h"

#include <cmath>
#include <string>

namespace {

using deltac::rt::set_last_error;

// Collects the first failed check of one call; fail() names the function.
struct Check {
  const char *fn;
  std::string err;
  void need(bool ok, const std::string &what) {
    if (!ok && err.empty()) err = what;
  }
  void ptr(const void *p, const char *name) {
    need(p != nullptr, std::string(name) + " is NULL");
  }
  void at_least(int64_t v, int64_t lo, const char *name) {
    need(v >= lo, std::string(name) + " = " + std::to_string(v) + ": expected >= " +
                      std::to_string(lo));
  }
  void dtype(int32_t d, const char *name) {
    need(d == DELTAC_F32 || d == DELTAC_BF16,
         std::string(name) + " = " + std::to_string(d) + ": expected 0 (f32) or 1 (bf16)");
  }
  void finite(float x, const char *name) {
    need(std::isfinite(x), std::string(name) + " is not finite");
  }
  // Before a launch: the argument checks passed and a GPU is usable.
  bool ready() {
    if (!err.empty()) return false;
    if (!deltac::rt::cuda_built()) err = "this build of deltac has no CUDA support";
    else if (!deltac::rt::cuda_available()) err = "no usable CUDA device";
    return err.empty();
  }
  // Returns the C API status: 1 with the message set, or the launch's.
  int done(int launch = 0) const {
    if (!err.empty()) return set_last_error(std::string(fn) + ": " + err);
    if (launch != 0)
      return set_last_error(std::string(fn) + ": kernel launch failed: " +
                            deltac::fused::error_text(launch));
    return 0;
  }
};

// The column extent of `heads` heads of `width` columns, `per` a group of
// `stride` columns: what a row must hold.
int64_t extent(int64_t heads, int64_t per, int64_t stride, int64_t width) {
  return (heads / per - 1) * stride + per * width;
}

} // namespace

extern "C" {

int deltac_conv_gates(const void *y, int64_t ldy, int64_t y_group, const void *conv_w,
                      const void *conv_b, const void *state_in, void *state_out, const void *b,
                      const void *a, int64_t ldba, int64_t ba_heads, int64_t ba_group,
                      const void *A_log, const void *dt_bias, float beta_scale, void *q, void *k,
                      void *v, float *beta, float *g, int64_t B, int64_t T, int64_t H, int64_t HV,
                      int64_t K, int64_t V, int32_t W, int32_t dtype, int32_t param_dtype,
                      void *stream) {
  Check c{"deltac_conv_gates", {}};
  c.dtype(dtype, "dtype");
  c.dtype(param_dtype, "param_dtype");
  c.at_least(B, 1, "B");
  c.at_least(T, 1, "T");
  c.at_least(H, 1, "H");
  c.at_least(K, 1, "K");
  c.at_least(V, 1, "V");
  c.need(HV >= H && HV % H == 0, "HV = " + std::to_string(HV) + ": expected a multiple of H = " +
                                     std::to_string(H));
  c.need(W >= 1 && W <= deltac::fused::kMaxConvKernel,
         "W = " + std::to_string(W) + ": expected 1.." +
             std::to_string(deltac::fused::kMaxConvKernel));
  if (!c.err.empty()) return c.done();
  const int64_t C = 2 * H * K + HV * V, r = HV / H;
  if (y_group == 0) {
    c.need(ldy >= C, "ldy = " + std::to_string(ldy) + ": expected >= 2 H K + HV V = " +
                         std::to_string(C));
  } else {
    c.need(y_group >= 2 * K + r * V, "y_group = " + std::to_string(y_group) +
                                         ": expected 0 or >= 2 K + (HV / H) V = " +
                                         std::to_string(2 * K + r * V));
    c.need(ldy >= H * y_group, "ldy = " + std::to_string(ldy) + ": expected >= H * y_group = " +
                                   std::to_string(H * y_group));
  }
  c.need(ba_heads >= 1 && ba_heads <= HV && HV % ba_heads == 0,
         "ba_heads = " + std::to_string(ba_heads) + ": expected a divisor of HV = " +
             std::to_string(HV));
  if (c.err.empty()) {
    c.need(HV == ba_heads || ba_group >= ba_heads,
           "ba_group = " + std::to_string(ba_group) + ": expected >= ba_heads");
    c.need(ldba >= extent(HV, ba_heads, ba_group, 1),
           "ldba = " + std::to_string(ldba) + ": expected >= " +
               std::to_string(extent(HV, ba_heads, ba_group, 1)));
  }
  c.ptr(y, "y");
  c.ptr(conv_w, "conv_w");
  c.ptr(b, "b");
  c.ptr(a, "a");
  c.ptr(A_log, "A_log");
  c.ptr(dt_bias, "dt_bias");
  c.ptr(q, "q");
  c.ptr(k, "k");
  c.ptr(v, "v");
  c.ptr(beta, "beta");
  c.ptr(g, "g");
  c.finite(beta_scale, "beta_scale");
  if (!c.ready()) return c.done();
  deltac::fused::ConvGates p{};
  p.y = y, p.y_bf16 = dtype == DELTAC_BF16, p.ldy = ldy, p.group = y_group, p.dk = K, p.vg = r * V;
  p.w = conv_w, p.bias = conv_b, p.p_bf16 = param_dtype == DELTAC_BF16;
  p.state_in = state_in, p.state_out = state_out;
  p.q = q, p.k = k, p.v = v, p.out_bf16 = p.y_bf16;
  p.B = B, p.T = T, p.C = C, p.kd = H * K, p.vd = HV * V, p.W = W, p.HV = HV;
  p.b = b, p.a = a, p.ldba = ldba, p.ba_heads = ba_heads, p.ba_group = ba_group;
  p.A_log = A_log, p.dt_bias = dt_bias, p.beta_scale = beta_scale, p.beta = beta, p.g = g;
  return c.done(deltac::fused::conv_gates(p, stream));
}

int deltac_gated_rmsnorm(const void *o, const void *z, void *out, int64_t rows, int64_t heads,
                         int64_t D, int64_t ldz, int64_t z_heads, int64_t z_group, const void *w,
                         float eps, int32_t dtype, int32_t param_dtype, void *stream) {
  Check c{"deltac_gated_rmsnorm", {}};
  c.dtype(dtype, "dtype");
  c.dtype(param_dtype, "param_dtype");
  c.at_least(rows, 1, "rows");
  c.at_least(heads, 1, "heads");
  c.need(D >= 1 && D <= 256, "D = " + std::to_string(D) + ": expected 1..256");
  c.need(z_heads >= 1 && z_heads <= heads && heads % z_heads == 0,
         "z_heads = " + std::to_string(z_heads) + ": expected a divisor of heads = " +
             std::to_string(heads));
  if (c.err.empty()) {
    c.need(heads == z_heads || z_group >= z_heads * D,
           "z_group = " + std::to_string(z_group) + ": expected >= z_heads * D");
    c.need(ldz >= extent(heads, z_heads, z_group, D),
           "ldz = " + std::to_string(ldz) + ": expected >= " +
               std::to_string(extent(heads, z_heads, z_group, D)));
  }
  c.ptr(o, "o");
  c.ptr(z, "z");
  c.ptr(out, "out");
  c.ptr(w, "w");
  c.need(std::isfinite(eps) && eps >= 0, "eps must be finite and >= 0");
  if (!c.ready()) return c.done();
  const bool bf = dtype == DELTAC_BF16;
  return c.done(deltac::fused::gated_rmsnorm(o, bf, out, bf, z, bf, ldz, z_heads, z_group, w,
                                             param_dtype == DELTAC_BF16, rows, heads, D, eps,
                                             stream));
}

int deltac_layernorm_gate(const void *o, const void *g, void *out, int64_t rows, int64_t heads,
                          int64_t D, const void *w, const void *b, float eps, int32_t dtype,
                          int32_t param_dtype, void *stream) {
  Check c{"deltac_layernorm_gate", {}};
  c.dtype(dtype, "dtype");
  c.dtype(param_dtype, "param_dtype");
  c.at_least(rows, 1, "rows");
  c.at_least(heads, 1, "heads");
  c.need(D >= 1 && D <= 256, "D = " + std::to_string(D) + ": expected 1..256");
  c.ptr(o, "o");
  c.ptr(g, "g");
  c.ptr(out, "out");
  c.ptr(w, "w");
  c.ptr(b, "b");
  c.need(std::isfinite(eps) && eps >= 0, "eps must be finite and >= 0");
  if (!c.ready()) return c.done();
  const bool bf = dtype == DELTAC_BF16;
  return c.done(deltac::fused::layernorm_gate(o, g, bf, out, bf, w, b, param_dtype == DELTAC_BF16,
                                              rows, heads, D, eps, stream));
}

int deltac_sigmoid(const void *x, float *out, int64_t n, float scale, int32_t dtype,
                   void *stream) {
  Check c{"deltac_sigmoid", {}};
  c.dtype(dtype, "dtype");
  c.at_least(n, 1, "n");
  c.ptr(x, "x");
  c.ptr(out, "out");
  c.finite(scale, "scale");
  if (!c.ready()) return c.done();
  return c.done(deltac::fused::sigmoid(x, dtype == DELTAC_BF16, out, n, scale, stream));
}

} // extern "C"

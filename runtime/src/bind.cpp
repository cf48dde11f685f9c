// Named tensors -> deltac_fwd_params (deltac/bind.h).
#include "deltac/bind.h"

#include "deltac/check.h"

#include <climits>
#include <sstream>

namespace deltac {
namespace {

// Thrown inside this file only; every public function catches it.
struct BindError {
  std::string msg;
};

[[noreturn]] void fail(const std::string &msg) { throw BindError{msg}; }

std::string shapeStr(const std::vector<int64_t> &s) {
  std::ostringstream os;
  os << "(";
  for (size_t i = 0; i < s.size(); ++i)
    os << (i ? ", " : "") << s[i];
  os << (s.size() == 1 ? ",)" : ")");
  return os.str();
}

std::string num(int64_t x) { return std::to_string(x); }

std::string label(const TensorArg &t, const char *name) {
  return t.label.empty() ? name : t.label;
}

void expectPresent(const TensorArg &t, const char *name, const char *layout) {
  if (!t.present())
    fail(label(t, name) + ": missing: expected " + layout);
  bool empty = false;
  for (int64_t d : t.shape)
    empty = empty || d == 0;
  if (!t.data && !empty) // an empty tensor fails its shape check instead
    fail(label(t, name) + ": null data pointer");
}

void expectType(const TensorArg &t, const char *name, const char *layout,
                ElemType want, ElemType alt = ElemType::F32) {
  if (t.dtype != want && t.dtype != alt) {
    std::string w = elem_name(want);
    if (alt != want)
      w += " or " + std::string(elem_name(alt));
    fail(label(t, name) + ": dtype " + elem_name(t.dtype) + ": expected " + w +
         " " + layout);
  }
}

void expectShape(const TensorArg &t, const char *name,
                 const std::vector<int64_t> &want, const char *layout,
                 const std::string &why) {
  if (t.shape != want)
    fail(label(t, name) + ": shape " + shapeStr(t.shape) + ": expected " +
         shapeStr(want) + " " + layout + why);
}

void checkHeadDim(const std::string &lab, const char *dim, int64_t d) {
  if (d < 16 || d > 256 || d % 16 != 0)
    fail(lab + ": " + dim + " = " + num(d) +
         " (last dimension): expected a multiple of 16 in [16, 256]");
}

int32_t dtypeOf(ElemType t) {
  return t == ElemType::BF16 ? DELTAC_BF16
         : t == ElemType::F16 ? DELTAC_F16
                              : DELTAC_F32;
}

// q fixes B, T, H, K; v fixes HV, V.
void bindDims(const ForwardTensors &t, deltac_fwd_params *p) {
  const std::string ql = label(t.q, "q");
  expectPresent(t.q, "q", "[B, T, H, K]");
  expectType(t.q, "q", "[B, T, H, K]", ElemType::F32, ElemType::BF16);
  const auto &qs = t.q.shape;
  if (qs.size() != 4)
    fail(ql + ": shape " + shapeStr(qs) + ": expected rank 4 [B, T, H, K]");
  if (qs[0] <= 0 || qs[1] <= 0 || qs[2] <= 0)
    fail(ql + ": shape " + shapeStr(qs) +
         ": expected B, T, H > 0 in [B, T, H, K]");
  checkHeadDim(ql, "K", qs[3]);
  if (qs[0] > INT32_MAX || qs[1] > INT32_MAX || qs[2] > INT32_MAX)
    fail(ql + ": shape " + shapeStr(qs) + ": dimensions must fit in 32 bits");
  const int64_t B = qs[0], T = qs[1];

  expectPresent(t.k, "k", "[B, T, H, K]");
  expectType(t.k, "k", "[B, T, H, K]", t.q.dtype);
  expectShape(t.k, "k", qs, "[B, T, H, K]", " (as " + ql + ")");

  const std::string vl = label(t.v, "v");
  expectPresent(t.v, "v", "[B, T, HV, V]");
  expectType(t.v, "v", "[B, T, HV, V]", t.q.dtype);
  const auto &vs = t.v.shape;
  if (vs.size() != 4 || vs[0] != B || vs[1] != T)
    fail(vl + ": shape " + shapeStr(vs) +
         ": expected rank 4 [B, T, HV, V] with B = " + num(B) +
         ", T = " + num(T) + " (as " + ql + ")");
  if (vs[2] <= 0 || vs[2] % qs[2] != 0)
    fail(vl + ": HV = " + num(vs[2]) +
         " value heads: expected a positive multiple of H = " + num(qs[2]) +
         " (" + ql + ")");
  if (vs[2] > INT32_MAX)
    fail(vl + ": HV = " + num(vs[2]) + ": too large");
  checkHeadDim(vl, "V", vs[3]);
  p->B = int32_t(B), p->T = int32_t(T), p->H = int32_t(qs[2]);
  p->K = int32_t(qs[3]), p->HV = int32_t(vs[2]), p->V = int32_t(vs[3]);
  p->in_dtype = dtypeOf(t.q.dtype);
}

void bindGates(const ForwardTensors &t, deltac_fwd_params *p) {
  const std::vector<int64_t> bth = {p->B, p->T, p->HV};
  const std::string from =
      " (from " + label(t.q, "q") + " and " + label(t.v, "v") + ")";
  expectPresent(t.beta, "beta", "[B, T, HV]");
  expectType(t.beta, "beta", "[B, T, HV]", ElemType::F32);
  expectShape(t.beta, "beta", bth, "[B, T, HV]", from);
  p->beta = static_cast<const float *>(t.beta.data);

  if (p->variant == DELTAC_VARIANT_DELTA) {
    if (t.g.present())
      fail(label(t.g, "g") + ": given, but the delta variant takes no gate");
    p->g = nullptr;
    return;
  }
  const bool kda = p->variant == DELTAC_VARIANT_KDA;
  const char *layout = kda ? "[B, T, HV, K]" : "[B, T, HV]";
  expectPresent(t.g, "g", layout);
  expectType(t.g, "g", layout, ElemType::F32);
  std::vector<int64_t> gs = bth;
  if (kda)
    gs.push_back(p->K);
  expectShape(t.g, "g", gs, layout,
              kda ? " for the kda variant" : " for the gated variant");
  p->g = static_cast<const float *>(t.g.data);
}

// cu_seqlens fixes N (and needs B = 1).
void bindSequences(const ForwardTensors &t, deltac_fwd_params *p) {
  p->cu_seqlens = nullptr;
  p->N = p->B;
  if (!t.cu_seqlens.present())
    return;
  const TensorArg &c = t.cu_seqlens;
  const std::string cl = label(c, "cu_seqlens");
  expectPresent(c, "cu_seqlens", "[N+1] int64");
  expectType(c, "cu_seqlens", "[N+1]", ElemType::I64);
  if (c.shape.size() != 1 || c.shape[0] < 2)
    fail(cl + ": shape " + shapeStr(c.shape) +
         ": expected rank 1 [N+1] with N >= 1");
  if (c.shape[0] - 1 > kMaxSequences)
    fail(cl + ": N = " + num(c.shape[0] - 1) +
         " sequences: expected at most " + num(kMaxSequences));
  if (p->B != 1)
    fail(cl + ": variable-length sequences need B = 1 in " + label(t.q, "q") +
         ", got B = " + num(p->B));
  p->N = int32_t(c.shape[0] - 1);
  p->cu_seqlens = static_cast<const int64_t *>(c.data);
  if (!t.cu_seqlens_on_host)
    return;
  const int64_t *cu = p->cu_seqlens;
  if (cu[0] != 0)
    fail(cl + ": cu_seqlens[0] = " + num(cu[0]) + ": expected 0");
  for (int32_t i = 1; i <= p->N; ++i)
    if (cu[i] < cu[i - 1])
      fail(cl + ": cu_seqlens[" + num(i) + "] = " + num(cu[i]) +
           " < cu_seqlens[" + num(i - 1) + "] = " + num(cu[i - 1]) +
           ": expected non-decreasing values");
  if (cu[p->N] != p->T)
    fail(cl + ": last value " + num(cu[p->N]) + ": expected T = " +
         num(p->T) + " (" + label(t.q, "q") + ")");
}

const char *stateLayout(const deltac_fwd_params &p) {
  return p.state_layout == DELTAC_STATE_VK ? "[N, HV, V, K]" : "[N, HV, K, V]";
}

std::string nWhy(const ForwardTensors &t) {
  return t.cu_seqlens.present()
             ? " (N from " + label(t.cu_seqlens, "cu_seqlens") + ")"
             : std::string(" (N = B)");
}

} // namespace

const char *elem_name(ElemType t) {
  switch (t) {
  case ElemType::F32:
    return "float32";
  case ElemType::BF16:
    return "bfloat16";
  case ElemType::F16:
    return "float16";
  case ElemType::I32:
    return "int32";
  default:
    return "int64";
  }
}

std::vector<int64_t> o_shape(const deltac_fwd_params &p) {
  return {p.B, p.T, p.HV, p.V};
}

std::vector<int64_t> state_shape(const deltac_fwd_params &p) {
  if (p.state_layout == DELTAC_STATE_VK)
    return {p.N, p.HV, p.V, p.K};
  return {p.N, p.HV, p.K, p.V};
}

bool bind_inputs(const ForwardTensors &t, deltac_fwd_params *p,
                 std::string *error) {
  try {
    *p = deltac_fwd_params{};
    p->variant = t.variant;
    if (t.variant < DELTAC_VARIANT_DELTA || t.variant > DELTAC_VARIANT_KDA)
      fail("variant = " + num(t.variant) + ": expected 0 (delta), 1 (gated) "
                                            "or 2 (kda)");
    p->state_layout = t.state_layout;
    p->out_dtype = DELTAC_F32;
    p->state_dtype = DELTAC_F32;
    bindDims(t, p);
    bindGates(t, p);
    bindSequences(t, p);
    p->q = t.q.data, p->k = t.k.data, p->v = t.v.data;
    if (t.h0.present()) {
      expectPresent(t.h0, "h0", stateLayout(*p));
      expectType(t.h0, "h0", stateLayout(*p), ElemType::F32);
      expectShape(t.h0, "h0", state_shape(*p), stateLayout(*p), nWhy(t));
      p->h0 = t.h0.data;
    }
    p->scale = t.scale;
    p->qk_l2norm = t.qk_l2norm;
    p->threads = t.threads;
    std::string err;
    if (!check_dims(*p, &err, t.cu_seqlens_on_host))
      fail(err);
    return true;
  } catch (const BindError &e) {
    *error = e.msg;
    return false;
  }
}

bool bind_outputs(const ForwardTensors &t, deltac_fwd_params *p,
                  std::string *error) {
  try {
    expectPresent(t.o, "o", "[B, T, HV, V]");
    expectType(t.o, "o", "[B, T, HV, V]", ElemType::F32, ElemType::BF16);
    expectShape(t.o, "o", o_shape(*p), "[B, T, HV, V]", "");
    p->o = const_cast<void *>(t.o.data);
    p->out_dtype = dtypeOf(t.o.dtype);
    p->ht = nullptr;
    if (t.ht.present()) {
      expectPresent(t.ht, "ht", stateLayout(*p));
      expectType(t.ht, "ht", stateLayout(*p), ElemType::F32);
      expectShape(t.ht, "ht", state_shape(*p), stateLayout(*p), nWhy(t));
      p->ht = const_cast<void *>(t.ht.data);
    }
    std::string err;
    if (!check_params(*p, &err, t.cu_seqlens_on_host))
      fail(err);
    return true;
  } catch (const BindError &e) {
    *error = e.msg;
    return false;
  }
}

bool bind_params(const ForwardTensors &t, deltac_fwd_params *p,
                 std::string *error) {
  return bind_inputs(t, p, error) && bind_outputs(t, p, error);
}

} // namespace deltac

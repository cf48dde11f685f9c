// `deltac run`: loading the .npy inputs, the fused pre-processing and the
// value checks. Shapes are checked by the binder (deltac/bind.h) with the
// file paths as labels; values by deltac::find_bad_value (check.h), the rule
// of the runtime's checking mode.
#include "cli_internal.h"

#include "deltac/check.h"
#include "deltac/convert.h"
#include "deltac/preprocess.h"

#include <cmath>
#include <cstdio>

namespace deltac {
namespace cli {
namespace {

using npy::Array;
using npy::DType;

std::string num(double x) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%g", x);
  return buf;
}

// Loads dir/name as float32; throws with the path in the message.
Array loadF32(const std::string &dir, const char *name, const char *layout) {
  const std::string path = join_path(dir, name);
  Array a;
  std::string err;
  if (!npy::read_file(path, &a, &err))
    fail(path + ": " + err);
  if (a.dtype != DType::F32)
    fail(path + ": dtype " + npy::name(a.dtype) + ": expected float32 " +
         layout);
  return a;
}

TensorArg arg(const Array &a, const std::string &path) {
  TensorArg t;
  t.data = a.data.data();
  t.dtype = ElemType::F32;
  t.shape = a.shape;
  t.label = path;
  return t;
}

void expectFinite(const std::string &path, const Array &a) {
  const float *x = a.as<float>();
  for (int64_t i = 0, n = a.count(); i < n; ++i)
    if (!std::isfinite(x[i]))
      fail(path + ": element " + std::to_string(i) + " is " + num(x[i]) +
           ": expected finite values");
}

// cu_seqlens.npy: int32 or int64 [N+1], widened to int64 for the binder.
void loadCuSeqlens(const std::string &dir, Inputs *in) {
  const std::string path = join_path(dir, "cu_seqlens.npy");
  Array c;
  std::string err;
  if (!npy::read_file(path, &c, &err))
    fail(path + ": " + err);
  if (c.dtype != DType::I32 && c.dtype != DType::I64)
    fail(path + ": dtype " + npy::name(c.dtype) +
         ": expected int32 or int64 [N+1]");
  if (c.shape.size() != 1 || c.shape[0] < 2)
    fail(path + ": shape " + npy::shape_str(c.shape) +
         ": expected rank 1 [N+1] with N >= 1");
  if (c.shape[0] - 1 > kMaxSequences) // before widening: N bounds memory
    fail(path + ": N = " + std::to_string(c.shape[0] - 1) +
         " sequences: expected at most " + std::to_string(kMaxSequences));
  in->cu.resize(std::size_t(c.shape[0]));
  for (std::size_t i = 0; i < in->cu.size(); ++i)
    in->cu[i] = c.dtype == DType::I32 ? c.as<int32_t>()[i] : c.as<int64_t>()[i];
  TensorArg &t = in->tensors.cu_seqlens;
  t.data = in->cu.data();
  t.dtype = ElemType::I64;
  t.shape = c.shape;
  t.label = path;
}

// g.npy by the variant's rules (files present or absent).
void loadGate(const Options &opt, Inputs *in) {
  const std::string path = join_path(opt.inputs, "g.npy");
  const bool have = exists(path);
  if (variant_of(opt) == DELTAC_VARIANT_DELTA) {
    if (have)
      fail(path + ": present, but --variant=delta takes no gate (remove it "
                  "or use --variant=gated or kda)");
    return;
  }
  if (!have)
    fail(path + ": file not found: --variant=" + opt.variant +
         (opt.gateInKernel ? " with --gate-in-kernel needs the gate input a"
                           : " needs the log decay g"));
  in->g = loadF32(opt.inputs, "g.npy",
                  variant_of(opt) == DELTAC_VARIANT_KDA ? "[B, T, HV, K]"
                                                        : "[B, T, HV]");
  in->tensors.g = arg(in->g, path);
}

// A_log.npy [HV] and dt_bias.npy [HV] or [HV, K] / [HV*K] (kda), for
// --gate-in-kernel; an error without it.
void loadGateParams(const Options &opt, const deltac_fwd_params &p,
                    Inputs *in) {
  const std::string aPath = join_path(opt.inputs, "A_log.npy"),
                    bPath = join_path(opt.inputs, "dt_bias.npy");
  if (!opt.gateInKernel) {
    for (const std::string *path : {&aPath, &bPath})
      if (exists(*path))
        fail(*path + ": present, but --gate-in-kernel is not set (g.npy is "
                     "read as the log decay)");
    return;
  }
  const int64_t HV = p.HV, K = p.K;
  in->aLog = loadF32(opt.inputs, "A_log.npy", "[HV]");
  if (in->aLog.shape != std::vector<int64_t>{HV})
    fail(aPath + ": shape " + npy::shape_str(in->aLog.shape) + ": expected " +
         npy::shape_str({HV}) + " [HV] (HV from v.npy)");
  const bool kda = p.variant == DELTAC_VARIANT_KDA;
  in->dtBias = loadF32(opt.inputs, "dt_bias.npy", kda ? "[HV, K]" : "[HV]");
  const auto &s = in->dtBias.shape;
  if (kda ? s != std::vector<int64_t>{HV, K} && s != std::vector<int64_t>{HV * K}
          : s != std::vector<int64_t>{HV})
    fail(bPath + ": shape " + npy::shape_str(s) + ": expected " +
         (kda ? npy::shape_str({HV, K}) + " [HV, K] or " +
                    npy::shape_str({HV * K}) + " for --variant=kda"
              : npy::shape_str({HV}) + " [HV] for --variant=gated"));
}

// --beta-sigmoid, --gate-in-kernel: beta and g computed on the host (the
// formulas of the generated code); p then points at the results.
void preprocess(const Options &opt, Inputs *in) {
  deltac_fwd_params &p = in->p;
  const std::string dir = opt.inputs;
  if (opt.betaSigmoid) {
    expectFinite(join_path(dir, "beta.npy"), in->beta);
    in->betaBuf.resize(std::size_t(in->beta.count()));
    beta_sigmoid(in->beta.as<float>(), in->betaBuf.data(), in->betaBuf.size(),
                 opt.negEig ? 2.0f : 1.0f);
    p.beta = in->betaBuf.data();
  }
  if (!opt.gateInKernel)
    return;
  expectFinite(join_path(dir, "g.npy"), in->g);
  expectFinite(join_path(dir, "A_log.npy"), in->aLog);
  expectFinite(join_path(dir, "dt_bias.npy"), in->dtBias);
  in->gBuf.resize(std::size_t(in->g.count()));
  const int width = p.variant == DELTAC_VARIANT_KDA ? p.K : 1;
  gate_from_logits(in->g.as<float>(), in->aLog.as<float>(),
                   in->dtBias.as<float>(), in->gBuf.data(), in->gBuf.size(),
                   p.HV, width);
  for (std::size_t i = 0; i < in->gBuf.size(); ++i)
    if (!std::isfinite(in->gBuf[i]))
      fail(join_path(dir, "A_log.npy") +
           ": the gate -exp(A_log) * softplus(a + dt_bias) overflows at g "
           "element " + std::to_string(i) + ": expected a finite gate");
  p.g = in->gBuf.data();
}

// The checking mode's rule (check.h), with the file named.
void checkValues(const Options &opt, const Inputs &in) {
  BadValue bad;
  if (find_bad_value(in.p, opt.negEig ? 2.0f : 1.0f, &bad))
    return;
  const std::string file = std::string(bad.tensor) + ".npy";
  std::string hint;
  if (file == "beta.npy")
    hint = opt.negEig ? " (--allow-neg-eigval)"
                      : " (use --allow-neg-eigval for [0, 2], --beta-sigmoid "
                        "for logits)";
  else if (file == "g.npy")
    hint = " (--gate-in-kernel for gate inputs)";
  fail(join_path(opt.inputs, file) + ": element " +
       std::to_string(bad.index) + " is " + num(bad.value) + ": expected " +
       bad.expected + hint);
}

// --dtype=bf16: q, k, v rounded to bf16 (nearest even) on load.
void toBf16(const Array &a, std::vector<uint16_t> *out, TensorArg *t) {
  out->resize(std::size_t(a.count()));
  const float *x = a.as<float>();
  for (std::size_t i = 0; i < out->size(); ++i)
    (*out)[i] = f32_to_bf16(x[i]);
  t->data = out->data();
  t->dtype = ElemType::BF16;
}

} // namespace

void load_inputs(const Options &opt, Inputs *in) {
  const std::string &dir = opt.inputs;
  ForwardTensors &t = in->tensors;
  t.variant = variant_of(opt);
  in->q = loadF32(dir, "q.npy", "[B, T, H, K]");
  t.q = arg(in->q, join_path(dir, "q.npy"));
  in->k = loadF32(dir, "k.npy", "[B, T, H, K]");
  t.k = arg(in->k, join_path(dir, "k.npy"));
  in->v = loadF32(dir, "v.npy", "[B, T, HV, V]");
  t.v = arg(in->v, join_path(dir, "v.npy"));
  in->beta = loadF32(dir, "beta.npy", "[B, T, HV]");
  t.beta = arg(in->beta, join_path(dir, "beta.npy"));
  loadGate(opt, in);
  if (exists(join_path(dir, "cu_seqlens.npy")))
    loadCuSeqlens(dir, in);
  if (exists(join_path(dir, "h0.npy"))) {
    in->h0 = loadF32(dir, "h0.npy", "[N, HV, K, V]");
    t.h0 = arg(in->h0, join_path(dir, "h0.npy"));
  }
  if (opt.dtype == "bf16") {
    toBf16(in->q, &in->q16, &t.q);
    toBf16(in->k, &in->k16, &t.k);
    toBf16(in->v, &in->v16, &t.v);
  }
  t.scale = float(opt.haveScale ? opt.scale : 0.0);
  t.qk_l2norm = opt.l2norm ? 1 : 0;
  t.threads = opt.threads;
  std::string err;
  if (!bind_inputs(t, &in->p, &err)) // shapes, N bounded: nothing allocated
    fail(err);                       // from an unchecked size before this
  loadGateParams(opt, in->p, in);
  preprocess(opt, in);
  checkValues(opt, *in);
}

} // namespace cli
} // namespace deltac

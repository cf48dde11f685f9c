//===- EmitCpp.cpp - C++ for the CPU kernel templates ---------------------===//
//
// <layer>_cpu.cpp: the extern "C" entry checks the params against the
// compiled spec and with deltac::check_params, then dispatches on the
// longest sequence to one run_<kernel> function per delta.kernel. Each runs
// its pre-processing stages as host loops, instantiates its catalogue
// family's entry (deltac::cpu::decode, recurrent_tiled or chunked, knobs
// first) for the delta.fused loop, then its post-processing stages.
//
//===----------------------------------------------------------------------===//

#include "EmitInternal.h"

#include "llvm/Support/FormatVariadic.h"

using namespace mlir;
using namespace mlir::delta;

namespace deltac {
namespace {

// Element-wise loops around the conversions of deltac/convert.h.
const char kConversions[] = R"(template <class Cvt>
std::vector<float> widen(const void *src, size_t n, Cvt cvt) {
  const uint16_t *s = static_cast<const uint16_t *>(src);
  std::vector<float> out(n);
#pragma omp parallel for
  for (int64_t i = 0; i < int64_t(n); ++i)
    out[i] = cvt(s[i]);
  return out;
}

template <class Cvt>
void narrow(void *dst, const std::vector<float> &src, Cvt cvt) {
  uint16_t *d = static_cast<uint16_t *>(dst);
#pragma omp parallel for
  for (int64_t i = 0; i < int64_t(src.size()); ++i)
    d[i] = cvt(src[i]);
}

)";

const char *toF32Fn(DType d) {
  return d == DType::f16 ? "deltac::f16_to_f32" : "deltac::bf16_to_f32";
}
const char *fromF32Fn(DType d) {
  return d == DType::f16 ? "deltac::f32_to_f16" : "deltac::f32_to_bf16";
}

// delta.state_scan with save_chunk_states: the chunked template runs one
// chunk of one sequence per call, carrying the state through the chunk-state
// slots (the last one is the final state).
void emitChunkStateLoop(raw_ostream &os, LayerOp layer, const KernelPlan &k) {
  // The template call runs once per chunk inside host loops: EmitC has no
  // construct for them here, so the loop stays C++ text.
  int64_t gw = layer.getVariant() == Variant::kda ? layer.getKeyDim() : 1;
  os << "  // delta.state_scan saves chunk-end states: one template call per "
        "chunk of each\n"
     << "  // sequence, the state carried through the chunk_states slots.\n"
     << "  {\n"
     << "    const int64_t C = " << k.config.chunk << ";\n"
     << "    const size_t hs = size_t(p.HV) * p.K * p.V;\n"
     << "    const size_t inB = p.in_dtype == DELTAC_F32 ? 4 : 2;\n"
     << "    const size_t outB = p.out_dtype == DELTAC_F32 ? 4 : 2;\n"
     << "    int64_t slot = 0;\n"
     << "    for (int32_t n = 0; n < p.N; ++n) {\n"
     << "      const int64_t start = p.cu_seqlens ? p.cu_seqlens[n] : "
        "int64_t(n) * p.T;\n"
     << "      const int64_t len = p.cu_seqlens ? p.cu_seqlens[n + 1] - start "
        ": p.T;\n"
     << "      const float *h = p.h0 ? static_cast<const float *>(p.h0) + n * "
        "hs : nullptr;\n"
     << "      for (int64_t t0 = 0; t0 < len; t0 += C, ++slot) {\n"
     << "        const int64_t tok = start + t0;\n"
     << "        deltac_fwd_params c = p;\n"
     << "        c.B = 1;\n        c.N = 1;\n"
     << "        c.T = int32_t(std::min<int64_t>(C, len - t0));\n"
     << "        c.cu_seqlens = nullptr;\n"
     << "        c.q = static_cast<const char *>(p.q) + tok * p.H * p.K * "
        "inB;\n"
     << "        c.k = static_cast<const char *>(p.k) + tok * p.H * p.K * "
        "inB;\n"
     << "        c.v = static_cast<const char *>(p.v) + tok * p.HV * p.V * "
        "inB;\n"
     << "        c.o = static_cast<char *>(p.o) + tok * p.HV * p.V * outB;\n"
     << "        c.beta = p.beta + tok * p.HV;\n";
  if (layer.getVariant() != Variant::delta)
    os << "        c.g = p.g + tok * p.HV * " << gw << ";\n";
  os << "        c.h0 = h;\n"
     << "        c.ht = chunk_states + slot * hs;\n"
     << "        " << templateCall(layer, k).instantiation() << "(c);\n"
     << "        h = chunk_states + slot * hs;\n"
     << "      }\n"
     << "      if (p.ht) {\n"
     << "        float *out = static_cast<float *>(p.ht) + n * hs;\n"
     << "        if (h)\n          std::copy(h, h + hs, out);\n"
     << "        else\n          std::fill(out, out + hs, 0.0f);\n"
     << "      }\n"
     << "    }\n"
     << "  }\n";
}

} // namespace

std::string cpuKernelComment(LayerOp layer, const KernelPlan &k) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << "// delta.kernel @" << k.op.getSymName() << ": " << k.family->name;
  if (k.chunked)
    os << ", chunk " << k.config.chunk;
  if (k.sched.getMaxTokens())
    os << ", sequences of <= " << k.sched.getMaxTokens() << " tokens";
  os << " (schedule: " << k.sched.getSource() << ").";
  return s;
}

std::string cpuPreText(LayerOp layer, const KernelPlan &k) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << "  (void)err;\n  (void)err_len;\n";
  emitSizes(os);
  for (ConvertOp c : k.pre) {
    StringRef t = c.getTensor();
    os << "  // delta.convert \"" << t << "\" " << stringifyDType(c.getFrom())
       << " to " << stringifyDType(c.getTo()) << "\n";
    std::string buf = (t + "_f32").str();
    if (t == "h0") {
      os << "  std::vector<float> " << buf << ";\n  if (p.h0) {\n    " << buf
         << " = widen(p.h0, nH, " << toF32Fn(c.getFrom())
         << ");\n    p.h0 = " << buf << ".data();\n  }\n"
         << "  p.state_dtype = DELTAC_F32;\n";
    } else {
      os << "  std::vector<float> " << buf << " = widen(p." << t << ", "
         << countOf(t) << ", " << toF32Fn(c.getFrom()) << ");\n  p." << t
         << " = " << buf << ".data();\n";
      if (t == "v")
        os << "  p.in_dtype = DELTAC_F32;\n";
    }
  }
  // Outputs converted after the call are first written to f32 buffers.
  for (ConvertOp c : k.post) {
    StringRef t = c.getTensor();
    std::string buf = (t + "_f32").str();
    os << "  // delta.convert \"" << t << "\" " << stringifyDType(c.getFrom())
       << " to " << stringifyDType(c.getTo())
       << " (after the call): f32 buffer\n"
       << "  void *" << t << "_out = p." << t << ";\n"
       << "  std::vector<float> " << buf << ";\n";
    if (t == "ht")
      os << "  if (p.ht) {\n    " << buf << ".resize(nH);\n    p.ht = " << buf
         << ".data();\n  }\n  p.state_dtype = DELTAC_F32;\n";
    else
      os << "  " << buf << ".resize(nVO);\n  p.o = " << buf
         << ".data();\n  p.out_dtype = DELTAC_F32;\n";
  }
  if (k.betaSigmoid) {
    bool two = k.betaSigmoid.getRange() == BetaRange::zero_two;
    os << "  // delta.beta_sigmoid "
       << stringifyBetaRange(k.betaSigmoid.getRange())
       << ": params.beta holds logits\n"
       << "  std::vector<float> beta_buf(nBeta);\n"
       << "  deltac::beta_sigmoid(p.beta, beta_buf.data(), nBeta, "
       << (two ? "2.0f" : "1.0f") << ");\n"
       << "  p.beta = beta_buf.data();\n";
  }
  if (k.gate) {
    int64_t w = k.gate.getWidth();
    os << "  // delta.gate width " << w
       << ": g = -exp(A_log[h]) * softplus(a + dt_bias), params.g holds a\n"
       << "  const size_t nG = nBeta * " << w << ";\n"
       << "  std::vector<float> g_buf(nG);\n"
       << "  deltac::gate_from_logits(p.g, A_log, dt_bias, g_buf.data(), nG, "
          "p.HV, "
       << w << ");\n"
       << "  p.g = g_buf.data();\n";
  }

  os << "  // delta.fused over " << (k.chunked ? "chunks" : "tokens");
  if (k.l2norm)
    os << " (qk_l2norm fused: p.qk_l2norm = 1)";
  os << "\n";
  if (k.chunkStates)
    emitChunkStateLoop(os, layer, k);
  return s;
}

std::string cpuPostText(LayerOp, const KernelPlan &k) {
  std::string s;
  llvm::raw_string_ostream os(s);
  for (ConvertOp c : k.post) {
    StringRef t = c.getTensor();
    os << "  // delta.convert \"" << t << "\" " << stringifyDType(c.getFrom())
       << " to " << stringifyDType(c.getTo()) << "\n";
    if (t == "ht")
      os << "  if (ht_out)\n  ";
    os << "  narrow(" << t << "_out, " << t << "_f32, "
       << fromF32Fn(c.getTo()) << ");\n";
  }
  return s;
}

std::string cpuHelpers(ArrayRef<KernelPlan> plans) {
  bool needCvt = llvm::any_of(plans, [](const KernelPlan &k) {
    return !k.pre.empty() || !k.post.empty();
  });
  return needCvt ? kConversions : "";
}

} // namespace deltac

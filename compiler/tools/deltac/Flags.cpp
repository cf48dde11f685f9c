//===- Flags.cpp - build a delta.layer spec from deltac flags -------------===//
//
// `deltac generate --variant=gated --heads=16 ...` builds the same
// delta.layer a spec file would hold; the op verifier then checks it.
//
//===----------------------------------------------------------------------===//

#include "Flags.h"

#include "Delta/DeltaAttrs.h"

#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

#include <cmath>

using namespace llvm;
using namespace mlir::delta;

namespace deltac {

cl::SubCommand &generateCmd() {
  static cl::SubCommand cmd("generate", "Generate C++/CUDA sources, a header "
                                        "and manifest.json from a spec");
  return cmd;
}

static cl::OptionCategory specCat("Spec flags (instead of a spec file)");

cl::OptionCategory &specCategory() { return specCat; }

static cl::opt<std::string> name("name", cl::desc("layer name (default: layer)"),
                                 cl::sub(generateCmd()), cl::cat(specCat));
static cl::opt<std::string> variant("variant", cl::desc("delta, gated or kda"),
                                    cl::sub(generateCmd()), cl::cat(specCat));
static cl::opt<int> heads("heads", cl::desc("q/k heads H"),
                          cl::sub(generateCmd()), cl::cat(specCat));
static cl::opt<int> vHeads("v-heads",
                           cl::desc("value heads HV (a multiple of H; "
                                    "default H)"),
                           cl::sub(generateCmd()), cl::cat(specCat));
static cl::opt<int> keyDim("key-dim", cl::desc("K: 16..256, multiple of 16"),
                           cl::sub(generateCmd()), cl::cat(specCat));
static cl::opt<int> valueDim("value-dim",
                             cl::desc("V: 16..256, multiple of 16"),
                             cl::sub(generateCmd()), cl::cat(specCat));
static cl::opt<std::string> dtype("dtype",
                                  cl::desc("input dtype: f32, bf16 or f16"),
                                  cl::sub(generateCmd()), cl::cat(specCat));
static cl::opt<std::string> outDtype("out-dtype",
                                     cl::desc("output dtype (default: "
                                              "--dtype)"),
                                     cl::sub(generateCmd()), cl::cat(specCat));
static cl::opt<std::string> stateDtype("state-dtype",
                                       cl::desc("state dtype: f32 or bf16"),
                                       cl::sub(generateCmd()), cl::cat(specCat));
static cl::opt<std::string> stateLayout("state-layout",
                                        cl::desc("kv (default) or vk"),
                                        cl::sub(generateCmd()),
                                        cl::cat(specCat));
static cl::opt<double> scale("scale", cl::desc("scale (default 1/sqrt(K))"),
                             cl::sub(generateCmd()), cl::cat(specCat));
static cl::opt<std::string> betaRange("beta-range",
                                      cl::desc("zero_one (default) or "
                                               "zero_two"),
                                      cl::sub(generateCmd()), cl::cat(specCat));
static cl::opt<bool> qkNorm("qk-l2norm", cl::desc("L2-normalise q and k"),
                            cl::sub(generateCmd()), cl::cat(specCat));
static cl::opt<bool> betaSigmoid("beta-sigmoid",
                                 cl::desc("beta = sigmoid(logits) in the "
                                          "kernel entry"),
                                 cl::sub(generateCmd()), cl::cat(specCat));
static cl::opt<bool> gateInKernel("gate-in-kernel",
                                  cl::desc("g = -exp(A_log) * softplus(a + "
                                           "dt_bias) in the kernel entry"),
                                  cl::sub(generateCmd()), cl::cat(specCat));
static cl::opt<bool> initialState("initial-state",
                                  cl::desc("read an initial state h0"),
                                  cl::sub(generateCmd()), cl::cat(specCat));
static cl::opt<bool> finalState("final-state",
                                cl::desc("write the final state ht"),
                                cl::sub(generateCmd()), cl::cat(specCat));
static cl::opt<bool> chunkStates("chunk-states",
                                 cl::desc("write states at chunk ends"),
                                 cl::sub(generateCmd()), cl::cat(specCat));
static cl::opt<bool> varlen("varlen", cl::desc("packed sequences (cu_seqlens)"),
                            cl::sub(generateCmd()), cl::cat(specCat));
static cl::opt<int> decodeTokens("decode-tokens",
                                 cl::desc("tokens per decode step, 1..8"),
                                 cl::sub(generateCmd()), cl::cat(specCat));

bool specFlagsGiven() {
  for (cl::Option *o : std::initializer_list<cl::Option *>{&name, &variant, &heads, &vHeads,
                        &keyDim, &valueDim, &dtype, &outDtype, &stateDtype,
                        &stateLayout, &scale, &betaRange, &qkNorm,
                        &betaSigmoid, &gateInKernel, &initialState,
                        &finalState, &chunkStates, &varlen, &decodeTokens})
    if (o->getNumOccurrences())
      return true;
  return false;
}

namespace {
template <typename E>
bool enumFlag(raw_ostream &os, cl::opt<std::string> &flag, StringRef attr,
              StringRef mnemonic, std::optional<E> (*parse)(StringRef),
              StringRef allowed, std::string &error) {
  if (!flag.getNumOccurrences())
    return true;
  if (!parse(flag)) {
    error = ("--" + flag.ArgStr + "=" + flag + ": expected " + allowed).str();
    return false;
  }
  os << ", " << attr << " = #delta." << mnemonic << "<" << flag << ">";
  return true;
}
} // namespace

bool specFromFlags(const std::string &mode, std::string &text,
                   std::string &error) {
  for (cl::opt<int> *req : {&heads, &keyDim, &valueDim})
    if (!req->getNumOccurrences()) {
      error = ("--" + req->ArgStr +
               " is required when the spec is given by flags (needed: "
               "--variant, --heads, --key-dim, --value-dim)")
                  .str();
      return false;
    }
  if (!variant.getNumOccurrences()) {
    error = "--variant is required when the spec is given by flags: "
            "delta, gated or kda";
    return false;
  }
  std::string n = name.empty() ? "layer" : name.getValue();
  if (n.empty() || !(isalpha(n[0]) || n[0] == '_') ||
      !llvm::all_of(n, [](char c) { return isalnum(c) || c == '_'; })) {
    error = "--name=" + n + ": expected a C identifier";
    return false;
  }
  llvm::raw_string_ostream os(text);
  os << "delta.layer @" << n << " {heads = " << heads
     << ", key_dim = " << keyDim << ", value_dim = " << valueDim;
  if (vHeads.getNumOccurrences())
    os << ", v_heads = " << vHeads;
  if (!enumFlag<Variant>(os, variant, "variant", "variant", symbolizeVariant,
                         "delta, gated or kda", error) ||
      !enumFlag<DType>(os, dtype, "in_dtype", "dtype", symbolizeDType,
                       "f32, bf16 or f16", error) ||
      !enumFlag<DType>(os, outDtype, "out_dtype", "dtype", symbolizeDType,
                       "f32, bf16 or f16", error) ||
      !enumFlag<DType>(os, stateDtype, "state_dtype", "dtype", symbolizeDType,
                       "f32 or bf16", error) ||
      !enumFlag<StateLayout>(os, stateLayout, "state_layout", "layout",
                             symbolizeStateLayout, "kv or vk", error) ||
      !enumFlag<BetaRange>(os, betaRange, "beta_range", "beta_range",
                           symbolizeBetaRange, "zero_one or zero_two", error))
    return false;
  if (scale.getNumOccurrences() &&
      (!std::isfinite(scale.getValue()) || scale.getValue() <= 0)) {
    error = "--scale: expected a finite value > 0";
    return false;
  }
  if (scale.getNumOccurrences())
    os << ", scale = " << llvm::format("%.17e", scale.getValue()) << " : f64";
  auto flag = [&](cl::opt<bool> &f, StringRef attr) {
    if (f)
      os << ", " << attr << " = true";
  };
  flag(qkNorm, "qk_l2norm");
  flag(betaSigmoid, "beta_sigmoid");
  flag(gateInKernel, "gate_in_kernel");
  flag(initialState, "initial_state");
  flag(finalState, "final_state");
  flag(chunkStates, "chunk_states");
  flag(varlen, "varlen");
  if (decodeTokens.getNumOccurrences())
    os << ", decode_tokens = " << decodeTokens;
  if (!mode.empty()) {
    if (!symbolizeMode(mode)) {
      error = "--mode=" + mode + ": expected auto, chunked or recurrent";
      return false;
    }
    os << ", mode = #delta.mode<" << mode << ">";
  }
  os << "}\n";
  return true;
}

} // namespace deltac

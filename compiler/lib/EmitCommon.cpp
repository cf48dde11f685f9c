//===- EmitCommon.cpp - pieces shared by the CPU and CUDA emitters --------===//

#include "EmitInternal.h"

#include "llvm/Support/FormatVariadic.h"

#include <algorithm>

using namespace mlir;
using namespace mlir::delta;

namespace deltac {

const char *variantEnum(Variant v) {
  switch (v) {
  case Variant::delta:
    return "DELTAC_VARIANT_DELTA";
  case Variant::gated:
    return "DELTAC_VARIANT_GATED";
  case Variant::kda:
    return "DELTAC_VARIANT_KDA";
  }
  return "?";
}

const char *dtypeEnum(DType d) {
  switch (d) {
  case DType::f32:
    return "DELTAC_F32";
  case DType::bf16:
    return "DELTAC_BF16";
  case DType::f16:
    return "DELTAC_F16";
  }
  return "?";
}

std::string cpuEntry(LayerOp layer) {
  return (layer.getSymName() + "_forward_cpu").str();
}
std::string cudaEntry(LayerOp layer) {
  return (layer.getSymName() + "_forward_cuda").str();
}
SmallVector<std::pair<std::string, std::string>> extraParamList(LayerOp layer,
                                                                bool cuda) {
  SmallVector<std::pair<std::string, std::string>> e;
  if (layer.getChunkStates()) {
    e.push_back({"float *", "chunk_states"});
    if (cuda)
      e.push_back({"int64_t", "chunk_states_count"});
  }
  if (layer.getGateInKernel()) {
    e.push_back({"const float *", "A_log"});
    e.push_back({"const float *", "dt_bias"});
  }
  return e;
}
std::string extraParams(LayerOp layer, bool cuda) {
  std::string s;
  for (auto &[type, name] : extraParamList(layer, cuda))
    s += type + (StringRef(type).ends_with("*") ? "" : " ") + name + ", ";
  return s;
}

int64_t chunkOf(LayerOp layer, Target target) {
  if (auto scheds = layer.getSchedules())
    for (auto sc : scheds->getAsRange<ScheduleAttr>())
      if (sc.getTarget() == target && sc.getKnob("chunk"))
        return sc.getKnob("chunk");
  return 0;
}

const char *countOf(StringRef t) {
  if (t == "q" || t == "k")
    return "nQK";
  if (t == "v" || t == "o")
    return "nVO";
  return "nH";
}

void emitSizes(raw_ostream &os) {
  os << "  [[maybe_unused]] const size_t nQK = size_t(p.B) * p.T * p.H * "
        "p.K;\n"
     << "  [[maybe_unused]] const size_t nVO = size_t(p.B) * p.T * p.HV * "
        "p.V;\n"
     << "  [[maybe_unused]] const size_t nH = size_t(p.N) * p.HV * p.K * "
        "p.V;\n"
     << "  [[maybe_unused]] const size_t nBeta = size_t(p.B) * p.T * p.HV;\n";
}

void emitEntryPrologue(raw_ostream &os, LayerOp layer, StringRef entry) {
  os << "  if (!params)\n    return fail(err, err_len, \"" << entry
     << ": params is null\");\n"
     << "  deltac_fwd_params p = *params;\n"
     << "  if (!matchSpec(p, err, err_len))\n    return 1;\n"
     << llvm::formatv("  if (p.scale == 0.0f)\n    p.scale = {0:e9}f;\n",
                      layer.getScaleOrDefault());
  if (layer.getGateInKernel())
    os << "  if (!A_log || !dt_bias || !p.g)\n    return fail(err, err_len, \""
       << layer.getSymName()
       << ": A_log, dt_bias and params.g (holding a) must be set\");\n";
}

std::string TemplateCall::instantiation() const {
  std::string s = callee + "<";
  for (size_t i = 0; i < args.size(); ++i)
    s += (i ? ", " : "") + args[i].second;
  return s + ">";
}

// The arguments follow the family's entry: CPU entries take
// <Var, knobs..., KC, VC>, CUDA entries <Var, K, V, InT, knobs...>, knobs in
// catalogue order (deltac::kKnobNames).
TemplateCall templateCall(LayerOp layer, const KernelPlan &plan) {
  TemplateCall t;
  const deltac::FamilyInfo &f = *plan.family;
  t.header = f.header;
  t.callee = f.entry;
  t.args.push_back({"Var", variantEnum(layer.getVariant())});
  auto knobs = [&] {
    // The parameter names of deltac/cpu/launch.h, deltac/cuda/launch.cuh.
    const char *const kArgName[deltac::kKnobCount] = {
        "Chunk", "BK", f.device == deltac::Device::CPU ? "TileV" : "BV",
        "Warps", "Stages", "Split", "Fuse", "Scan"};
    for (int i = 0; i < deltac::kKnobCount; ++i)
      if (f.knobs & (1u << i))
        t.args.push_back({kArgName[i], std::to_string(plan.config.knob(i))});
  };
  std::string k = std::to_string(layer.getKeyDim());
  std::string v = std::to_string(layer.getValueDim());
  if (f.device == deltac::Device::CPU) {
    knobs();
    t.args.push_back({"KC", k});
    t.args.push_back({"VC", v});
  } else {
    t.args.push_back({"K", k});
    t.args.push_back({"V", v});
    t.args.push_back(
        {"InT", plan.tplIn == DType::bf16 ? "__nv_bfloat16" : "float"});
    knobs();
  }
  return t;
}

FailureOr<KernelPlan> readKernel(KernelOp kernel, LayerOp layer) {
  KernelPlan plan;
  plan.op = kernel;
  plan.sched = kernel.getSchedule();
  plan.family = familyOf(plan.sched);
  plan.config = configOf(plan.sched);
  plan.tplIn = layer.getInDtype();
  plan.tplOut = layer.getOutputDType();
  bool seenFused = false;
  for (Operation &op : kernel.getBody().front()) {
    if (isa<YieldOp>(op))
      continue;
    if (auto c = dyn_cast<ConvertOp>(op)) {
      (seenFused ? plan.post : plan.pre).push_back(c);
      if (c.getTensor() == "q")
        plan.tplIn = c.getTo();
      if (c.getTensor() == "o")
        plan.tplOut = c.getFrom();
      continue;
    }
    if (auto b = dyn_cast<BetaSigmoidOp>(op)) {
      plan.betaSigmoid = b;
      continue;
    }
    if (auto g = dyn_cast<GateOp>(op)) {
      plan.gate = g;
      continue;
    }
    auto fused = dyn_cast<FusedOp>(op);
    if (!fused)
      return op.emitOpError()
             << "runs as a kernel of its own, but the catalogue's "
             << plan.family->name << " template (" << plan.family->entry
             << ") runs the stages fused: run delta-fuse-stages with "
                "fuse=all";
    if (seenFused)
      return op.emitOpError()
             << "is a second fused group: the catalogue's "
             << plan.family->name << " template (" << plan.family->entry
             << ") runs every stage in one kernel (delta-fuse-stages "
                "fuse=all)";
    seenFused = true;
    plan.chunked = fused.getOver() == "chunks";
    for (Operation &st : fused.getBody().front()) {
      if (isa<YieldOp>(st)) {
        continue;
      } else if (isa<QKNormOp>(st)) {
        plan.l2norm = true;
      } else if (auto scan = dyn_cast<StateScanOp>(st)) {
        plan.chunkStates = scan.getSaveChunkStates();
      } else if (auto c = dyn_cast<GateCumsumOp>(st);
                 c && int64_t(c.getChunk()) != plan.config.chunk) {
        return c.emitOpError() << "chunk " << c.getChunk()
                               << " differs from the kernel's schedule chunk "
                               << plan.config.chunk;
      } else if (!isa<GateCumsumOp, KKTInverseOp, WYOp, ChunkOutputOp,
                      RecurrentStepOp>(st)) {
        return st.emitOpError() << "has no template to run it";
      }
    }
  }
  if (!seenFused)
    return kernel.emitOpError() << "has no delta.fused stage loop";
  if (plan.chunked != (modeOf(plan.sched) == mlir::delta::Mode::chunked))
    return kernel.emitOpError() << "stage loop does not match the schedule";
  return plan;
}

void emitCommonPrelude(raw_ostream &os, LayerOp layer) {
  StringRef name = layer.getSymName();
  os << "namespace {\n\n"
     << "int fail(char *err, size_t len, const std::string &msg) {\n"
     << "  if (err && len)\n"
     << "    std::snprintf(err, len, \"%s\", msg.c_str());\n"
     << "  return 1;\n}\n\n"
     << "[[maybe_unused]] bool reject(char *err, size_t len, const std::string &msg) {\n"
     << "  fail(err, len, msg);\n  return false;\n}\n\n";

  os << "// Compares p with the spec @" << name << " was compiled for.\n"
     << "bool matchSpec(const deltac_fwd_params &p, char *err, size_t len) "
        "{\n"
     << "  auto bad = [&](const char *field, long long got, const char *want) "
        "{\n"
     << "    fail(err, len, std::string(\"" << name
     << ": params.\") + field + \" = \" +\n"
     << "                       std::to_string(got) + \": compiled for \" + "
        "want);\n"
     << "    return false;\n  };\n";
  auto eq = [&](StringRef field, const std::string &value, StringRef want) {
    os << "  if (p." << field << " != " << value << ")\n"
       << "    return bad(\"" << field << "\", p." << field << ", \"" << want
       << "\");\n";
  };
  auto i = [](int64_t v) { return std::to_string(v); };
  Variant var = layer.getVariant();
  eq("variant", variantEnum(var),
     llvm::formatv("{0} ({1})", (int)var, stringifyVariant(var)).str());
  eq("H", i(layer.getHeads()), i(layer.getHeads()));
  eq("HV", i(layer.getNumValueHeads()), i(layer.getNumValueHeads()));
  eq("K", i(layer.getKeyDim()), i(layer.getKeyDim()));
  eq("V", i(layer.getValueDim()), i(layer.getValueDim()));
  auto dt = [&](StringRef field, DType d) {
    eq(field, dtypeEnum(d),
       llvm::formatv("{0} ({1})", (int)d, stringifyDType(d)).str());
  };
  dt("in_dtype", layer.getInDtype());
  dt("out_dtype", layer.getOutputDType());
  dt("state_dtype", layer.getStateDtype());
  StateLayout sl = layer.getStateLayout();
  eq("state_layout",
     sl == StateLayout::kv ? "DELTAC_STATE_KV" : "DELTAC_STATE_VK",
     llvm::formatv("{0} ({1})", (int)sl, stringifyStateLayout(sl)).str());
  eq("qk_l2norm", layer.getQkL2norm() ? "1" : "0",
     layer.getQkL2norm() ? "1 (q/k L2 norm on)" : "0 (q/k L2 norm off)");
  auto forbid = [&](StringRef ptr, StringRef why) {
    os << "  if (p." << ptr << ")\n    return reject(err, len, \"" << name
       << ": params." << ptr << " is set but " << why << "\");\n";
  };
  auto require = [&](StringRef ptr, StringRef why) {
    os << "  if (!p." << ptr << ")\n    return reject(err, len, \"" << name
       << ": params." << ptr << " is null but " << why << "\");\n";
  };
  if (!layer.getInitialState())
    forbid("h0", "the layer was compiled without initial_state");
  if (layer.getFinalState())
    require("ht", "the layer was compiled with final_state");
  else
    forbid("ht", "the layer was compiled without final_state");
  if (!layer.getVarlen())
    forbid("cu_seqlens", "the layer was compiled without varlen");
  if (var == Variant::delta)
    forbid("g", "the delta variant has no decay");
  double scale = layer.getScaleOrDefault();
  os << llvm::formatv(
      "  // scale 0 means the compiled scale.\n"
      "  if (p.scale != 0.0f && std::fabs(p.scale - {0:e9}f) > 1e-6f * "
      "{0:e9}f)\n"
      "    return reject(err, len, \"{1}: params.scale = \" + "
      "std::to_string(p.scale) +\n"
      "                                \": compiled for {0:e9} (or 0)\");\n",
      scale, name);
  os << "  if (p.N <= 0 || p.N > (1 << 24))\n"
     << "    return bad(\"N\", p.N, \"1..2^24\");\n"
     << "  return true;\n}\n\n";

  os << "// Longest sequence of the call (cu_seqlens must be a host "
        "pointer).\n"
     << "[[maybe_unused]] int64_t longestSequence(const deltac_fwd_params "
        "&p) {\n"
     << "  if (!p.cu_seqlens)\n    return p.T;\n"
     << "  int64_t longest = 0;\n"
     << "  for (int32_t n = 0; n < p.N; ++n)\n"
     << "    longest = std::max<int64_t>(longest, p.cu_seqlens[n + 1] - "
        "p.cu_seqlens[n]);\n"
     << "  return longest;\n}\n\n";
}

// check_params only knows the template dtypes; a converted tensor keeps the
// user's pointer in the view, so size-equivalent dtypes keep its alignment
// check exact (f16 is checked as the 2-byte bf16).
void emitCheckView(raw_ostream &os, const KernelPlan &plan) {
  auto sizeEq = [](DType d) {
    return d == DType::f16 ? dtypeEnum(DType::bf16) : dtypeEnum(d);
  };
  LayerOp layer = SymbolTable::lookupNearestSymbolFrom<LayerOp>(
      plan.op, plan.op.getLayerAttr());
  os << "  deltac_fwd_params view = p;\n";
  if (layer.getInDtype() != plan.tplIn)
    os << "  view.in_dtype = " << sizeEq(layer.getInDtype()) << ";\n";
  if (layer.getOutputDType() != plan.tplOut)
    os << "  view.out_dtype = " << sizeEq(layer.getOutputDType()) << ";\n";
  if (layer.getStateDtype() != DType::f32)
    os << "  view.state_dtype = DELTAC_F32; // converted around the call\n";
}

void emitTry(raw_ostream &os) {
  os << "#if defined(__cpp_exceptions)\n  try {\n#endif\n";
}

void emitCatch(raw_ostream &os, LayerOp layer) {
  os << "#if defined(__cpp_exceptions)\n"
     << "  } catch (const std::exception &e) {\n"
     << "    return fail(err, err_len, std::string(\"" << layer.getSymName()
     << ": \") + e.what());\n"
     << "  }\n#endif\n";
}

/// The chunk-end state helpers of one target: <NAME>[_CUDA]_CHUNK,
/// <name>[_cuda]_chunk_count and, on CUDA, <name>_cuda_chunk_capacity.
static void emitChunkStateHelpers(raw_ostream &os, LayerOp layer, bool cuda) {
  StringRef name = layer.getSymName();
  std::string up = name.upper() + (cuda ? "_CUDA" : "");
  std::string fn = (name + (cuda ? "_cuda" : "")).str();
  int64_t chunk = chunkOf(layer, cuda ? Target::sm_90a : Target::cpu);
  os << "#define " << up << "_CHUNK " << chunk << "\n\n"
     << "/* Chunk-end states of the " << (cuda ? "CUDA" : "CPU")
     << " entry: f32\n * [" << fn
     << "_chunk_count(p), HV, K, V] (state layout), one per chunk\n"
     << " * of " << chunk
     << " tokens of each sequence, in order (host cu_seqlens). */\n"
     << "static inline long long " << fn
     << "_chunk_count(const deltac_fwd_params *p) {\n"
     << "  long long n = 0;\n"
     << "  for (int i = 0; i < p->N; ++i) {\n"
     << "    long long len = p->cu_seqlens ? p->cu_seqlens[i + 1] - "
        "p->cu_seqlens[i] : p->T;\n"
     << "    n += (len + " << chunk - 1 << ") / " << chunk << ";\n"
     << "  }\n  return n;\n}\n\n";
  if (!cuda)
    return;
  os << "/* The least chunk_states_count the CUDA entry takes (it reads no "
        "cu_seqlens:\n"
     << " * device memory): without cu_seqlens the count, with them the "
        "most chunks any\n"
     << " * split of the B * T tokens into N sequences has. The entry writes "
        "the first\n"
     << " * " << fn
     << "_chunk_count(p) entries and leaves the rest as they\n"
     << " * were. */\n"
     << "static inline long long " << fn
     << "_chunk_capacity(const deltac_fwd_params *p) {\n"
     << "  if (!p->cu_seqlens)\n"
     << "    return (long long)p->N * ((p->T + " << chunk - 1 << ") / "
     << chunk << ");\n"
     << "  return ((long long)p->B * p->T + (long long)p->N * " << chunk - 1
     << ") / " << chunk << ";\n}\n\n";
}

/// The spec as a params template and feature macros, for callers.
static void emitSpecParams(raw_ostream &os, LayerOp layer, bool cpu,
                           bool cuda) {
  StringRef name = layer.getSymName();
  std::string up = name.upper();
  auto flag = [&](StringRef what, bool on) {
    os << "#define " << up << "_" << what << " " << (on ? 1 : 0) << "\n";
  };
  flag("INITIAL_STATE", layer.getInitialState());
  flag("FINAL_STATE", layer.getFinalState());
  flag("VARLEN", layer.getVarlen());
  flag("BETA_SIGMOID", layer.getBetaSigmoid());
  flag("GATE_IN_KERNEL", layer.getGateInKernel());
  flag("CHUNK_STATES", layer.getChunkStates());
  if (layer.getChunkStates() && cpu)
    emitChunkStateHelpers(os, layer, /*cuda=*/false);
  if (layer.getChunkStates() && cuda)
    emitChunkStateHelpers(os, layer, /*cuda=*/true);
  os << "#define " << up << "_BETA_RANGE "
     << (layer.getBetaRange() == BetaRange::zero_two ? "2.0f" : "1.0f")
     << "\n#define " << up << "_DECODE_TOKENS " << layer.getDecodeTokens()
     << "\n\n/* The compiled spec as params: fill B, T, N and the pointers. "
        "*/\n"
     << "static inline deltac_fwd_params " << name
     << "_spec_params(void) {\n"
     << "  deltac_fwd_params p;\n"
     << "  memset(&p, 0, sizeof p);\n"
     << "  p.variant = " << variantEnum(layer.getVariant()) << ";\n"
     << "  p.H = " << layer.getHeads() << ";\n"
     << "  p.HV = " << layer.getNumValueHeads() << ";\n"
     << "  p.K = " << layer.getKeyDim() << ";\n"
     << "  p.V = " << layer.getValueDim() << ";\n"
     << "  p.in_dtype = " << dtypeEnum(layer.getInDtype()) << ";\n"
     << "  p.out_dtype = " << dtypeEnum(layer.getOutputDType()) << ";\n"
     << "  p.state_dtype = " << dtypeEnum(layer.getStateDtype()) << ";\n"
     << "  p.state_layout = "
     << (layer.getStateLayout() == StateLayout::kv ? "DELTAC_STATE_KV"
                                                    : "DELTAC_STATE_VK")
     << ";\n"
     << llvm::formatv("  p.scale = {0:e9}f;\n", layer.getScaleOrDefault())
     << "  p.qk_l2norm = " << (layer.getQkL2norm() ? 1 : 0) << ";\n"
     << "  return p;\n}\n\n";
}

std::string emitHeader(LayerOp layer, bool cpu, bool cuda) {
  std::string s;
  llvm::raw_string_ostream os(s);
  std::string guard = ("DELTAC_GENERATED_" + layer.getSymName().upper() + "_H");
  StringRef name = layer.getSymName();
  os << "/* " << name << ".h: generated by deltac from delta.layer @" << name
     << ". Do not edit.\n"
     << " * Spec: variant " << stringifyVariant(layer.getVariant())
     << ", H = " << layer.getHeads() << ", HV = " << layer.getNumValueHeads()
     << ", K = " << layer.getKeyDim() << ", V = " << layer.getValueDim()
     << ",\n *   in " << stringifyDType(layer.getInDtype()) << ", out "
     << stringifyDType(layer.getOutputDType()) << ", state "
     << stringifyDType(layer.getStateDtype()) << " "
     << stringifyStateLayout(layer.getStateLayout()) << ", scale "
     << llvm::formatv("{0:e9}", layer.getScaleOrDefault()) << ".\n"
     << " * Entry points return 0 on success, non-zero with a message in err "
        "otherwise. */\n"
     << "#ifndef " << guard << "\n#define " << guard << "\n\n"
     << "#include <stddef.h>\n#include <string.h>\n\n"
     << "#include \"deltac/params.h\"\n\n"
     << "#ifdef __cplusplus\nextern \"C\" {\n#endif\n\n";
  if (layer.getGateInKernel())
    os << "/* g = -exp(A_log) * softplus(a + dt_bias) is computed in the "
          "entry: params.g holds a\n"
       << " * (the shape of g), A_log is [HV], dt_bias is "
       << (layer.getVariant() == Variant::kda ? "[HV, K]" : "[HV]")
       << ". */\n";
  if (layer.getBetaSigmoid())
    os << "/* params.beta holds logits: beta = "
       << (layer.getBetaRange() == BetaRange::zero_two ? "2 * " : "")
       << "sigmoid(logits). */\n";
  emitSpecParams(os, layer, cpu, cuda);
  if (cpu)
    os << "/* Host pointers. */\nint " << cpuEntry(layer)
       << "(const deltac_fwd_params *p, " << extraParams(layer, false)
       << "char *err, size_t err_len);\n";
  if (cuda) {
    os << "/* Device pointers; stream is a cudaStream_t.";
    if (layer.getChunkStates())
      os << " chunk_states: device\n"
         << " * memory, 16-byte aligned, chunk_states_count entries, at least\n"
         << " * " << layer.getSymName() << "_cuda_chunk_capacity(p).";
    os << " */\nint " << cudaEntry(layer)
       << "(const deltac_fwd_params *p, void *stream, "
       << extraParams(layer, true) << "char *err, size_t err_len);\n";
  }
  os << "\n#ifdef __cplusplus\n}\n#endif\n\n#endif /* " << guard << " */\n";
  return s;
}

} // namespace deltac

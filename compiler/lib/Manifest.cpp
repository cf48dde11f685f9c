//===- Manifest.cpp - emitPackage and manifest.json -----------------------===//

#include "EmitInternal.h"
#include "deltac/Emit.h"


#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "mlir/IR/Verifier.h"

using namespace mlir;
using namespace mlir::delta;
namespace json = llvm::json;

namespace deltac {
namespace {

json::Object specJson(LayerOp l) {
  return json::Object{
      {"variant", stringifyVariant(l.getVariant())},
      {"heads", l.getHeads()},
      {"v_heads", l.getNumValueHeads()},
      {"key_dim", l.getKeyDim()},
      {"value_dim", l.getValueDim()},
      {"in_dtype", stringifyDType(l.getInDtype())},
      {"out_dtype", stringifyDType(l.getOutputDType())},
      {"state_dtype", stringifyDType(l.getStateDtype())},
      {"state_layout", stringifyStateLayout(l.getStateLayout())},
      {"scale", l.getScaleOrDefault()},
      {"beta_range", stringifyBetaRange(l.getBetaRange())},
      {"qk_l2norm", l.getQkL2norm()},
      {"beta_sigmoid", l.getBetaSigmoid()},
      {"gate_in_kernel", l.getGateInKernel()},
      {"initial_state", l.getInitialState()},
      {"final_state", l.getFinalState()},
      {"chunk_states", l.getChunkStates()},
      {"varlen", l.getVarlen()},
      {"decode_tokens", l.getDecodeTokens()},
      {"mode", stringifyMode(l.getMode())},
  };
}

json::Object scheduleJson(ScheduleAttr s) {
  json::Object knobs;
  for (NamedAttribute a : s.getKnobs())
    knobs[a.getName().getValue()] = cast<IntegerAttr>(a.getValue()).getInt();
  return json::Object{{"target", targetName(s.getTarget())},
                      {"family", s.getFamily()},
                      {"mode", stringifyMode(modeOf(s))},
                      {"knobs", std::move(knobs)},
                      {"max_tokens", s.getMaxTokens()},
                      {"source", s.getSource()}};
}

json::Object kernelJson(LayerOp l, const KernelPlan &k,
                        ArrayRef<KernelPlan> all) {
  ScheduleAttr s = k.sched;
  TemplateCall call = templateCall(l, k);
  json::Object args;
  for (auto &[name, value] : call.args) {
    long long n;
    if (!StringRef(value).getAsInteger(10, n))
      args[name] = n;
    else
      args[name] = value;
  }
  std::string inst = call.instantiation();
  json::Array stages;
  for (Operation &op : k.op.getBody().front()) {
    if (auto f = dyn_cast<FusedOp>(op)) {
      json::Array names;
      for (StringRef n : f.getStages().getAsValueRange<StringAttr>())
        names.push_back(n);
      stages.push_back(json::Object{{"fused_over", f.getOver()},
                                    {"stages", std::move(names)}});
    } else if (isa<YieldOp>(op)) {
      continue;
    } else if (auto c = dyn_cast<ConvertOp>(op)) {
      stages.push_back(llvm::formatv("convert {0} {1} to {2}", c.getTensor(),
                                     stringifyDType(c.getFrom()),
                                     stringifyDType(c.getTo()))
                           .str());
    } else {
      stages.push_back(op.getName().stripDialect());
    }
  }
  int64_t bound = s.getMaxTokens(), others = 0;
  for (const KernelPlan &o : all)
    others = std::max(others, o.sched.getMaxTokens());
  std::string when =
      bound ? llvm::formatv("longest sequence <= {0} tokens", bound).str()
      : others ? llvm::formatv("longest sequence > {0} tokens", others).str()
               : std::string("always");
  return json::Object{
      {"name", k.op.getSymName()},
      {"target", targetName(s.getTarget())},
      {"family", k.family->name},
      {"header", call.header},
      {"template", call.callee},
      {"template_args", std::move(args)},
      {"instantiation", inst},
      {"schedule", scheduleJson(s)},
      {"runs_when", when},
      {"stages", std::move(stages)},
  };
}

/// The source file of one target: built as an emitc.file in a scratch
/// module, printed by mlir::emitc::translateToCpp.
FailureOr<std::string> emitSource(LayerOp layer, ArrayRef<KernelPlan> plans,
                                  bool cuda) {
  MLIRContext *ctx = layer.getContext();
  ctx->getOrLoadDialect<emitc::EmitCDialect>();
  OwningOpRef<ModuleOp> scratch = ModuleOp::create(layer.getLoc());
  OpBuilder b = OpBuilder::atBlockEnd(scratch->getBody());
  emitc::FileOp file = buildSourceFile(b, layer.getLoc(), layer, plans, cuda);
  if (failed(verify(file)))
    return failure();
  return printSourceFile(*scratch, file.getId());
}

/// Whether the kernel set was written in the spec (not the auto rule's).
bool fromSpec(ArrayRef<KernelPlan> plans) {
  return llvm::any_of(plans, [](const KernelPlan &k) {
    return k.sched.getSource() == "spec";
  });
}

/// What mode auto means on t, from the catalogue.
std::string autoNote(Target t) {
  deltac::FamilyList l = deltac::families_for(deviceOf(t), deltac::Mode::Auto);
  std::string s = "mode auto on " + targetName(t).str() +
                  ": the catalogue's families in order, each for the calls it "
                  "takes: ";
  // An entry after an unbounded one is a fallback: it takes only the shapes
  // the unbounded ones before it cannot run (check_family).
  std::string unboundedBefore;
  for (int i = 0; i < l.n; ++i) {
    const deltac::FamilyInfo &f = deltac::family_info(l.f[i]);
    std::string when =
        l.max_tokens[i]
            ? "at most " + std::to_string(l.max_tokens[i]) + " tokens"
            : std::string("any length");
    if (!unboundedBefore.empty())
      when += ", for the shapes " + unboundedBefore + " cannot run";
    s += std::string(i ? ", " : "") + f.name + " (" + when + ")";
    if (!l.max_tokens[i])
      unboundedBefore += (unboundedBefore.empty() ? "" : " or ") +
                         std::string(f.name);
  }
  return s;
}

} // namespace

LogicalResult emitPackage(ModuleOp module, std::vector<GeneratedFile> &files) {
  json::Array layersJson;
  bool ok = true;
  module.walk([&](LayerOp layer) {
    if (!ok)
      return;
    if (layer->getParentOp() != module.getOperation()) {
      layer.emitOpError() << "is inside a nested module: deltac emits layers "
                             "at the top level of the spec only; move it out";
      ok = false;
      return;
    }
    SmallVector<KernelPlan> cpu, cuda;
    if (failed(readLayerKernels(module, layer, cpu, cuda))) {
      ok = false;
      return;
    }
    if (cpu.empty() && cuda.empty()) {
      layer.emitOpError() << "has no delta.kernel: run delta-lower-stages "
                             "first";
      ok = false;
      return;
    }
    StringRef name = layer.getSymName();
    json::Object entries;
    json::Array kernels, notes;
    files.push_back({(name + ".h").str(),
                     emitHeader(layer, !cpu.empty(), !cuda.empty())});
    if (!cpu.empty()) {
      FailureOr<std::string> text = emitSource(layer, cpu, /*cuda=*/false);
      if (failed(text)) {
        ok = false;
        return;
      }
      files.push_back({(name + "_cpu.cpp").str(), *text});
      entries["cpu"] = json::Object{
          {"symbol", cpuEntry(layer)},
          {"source", (name + "_cpu.cpp").str()},
          {"signature", "int " + cpuEntry(layer) +
                            "(const deltac_fwd_params *p, " +
                            extraParams(layer, false) +
                            "char *err, size_t err_len)"},
          {"pointers", "host"}};
      for (const KernelPlan &k : cpu)
        kernels.push_back(kernelJson(layer, k, cpu));
      if (layer.getMode() == mlir::delta::Mode::automatic && !fromSpec(cpu))
        notes.push_back(autoNote(Target::cpu));
    }
    if (!cuda.empty()) {
      FailureOr<std::string> text = emitSource(layer, cuda, /*cuda=*/true);
      if (failed(text)) {
        ok = false;
        return;
      }
      files.push_back({(name + "_cuda.cu").str(), *text});
      entries["cuda:sm_90a"] = json::Object{
          {"symbol", cudaEntry(layer)},
          {"source", (name + "_cuda.cu").str()},
          {"signature", "int " + cudaEntry(layer) +
                            "(const deltac_fwd_params *p, void *stream, " +
                            extraParams(layer, true) +
                            "char *err, size_t err_len)"},
          {"pointers", "device"}};
      for (const KernelPlan &k : cuda)
        kernels.push_back(kernelJson(layer, k, cuda));
      if (layer.getMode() == mlir::delta::Mode::automatic && !fromSpec(cuda))
        notes.push_back(autoNote(Target::sm_90a));
    }
    layersJson.push_back(json::Object{{"name", name},
                                      {"spec", specJson(layer)},
                                      {"header", (name + ".h").str()},
                                      {"entry_points", std::move(entries)},
                                      {"kernels", std::move(kernels)},
                                      {"notes", std::move(notes)}});
  });
  if (!ok)
    return failure();
  if (layersJson.empty())
    return module.emitError() << "the module holds no delta.layer";
  std::string text;
  llvm::raw_string_ostream os(text);
  os << llvm::formatv("{0:2}",
                      json::Value(json::Object{
                          {"format", "deltac-manifest"},
                          {"version", 1},
                          {"generator", "deltac 0.1.0"},
                          {"layers", std::move(layersJson)}}))
     << "\n";
  files.push_back({"manifest.json", text});
  return success();
}

} // namespace deltac

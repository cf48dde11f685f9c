//===- Manifest.cpp - emitPackage and manifest.json -----------------------===//

#include "EmitInternal.h"
#include "deltac/Emit.h"

#include "Delta/TuningDB.h"

#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"

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
  return json::Object{{"target", targetName(s.getTarget())},
                      {"mode", stringifyMode(s.getMode())},
                      {"chunk", s.getChunk()},
                      {"tile_k", s.getTileK()},
                      {"tile_v", s.getTileV()},
                      {"warps", s.getWarps()},
                      {"stages", s.getStages()},
                      {"max_tokens", s.getMaxTokens()},
                      {"source", s.getSource()}};
}

json::Object kernelJson(LayerOp l, const KernelPlan &k,
                        ArrayRef<KernelPlan> all) {
  ScheduleAttr s = k.sched;
  bool cpu = s.getTarget() == Target::cpu;
  std::string var = variantEnum(l.getVariant());
  json::Object args{{"Var", var}};
  std::string inst;
  if (cpu && k.chunked) {
    args["Chunk"] = s.getChunk();
    args["KC"] = l.getKeyDim();
    args["VC"] = l.getValueDim();
    inst = llvm::formatv("deltac::cpu::chunked<{0}, {1}, {2}, {3}>", var,
                         s.getChunk(), l.getKeyDim(), l.getValueDim());
  } else if (cpu) {
    args["KC"] = l.getKeyDim();
    args["VC"] = l.getValueDim();
    inst = llvm::formatv("deltac::cpu::recurrent<{0}, {1}, {2}>", var,
                         l.getKeyDim(), l.getValueDim());
  } else {
    const char *inT = k.tplIn == DType::bf16 ? "__nv_bfloat16" : "float";
    args["K"] = l.getKeyDim();
    args["V"] = l.getValueDim();
    args["InT"] = inT;
    inst = llvm::formatv("deltac::cuda::recurrent<{0}, {1}, {2}, {3}>", var,
                         l.getKeyDim(), l.getValueDim(), inT);
  }
  json::Array stages;
  for (Operation &op : k.op.getBody().front()) {
    if (auto f = dyn_cast<FusedOp>(op)) {
      json::Array names;
      for (StringRef n : f.getStages().getAsValueRange<StringAttr>())
        names.push_back(n);
      stages.push_back(json::Object{{"fused_over", f.getOver()},
                                    {"stages", std::move(names)}});
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
      {"template", cpu ? (k.chunked ? "deltac::cpu::chunked"
                                    : "deltac::cpu::recurrent")
                       : "deltac::cuda::recurrent"},
      {"template_args", std::move(args)},
      {"instantiation", inst},
      {"schedule", scheduleJson(s)},
      {"runs_when", when},
      {"stages", std::move(stages)},
  };
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
    for (auto k : module.getOps<KernelOp>()) {
      if (k.getLayer() != layer.getSymName())
        continue;
      FailureOr<KernelPlan> plan = readKernel(k, layer);
      if (failed(plan)) {
        ok = false;
        return;
      }
      (k.getSchedule().getTarget() == Target::cpu ? cpu : cuda)
          .push_back(*plan);
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
      files.push_back({(name + "_cpu.cpp").str(), emitCpuSource(layer, cpu)});
      entries["cpu"] = json::Object{
          {"symbol", cpuEntry(layer)},
          {"source", (name + "_cpu.cpp").str()},
          {"signature", "int " + cpuEntry(layer) +
                            "(const deltac_fwd_params *p, " +
                            extraParams(layer) + "char *err, size_t err_len)"},
          {"pointers", "host"}};
      for (const KernelPlan &k : cpu)
        kernels.push_back(kernelJson(layer, k, cpu));
      if (layer.getMode() == Mode::automatic && cpu.size() == 1 &&
          cpu[0].sched.getMode() == Mode::recurrent &&
          cpu[0].sched.getMaxTokens() == 0)
        notes.push_back("mode auto on cpu: the recurrent kernel runs every "
                        "sequence length (deltac::kCpuRecurrentMaxTokens = 0: "
                        "it measured faster than the chunked kernels at every "
                        "length); mode = chunked gives the chunked kernel");
    }
    if (!cuda.empty()) {
      files.push_back({(name + "_cuda.cu").str(), emitCudaSource(layer, cuda)});
      entries["cuda:sm_90a"] = json::Object{
          {"symbol", cudaEntry(layer)},
          {"source", (name + "_cuda.cu").str()},
          {"signature", "int " + cudaEntry(layer) +
                            "(const deltac_fwd_params *p, void *stream, " +
                            extraParams(layer) + "char *err, size_t err_len)"},
          {"pointers", "device"}};
      for (const KernelPlan &k : cuda)
        kernels.push_back(kernelJson(layer, k, cuda));
      if (layer.getMode() == Mode::automatic)
        notes.push_back("mode auto on cuda:sm_90a: no chunked CUDA kernel "
                        "exists yet, the recurrent kernel runs every sequence "
                        "length");
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

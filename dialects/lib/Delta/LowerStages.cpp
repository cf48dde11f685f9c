//===- LowerStages.cpp - lower delta.layer into stage kernels -------------===//
//
// One delta.kernel per schedule: a data-flow graph from the layer's tensors
// (block arguments) to o, ht and chunk states (delta.yield):
//   pre-processing the templates do not do themselves (delta.convert of
//     inputs and initial state, delta.beta_sigmoid, delta.gate),
//   the stages of the schedule's family: chunked (qk_l2norm, gate_cumsum,
//     kkt_inverse, wy, state_scan, chunk_output) or recurrent (qk_l2norm,
//     recurrent_step), unfused (delta-fuse-stages groups them),
//   post-processing (delta.convert of o and the final state).
//
//===----------------------------------------------------------------------===//

#include "Delta/DeltaOps.h"
#include "Delta/Passes.h"
#include "Delta/DeltaCatalogue.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/StringMap.h"

namespace mlir::delta {
#define GEN_PASS_DEF_DELTALOWERSTAGES
#include "Delta/Passes.h.inc"
} // namespace mlir::delta

using namespace mlir;
using namespace mlir::delta;

namespace {

/// The kernel's block arguments: the layer's tensors, in params order.
SmallVector<StringRef> kernelInputs(LayerOp layer) {
  SmallVector<StringRef> in{"q", "k", "v", "beta"};
  if (layer.getGateInKernel())
    in.append({"a", "A_log", "dt_bias"});
  else if (layer.getVariant() != Variant::delta)
    in.push_back("g");
  if (layer.getInitialState())
    in.push_back("h0");
  return in;
}

/// What the kernel returns.
SmallVector<StringRef> kernelOutputs(LayerOp layer) {
  SmallVector<StringRef> out{"o"};
  if (layer.getFinalState())
    out.push_back("ht");
  if (layer.getChunkStates())
    out.push_back("chunk_states");
  return out;
}

/// The data-flow graph of one kernel, unfused: pre-processing, the stages
/// of the schedule's family (chunked: qk_l2norm, gate_cumsum, kkt_inverse,
/// wy, state_scan, chunk_output; recurrent: qk_l2norm, recurrent_step),
/// post-processing, delta.yield.
void buildBody(OpBuilder &b, Location loc, LayerOp layer, ScheduleAttr s,
               Block &body) {
  Type T = b.getType<mlir::delta::TensorType>();
  llvm::StringMap<Value> in;
  for (StringRef name : kernelInputs(layer))
    in[name] = body.addArgument(T, loc);
  Target target = s.getTarget();
  const deltac::Family family = familyOf(s)->family;
  DType tplIn = templateInType(layer, target, family);
  DType tplOut = templateOutType(layer, target, family);
  bool bf16State = layer.getStateDtype() == DType::bf16;
  Value q = in["q"], k = in["k"], v = in["v"], beta = in["beta"];
  Value g = in.lookup("g"), h0 = in.lookup("h0");

  // Pre-processing.
  auto convert = [&](StringRef name, Value x, DType from, DType to) {
    return ConvertOp::create(b, loc, T, b.getStringAttr(name), x,
                             DTypeAttr::get(b.getContext(), from),
                             DTypeAttr::get(b.getContext(), to))
        .getOutput();
  };
  if (layer.getInDtype() != tplIn) {
    q = convert("q", q, layer.getInDtype(), tplIn);
    k = convert("k", k, layer.getInDtype(), tplIn);
    v = convert("v", v, layer.getInDtype(), tplIn);
  }
  if (bf16State && h0)
    h0 = convert("h0", h0, DType::bf16, DType::f32);
  if (layer.getBetaSigmoid())
    beta = BetaSigmoidOp::create(
               b, loc, T,
               BetaRangeAttr::get(b.getContext(), layer.getBetaRange()), beta)
               .getBeta();
  int64_t width = layer.getVariant() == Variant::kda ? layer.getKeyDim() : 1;
  if (layer.getGateInKernel())
    g = GateOp::create(b, loc, T, in["a"], in["A_log"], in["dt_bias"],
                       b.getI64IntegerAttr(width))
            .getG();

  // The stages.
  Value qn = q, kn = k;
  if (layer.getQkL2norm()) {
    auto n = QKNormOp::create(b, loc, T, T, q, k);
    qn = n.getQN();
    kn = n.getKN();
  }
  Value o, ht, chunkStates;
  if (modeOf(s) == Mode::chunked) {
    auto c = b.getI64IntegerAttr(s.getKnob("chunk"));
    Value decay;
    if (g)
      decay = GateCumsumOp::create(b, loc, T, g, c, b.getI64IntegerAttr(width))
                  .getGCum();
    Value A = KKTInverseOp::create(b, loc, T, kn, beta, decay, c).getA();
    auto wy = WYOp::create(b, loc, T, T, A, kn, v, beta, decay, c);
    auto scan = StateScanOp::create(
        b, loc, T, T, T, kn, wy.getW(), wy.getU(), decay, h0, c,
        b.getBoolAttr(layer.getChunkStates()));
    o = ChunkOutputOp::create(b, loc, T, qn, kn, scan.getVNew(), scan.getH(),
                              decay, c)
            .getO();
    ht = scan.getHt();
    chunkStates = scan.getH();
  } else {
    auto step = RecurrentStepOp::create(
        b, loc, T, T, VariantAttr::get(b.getContext(), layer.getVariant()), qn,
        kn, v, beta, g, h0);
    o = step.getO();
    ht = step.getHt();
  }

  // Post-processing.
  if (layer.getOutputDType() != tplOut)
    o = convert("o", o, tplOut, layer.getOutputDType());
  if (bf16State && layer.getFinalState())
    ht = convert("ht", ht, DType::f32, DType::bf16);
  SmallVector<Value> out{o};
  if (layer.getFinalState())
    out.push_back(ht);
  if (layer.getChunkStates())
    out.push_back(chunkStates);
  YieldOp::create(b, loc, out);
}

/// A copy of k with its delta.fused groups inlined: the unfused graph, to
/// compare with a fresh lowering. The caller erases it.
KernelOp unfusedCopy(KernelOp k) {
  auto copy = cast<KernelOp>(k->clone());
  copy.unfuse();
  return copy;
}

struct DeltaLowerStagesPass
    : mlir::delta::impl::DeltaLowerStagesBase<DeltaLowerStagesPass> {
  void runOnOperation() override {
    bool failedAny = false;
    SmallVector<LayerOp> layers;
    getOperation().walk([&](LayerOp l) { layers.push_back(l); });
    // A kernel whose schedule is no longer one of its layer's (an earlier
    // run with other options) is stale and replaced; one that matches a
    // schedule is kept if its body is what lowering produces, an error if
    // not (the stages describe the schedule and cannot be changed by hand).
    DenseMap<Operation *, SmallVector<KernelOp>> kept;
    SmallVector<KernelOp> stale;
    getOperation().walk([&](KernelOp k) {
      auto layer = SymbolTable::lookupNearestSymbolFrom<LayerOp>(
          k->getParentOp(), k.getLayerAttr());
      auto scheds = layer ? layer.getSchedules() : std::nullopt;
      if (scheds && llvm::is_contained(*scheds, k.getSchedule()))
        kept[layer].push_back(k);
      else
        stale.push_back(k);
    });
    for (KernelOp k : stale)
      k.erase();
    for (LayerOp layer : layers) {
      auto scheds = layer.getSchedules();
      if (!scheds || scheds->empty()) {
        layer.emitOpError() << "has no schedule: run delta-select-schedule "
                               "first";
        failedAny = true;
        continue;
      }
      OpBuilder b(layer.getContext());
      b.setInsertionPointAfter(layer);
      for (auto s : scheds->getAsRange<ScheduleAttr>()) {
        std::string name = (layer.getSymName() + "_" + s.getFamily()).str();
        // Built detached, inserted once the name is known to be free.
        OpBuilder detached(layer.getContext());
        auto kernel = KernelOp::create(
            detached, layer.getLoc(), name, layer.getSymName(), s,
            detached.getStrArrayAttr(kernelInputs(layer)),
            detached.getStrArrayAttr(kernelOutputs(layer)));
        Block &body = kernel.getBody().emplaceBlock();
        OpBuilder kb = OpBuilder::atBlockEnd(&body);
        buildBody(kb, layer.getLoc(), layer, s, body);

        KernelOp existing;
        for (KernelOp k : kept.lookup(layer))
          if (k.getSchedule() == s)
            existing = k;
        if (existing) {
          // Kept when it is this lowering, fused or not.
          KernelOp flat = unfusedCopy(existing);
          bool same = OperationEquivalence::isEquivalentTo(
              flat, kernel, OperationEquivalence::IgnoreLocations);
          flat.erase();
          kernel.erase();
          if (!same) {
            existing.emitOpError()
                << "body differs from the stages delta-lower-stages builds "
                   "for its schedule: remove the kernel (it is generated "
                   "from the layer's schedule)";
            failedAny = true;
          }
          b.setInsertionPointAfter(existing);
          continue;
        }
        if (Operation *other = SymbolTable::lookupNearestSymbolFrom(
                layer, StringAttr::get(layer.getContext(), name))) {
          InFlightDiagnostic d = layer.emitOpError()
                                 << "its " << s.getFamily()
                                 << " kernel would be named @" << name
                                 << ", which another symbol already uses: "
                                    "rename the layer or that symbol";
          d.attachNote(other->getLoc()) << "@" << name << " is defined here";
          kernel.erase();
          failedAny = true;
          continue;
        }
        b.insert(kernel);
        b.setInsertionPointAfter(kernel);
      }
    }
    if (failedAny)
      signalPassFailure();
  }
};

} // namespace

//===- LowerStages.cpp - lower delta.layer into stage kernels -------------===//
//
// One delta.kernel per schedule. Its body, in order:
//   host/device pre-processing the templates do not do themselves
//     (delta.convert of inputs and initial state, delta.beta_sigmoid,
//      delta.gate),
//   one delta.fused loop: over chunks (qk_l2norm, gate_cumsum, kkt_inverse,
//     wy, state_scan, chunk_output: the templates fuse all stages per chunk)
//     or over tokens (qk_l2norm, recurrent_step),
//   post-processing (delta.convert of o and the final state).
//
//===----------------------------------------------------------------------===//

#include "Delta/DeltaOps.h"
#include "Delta/Passes.h"
#include "Delta/TuningDB.h"

#include "mlir/IR/Builders.h"

namespace mlir::delta {
#define GEN_PASS_DEF_DELTALOWERSTAGES
#include "Delta/Passes.h.inc"
} // namespace mlir::delta

using namespace mlir;
using namespace mlir::delta;

namespace {

/// The element types the kernel templates compute with, and the
/// conversions needed around them.
struct KernelTypes {
  DType in, out; // what the template reads / writes
};

KernelTypes templateTypes(LayerOp layer, Target t) {
  DType in = layer.getInDtype() == DType::f16 ? DType::f32 : layer.getInDtype();
  DType out = layer.getOutputDType();
  if (t == Target::sm_90a)
    out = in; // the CUDA template writes o in its input type
  else if (out == DType::f16)
    out = DType::f32;
  return {in, out};
}

void buildBody(OpBuilder &b, Location loc, LayerOp layer, ScheduleAttr s) {
  KernelTypes kt = templateTypes(layer, s.getTarget());
  bool bf16State = layer.getStateDtype() == DType::bf16;
  // Pre-processing.
  if (layer.getInDtype() != kt.in)
    for (StringRef t : {"q", "k", "v"})
      ConvertOp::create(b, loc, t, layer.getInDtype(), kt.in);
  if (bf16State && layer.getInitialState())
    ConvertOp::create(b, loc, "h0", DType::bf16, DType::f32);
  if (layer.getBetaSigmoid())
    BetaSigmoidOp::create(b, loc, layer.getBetaRange());
  if (layer.getGateInKernel())
    GateOp::create(b, loc,
                   layer.getVariant() == Variant::kda ? layer.getKeyDim() : 1);

  // The fused loop.
  bool chunked = s.getMode() == Mode::chunked;
  SmallVector<StringRef> names;
  if (layer.getQkL2norm())
    names.push_back("qk_l2norm");
  if (chunked) {
    if (layer.getVariant() != Variant::delta)
      names.push_back("gate_cumsum");
    names.append({"kkt_inverse", "wy", "state_scan", "chunk_output"});
  } else {
    names.push_back("recurrent_step");
  }
  auto fused = FusedOp::create(b, loc, chunked ? "chunks" : "tokens",
                               b.getStrArrayAttr(names));
  Block &fb = fused.getBody().emplaceBlock();
  {
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToEnd(&fb);
    int64_t c = s.getChunk();
    if (layer.getQkL2norm())
      QKNormOp::create(b, loc);
    if (chunked) {
      int64_t width = layer.getVariant() == Variant::kda ? layer.getKeyDim() : 1;
      if (layer.getVariant() != Variant::delta)
        GateCumsumOp::create(b, loc, c, width);
      KKTInverseOp::create(b, loc, c);
      WYOp::create(b, loc, c);
      StateScanOp::create(b, loc, c, layer.getChunkStates());
      ChunkOutputOp::create(b, loc, c);
    } else {
      RecurrentStepOp::create(b, loc, layer.getVariant());
    }
  }

  // Post-processing.
  if (layer.getOutputDType() != kt.out)
    ConvertOp::create(b, loc, "o", kt.out, layer.getOutputDType());
  if (bf16State && layer.getFinalState())
    ConvertOp::create(b, loc, "ht", DType::f32, DType::bf16);
}

/// The body ops of a kernel in generic form, to compare two kernels.
std::string bodyText(KernelOp k) {
  std::string text;
  llvm::raw_string_ostream os(text);
  for (Operation &op : k.getBody().front())
    op.print(os, OpPrintingFlags().printGenericOpForm());
  return text;
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
        std::string name = (layer.getSymName() + "_" +
                            stringifyTarget(s.getTarget()) + "_" +
                            stringifyMode(s.getMode()))
                               .str();
        // Built detached, inserted once the name is known to be free.
        OpBuilder detached(layer.getContext());
        auto kernel = KernelOp::create(detached, layer.getLoc(), name,
                                       layer.getSymName(), s);
        Block &body = kernel.getBody().emplaceBlock();
        OpBuilder kb = OpBuilder::atBlockEnd(&body);
        buildBody(kb, layer.getLoc(), layer, s);

        KernelOp existing;
        for (KernelOp k : kept.lookup(layer))
          if (k.getSchedule() == s)
            existing = k;
        if (existing) {
          bool same = bodyText(existing) == bodyText(kernel);
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
                                 << "its " << stringifyTarget(s.getTarget())
                                 << " " << stringifyMode(s.getMode())
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

//===- DeltaOps.cpp - delta ops and their verifiers -----------------------===//

#include "Delta/DeltaOps.h"
#include "Delta/DeltaCatalogue.h"

#include "mlir/IR/OpImplementation.h"
#include "llvm/ADT/StringExtras.h"

#include <cfloat>
#include <cmath>

using namespace mlir;
using namespace mlir::delta;

#define GET_OP_CLASSES
#include "Delta/DeltaOps.cpp.inc"

double LayerOp::getScaleOrDefault() {
  if (auto s = getScale())
    return s->convertToDouble();
  return 1.0 / std::sqrt(static_cast<double>(getKeyDim()));
}

/// Head counts travel in int32 fields of deltac_fwd_params.
static constexpr int64_t kMaxHeads = 65536;

static bool validHeadDim(int64_t d) {
  return d >= 16 && d <= 256 && d % 16 == 0;
}

static bool isCIdentifier(StringRef s) {
  return !s.empty() && (llvm::isAlpha(s[0]) || s[0] == '_') &&
         llvm::all_of(s, [](char c) { return llvm::isAlnum(c) || c == '_'; });
}

LogicalResult LayerOp::verify() {
  if (!isCIdentifier(getSymName()))
    return emitOpError() << "name '" << getSymName()
                         << "' must be a C identifier (letters, digits and _, "
                            "not starting with a digit): it prefixes the "
                            "generated entry points";
  int64_t h = getHeads();
  if (h < 1 || h > kMaxHeads)
    return emitOpError() << "'heads' must be in 1.." << kMaxHeads << ", got "
                         << h;
  int64_t hv = getNumValueHeads();
  if (hv < 1 || hv > kMaxHeads || hv % h != 0)
    return emitOpError() << "'v_heads' (" << hv
                         << ") must be a multiple of 'heads' (" << h
                         << ") in 1.." << kMaxHeads
                         << ": each q/k head serves v_heads/heads value heads";
  if (!validHeadDim(getKeyDim()))
    return emitOpError() << "'key_dim' must be in 16..256 and a multiple of "
                            "16, got "
                         << getKeyDim();
  if (!validHeadDim(getValueDim()))
    return emitOpError() << "'value_dim' must be in 16..256 and a multiple of "
                            "16, got "
                         << getValueDim();
  if (getStateDtype() == DType::f16)
    return emitOpError() << "'state_dtype' must be f32 or bf16, got f16";
  if (auto s = getScale()) {
    // The generated code holds the scale as a float literal, and a scale of
    // 0.0f means "the default 1/sqrt(K)" to the kernels.
    double v = s->convertToDouble();
    float f = static_cast<float>(v);
    if (!std::isfinite(v) || !std::isfinite(f) || f < FLT_MIN)
      return emitOpError() << "'scale' must be > 0 and a finite normal float "
                              "(1.2e-38..3.4e+38), got "
                           << v;
  }
  if (getGateInKernel() && getVariant() == Variant::delta)
    return emitOpError() << "'gate_in_kernel' needs a decay: allowed with "
                            "variant gated or kda, not delta";
  if (getChunkStates() && getMode() != Mode::chunked)
    return emitOpError()
           << "'chunk_states' needs mode = chunked (only the chunked kernel "
              "has chunk-end states), got mode = "
           << stringifyMode(getMode());
  int64_t dt = getDecodeTokens();
  if (dt < 1 || dt > 8)
    return emitOpError() << "'decode_tokens' must be in 1..8, got " << dt;

  if (auto scheds = getSchedules()) {
    // One kernel per family (it is named after it); the catalogue's
    // check_config for this layer's shapes.
    SmallVector<StringRef> seen;
    SmallVector<Target> unbounded;
    for (auto s : scheds->getAsRange<ScheduleAttr>()) {
      if (llvm::is_contained(seen, s.getFamily()))
        return emitOpError() << "two schedules of family " << s.getFamily()
                             << ": at most one per family";
      seen.push_back(s.getFamily());
      if (s.getMaxTokens() == 0) {
        if (llvm::is_contained(unbounded, s.getTarget()))
          return emitOpError()
                 << "two schedules for target " << targetName(s.getTarget())
                 << " with max_tokens = 0 (no bound): at most one per target "
                    "may be unbounded, the others need max_tokens >= 1";
        unbounded.push_back(s.getTarget());
      }
      deltac::FamilyList allowed =
          deltac::families_for(deviceOf(s.getTarget()),
                               catalogueMode(getMode()));
      const deltac::FamilyInfo *f = familyOf(s);
      // Under mode auto any family of the device may be written in the spec.
      if (getMode() != Mode::automatic &&
          !llvm::is_contained(ArrayRef(allowed.f, allowed.n), f->family)) {
        std::string why;
        deltac::Family unused;
        deltac::default_family(deviceOf(s.getTarget()),
                               catalogueMode(getMode()),
                               problemOf(*this, s.getTarget(), 0, f->family), &unused,
                               &why);
        return emitOpError()
               << "schedule family " << f->name << " is not run by mode = "
               << stringifyMode(getMode()) << " on "
               << targetName(s.getTarget()) << " ("
               << (allowed.n ? "it runs " + familyNames(allowed) : why)
               << ")";
      }
      std::string why = deltac::check_config(
          configOf(s),
          problemOf(*this, s.getTarget(), s.getMaxTokens(), f->family));
      if (!why.empty())
        return emitOpError() << "schedule on " << targetName(s.getTarget())
                             << ": " << why;
    }
  }
  return success();
}

LogicalResult KernelOp::verify() {
  Operation *sym =
      SymbolTable::lookupNearestSymbolFrom((*this)->getParentOp(),
                                           getLayerAttr());
  if (!sym || !isa<LayerOp>(sym))
    return emitOpError() << "'layer' must name a delta.layer, '"
                         << getLayer() << "' does not";
  Block &body = getBody().front();
  if (body.getNumArguments() != getInputs().size())
    return emitOpError() << "has " << body.getNumArguments()
                         << " block arguments but 'inputs' names "
                         << getInputs().size();
  for (BlockArgument a : body.getArguments())
    if (!isa<mlir::delta::TensorType>(a.getType()))
      return emitOpError() << "block arguments must be !delta.tensor";
  auto yield = dyn_cast<YieldOp>(body.getTerminator());
  if (!yield)
    return emitOpError() << "body must end with delta.yield";
  if (yield.getValues().size() != getOutputs().size())
    return emitOpError() << "yields " << yield.getValues().size()
                         << " values but 'outputs' names "
                         << getOutputs().size();
  return success();
}

void KernelOp::unfuse() {
  SmallVector<FusedOp> groups;
  walk([&](FusedOp f) { groups.push_back(f); });
  for (FusedOp f : groups) {
    Block &fb = f.getBody().front();
    auto yield = cast<YieldOp>(fb.getTerminator());
    for (auto [r, y] : llvm::zip(f.getResults(), yield.getValues()))
      r.replaceAllUsesWith(y);
    yield.erase();
    f->getBlock()->getOperations().splice(f->getIterator(),
                                          fb.getOperations());
    f.erase();
  }
}

void KernelOp::getAsmBlockArgumentNames(Region &region,
                                        OpAsmSetValueNameFn setNameFn) {
  auto names = getInputs().getAsValueRange<StringAttr>();
  for (auto [arg, name] : llvm::zip(region.getArguments(), names))
    setNameFn(arg, name);
}

LogicalResult FusedOp::verify() {
  if (getOver() != "chunks" && getOver() != "tokens")
    return emitOpError() << "'over' must be \"chunks\" or \"tokens\", got \""
                         << getOver() << "\"";
  SmallVector<StringRef> names;
  for (Operation &op : getBody().front())
    if (!isa<YieldOp>(op))
      names.push_back(op.getName().stripDialect());
  auto listed = getStages().getAsValueRange<StringAttr>();
  if (!llvm::equal(names, listed))
    return emitOpError() << "'stages' must list the body's ops in order ("
                         << llvm::join(names, ", ") << ")";
  auto yield = dyn_cast<YieldOp>(getBody().front().getTerminator());
  if (!yield || yield.getValues().size() != getNumResults())
    return emitOpError() << "body must end with a delta.yield of its "
                         << getNumResults() << " results";
  return success();
}

//===----------------------------------------------------------------------===//
// Value names in the printed IR
//===----------------------------------------------------------------------===//

void FusedOp::getAsmResultNames(OpAsmSetValueNameFn setNameFn) {
  // Each result after the value it yields (%o, %ht, ...).
  Block &body = getBody().front();
  if (body.empty())
    return;
  auto yield = dyn_cast<YieldOp>(body.back());
  if (!yield)
    return;
  for (auto [result, value] : llvm::zip(getResults(), yield.getValues())) {
    auto *def = value.getDefiningOp();
    auto asmOp = dyn_cast_or_null<OpAsmOpInterface>(def);
    if (!asmOp)
      continue;
    asmOp.getAsmResultNames([&](Value v, StringRef name) {
      if (v == value)
        setNameFn(result, name);
    });
  }
}

void ConvertOp::getAsmResultNames(OpAsmSetValueNameFn setNameFn) {
  setNameFn(getOutput(),
            (getTensor() + "_" + stringifyDType(getTo())).str());
}
void BetaSigmoidOp::getAsmResultNames(OpAsmSetValueNameFn setNameFn) {
  setNameFn(getBeta(), "beta");
}
void GateOp::getAsmResultNames(OpAsmSetValueNameFn setNameFn) {
  setNameFn(getG(), "g");
}
void QKNormOp::getAsmResultNames(OpAsmSetValueNameFn setNameFn) {
  setNameFn(getQN(), "q_n");
  setNameFn(getKN(), "k_n");
}
void GateCumsumOp::getAsmResultNames(OpAsmSetValueNameFn setNameFn) {
  setNameFn(getGCum(), "g_cum");
}
void KKTInverseOp::getAsmResultNames(OpAsmSetValueNameFn setNameFn) {
  setNameFn(getA(), "A");
}
void WYOp::getAsmResultNames(OpAsmSetValueNameFn setNameFn) {
  setNameFn(getW(), "w");
  setNameFn(getU(), "u");
}
void StateScanOp::getAsmResultNames(OpAsmSetValueNameFn setNameFn) {
  setNameFn(getH(), "h");
  setNameFn(getVNew(), "v_new");
  setNameFn(getHt(), "ht");
}
void ChunkOutputOp::getAsmResultNames(OpAsmSetValueNameFn setNameFn) {
  setNameFn(getO(), "o");
}
void RecurrentStepOp::getAsmResultNames(OpAsmSetValueNameFn setNameFn) {
  setNameFn(getO(), "o");
  setNameFn(getHt(), "ht");
}

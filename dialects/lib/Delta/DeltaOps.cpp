//===- DeltaOps.cpp - delta ops and their verifiers -----------------------===//

#include "Delta/DeltaOps.h"

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
    // One kernel per (target, mode): it is named after them.
    SmallVector<std::pair<Target, Mode>> seen;
    SmallVector<Target> unbounded;
    for (auto s : scheds->getAsRange<ScheduleAttr>()) {
      std::pair<Target, Mode> key{s.getTarget(), s.getMode()};
      if (llvm::is_contained(seen, key))
        return emitOpError() << "two schedules for target "
                             << stringifyTarget(s.getTarget()) << " and mode "
                             << stringifyMode(s.getMode())
                             << ": at most one per target and mode";
      seen.push_back(key);
      if (s.getMaxTokens() == 0) {
        if (llvm::is_contained(unbounded, s.getTarget()))
          return emitOpError()
                 << "two schedules for target "
                 << stringifyTarget(s.getTarget())
                 << " with max_tokens = 0 (no bound): at most one per target "
                    "may be unbounded, the others need max_tokens >= 1";
        unbounded.push_back(s.getTarget());
      }
      if (getMode() != Mode::automatic && s.getMode() != getMode())
        return emitOpError() << "schedule mode " << stringifyMode(s.getMode())
                             << " contradicts the layer's mode = "
                             << stringifyMode(getMode());
      if (s.getMode() == Mode::chunked && s.getTarget() != Target::cpu)
        return emitOpError() << "no chunked kernel exists for target "
                             << stringifyTarget(s.getTarget())
                             << " (only cpu has one; use mode = recurrent)";
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
  return success();
}

LogicalResult FusedOp::verify() {
  if (getOver() != "chunks" && getOver() != "tokens")
    return emitOpError() << "'over' must be \"chunks\" or \"tokens\", got \""
                         << getOver() << "\"";
  SmallVector<StringRef> names;
  for (Operation &op : getBody().front())
    names.push_back(op.getName().stripDialect());
  auto listed = getStages().getAsValueRange<StringAttr>();
  if (!llvm::equal(names, listed))
    return emitOpError() << "'stages' must list the body's ops in order ("
                         << llvm::join(names, ", ") << ")";
  return success();
}

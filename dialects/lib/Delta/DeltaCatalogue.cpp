//===- DeltaCatalogue.cpp - the dialect's view of the kernel catalogue ----===//

#include "Delta/DeltaCatalogue.h"

#include "llvm/ADT/StringSwitch.h"

using namespace mlir;
using namespace mlir::delta;

std::optional<Target> mlir::delta::parseTargetName(StringRef name) {
  return llvm::StringSwitch<std::optional<Target>>(name)
      .Case("cpu", Target::cpu)
      .Cases({"cuda:sm_90a", "sm_90a"}, Target::sm_90a)
      .Default(std::nullopt);
}

StringRef mlir::delta::targetName(Target t) {
  return t == Target::cpu ? "cpu" : "cuda:sm_90a";
}

deltac::Device mlir::delta::deviceOf(Target t) {
  return t == Target::cpu ? deltac::Device::CPU : deltac::Device::CUDA;
}

deltac::Mode mlir::delta::catalogueMode(Mode m) {
  switch (m) {
  case Mode::automatic:
    return deltac::Mode::Auto;
  case Mode::chunked:
    return deltac::Mode::Chunked;
  case Mode::recurrent:
    return deltac::Mode::Recurrent;
  }
  return deltac::Mode::Auto;
}

Mode mlir::delta::dialectMode(deltac::Mode m) {
  switch (m) {
  case deltac::Mode::Auto:
    return Mode::automatic;
  case deltac::Mode::Chunked:
    return Mode::chunked;
  case deltac::Mode::Recurrent:
    return Mode::recurrent;
  }
  return Mode::automatic;
}

const deltac::FamilyInfo *mlir::delta::familyOf(ScheduleAttr s) {
  return deltac::family_by_name(s.getFamily().str());
}

Mode mlir::delta::modeOf(ScheduleAttr s) {
  const deltac::FamilyInfo *f = familyOf(s);
  return f ? dialectMode(f->mode) : Mode::automatic;
}

deltac::KernelConfig mlir::delta::configOf(ScheduleAttr s) {
  deltac::KernelConfig c;
  if (const deltac::FamilyInfo *f = familyOf(s))
    c.family = f->family;
  for (int i = 0; i < deltac::kKnobCount; ++i)
    c.knob(i) = int32_t(s.getKnob(deltac::kKnobNames[i]));
  return c;
}

ScheduleAttr mlir::delta::scheduleOf(MLIRContext *ctx, Target t,
                                     const deltac::KernelConfig &c,
                                     int64_t maxTokens, StringRef source) {
  const deltac::FamilyInfo &f = deltac::family_info(c.family);
  Builder b(ctx);
  SmallVector<NamedAttribute> knobs;
  for (int i = 0; i < deltac::kKnobCount; ++i)
    if (f.knobs & (1u << i))
      knobs.push_back(
          b.getNamedAttr(deltac::kKnobNames[i], b.getI64IntegerAttr(c.knob(i))));
  return ScheduleAttr::get(ctx, t, f.name, b.getDictionaryAttr(knobs),
                           maxTokens, source);
}

static int32_t paramsDType(DType d) {
  switch (d) {
  case DType::f32:
    return DELTAC_F32;
  case DType::bf16:
    return DELTAC_BF16;
  case DType::f16:
    return DELTAC_F16;
  }
  return DELTAC_F32;
}

namespace {
/// The catalogue's problem of `layer` before any conversion: its own dtypes.
deltac::Problem ownProblem(LayerOp layer) {
  deltac::Problem p;
  p.variant = int32_t(layer.getVariant()); // same numbering as params.h
  p.K = int32_t(layer.getKeyDim());
  p.V = int32_t(layer.getValueDim());
  p.H = int32_t(layer.getHeads());
  p.HV = int32_t(layer.getNumValueHeads());
  p.in_dtype = paramsDType(layer.getInDtype());
  p.beta_two = layer.getBetaRange() == BetaRange::zero_two;
  return p;
}
} // namespace

DType mlir::delta::templateInType(LayerOp layer, Target, deltac::Family f) {
  if (layer.getInDtype() == DType::f16 ||
      deltac::f32_copies(ownProblem(layer), f))
    return DType::f32;
  return layer.getInDtype();
}

DType mlir::delta::templateOutType(LayerOp layer, Target t, deltac::Family f) {
  if (t == Target::sm_90a)
    return templateInType(layer, t, f); // the CUDA template writes o as its input
  DType out = layer.getOutputDType();
  return out == DType::f16 ? DType::f32 : out;
}

deltac::Problem mlir::delta::problemOf(LayerOp layer, Target t,
                                       int64_t maxTokens, deltac::Family f) {
  deltac::Problem p = ownProblem(layer);
  p.in_dtype = paramsDType(templateInType(layer, t, f));
  p.out_dtype = paramsDType(templateOutType(layer, t, f));
  p.state_dtype = DELTAC_F32; // bf16 states are converted around the call
  p.state_layout = layer.getStateLayout() == StateLayout::kv ? DELTAC_STATE_KV
                                                             : DELTAC_STATE_VK;
  p.seqs = 0;
  p.max_seqlen = maxTokens;
  return p;
}

std::string mlir::delta::familyNames(const deltac::FamilyList &l) {
  std::string s;
  for (int i = 0; i < l.n; ++i)
    s += std::string(i ? ", " : "") + deltac::family_info(l.f[i]).name;
  return s.empty() ? std::string("none") : s;
}

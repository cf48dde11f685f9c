//===- DeltaCatalogue.h - the dialect's view of the kernel catalogue -*- C++ -*-===//
//
// The kernel catalogue (catalogue/include/deltac/catalogue.h, LLVM-free) is
// the one table of kernel families, their knobs, legality and default rule.
// These helpers translate between it and the dialect: targets, layers and
// #delta.schedule attributes.
//
//===----------------------------------------------------------------------===//
#ifndef DELTA_DELTACATALOGUE_H
#define DELTA_DELTACATALOGUE_H

#include "Delta/DeltaOps.h"

#include "deltac/catalogue.h"

#include <optional>
#include <string>

namespace mlir::delta {

/// Parses "cpu", "cuda:sm_90a" (or "sm_90a").
std::optional<Target> parseTargetName(llvm::StringRef name);
/// The user-facing name of a target ("cpu", "cuda:sm_90a").
llvm::StringRef targetName(Target t);
/// The catalogue device a target runs on.
deltac::Device deviceOf(Target t);
deltac::Mode catalogueMode(Mode m);
Mode dialectMode(deltac::Mode m);

/// The family a schedule names (nullptr if unknown: the verifier rejects
/// such schedules).
const deltac::FamilyInfo *familyOf(ScheduleAttr s);
/// chunked or recurrent: what the schedule's family computes as.
Mode modeOf(ScheduleAttr s);
/// The schedule as a catalogue config.
deltac::KernelConfig configOf(ScheduleAttr s);
/// A schedule for config `c`; knobs are the ones the family reads.
ScheduleAttr scheduleOf(MLIRContext *ctx, Target t,
                        const deltac::KernelConfig &c, int64_t maxTokens,
                        llvm::StringRef source);

/// The problem a kernel of family `f` for `layer` on `t` solves, in the
/// element types the templates see (f16 q/k/v and bf16 states are converted
/// around the call, and 16-bit q/k/v where the catalogue runs the family on
/// f32 copies: deltac::f32_copies; CUDA writes o in its input type).
/// `maxTokens`: the longest sequence the kernel is dispatched for (0 = any).
deltac::Problem problemOf(LayerOp layer, Target t, int64_t maxTokens,
                          deltac::Family f);
/// The template's element types for a kernel of family `f` for `layer` on `t`.
DType templateInType(LayerOp layer, Target t, deltac::Family f);
DType templateOutType(LayerOp layer, Target t, deltac::Family f);

/// "mode = chunked on target cuda:sm_90a: <catalogue reason>" style text of
/// the family names of a list, e.g. "cpu_decode, cpu_recurrent".
std::string familyNames(const deltac::FamilyList &l);

} // namespace mlir::delta

#endif // DELTA_DELTACATALOGUE_H

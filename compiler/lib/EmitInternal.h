//===- EmitInternal.h - shared pieces of the emitters -----------*- C++ -*-===//
#ifndef DELTAC_EMITINTERNAL_H
#define DELTAC_EMITINTERNAL_H

#include "Delta/DeltaOps.h"

#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/raw_ostream.h"

#include <string>

namespace deltac {

/// One delta.kernel read back into what the emitters need.
struct KernelPlan {
  mutable mlir::delta::KernelOp op;
  mutable mlir::delta::ScheduleAttr sched;
  mutable llvm::SmallVector<mlir::delta::ConvertOp> pre, post;
  mutable mlir::delta::BetaSigmoidOp betaSigmoid; // null if absent
  mutable mlir::delta::GateOp gate;               // null if absent
  bool chunked = false;
  bool l2norm = false;
  bool chunkStates = false; // state_scan saves chunk-end states
  // Element types the template reads and writes after the conversions.
  mlir::delta::DType tplIn, tplOut;
};

/// Reads the body of `kernel`; fails with a diagnostic on anything the
/// templates cannot run.
mlir::FailureOr<KernelPlan> readKernel(mlir::delta::KernelOp kernel,
                                       mlir::delta::LayerOp layer);

/// "DELTAC_VARIANT_GATED" etc.
const char *variantEnum(mlir::delta::Variant v);
/// "DELTAC_F32" etc.
const char *dtypeEnum(mlir::delta::DType d);
/// Entry-point names.
std::string cpuEntry(mlir::delta::LayerOp layer);
std::string cudaEntry(mlir::delta::LayerOp layer);
/// Extra entry parameters: chunk_states (when the layer saves them), then
/// A_log and dt_bias (in-kernel gating); "" when none.
std::string extraParams(mlir::delta::LayerOp layer);
std::string extraArgs(mlir::delta::LayerOp layer);

/// Element count expression of tensor t ("nQK", "nVO" or "nH"), names
/// declared by emitSizes.
const char *countOf(llvm::StringRef t);
/// Writes the element counts nQK, nVO, nH, nBeta of `p` (kernel bodies).
void emitSizes(llvm::raw_ostream &os);
/// Writes the start of an extern "C" entry point up to the spec checks:
/// signature (`extra` after the params, e.g. "void *stream_, "), null
/// params, matchSpec, the compiled scale, the A_log/dt_bias check. Leaves
/// `deltac_fwd_params p` in scope.
void emitEntryPrologue(llvm::raw_ostream &os, mlir::delta::LayerOp layer,
                       llvm::StringRef entry, llvm::StringRef extra);
/// Writes the deltac::check_params call on `view`.
void emitCheckParams(llvm::raw_ostream &os, mlir::delta::LayerOp layer,
                     bool cuSeqlensOnHost = true);
/// Writes `fail`, `matchSpec` (params vs the compiled spec) and, when
/// `cpuLongest`, `longestSequence` into an anonymous namespace.
void emitCommonPrelude(llvm::raw_ostream &os, mlir::delta::LayerOp layer);
/// Writes the statements that build `view` (what check_params sees) from
/// `p` for the template types of `plan`.
void emitCheckView(llvm::raw_ostream &os, const KernelPlan &plan);
/// Open / close a try block around the kernel calls, so that an allocation
/// failure becomes an error return (when exceptions are enabled).
void emitTry(llvm::raw_ostream &os);
void emitCatch(llvm::raw_ostream &os, mlir::delta::LayerOp layer);
/// Writes the dispatch on the longest sequence to `run_<kernel>` functions.
void emitDispatch(llvm::raw_ostream &os, llvm::ArrayRef<KernelPlan> plans,
                  const std::string &args);

std::string emitCpuSource(mlir::delta::LayerOp layer,
                          llvm::ArrayRef<KernelPlan> plans);
std::string emitCudaSource(mlir::delta::LayerOp layer,
                           llvm::ArrayRef<KernelPlan> plans);
std::string emitHeader(mlir::delta::LayerOp layer, bool cpu, bool cuda);

} // namespace deltac

#endif // DELTAC_EMITINTERNAL_H

//===- EmitInternal.h - shared pieces of the emitters -----------*- C++ -*-===//
#ifndef DELTAC_EMITINTERNAL_H
#define DELTAC_EMITINTERNAL_H

#include "Delta/DeltaCatalogue.h"
#include "Delta/DeltaOps.h"

#include "mlir/Dialect/EmitC/IR/EmitC.h"
#include "mlir/IR/Builders.h"

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
  const deltac::FamilyInfo *family = nullptr; // the schedule's family
  deltac::KernelConfig config;                // its knobs
  bool chunked = false;
  bool l2norm = false;
  bool chunkStates = false; // state_scan saves chunk-end states
  // Element types the template reads and writes after the conversions.
  mlir::delta::DType tplIn, tplOut;
};

/// The template instantiation that runs a kernel: the catalogue family's
/// entry (FamilyInfo::entry) and its template arguments.
struct TemplateCall {
  std::string header; // include that declares the entry
  std::string callee; // e.g. "deltac::cpu::recurrent_tiled"
  llvm::SmallVector<std::pair<std::string, std::string>> args; // name, value
  std::string instantiation() const; // callee<args...>
};
TemplateCall templateCall(mlir::delta::LayerOp layer, const KernelPlan &plan);

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
/// Extra entry parameters (C type, name): chunk_states (when the layer saves
/// them; on CUDA then chunk_states_count), then A_log and dt_bias (in-kernel
/// gating).
llvm::SmallVector<std::pair<std::string, std::string>>
extraParamList(mlir::delta::LayerOp layer, bool cuda);
/// The same as C parameter text ("float *chunk_states, "); "" when none.
std::string extraParams(mlir::delta::LayerOp layer, bool cuda);
/// The chunk knob of the layer's schedule for `target` (0: none).
int64_t chunkOf(mlir::delta::LayerOp layer, mlir::delta::Target target);

/// Element count expression of tensor t ("nQK", "nVO" or "nH"), names
/// declared by emitSizes.
const char *countOf(llvm::StringRef t);
/// Writes the element counts nQK, nVO, nH, nBeta of `p` (kernel bodies).
void emitSizes(llvm::raw_ostream &os);
/// Writes the start of an extern "C" entry point body up to the spec
/// checks: null params, `deltac_fwd_params p`, matchSpec, the compiled
/// scale, the A_log/dt_bias check (names params, err, err_len, A_log,
/// dt_bias in scope).
void emitEntryPrologue(llvm::raw_ostream &os, mlir::delta::LayerOp layer,
                       llvm::StringRef entry);
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
/// Text pieces of the generated sources that EmitC does not express:
/// comments, helper definitions, host/device pre- and post-processing
/// around a template call (compiler/lib/EmitCpp.cpp, EmitCuda.cpp).
std::string cpuKernelComment(mlir::delta::LayerOp layer, const KernelPlan &k);
std::string cpuPreText(mlir::delta::LayerOp layer, const KernelPlan &k);
std::string cpuPostText(mlir::delta::LayerOp layer, const KernelPlan &k);
std::string cpuHelpers(llvm::ArrayRef<KernelPlan> plans);
std::string cudaKernelComment(mlir::delta::LayerOp layer, const KernelPlan &k);
std::string cudaPreText(mlir::delta::LayerOp layer, const KernelPlan &k);
std::string cudaPostText(mlir::delta::LayerOp layer, const KernelPlan &k);
std::string cudaOuterHelpers(llvm::ArrayRef<KernelPlan> plans);
std::string cudaInnerHelpers(llvm::ArrayRef<KernelPlan> plans);

/// Builds `emitc.file "<layer>_cpu.cpp"` (or `_cuda.cu`) at the builder's
/// insertion point: includes, helper text, one emitc.func per kernel that
/// calls the catalogue family's entry template (emitc.call_opaque with
/// template arguments), and the extern "C" entry point that checks the
/// params (deltac::check_params) and dispatches on the longest sequence
/// (emitc.if).
mlir::emitc::FileOp buildSourceFile(mlir::OpBuilder &b, mlir::Location loc,
                                    mlir::delta::LayerOp layer,
                                    llvm::ArrayRef<KernelPlan> plans,
                                    bool cuda);
/// The plans of every kernel of `layer` in `module`, per target.
mlir::LogicalResult readLayerKernels(mlir::ModuleOp module,
                                     mlir::delta::LayerOp layer,
                                     llvm::SmallVectorImpl<KernelPlan> &cpu,
                                     llvm::SmallVectorImpl<KernelPlan> &cuda);
/// The C++ text of file `id` in `module` (mlir::emitc::translateToCpp).
mlir::FailureOr<std::string> printSourceFile(mlir::Operation *module,
                                             llvm::StringRef id);

std::string emitHeader(mlir::delta::LayerOp layer, bool cpu, bool cuda);

} // namespace deltac

#endif // DELTAC_EMITINTERNAL_H

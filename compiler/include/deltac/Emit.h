//===- Emit.h - C++/CUDA emission for lowered delta modules -----*- C++ -*-===//
//
// Turns a module lowered by delta-lower-stages into source files that
// instantiate the hand-written kernel templates:
//   <layer>.h         extern "C" entry points (one header per layer)
//   <layer>_cpu.cpp   deltac::cpu::chunked / recurrent
//   <layer>_cuda.cu   deltac::cuda::recurrent
//   manifest.json     kernels, template parameters, schedules, entry points,
//                     the spec
//
//===----------------------------------------------------------------------===//
#ifndef DELTAC_EMIT_H
#define DELTAC_EMIT_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Support/LLVM.h"

#include <string>
#include <vector>

namespace deltac {

struct GeneratedFile {
  std::string name; // file name inside the output directory
  std::string text;
};

/// Emits every file for every delta.layer in `module` (which must have been
/// lowered). Reports problems as diagnostics at the offending op.
mlir::LogicalResult emitPackage(mlir::ModuleOp module,
                                std::vector<GeneratedFile> &files);

/// Options of the deltac pipeline (delta-select-schedule options).
struct PipelineOptions {
  std::string target = "cpu"; // cpu, cuda:sm_90a or all
  std::string mode;           // empty: the layer's mode
  int64_t chunk = 0, tileK = 0, tileV = 0, warps = 0, stages = 0, split = 0,
          fuse = 0, scan = 0;
  std::string tuningDb;
};

/// Registers `delta-to-emitc` (delta.kernel ops -> one emitc.file per layer
/// and target) with the pass registry (delta-opt).
void registerDeltaToEmitCPass();

/// Runs delta-select-schedule (with `opts`), delta-lower-stages and
/// delta-fuse-stages (fuse = all: what the templates run).
mlir::LogicalResult runPipeline(mlir::ModuleOp module,
                                const PipelineOptions &opts);

} // namespace deltac

#endif // DELTAC_EMIT_H

//===- Passes.h - delta dialect passes --------------------------*- C++ -*-===//
#ifndef DELTA_PASSES_H
#define DELTA_PASSES_H

#include "Delta/DeltaDialect.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

namespace mlir::delta {
#define GEN_PASS_DECL
#include "Delta/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "Delta/Passes.h.inc"
} // namespace mlir::delta

#endif // DELTA_PASSES_H

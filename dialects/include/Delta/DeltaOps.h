//===- DeltaOps.h - delta dialect ops ---------------------------*- C++ -*-===//
#ifndef DELTA_DELTAOPS_H
#define DELTA_DELTAOPS_H

#include "Delta/DeltaAttrs.h"
#include "Delta/DeltaDialect.h"
#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/IR/SymbolTable.h"

#define GET_TYPEDEF_CLASSES
#include "Delta/DeltaOpsTypes.h.inc"

#define GET_OP_CLASSES
#include "Delta/DeltaOps.h.inc"

#endif // DELTA_DELTAOPS_H

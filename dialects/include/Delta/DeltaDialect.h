//===- DeltaDialect.h - the delta dialect -----------------------*- C++ -*-===//
#ifndef DELTA_DELTADIALECT_H
#define DELTA_DELTADIALECT_H

#include "mlir/IR/Dialect.h"

#include "Delta/DeltaOpsDialect.h.inc"

#endif // DELTA_DELTADIALECT_H

//===- DeltaAttrs.h - delta enums and attributes ----------------*- C++ -*-===//
#ifndef DELTA_DELTAATTRS_H
#define DELTA_DELTAATTRS_H

#include "mlir/IR/Attributes.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"

#include "Delta/DeltaEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "Delta/DeltaAttrs.h.inc"

#endif // DELTA_DELTAATTRS_H

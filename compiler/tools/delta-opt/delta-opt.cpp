//===- delta-opt.cpp - mlir-opt for the delta dialect ---------------------===//

#include "Delta/DeltaDialect.h"
#include "Delta/Passes.h"
#include "deltac/Emit.h"

#include "mlir/Dialect/EmitC/IR/EmitC.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"

int main(int argc, char **argv) {
  mlir::delta::registerDeltaPasses();
  deltac::registerDeltaToEmitCPass();
  mlir::DialectRegistry registry;
  registry.insert<mlir::delta::DeltaDialect, mlir::emitc::EmitCDialect>();
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "delta dialect optimizer\n", registry));
}

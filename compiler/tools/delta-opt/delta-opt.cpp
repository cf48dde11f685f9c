//===- delta-opt.cpp - mlir-opt for the delta dialect ---------------------===//

#include "Delta/DeltaDialect.h"
#include "Delta/Passes.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"

int main(int argc, char **argv) {
  mlir::delta::registerDeltaPasses();
  mlir::DialectRegistry registry;
  registry.insert<mlir::delta::DeltaDialect>();
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "delta dialect optimizer\n", registry));
}

//===- DeltaToEmitC.cpp - the delta-to-emitc conversion -------------------===//
//
// Replaces the delta.kernel ops of every top-level layer by one emitc.file
// per target (`<layer>_cpu.cpp`, `<layer>_cuda.cu`), the form deltac prints
// with mlir::emitc::translateToCpp (`mlir-translate --mlir-to-cpp
// --file-id=<layer>_cpu.cpp` prints the same text). The layers stay: they
// are the spec the header and the manifest are written from.
//
//===----------------------------------------------------------------------===//

#include "EmitInternal.h"
#include "deltac/Emit.h"

#include "mlir/Pass/Pass.h"

using namespace mlir;
using namespace mlir::delta;

namespace {

struct DeltaToEmitCPass
    : PassWrapper<DeltaToEmitCPass, OperationPass<ModuleOp>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(DeltaToEmitCPass)

  StringRef getArgument() const final { return "delta-to-emitc"; }
  StringRef getDescription() const final {
    return "Convert each layer's delta.kernel ops into an emitc.file per "
           "target (entry point, dispatch, template calls)";
  }
  void getDependentDialects(DialectRegistry &registry) const override {
    registry.insert<emitc::EmitCDialect>();
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<LayerOp> layers(module.getOps<LayerOp>());
    OpBuilder b = OpBuilder::atBlockEnd(module.getBody());
    for (LayerOp layer : layers) {
      SmallVector<deltac::KernelPlan> cpu, cuda;
      if (failed(deltac::readLayerKernels(module, layer, cpu, cuda)))
        return signalPassFailure();
      if (!cpu.empty())
        deltac::buildSourceFile(b, layer.getLoc(), layer, cpu, false);
      if (!cuda.empty())
        deltac::buildSourceFile(b, layer.getLoc(), layer, cuda, true);
      for (auto plans : {&cpu, &cuda})
        for (deltac::KernelPlan &k : *plans)
          k.op.erase();
    }
  }
};

} // namespace

void deltac::registerDeltaToEmitCPass() {
  PassRegistration<DeltaToEmitCPass>();
}

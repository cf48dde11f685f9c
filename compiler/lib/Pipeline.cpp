//===- Pipeline.cpp - the deltac pass pipeline ----------------------------===//

#include "deltac/Emit.h"

#include "Delta/Passes.h"

#include "mlir/Pass/PassManager.h"

using namespace mlir;

LogicalResult deltac::runPipeline(ModuleOp module,
                                  const PipelineOptions &opts) {
  PassManager pm(module.getContext());
  delta::DeltaSelectScheduleOptions so;
  so.target = opts.target;
  so.mode = opts.mode;
  so.chunk = opts.chunk;
  so.tileK = opts.tileK;
  so.tileV = opts.tileV;
  so.warps = opts.warps;
  so.stages = opts.stages;
  so.split = opts.split;
  so.fuse = opts.fuse;
  so.scan = opts.scan;
  so.tuningDb = opts.tuningDb;
  pm.addPass(delta::createDeltaSelectSchedule(so));
  pm.addPass(delta::createDeltaLowerStages());
  // The catalogue's templates run every stage of a kernel in one launch.
  delta::DeltaFuseStagesOptions fo;
  fo.fuse = "all";
  pm.addPass(delta::createDeltaFuseStages(fo));
  return pm.run(module);
}

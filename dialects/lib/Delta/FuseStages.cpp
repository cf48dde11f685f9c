//===- FuseStages.cpp - group stages into delta.fused kernels -------------===//
//
// Which stages of a kernel share one launch is a choice (the `fuse` option:
// all, chunk_local, none). Each group becomes a delta.fused region that
// reads values from the kernel and yields those used after it.
//
//===----------------------------------------------------------------------===//

#include "Delta/DeltaOps.h"
#include "Delta/Passes.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/SetVector.h"

namespace mlir::delta {
#define GEN_PASS_DEF_DELTAFUSESTAGES
#include "Delta/Passes.h.inc"
} // namespace mlir::delta

using namespace mlir;
using namespace mlir::delta;

namespace {

bool isLoopStage(Operation *op) {
  return isa<QKNormOp, GateCumsumOp, KKTInverseOp, WYOp, StateScanOp,
             ChunkOutputOp, RecurrentStepOp>(op);
}

/// Moves `ops` (consecutive in one block) into a new delta.fused.
void wrap(ArrayRef<Operation *> ops, StringRef over) {
  llvm::SmallPtrSet<Operation *, 8> inGroup(ops.begin(), ops.end());
  SmallVector<Value> escaping;
  SmallVector<StringRef> names;
  for (Operation *op : ops) {
    names.push_back(op->getName().stripDialect());
    for (Value r : op->getResults())
      if (llvm::any_of(r.getUsers(),
                       [&](Operation *u) { return !inGroup.contains(u); }))
        escaping.push_back(r);
  }
  OpBuilder b(ops.front());
  Location loc = ops.front()->getLoc();
  auto f = FusedOp::create(b, loc, ValueRange(escaping).getTypes(), over,
                           b.getStrArrayAttr(names));
  Block *body = &f.getBody().emplaceBlock();
  for (Operation *op : ops)
    op->moveBefore(body, body->end());
  b.setInsertionPointToEnd(body);
  YieldOp::create(b, loc, escaping);
  for (auto [v, r] : llvm::zip(escaping, f.getResults()))
    v.replaceUsesWithIf(r, [&](OpOperand &use) {
      return !f->isProperAncestor(use.getOwner());
    });
}

struct DeltaFuseStagesPass
    : mlir::delta::impl::DeltaFuseStagesBase<DeltaFuseStagesPass> {
  using DeltaFuseStagesBase::DeltaFuseStagesBase;

  void runOnOperation() override {
    if (fuse != "all" && fuse != "chunk_local" && fuse != "none") {
      getOperation().emitError()
          << "delta-fuse-stages: fuse must be all, chunk_local or none, got '"
          << fuse << "'";
      return signalPassFailure();
    }
    getOperation().walk([&](KernelOp k) {
      k.unfuse();
      SmallVector<Operation *> stages;
      for (Operation &op : k.getBody().front())
        if (isLoopStage(&op))
          stages.push_back(&op);
      if (stages.empty())
        return;
      bool chunked = llvm::any_of(
          stages, [](Operation *op) { return isa<StateScanOp>(op); });
      StringRef over = chunked ? "chunks" : "tokens";
      SmallVector<SmallVector<Operation *>> groups;
      if (fuse == "none") {
        for (Operation *op : stages)
          groups.push_back({op});
      } else if (fuse == "chunk_local" && chunked) {
        groups.emplace_back();
        for (Operation *op : stages) {
          if (isa<StateScanOp, ChunkOutputOp>(op))
            groups.push_back({op});
          else
            groups.front().push_back(op);
        }
      } else {
        groups.push_back(stages);
      }
      for (auto &g : groups)
        if (!g.empty())
          wrap(g, over);
    });
  }
};

} // namespace

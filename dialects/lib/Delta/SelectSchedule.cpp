//===- SelectSchedule.cpp - attach #delta.schedule to layers --------------===//
//
// Per layer and target: defaults, then the tuning database, then schedules
// already on the layer (written in the spec, or from an earlier run), then
// explicit options (each later source wins). mode = auto on the CPU follows
// deltac::kCpuRecurrentMaxTokens (runtime/include/deltac/schedule.h, the rule
// the runtime's mode=auto uses too): 0 gives one unbounded recurrent
// schedule; a bound n gives a chunked schedule plus a recurrent one for
// sequences of at most n tokens. CUDA has only a recurrent kernel so far.
//
//===----------------------------------------------------------------------===//

#include "Delta/DeltaOps.h"
#include "Delta/Passes.h"
#include "Delta/TuningDB.h"

#include "deltac/schedule.h"

#include <algorithm>

namespace mlir::delta {
#define GEN_PASS_DEF_DELTASELECTSCHEDULE
#include "Delta/Passes.h.inc"
} // namespace mlir::delta

using namespace mlir;
using namespace mlir::delta;

namespace {

struct Choice {
  Mode mode;
  int64_t chunk, tileK, tileV, warps, stages, maxTokens;
  StringRef source;
};

/// Default schedule of one kernel on one target.
Choice defaults(LayerOp layer, Target target, Mode mode) {
  int64_t k = layer.getKeyDim(), v = layer.getValueDim();
  Choice c{mode, 0, k, v, 1, 1, 0, "default"};
  if (mode == Mode::chunked)
    c.chunk = deltac::kCpuDefaultChunk;
  if (target == Target::sm_90a) {
    // Recurrent CUDA kernel: the state column block of a CTA.
    c.tileV = std::min<int64_t>(v, 32);
    c.warps = 4;
  }
  return c;
}

struct DeltaSelectSchedulePass
    : mlir::delta::impl::DeltaSelectScheduleBase<DeltaSelectSchedulePass> {
  using DeltaSelectScheduleBase::DeltaSelectScheduleBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (failed(checkOptions(module)))
      return signalPassFailure();
    bool failedAny = false;
    module.walk([&](LayerOp layer) {
      if (failed(selectFor(layer)))
        failedAny = true;
    });
    if (failedAny)
      signalPassFailure();
  }

private:
  SmallVector<Target> targets;
  std::optional<Mode> modeOverride;
  std::vector<TuningRecord> db;

  LogicalResult checkOptions(ModuleOp module) {
    targets.clear();
    if (target == "all") {
      targets = {Target::cpu, Target::sm_90a};
    } else if (auto t = parseTargetName(target)) {
      targets = {*t};
    } else {
      return module.emitError() << "delta-select-schedule: unknown target '"
                                << target
                                << "': expected cpu, cuda:sm_90a or all";
    }
    modeOverride.reset();
    if (!mode.empty()) {
      modeOverride = symbolizeMode(mode);
      if (!modeOverride)
        return module.emitError()
               << "delta-select-schedule: unknown mode '" << mode
               << "': expected auto, chunked or recurrent";
    }
    if (chunk != 0 && chunk != 16 && chunk != 32 && chunk != 64)
      return module.emitError() << "delta-select-schedule: chunk must be 0 "
                                   "(auto), 16, 32 or 64, got "
                                << static_cast<int64_t>(chunk);
    for (auto [name, val] : {std::pair{"tile-k", (int64_t)tileK},
                             std::pair{"tile-v", (int64_t)tileV}})
      if (val != 0 && (val < 16 || val > 256 || val % 16 != 0))
        return module.emitError()
               << "delta-select-schedule: " << name
               << " must be 0 (auto) or a multiple of 16 in 16..256, got "
               << val;
    if (warps < 0 || warps > 32)
      return module.emitError() << "delta-select-schedule: warps must be 0 "
                                   "(auto) or in 1..32, got "
                                << static_cast<int64_t>(warps);
    if (stages < 0 || stages > 8)
      return module.emitError() << "delta-select-schedule: stages must be 0 "
                                   "(auto) or in 1..8, got "
                                << static_cast<int64_t>(stages);
    db.clear();
    if (!tuningDb.empty()) {
      auto loaded = loadTuningDB(tuningDb);
      if (!loaded)
        return module.emitError() << "delta-select-schedule: "
                                  << llvm::toString(loaded.takeError());
      db = std::move(*loaded);
    }
    return success();
  }

  const TuningRecord *lookup(LayerOp layer, Target t, Mode m) const {
    for (const TuningRecord &r : db)
      if (r.target == t && r.variant == layer.getVariant() &&
          r.keyDim == int64_t(layer.getKeyDim()) &&
          r.valueDim == int64_t(layer.getValueDim()) &&
          r.inDtype == layer.getInDtype() && (!r.mode || *r.mode == m))
        return &r;
    return nullptr;
  }

  /// `given`: the layer's own schedule for (t, m), if any; it wins over the
  /// defaults and the tuning database.
  Choice choose(LayerOp layer, Target t, Mode m, ScheduleAttr given) const {
    Choice c = defaults(layer, t, m);
    if (given) {
      c.chunk = given.getChunk();
      c.tileK = given.getTileK();
      c.tileV = given.getTileV();
      c.warps = given.getWarps();
      c.stages = given.getStages();
      c.maxTokens = given.getMaxTokens();
      c.source = given.getSource();
    } else if (const TuningRecord *r = lookup(layer, t, m)) {
      if (m == Mode::chunked && r->chunk)
        c.chunk = r->chunk;
      c.tileK = r->tileK;
      c.tileV = r->tileV;
      c.warps = r->warps;
      c.stages = r->stages;
      c.source = "tuning-db";
    }
    auto over = [&](int64_t opt, int64_t &field) {
      if (opt) {
        field = opt;
        c.source = "override";
      }
    };
    if (m == Mode::chunked)
      over(chunk, c.chunk);
    over(tileK, c.tileK);
    over(tileV, c.tileV);
    over(warps, c.warps);
    over(stages, c.stages);
    return c;
  }

  LogicalResult selectFor(LayerOp layer) {
    Mode m = modeOverride ? *modeOverride : layer.getMode();
    if (layer.getChunkStates() && m != Mode::chunked)
      return layer.emitOpError()
             << "'chunk_states' needs mode = chunked, but the schedule mode is "
             << stringifyMode(m);
    MLIRContext *ctx = layer.getContext();
    SmallVector<ScheduleAttr> given;
    if (auto old = layer.getSchedules())
      llvm::append_range(given, old->getAsRange<ScheduleAttr>());
    auto givenFor = [&](Target t, Mode km) {
      for (ScheduleAttr s : given)
        if (s.getTarget() == t && s.getMode() == km)
          return s;
      return ScheduleAttr();
    };
    SmallVector<Attribute> scheds;
    for (Target t : targets) {
      SmallVector<std::pair<Mode, int64_t>> kernels; // mode, max tokens
      SmallVector<ScheduleAttr> ownForTarget;
      for (ScheduleAttr s : given)
        if (s.getTarget() == t)
          ownForTarget.push_back(s);
      if (!modeOverride && !ownForTarget.empty()) {
        // The layer's own schedules for t: the kernel set as given.
        for (ScheduleAttr s : ownForTarget)
          kernels.push_back({s.getMode(), s.getMaxTokens()});
      } else if (t == Target::sm_90a) {
        if (m == Mode::chunked)
          return layer.emitOpError()
                 << "mode = chunked on target cuda:sm_90a: no chunked CUDA "
                    "kernel exists yet; use mode = recurrent or auto (auto "
                    "uses the recurrent kernel on CUDA)";
        kernels.push_back({Mode::recurrent, 0});
      } else if (m == Mode::automatic) {
        // decode_tokens (1..8) is information for the manifest: the bound
        // is kCpuRecurrentMaxTokens (0: the recurrent kernel takes all).
        if (deltac::kCpuRecurrentMaxTokens == 0) {
          kernels.push_back({Mode::recurrent, 0});
        } else {
          kernels.push_back({Mode::chunked, 0});
          kernels.push_back({Mode::recurrent, deltac::kCpuRecurrentMaxTokens});
        }
      } else {
        kernels.push_back({m, 0});
      }
      for (auto [km, maxTokens] : kernels) {
        ScheduleAttr own = givenFor(t, km);
        Choice c = choose(layer, t, km, own);
        if (!own || modeOverride)
          c.maxTokens = maxTokens;
        auto emitErr = [&]() { return layer.emitOpError(); };
        ScheduleAttr s = ScheduleAttr::getChecked(
            emitErr, ctx, t, km, c.chunk, c.tileK, c.tileV, c.warps, c.stages,
            c.maxTokens, c.source);
        if (!s)
          return failure();
        scheds.push_back(s);
      }
    }
    if (modeOverride)
      layer.setMode(m);
    layer.setSchedulesAttr(ArrayAttr::get(ctx, scheds));
    return success();
  }
};

} // namespace

//===- SelectSchedule.cpp - attach #delta.schedule to layers --------------===//
//
// Per layer and target, everything from the kernel catalogue
// (deltac/catalogue.h): the families the mode runs (families_for: on the
// CPU under auto, cpu_decode for calls of at most one token, then
// cpu_recurrent; on CUDA under auto, cuda_recurrent for calls of at most
// kCudaAutoRecurrentMaxTokens tokens, then cuda_chunked, with
// cuda_recurrent unbounded for shapes cuda_chunked cannot run), their
// default knobs (default_config), legality
// (check_family / check_config) and the error when no family exists
// (default_family). Each later source wins: defaults, the tuning database
// (deltac/tuning_db.h), schedules already on the layer, explicit options.
//
//===----------------------------------------------------------------------===//

#include "Delta/DeltaCatalogue.h"
#include "Delta/DeltaOps.h"
#include "Delta/Passes.h"

#include "deltac/tuning_db.h"

namespace mlir::delta {
#define GEN_PASS_DEF_DELTASELECTSCHEDULE
#include "Delta/Passes.h.inc"
} // namespace mlir::delta

using namespace mlir;
using namespace mlir::delta;

namespace {

/// One kernel of the set: its family and dispatch bound.
struct KernelSlot {
  deltac::Family family;
  int64_t maxTokens;
};

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
  deltac::TuningDB db;
  int64_t knobOpt[deltac::kKnobCount] = {};

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
    // In deltac::kKnobNames order.
    const int64_t opts[deltac::kKnobCount] = {chunk,  tileK, tileV, warps,
                                              stages, split, fuse,  scan};
    static_assert(deltac::kKnobCount == 8, "one option per catalogue knob");
    for (int i = 0; i < deltac::kKnobCount; ++i) {
      knobOpt[i] = opts[i];
      if (opts[i] < 0 || opts[i] > INT32_MAX)
        return module.emitError()
               << "delta-select-schedule: " << deltac::kKnobNames[i]
               << " must be 0 (default) or a value the catalogue lists, got "
               << opts[i];
    }
    db = deltac::TuningDB();
    if (!tuningDb.empty()) {
      std::string err;
      if (!deltac::load_tuning_db(tuningDb, &db, &err))
        return module.emitError() << "delta-select-schedule: " << err;
    }
    return success();
  }

  /// The tuning-db record for family f on layer's shapes, bounded like the
  /// kernel (its bucket holds maxTokens; the smallest such bucket wins).
  const deltac::TuningRecord *lookup(LayerOp layer, Target t,
                                     deltac::Family f,
                                     int64_t maxTokens) const {
    deltac::Problem p = problemOf(layer, t, maxTokens, f);
    const deltac::TuningRecord *best = nullptr;
    auto bucket = [](int64_t x) { return x ? x : INT64_MAX; };
    for (const deltac::TuningRecord &r : db.records) {
      if (r.config.family != f || r.variant != int32_t(layer.getVariant()) ||
          r.K != p.K || r.V != p.V ||
          r.in_dtype != p.in_dtype /* template type */)
        continue;
      if (bucket(r.max_tokens) < bucket(maxTokens))
        continue; // the record does not hold every length this kernel takes
      if (!deltac::check_config(r.config, p).empty())
        continue;
      if (!best || bucket(r.max_tokens) < bucket(best->max_tokens))
        best = &r;
    }
    return best;
  }

  /// The kernel set mode m gives on t: the catalogue's families in order,
  /// each bounded by the longest sequence the mode dispatches to it, up to
  /// the first unbounded one (a family listed again unbounded, as the
  /// fallback of one that cannot run, loses its bound).
  FailureOr<SmallVector<KernelSlot>> kernelSet(LayerOp layer, Target t,
                                               Mode m) {
    deltac::Device d = deviceOf(t);
    deltac::FamilyList l = deltac::families_for(d, catalogueMode(m));
    SmallVector<KernelSlot> set;
    for (int i = 0; i < l.n; ++i) {
      const int64_t bound = l.max_tokens[i];
      if (!deltac::check_family(l.f[i], problemOf(layer, t, bound, l.f[i]))
               .empty())
        continue;
      auto same = llvm::find_if(
          set, [&](const KernelSlot &k) { return k.family == l.f[i]; });
      if (same != set.end())
        same->maxTokens = bound;
      else
        set.push_back({l.f[i], bound});
      if (bound == 0)
        return set;
    }
    std::string why;
    deltac::Family unused = deltac::Family::CpuRecurrent;
    // The reason the list's first family gives (in its own element types).
    deltac::default_family(d, catalogueMode(m),
                           problemOf(layer, t, 0, l.n ? l.f[0] : unused),
                           &unused, &why);
    return layer.emitOpError()
           << "mode = " << stringifyMode(m) << " on target " << targetName(t)
           << ": " << why;
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
    SmallVector<std::pair<Target, KernelSlot>> slots;
    for (Target t : targets) {
      SmallVector<ScheduleAttr> own;
      for (ScheduleAttr s : given)
        if (s.getTarget() == t)
          own.push_back(s);
      if (!modeOverride && !own.empty()) {
        // The layer's own schedules for t: the kernel set as given.
        for (ScheduleAttr s : own)
          slots.push_back({t, {familyOf(s)->family, s.getMaxTokens()}});
        continue;
      }
      auto set = kernelSet(layer, t, m);
      if (failed(set))
        return failure();
      for (KernelSlot k : *set)
        slots.push_back({t, k});
    }

    // A knob option must be read by some kernel chosen for the layer.
    for (int i = 0; i < deltac::kKnobCount; ++i) {
      if (!knobOpt[i])
        continue;
      bool read = llvm::any_of(slots, [&](auto &ts) {
        return deltac::family_info(ts.second.family).knobs & (1u << i);
      });
      if (!read) {
        std::string chosen;
        for (auto &[t, k] : slots)
          chosen += std::string(chosen.empty() ? "" : ", ") +
                    deltac::family_info(k.family).name;
        return layer.emitOpError()
               << "delta-select-schedule: option "
               << deltac::kKnobNames[i] << " = " << knobOpt[i]
               << " is read by no kernel chosen for this layer (" << chosen
               << ")";
      }
    }

    SmallVector<Attribute> scheds;
    for (auto &[t, slot] : slots) {
      ScheduleAttr own;
      for (ScheduleAttr s : given)
        if (s.getTarget() == t && familyOf(s)->family == slot.family)
          own = s;
      int64_t maxTokens = own && !modeOverride ? own.getMaxTokens()
                                               : slot.maxTokens;
      deltac::Problem p = problemOf(layer, t, maxTokens, slot.family);
      deltac::KernelConfig c = deltac::default_config(slot.family, p);
      StringRef source = "default";
      if (own) {
        c = configOf(own);
        source = own.getSource();
      } else if (const deltac::TuningRecord *r =
                     lookup(layer, t, slot.family, maxTokens)) {
        c = r->config;
        source = "tuning-db";
      }
      const deltac::FamilyInfo &fi = deltac::family_info(slot.family);
      for (int i = 0; i < deltac::kKnobCount; ++i)
        if (knobOpt[i] && (fi.knobs & (1u << i))) {
          c.knob(i) = int32_t(knobOpt[i]);
          source = "override";
        }
      std::string why = deltac::check_config(c, p);
      if (!why.empty())
        return layer.emitOpError()
               << "delta-select-schedule: on " << targetName(t) << ": " << why;
      // Beta above 1: the knobs the kernel runs (16-bit CUDA: scan 5),
      // whatever the sources say.
      if (p.beta_two)
        c = deltac::call_knobs(c, p);
      scheds.push_back(scheduleOf(ctx, t, c, maxTokens, source));
    }
    if (modeOverride)
      layer.setMode(m);
    layer.setSchedulesAttr(ArrayAttr::get(ctx, scheds));
    return success();
  }
};

} // namespace

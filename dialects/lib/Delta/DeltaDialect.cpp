//===- DeltaDialect.cpp - the delta dialect -------------------------------===//

#include "Delta/DeltaDialect.h"
#include "Delta/DeltaAttrs.h"
#include "Delta/DeltaCatalogue.h"
#include "Delta/DeltaOps.h"

#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::delta;

#include "Delta/DeltaOpsDialect.cpp.inc"
#include "Delta/DeltaEnums.cpp.inc"
#define GET_ATTRDEF_CLASSES
#include "Delta/DeltaAttrs.cpp.inc"
#define GET_TYPEDEF_CLASSES
#include "Delta/DeltaOpsTypes.cpp.inc"

void DeltaDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "Delta/DeltaOps.cpp.inc"
      >();
  addTypes<
#define GET_TYPEDEF_LIST
#include "Delta/DeltaOpsTypes.cpp.inc"
      >();
  addAttributes<
#define GET_ATTRDEF_LIST
#include "Delta/DeltaAttrs.cpp.inc"
      >();
}

int64_t ScheduleAttr::getKnob(StringRef name) const {
  if (auto v = getKnobs().getAs<IntegerAttr>(name))
    return v.getInt();
  return 0;
}

LogicalResult
ScheduleAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                     Target target, StringRef family, DictionaryAttr knobs,
                     int64_t maxTokens, StringRef source) {
  const deltac::FamilyInfo *f = deltac::family_by_name(family.str());
  if (!f) {
    std::string list;
    for (const deltac::FamilyInfo &x : deltac::kFamilies)
      list += std::string(list.empty() ? "" : ", ") + x.name;
    return emitError() << "schedule family '" << family
                       << "' is not in the kernel catalogue (" << list << ")";
  }
  if (deviceOf(target) != f->device)
    return emitError() << "schedule family " << f->name << " runs on "
                       << deltac::device_name(f->device) << ", not on target "
                       << targetName(target);
  if (!knobs)
    return emitError() << "schedule knobs must be a dictionary";
  for (NamedAttribute a : knobs) {
    int i = 0;
    while (i < deltac::kKnobCount && a.getName() != deltac::kKnobNames[i])
      ++i;
    if (i == deltac::kKnobCount || !(f->knobs & (1u << i))) {
      std::string read;
      for (int j = 0; j < deltac::kKnobCount; ++j)
        if (f->knobs & (1u << j))
          read += std::string(read.empty() ? "" : ", ") + deltac::kKnobNames[j];
      return emitError() << "schedule family " << f->name << " has no knob '"
                         << a.getName().getValue() << "' (it reads: "
                         << (read.empty() ? std::string("none") : read) << ")";
    }
    if (!isa<IntegerAttr>(a.getValue()))
      return emitError() << "schedule knob '" << a.getName().getValue()
                         << "' must be an integer";
  }
  for (int i = 0; i < deltac::kKnobCount; ++i) {
    if (!(f->knobs & (1u << i)))
      continue;
    const deltac::KnobValues &vals = f->values[i];
    auto v = knobs.getAs<IntegerAttr>(deltac::kKnobNames[i]);
    // A knob whose values hold 0 (split, fuse, scan: added later) may be
    // absent.
    if (!v && vals.contains(0))
      continue;
    if (!v)
      return emitError() << "schedule family " << f->name << " needs knob '"
                         << deltac::kKnobNames[i] << "'";
    int64_t x = v.getInt();
    if (x < INT32_MIN || x > INT32_MAX || !vals.contains(int32_t(x))) {
      std::string list;
      for (int j = 0; j < vals.n; ++j)
        list += (j ? ", " : "") + std::to_string(vals.v[j]);
      return emitError() << "schedule family " << f->name << ": "
                         << deltac::kKnobNames[i] << " = " << x
                         << ", expected one of " << list;
    }
  }
  if (maxTokens < 0)
    return emitError() << "schedule max_tokens must be >= 0 (0 = unbounded), "
                          "got "
                       << maxTokens;
  if (f->max_tokens && (maxTokens < 1 || maxTokens > f->max_tokens))
    return emitError() << "schedule family " << f->name
                       << " takes sequences of at most " << f->max_tokens
                       << " tokens: max_tokens must be in 1.." << f->max_tokens
                       << ", got " << maxTokens;
  if (source != "default" && source != "tuning-db" && source != "override" &&
      source != "spec")
    return emitError() << "schedule source must be default, tuning-db, "
                          "override or spec, got '"
                       << source << "'";
  return success();
}

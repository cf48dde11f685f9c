//===- DeltaDialect.cpp - the delta dialect -------------------------------===//

#include "Delta/DeltaDialect.h"
#include "Delta/DeltaAttrs.h"
#include "Delta/DeltaOps.h"

#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::delta;

#include "Delta/DeltaOpsDialect.cpp.inc"
#include "Delta/DeltaEnums.cpp.inc"
#define GET_ATTRDEF_CLASSES
#include "Delta/DeltaAttrs.cpp.inc"

void DeltaDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "Delta/DeltaOps.cpp.inc"
      >();
  addAttributes<
#define GET_ATTRDEF_LIST
#include "Delta/DeltaAttrs.cpp.inc"
      >();
}

static bool validTile(int64_t x) { return x >= 16 && x <= 256 && x % 16 == 0; }

LogicalResult
ScheduleAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                     Target target, Mode mode, int64_t chunk, int64_t tileK,
                     int64_t tileV, int64_t warps, int64_t stages,
                     int64_t maxTokens, StringRef source) {
  if (mode == Mode::automatic)
    return emitError() << "schedule mode must be chunked or recurrent "
                          "(auto is resolved into one schedule per mode)";
  if (mode == Mode::chunked && chunk != 16 && chunk != 32 && chunk != 64)
    return emitError() << "chunked schedule: chunk must be 16, 32 or 64, got "
                       << chunk;
  if (mode == Mode::recurrent && chunk != 0)
    return emitError() << "recurrent schedule: chunk must be 0, got " << chunk;
  if (!validTile(tileK) || !validTile(tileV))
    return emitError() << "schedule tiles must be multiples of 16 in 16..256, "
                          "got tile_k = "
                       << tileK << ", tile_v = " << tileV;
  if (warps < 1 || warps > 32)
    return emitError() << "schedule warps must be in 1..32, got " << warps;
  if (stages < 1 || stages > 8)
    return emitError() << "schedule stages must be in 1..8, got " << stages;
  if (maxTokens < 0)
    return emitError() << "schedule max_tokens must be >= 0 (0 = unbounded), "
                          "got "
                       << maxTokens;
  if (source != "default" && source != "tuning-db" && source != "override" &&
      source != "spec")
    return emitError() << "schedule source must be default, tuning-db, "
                          "override or spec, got '"
                       << source << "'";
  return success();
}

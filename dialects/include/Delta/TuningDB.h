//===- TuningDB.h - tuning database for delta schedules ---------*- C++ -*-===//
//
// A tuning database is a JSON file:
//   {"format": "deltac-tuning-db", "version": 1,
//    "records": [{"target": "cpu", "variant": "gated", "key_dim": 128,
//                 "value_dim": 128, "in_dtype": "bf16",
//                 "mode": "chunked",            // optional: both if absent
//                 "chunk": 64, "tile_k": 128, "tile_v": 128,
//                 "warps": 1, "stages": 1,
//                 "provenance": {...}}]}        // optional, not read
// Records are keyed by (target, variant, key_dim, value_dim, in_dtype[,
// mode]); the first matching record wins. Every field is checked on load.
//
//===----------------------------------------------------------------------===//
#ifndef DELTA_TUNINGDB_H
#define DELTA_TUNINGDB_H

#include "Delta/DeltaAttrs.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <optional>
#include <string>
#include <vector>

namespace mlir::delta {

struct TuningRecord {
  Target target;
  Variant variant;
  int64_t keyDim, valueDim;
  DType inDtype;
  std::optional<Mode> mode; // chunked or recurrent; nullopt = both
  int64_t chunk, tileK, tileV, warps, stages;
};

/// Loads and validates a tuning database; the error names the file, the
/// record and the field.
llvm::Expected<std::vector<TuningRecord>> loadTuningDB(llvm::StringRef path);

/// Parses "cpu", "cuda:sm_90a" (or "sm_90a").
std::optional<Target> parseTargetName(llvm::StringRef name);
/// The user-facing name of a target ("cpu", "cuda:sm_90a").
llvm::StringRef targetName(Target t);

} // namespace mlir::delta

#endif // DELTA_TUNINGDB_H

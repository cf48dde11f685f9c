// Internal: which kernel config a call runs. The catalogue's default rule
// (deltac/catalogue.h), or a tuning-database record when a database is
// loaded (deltac_load_tuning_db or DELTAC_TUNING_DB) and the record is
// precompiled in this runtime.
#ifndef DELTAC_RUNTIME_SELECT_H
#define DELTAC_RUNTIME_SELECT_H

#include "deltac/catalogue.h"
#include "deltac/runtime.h"
#include "deltac/tuning_db.h"

#include <memory>
#include <string>

namespace deltac {
namespace rt {

// The process's tuning database: db is null when none is loaded; error says
// why the one named by DELTAC_TUNING_DB could not be loaded ("" otherwise).
struct DbSnapshot {
  std::shared_ptr<const TuningDB> db;
  std::string source; // its path
  std::string error;
};
DbSnapshot tuning_db();
// deltac_load_tuning_db: path null or "" unloads. On failure nothing changes.
bool load_tuning_db(const char *path, std::string *error);

struct Choice {
  KernelConfig config;
  bool tuned = false; // a database record chose it
  std::string note;   // "" or why the database was not used
};

// The config device d runs prob with under opt (mode, chunk). False with
// *error when no family of d can run it.
bool choose_config(Device d, const deltac_options &opt, const Problem &prob,
                   Choice *out, std::string *error);

// Whether this build ships a CUDA kernel for prob (any knob values): the
// catalogue's family rules and its precompiled list.
bool cuda_has_kernel(const Problem &prob);

// "cuda_recurrent tile_v=16 warps=4": a config for messages.
std::string config_string(const KernelConfig &c);

} // namespace rt
} // namespace deltac

#endif // DELTAC_RUNTIME_SELECT_H

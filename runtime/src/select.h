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
#include <vector>

namespace deltac {
namespace rt {

// The process's tuning database: db is null when none is loaded; error says
// why the one named by DELTAC_TUNING_DB could not be loaded ("" otherwise).
// usable[d]: the records of device d whose env matches this machine and
// build (deltac/env.h), with their indexes in db; the only ones ever run.
struct DbSnapshot {
  std::shared_ptr<const TuningDB> db;
  std::shared_ptr<const TuningDB> usable[2];
  std::shared_ptr<const std::vector<size_t>> usableIndex[2];
  std::string source; // its path
  std::string error;
};
DbSnapshot tuning_db();
// deltac_load_tuning_db: path null or "" unloads. On failure nothing changes.
bool load_tuning_db(const char *path, std::string *error);
// The loaded database's saved-states choice for a backward of these dims
// (TuningDB::lookup_backward over the records whose env matches this machine
// and build): 1 keep, 0 recompute, -1 no record.
int tuned_saved_states(int32_t variant, int32_t K, int32_t V, int32_t in_dtype, int32_t HV,
                       int64_t seqlen);

struct Choice {
  KernelConfig config;
  // The K, V config runs: the call's, or on CUDA the padded pair
  // (shipped_family) when no instance has the call's own.
  int32_t K = 0, V = 0;
  bool tuned = false;  // a database record chose it
  int32_t threads = 0; // the record's CPU threads (0 = none)
  CpuIsa isa = CpuIsa::generic; // CPU: the instruction-set instance to run
  std::string note;    // "" or why the database (or part of a record) was not used
};

// options.config as a KernelConfig: false with *error when the family name
// is unknown (no family: *present = false, true).
bool config_from_options(const deltac_options &opt, KernelConfig *out,
                         bool *present, std::string *error);

// The config device d runs prob with under opt (config, mode, chunk). False
// with *error when no family of d can run it, or options.config is not
// legal and precompiled for prob.
bool choose_config(Device d, const deltac_options &opt, const Problem &prob,
                   Choice *out, std::string *error);

// The default rule's family for prob on d under m among the families whose
// default config this runtime ships (precompiled); false with *why if none.
// On CUDA, when no family has an instance of prob's K, V, the first one
// that can runs it padded with zero channels to a (Kp, Vp) it ships
// (padded_dims): *run (when not null) is the problem the family runs, prob
// or prob with K, V padded.
bool shipped_family(Device d, Mode m, const Problem &prob, Family *out,
                    std::string *why, Problem *run = nullptr);
// CUDA family f: the precompiled (Kp >= K, Vp >= V) with the least Kp * Vp
// (then the least Kp) whose default config f's rules accept; false if none.
// The delta rule is exact under zero padding (runtime/src/cuda_pad.cu).
bool padded_dims(Family f, const Problem &prob, Problem *padded);
// options.deterministic (batch-invariant): the one family d runs prob with
// under m whatever the sequences' lengths, where that differs from the
// default rule: CPU auto / recurrent: cpu_recurrent (never cpu_decode).
// False: the default rule. On CUDA that is always the case: under auto each
// sequence runs the family its own length picks (a varlen call is a mixed
// batch, runtime.cpp), and both families run a batch-invariant plan.
bool invariant_family(Device d, Mode m, const Problem &prob, Family *out);
// "" when CUDA has a precompiled kernel for prob under mode m (the
// default rule's family and config), else why not.
std::string cuda_kernel_refusal(const Problem &prob, Mode m);

// "cuda_recurrent tile_v=16 warps=4": a config for messages.
std::string config_string(const KernelConfig &c);

} // namespace rt
} // namespace deltac

#endif // DELTAC_RUNTIME_SELECT_H

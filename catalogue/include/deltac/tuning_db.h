// The tuning database: measured kernel configs per problem, read by the
// runtime (DELTAC_TUNING_DB or an explicit path) and by the compiler's
// delta-select-schedule, written by the autotuner. LLVM-free (nlohmann-json).
//
//   {"format": "deltac-tuning-db", "version": 2,
//    "records": [{"family": "cuda_recurrent", "variant": "gated",
//                 "key_dim": 128, "value_dim": 128, "in_dtype": "bf16",
//                 "max_tokens": 0,           // size bucket: longest sequence
//                                            // it holds for (0 = any)
//                 "tile_v": 16, "warps": 4,  // exactly the family's knobs
//                 "time_us": 12.5,           // optional
//                 "threads": 2,              // optional, CPU: threads it
//                                            // was measured with
//                 "isa": "avx512",           // optional, CPU: the
//                                            // instruction-set instance
//                                            // (absent: the catalogue's
//                                            // rule, cpu_isa_for)
//                 "env": {"cpu": "...", ...}}],  // optional: string values
//    "backward": [{"variant": "delta", "key_dim": 64, "value_dim": 64,
//                  "in_dtype": "bf16", "v_heads": 32, "max_tokens": 4096,
//                  "saved_states": "keep",    // or "recompute"
//                  "time_us": 2881.0, "other_us": 2944.0,  // optional
//                  "env": {...}}]}            // optional, as above
// "backward" (optional) holds the backward's saved-states choice
// (BackwardRecord).
// "env" names the machine and build a record holds for (the autotuner writes
// it: docs/autotune.md); this reader keeps it as strings, the runtime
// compares it with the running machine (runtime/src/select.cpp).
// Every field is checked on load against the catalogue; the error names the
// file, the record and the field.
#ifndef DELTAC_TUNING_DB_H
#define DELTAC_TUNING_DB_H

#include "deltac/catalogue.h"

#include <map>
#include <string>
#include <vector>

namespace deltac {

struct TuningRecord {
  int32_t variant = 0, K = 0, V = 0, in_dtype = 0;
  int64_t max_tokens = 0; // 0 = any length
  KernelConfig config;
  double time_us = 0; // 0 = not recorded
  int32_t threads = 0; // CPU threads it was measured with (0 = not recorded)
  std::string isa;     // CPU instance (kCpuIsaNames) it ran, "" = the rule's
  std::map<std::string, std::string> env; // empty = none recorded
};

// The CUDA chunked backward's saved-states option (deltac_options.
// saved_states, deltac_saved_states_pay): keep the chunk states the forward
// writes, or let the backward recompute them. A memory / time choice the
// catalogue offers where bwd_saves_states holds (deltac/backward_rules.h);
// deltac-tune --backward measures both and writes the pick.
struct BackwardRecord {
  int32_t variant = 0, K = 0, V = 0, in_dtype = 0;
  int32_t HV = 0;         // value heads it was measured with
  int64_t max_tokens = 0; // bucket: tokens per sequence it holds for (0 = any)
  bool keep = false;      // "saved_states": "keep" or "recompute"
  double time_us = 0;     // forward + backward with the pick (0 = not recorded)
  double other_us = 0;    // ... with the other choice (0 = not recorded)
  std::map<std::string, std::string> env; // empty = none recorded
};

struct TuningDB {
  std::vector<TuningRecord> records;
  std::vector<BackwardRecord> backward;

  // The record for p on device d under mode m: same variant, K, V and
  // in_dtype, a family of d that m allows, legal for p (check_config), and
  // among those the smallest bucket that holds p.max_seqlen (unbounded
  // last); nullptr when none.
  const TuningRecord *lookup(Device d, Mode m, const Problem &p) const;
  // The backward record for these dims and value heads whose bucket is the
  // smallest holding seqlen tokens per sequence; nullptr when none.
  const BackwardRecord *lookup_backward(int32_t variant, int32_t K, int32_t V,
                                        int32_t in_dtype, int32_t HV,
                                        int64_t seqlen) const;
};

// Parse JSON text; `name` names the source in messages. On failure returns
// false and *error says what and where; *out is untouched.
bool parse_tuning_db(const std::string &text, const std::string &name,
                     TuningDB *out, std::string *error);
bool load_tuning_db(const std::string &path, TuningDB *out, std::string *error);
// JSON text of db (parse_tuning_db reads it back to the same records).
std::string format_tuning_db(const TuningDB &db);
// Writes atomically (temporary file + rename).
bool save_tuning_db(const std::string &path, const TuningDB &db,
                    std::string *error);

const char *variant_name(int32_t variant); // "delta", "gated", "kda"
const char *dtype_name(int32_t dtype);     // "f32", "bf16", "f16", "fp8_e4m3"

} // namespace deltac

#endif // DELTAC_TUNING_DB_H

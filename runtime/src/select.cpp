// Config choice: the catalogue's default rule or a tuning-database record.
#include "select.h"

#include <cstdlib>
#include <mutex>

namespace deltac {
namespace rt {
namespace {

struct DbState {
  std::mutex mu;
  bool initialized = false; // env read, or deltac_load_tuning_db called
  DbSnapshot current;
};

DbState &state() {
  static DbState s;
  return s;
}

// Reads DELTAC_TUNING_DB on first use unless a database was set explicitly.
void initFromEnv(DbState &s) {
  if (s.initialized)
    return;
  s.initialized = true;
  const char *path = std::getenv("DELTAC_TUNING_DB");
  if (!path || !*path)
    return;
  auto db = std::make_shared<TuningDB>();
  std::string err;
  s.current.source = path;
  if (deltac::load_tuning_db(path, db.get(), &err))
    s.current.db = std::move(db);
  else
    s.current.error = "DELTAC_TUNING_DB: " + err;
}

} // namespace

DbSnapshot tuning_db() {
  DbState &s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  initFromEnv(s);
  return s.current;
}

bool load_tuning_db(const char *path, std::string *error) {
  DbSnapshot next;
  if (path && *path) {
    auto db = std::make_shared<TuningDB>();
    if (!deltac::load_tuning_db(path, db.get(), error))
      return false;
    next.db = std::move(db);
    next.source = path;
  }
  DbState &s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  s.initialized = true;
  s.current = std::move(next);
  return true;
}

std::string config_string(const KernelConfig &c) {
  const FamilyInfo &f = family_info(c.family);
  std::string s = f.name;
  for (int i = 0; i < kKnobCount; ++i)
    if (f.knobs & (1u << i))
      s += std::string(" ") + kKnobNames[i] + "=" + std::to_string(c.knob(i));
  return s;
}

bool choose_config(Device d, const deltac_options &opt, const Problem &prob,
                   Choice *out, std::string *error) {
  *out = Choice{};
  const Mode m = opt.chunk ? Mode::Chunked : static_cast<Mode>(opt.mode);
  if (opt.chunk) { // an explicit chunk size wins over the database
    out->config.family = Family::CpuChunked;
    out->config.chunk = opt.chunk;
    *error = check_config(out->config, prob);
    return error->empty();
  }
  Family f;
  if (!default_family(d, m, prob, &f, error))
    return false;
  out->config = default_config(f, prob);

  DbSnapshot db = tuning_db();
  if (!db.error.empty()) {
    out->note = db.error + "; the default rule ran";
    return true;
  }
  if (!db.db)
    return true;
  const TuningRecord *r = db.db->lookup(d, m, prob);
  if (!r)
    return true;
  if (!precompiled(r->config, prob)) {
    out->note = "tuning db '" + db.source + "': record " +
                std::to_string(r - db.db->records.data()) + " (" +
                config_string(r->config) +
                ") is not precompiled in this runtime; the default config (" +
                config_string(out->config) + ") ran";
    return true;
  }
  out->config = r->config;
  out->tuned = true;
  return true;
}

bool cuda_has_kernel(const Problem &prob) {
  if (!check_family(Family::CudaRecurrent, prob).empty())
    return false;
  return precompiled(default_config(Family::CudaRecurrent, prob), prob);
}

} // namespace rt
} // namespace deltac

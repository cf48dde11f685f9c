// Config choice: the catalogue's default rule or a tuning-database record.
#include "select.h"
#include "dispatch.h"

#include "deltac/env.h"

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

// Splits db's records by device into those whose env matches this machine
// and build (deltac/env.h) and the rest, which are never run.
void partition(DbSnapshot *s) {
  for (Device d : {Device::CPU, Device::CUDA}) {
    auto usable = std::make_shared<TuningDB>();
    auto index = std::make_shared<std::vector<size_t>>();
    for (size_t i = 0; i < s->db->records.size(); ++i) {
      const TuningRecord &r = s->db->records[i];
      if (family_info(r.config.family).device == d &&
          env_mismatch(d, r.env, current_env(d)).empty()) {
        usable->records.push_back(r);
        index->push_back(i);
      }
    }
    if (d == Device::CUDA) // the backward's records: CUDA only
      for (const BackwardRecord &r : s->db->backward)
        if (env_mismatch(d, r.env, current_env(d)).empty())
          usable->backward.push_back(r);
    s->usable[int(d)] = std::move(usable);
    s->usableIndex[int(d)] = std::move(index);
  }
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
  if (deltac::load_tuning_db(path, db.get(), &err)) {
    s.current.db = std::move(db);
    partition(&s.current);
  } else
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
    partition(&next);
  }
  DbState &s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  s.initialized = true;
  s.current = std::move(next);
  return true;
}

int tuned_saved_states(int32_t variant, int32_t K, int32_t V, int32_t in_dtype, int32_t HV,
                       int64_t seqlen) {
  DbSnapshot db = tuning_db();
  if (!db.db)
    return -1;
  const BackwardRecord *r = db.usable[int(Device::CUDA)]->lookup_backward(
      variant, K, V, in_dtype, HV, seqlen);
  return r ? int(r->keep) : -1;
}

std::string config_string(const KernelConfig &c) {
  const FamilyInfo &f = family_info(c.family);
  std::string s = f.name;
  for (int i = 0; i < kKnobCount; ++i)
    if (f.knobs & (1u << i))
      s += std::string(" ") + kKnobNames[i] + "=" + std::to_string(c.knob(i));
  return s;
}

bool config_from_options(const deltac_options &opt, KernelConfig *out,
                         bool *present, std::string *error) {
  const deltac_kernel_config &k = opt.config;
  *present = k.family && *k.family;
  if (!*present)
    return true;
  const FamilyInfo *f = family_by_name(k.family);
  if (!f) {
    std::string list;
    for (const FamilyInfo &x : kFamilies)
      list += std::string(list.empty() ? "" : ", ") + x.name;
    *error = std::string("options.config.family = '") + k.family +
             "': expected one of " + list;
    return false;
  }
  *out = KernelConfig{};
  out->family = f->family;
  out->chunk = k.chunk, out->tile_k = k.tile_k, out->tile_v = k.tile_v;
  out->warps = k.warps, out->stages = k.stages, out->split = k.split;
  out->fuse = k.fuse, out->scan = k.scan;
  return true;
}

// options.config.isa: *out = the instance named, or the rule's for c; false
// with *error when it is unknown, given for a CUDA family, or not runnable.
static bool isa_from_options(const deltac_options &opt, const KernelConfig &c,
                             const Problem &prob, CpuIsa *out,
                             std::string *error) {
  const FamilyInfo &f = family_info(c.family);
  const char *name = opt.config.isa;
  if (!name || !*name) {
    if (f.device == Device::CPU)
      *out = cpu_isa_for(c.family, prob);
    return true;
  }
  if (f.device != Device::CPU) {
    *error = std::string("options.config.isa = '") + name + "': " + f.name +
             " runs on CUDA (leave isa NULL)";
    return false;
  }
  if (!cpu_isa_by_name(name, out)) {
    *error = std::string("options.config.isa = '") + name +
             "': expected generic, avx2 or avx512";
    return false;
  }
  *error = check_cpu_isa(c.family, *out, prob);
  if (!error->empty()) {
    *error = "options.config.isa: " + *error;
    return false;
  }
  return true;
}

static bool chooseByRule(Device d, const deltac_options &opt, Mode m,
                         const Problem &prob, Choice *out, std::string *error);

// Whether this runtime runs c for prob: precompiled, or (cuda_recurrent)
// compiled at run time by NVRTC (cuda_jit.h); *jit says which.
static bool runnable(const KernelConfig &c, const Problem &prob, bool *jit) {
  *jit = false;
  if (precompiled(c, prob))
    return true;
  *jit = cuda_jit_enabled(c.family);
  return *jit;
}
static std::string jit_note(const KernelConfig &c, const Problem &prob) {
  return config_string(c) + " with K = " + std::to_string(prob.K) + ", V = " +
         std::to_string(prob.V) +
         " is not precompiled: compiled at run time by NVRTC (docs/jit.md)";
}

bool choose_config(Device d, const deltac_options &opt, const Problem &prob,
                   Choice *out, std::string *error) {
  *out = Choice{};
  out->K = prob.K, out->V = prob.V; // the dims the kernel runs (padded: below)
  bool pinned = false;
  if (!config_from_options(opt, &out->config, &pinned, error))
    return false;
  if (!pinned && opt.config.isa && *opt.config.isa) {
    *error = std::string("options.config.isa = '") + opt.config.isa +
             "': needs options.config.family (the family to run with it)";
    return false;
  }
  if (pinned) { // options.config: exactly this config, or an error
    const FamilyInfo &f = family_info(out->config.family);
    if (f.device != d) {
      *error = std::string("options.config: ") + f.name + " runs on " +
               device_name(f.device) + ", the call runs on " + device_name(d);
      return false;
    }
    if (opt.mode != DELTAC_MODE_AUTO && static_cast<Mode>(opt.mode) != f.mode) {
      *error = std::string("options.config: ") + f.name + " is " +
               (f.mode == Mode::Chunked ? "chunked" : "recurrent") +
               ", options.mode asks for the other mode";
      return false;
    }
    std::string why = check_config(out->config, prob);
    if (!why.empty()) {
      *error = "options.config: " + why;
      return false;
    }
    bool jit = false;
    if (!runnable(out->config, prob, &jit)) {
      std::string why;
      cuda_jit_enabled(out->config.family, &why);
      *error = "options.config: " + config_string(out->config) +
               " is not precompiled in this runtime" +
               (d == Device::CUDA ? " (" + why + "; a pinned config never runs padded; "
                                    "without options.config a K, V with no instance does)"
                                  : "");
      return false;
    }
    if (jit)
      out->note = jit_note(out->config, prob);
    return isa_from_options(opt, out->config, prob, &out->isa, error);
  }
  const Mode m = opt.chunk ? Mode::Chunked : static_cast<Mode>(opt.mode);
  if (d == Device::CUDA) { // no instance for the call's K, V: run it padded
    Problem run;
    Family f;
    std::string why;
    if (shipped_family(d, m, prob, &f, &why, &run) &&
        (run.K != prob.K || run.V != prob.V)) {
      out->K = run.K, out->V = run.V;
      return chooseByRule(d, opt, m, run, out, error);
    }
  }
  return chooseByRule(d, opt, m, prob, out, error);
}

// choose_config without options.config: options.chunk, the default rule or
// a tuning record, for prob (on CUDA: the dims the call runs with).
static bool chooseByRule(Device d, const deltac_options &opt, Mode m,
                         const Problem &prob, Choice *out, std::string *error) {
  if (opt.chunk) { // an explicit chunk size wins over the database
    const Family f = d == Device::CUDA ? Family::CudaChunked : Family::CpuChunked;
    *error = check_family(f, prob);
    if (!error->empty())
      return false;
    out->config = default_config(f, prob);
    out->config.chunk = opt.chunk;
    *error = check_config(out->config, prob);
    bool jit = false;
    if (error->empty() && !runnable(out->config, prob, &jit))
      *error = "options.chunk: " + config_string(out->config) +
               " is not precompiled in this runtime (the default config of " +
               "this shape is " + config_string(default_config(f, prob)) + ")";
    else if (jit)
      out->note = jit_note(out->config, prob);
    if (d == Device::CPU)
      out->isa = cpu_isa_for(f, prob);
    return error->empty();
  }
  Family f;
  if (!(opt.deterministic && invariant_family(d, m, prob, &f)) &&
      !shipped_family(d, m, prob, &f, error))
    return false;
  out->config = default_config(f, prob);
  if (d == Device::CPU)
    out->isa = cpu_isa_for(f, prob);
  else if (!precompiled(out->config, prob)) // shipped_family chose the NVRTC path
    out->note = jit_note(out->config, prob);
  if (opt.deterministic) // batch-invariant: records are chosen per batch shape
    return true;

  DbSnapshot db = tuning_db();
  if (!db.error.empty()) {
    out->note = db.error + "; the default rule ran";
    return true;
  }
  if (!db.db)
    return true;
  // Only records measured here (same machine and build: their "env" agrees
  // with deltac/env.h's current_env on every identity key, or they have no
  // env) are run; a record from elsewhere never is: the default rule runs
  // and the note says why.
  const TuningDB &usable = *db.usable[int(d)];
  const TuningRecord *r = usable.lookup(d, m, prob);
  if (!r) {
    const TuningRecord *foreign = db.db->lookup(d, m, prob);
    if (foreign)
      out->note = "tuning db '" + db.source + "': record " +
                  std::to_string(foreign - db.db->records.data()) + " (" +
                  config_string(foreign->config) +
                  ") was tuned on another machine or build (" +
                  env_mismatch(d, foreign->env, current_env(d)) +
                  "); the default config (" + config_string(out->config) +
                  ") ran";
    return true;
  }
  const size_t index = (*db.usableIndex[int(d)])[size_t(r - usable.records.data())];
  // A record tuned without the call's decode fields (a pool, a bf16 state)
  // may name a family that cannot run them: the default rule runs then.
  const std::string illegal = check_config(r->config, prob);
  if (!illegal.empty()) {
    out->note = "tuning db '" + db.source + "': record " +
                std::to_string(index) + " (" + config_string(r->config) +
                ") cannot run this call (" + illegal +
                "); the default config (" + config_string(out->config) +
                ") ran";
    return true;
  }
  bool jit = false;
  if (!runnable(r->config, prob, &jit)) {
    out->note = "tuning db '" + db.source + "': record " +
                std::to_string(index) + " (" +
                config_string(r->config) +
                ") is not precompiled in this runtime; the default config (" +
                config_string(out->config) + ") ran";
    return true;
  }
  // A CPU record's instruction set ("" = the rule's for its family), e.g.
  // avx512 while DELTAC_CPU_ISA=avx2 forces the narrower one: not run.
  CpuIsa isa = out->isa;
  if (d == Device::CPU) {
    isa = cpu_isa_for(r->config.family, prob);
    if (!r->isa.empty())
      cpu_isa_by_name(r->isa, &isa); // checked when the database was read
    const std::string narrow = check_cpu_isa(r->config.family, isa, prob);
    if (!narrow.empty()) {
      out->note = "tuning db '" + db.source + "': record " +
                  std::to_string(index) + " (" + config_string(r->config) +
                  " isa=" + r->isa + ") cannot run here (" + narrow +
                  "); the default config (" + config_string(out->config) +
                  ") ran";
      return true;
    }
  }
  out->isa = isa;
  out->config = r->config;
  out->tuned = true;
  if (jit)
    out->note = "tuning db '" + db.source + "': record " + std::to_string(index) + ": " +
                jit_note(r->config, prob);
  // A tuned split was measured at the tuned batch size; where this call's
  // grid already fills 7/8 of the GPU (where the kernel's own rule,
  // chunked_default_split, would not split), the rule runs (split 0).
  const KernelConfig &c = out->config;
  if (c.family == Family::CudaChunked && c.split > 1 && c.tile_v > 0 &&
      prob.sm_count > 0 &&
      !cuda::chunked_grid_short(prob.seqs * prob.HV * (prob.V / c.tile_v), prob.sm_count)) {
    out->note = "tuning db '" + db.source + "': record " + std::to_string(index) +
                "'s split=" + std::to_string(c.split) +
                " not used: this call's grid fills the GPU (the kernel's rule ran)";
    out->config.split = 0;
  }
  out->threads = d == Device::CPU ? r->threads : 0;
  return true;
}

bool invariant_family(Device d, Mode m, const Problem &prob, Family *out) {
  if (d == Device::CUDA) // the default rule, per sequence (mixed batches)
    return false;
  if (m == Mode::Chunked || !check_family(Family::CpuRecurrent, prob).empty())
    return false;
  *out = Family::CpuRecurrent;
  return true;
}

bool padded_dims(Family f, const Problem &prob, Problem *padded) {
  if (family_info(f).device != Device::CUDA || !check_problem(prob).empty())
    return false;
  bool found = false;
  auto consider = [&](int32_t k, int32_t v) {
    if (k < prob.K || v < prob.V)
      return;
    if (found && (int64_t(k) * v > int64_t(padded->K) * padded->V ||
                  (int64_t(k) * v == int64_t(padded->K) * padded->V &&
                   k >= padded->K)))
      return;
    Problem q = prob;
    q.K = k, q.V = v;
    if (check_family(f, q).empty() && precompiled(default_config(f, q), q)) {
      *padded = q;
      found = true;
    }
  };
#define DELTAC_X(k, v) consider(k, v);
  if (f == Family::CudaChunked) {
    DELTAC_CUDA_CHUNKED_DIMS(DELTAC_X)
  } else {
    DELTAC_CUDA_RECURRENT_DIMS(DELTAC_X)
  }
#undef DELTAC_X
  return found;
}

bool shipped_family(Device d, Mode m, const Problem &prob, Family *out,
                    std::string *why, Problem *run) {
  // The catalogue's order (families_for), skipping families whose default
  // config this runtime does not ship: e.g. K = 256, V = 128 runs the CUDA
  // recurrence under auto, as no chunked instance has those dims. On CUDA,
  // when no family has an instance of K, V, the first one runs padded
  // (padded_dims).
  FamilyList l = families_for(d, m, prob.cpu_isa, prob.cpu_split512);
  std::string first;
  for (int i = 0; i < l.n; ++i) {
    const int64_t b = l.max_tokens[i];
    if (b && (prob.max_seqlen == 0 || prob.max_seqlen > b))
      continue;
    std::string w = check_family(l.f[i], prob);
    const KernelConfig c = default_config(l.f[i], prob);
    if (w.empty() && !precompiled(c, prob))
      w = config_string(c) + " for variant " + variant_name(prob.variant) +
          " with K = " + std::to_string(prob.K) + ", V = " +
          std::to_string(prob.V) + " is not precompiled in this build " +
          "(DELTAC_*_DIMS in deltac/catalogue.h)";
    if (w.empty()) {
      *out = l.f[i];
      if (run)
        *run = prob;
      return true;
    }
    if (first.empty())
      first = w;
  }
  // No family has an instance of K, V itself: the first that runs padded.
  for (int i = 0; i < l.n && d == Device::CUDA; ++i) {
    const int64_t b = l.max_tokens[i];
    if (b && (prob.max_seqlen == 0 || prob.max_seqlen > b))
      continue;
    // The recurrent family compiles the exact dims at run time (NVRTC)
    // rather than run padded, where it can (decode); prompts keep the padded
    // chunked instance (its warp scan needs K = 64, 128 or 256).
    if (l.f[i] == Family::CudaRecurrent && check_family(l.f[i], prob).empty() &&
        cuda_jit_enabled(l.f[i])) {
      *out = l.f[i];
      if (run)
        *run = prob;
      return true;
    }
    Problem padded;
    if (padded_dims(l.f[i], prob, &padded)) {
      *out = l.f[i];
      if (run)
        *run = padded;
      return true;
    }
  }
  *why = first.empty() ? std::string("no kernel on ") + device_name(d) : first;
  return false;
}

std::string cuda_kernel_refusal(const Problem &prob, Mode m) {
  Family f;
  std::string why;
  return shipped_family(Device::CUDA, m, prob, &f, &why) ? "" : why;
}

} // namespace rt
} // namespace deltac

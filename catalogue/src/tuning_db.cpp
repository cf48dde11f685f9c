// Tuning database reader and writer (tuning_db.h).
#include "deltac/tuning_db.h"

#include "deltac/backward_rules.h"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <unistd.h>

namespace deltac {
namespace {

using json = nlohmann::json;

const char *const kVariants[] = {"delta", "gated", "kda"};
// The input dtypes a record may name, at their enum values (spelled by check.h).
const char *const kDtypes[] = {detail::dtypeName(DELTAC_F32), detail::dtypeName(DELTAC_BF16),
                               detail::dtypeName(DELTAC_F16)};
static_assert(DELTAC_F32 == 0 && DELTAC_BF16 == 1 && DELTAC_F16 == 2, "kDtypes' order");

// Reads one record, keeping the first problem.
struct Reader {
  const json &obj;
  size_t index;
  std::string error;
  const char *what = "record"; // "record" or "backward record"

  void fail(const std::string &key, const std::string &expected) {
    if (!error.empty())
      return;
    std::string got = obj.contains(key) ? "got " + obj[key].dump() : "missing";
    error = std::string(what) + " " + std::to_string(index) + ": field '" + key +
            "' must be " + expected + " (" + got + ")";
  }

  int64_t integer(const std::string &key, int64_t lo, int64_t hi) {
    auto it = obj.find(key);
    if (it == obj.end() || !it->is_number_integer() ||
        it->get<int64_t>() < lo || it->get<int64_t>() > hi) {
      fail(key, "an integer in " + std::to_string(lo) + ".." +
                    std::to_string(hi));
      return 0;
    }
    return it->get<int64_t>();
  }

  template <size_t N>
  int32_t name(const std::string &key, const char *const (&names)[N]) {
    auto it = obj.find(key);
    if (it != obj.end() && it->is_string())
      for (size_t i = 0; i < N; ++i)
        if (it->get<std::string>() == names[i])
          return int32_t(i);
    std::string list;
    for (size_t i = 0; i < N; ++i)
      list += std::string(i ? ", " : "") + "\"" + names[i] + "\"";
    fail(key, "one of " + list);
    return 0;
  }
};

void read_env(Reader &rd, std::map<std::string, std::string> *env) {
  if (!rd.obj.contains("env"))
    return;
  const json &e = rd.obj["env"];
  bool ok = e.is_object();
  for (auto it = e.begin(); ok && it != e.end(); ++it)
    ok = it->is_string();
  if (ok)
    for (auto it = e.begin(); it != e.end(); ++it)
      (*env)[it.key()] = it->get<std::string>();
  else
    rd.fail("env", "an object of strings");
}

double read_time(Reader &rd, const char *key) {
  if (!rd.obj.contains(key))
    return 0;
  const json &v = rd.obj[key];
  if (v.is_number() && v.get<double>() >= 0)
    return v.get<double>();
  rd.fail(key, "a non-negative number");
  return 0;
}

const char *const kSavedChoices[] = {"recompute", "keep"};

bool read_backward(const json &obj, size_t i, BackwardRecord *r, std::string *error) {
  if (!obj.is_object()) {
    *error = "backward record " + std::to_string(i) + " must be an object";
    return false;
  }
  Reader rd{obj, i, {}, "backward record"};
  r->variant = rd.name("variant", kVariants);
  r->K = int32_t(rd.integer("key_dim", 16, 256));
  r->V = int32_t(rd.integer("value_dim", 16, 256));
  r->in_dtype = rd.name("in_dtype", kDtypes);
  r->HV = int32_t(rd.integer("v_heads", 1, 1 << 20));
  r->max_tokens = obj.contains("max_tokens") ? rd.integer("max_tokens", 0, int64_t(1) << 40) : 0;
  r->keep = rd.name("saved_states", kSavedChoices) == 1;
  r->time_us = read_time(rd, "time_us");
  r->other_us = read_time(rd, "other_us");
  read_env(rd, &r->env);
  if (rd.error.empty() && !bwd_saves_states(r->variant, r->K, r->V, r->in_dtype))
    rd.error = "backward record " + std::to_string(i) + ": " + variant_name(r->variant) +
               " K = " + std::to_string(r->K) + ", V = " + std::to_string(r->V) + ", " +
               dtype_name(r->in_dtype) +
               " inputs: the catalogue offers saved states only for bf16 delta or gated, "
               "K = 64 or 128, V a multiple of 32 up to 256 (bwd_saves_states)";
  if (!rd.error.empty()) {
    *error = rd.error;
    return false;
  }
  return true;
}

bool read_record(const json &obj, size_t i, TuningRecord *r,
                 std::string *error) {
  if (!obj.is_object()) {
    *error = "record " + std::to_string(i) + " must be an object";
    return false;
  }
  Reader rd{obj, i, {}};
  const FamilyInfo *fam = nullptr;
  auto it = obj.find("family");
  if (it != obj.end() && it->is_string())
    fam = family_by_name(it->get<std::string>());
  if (!fam) {
    std::string list;
    for (const FamilyInfo &f : kFamilies)
      list += std::string(list.empty() ? "" : ", ") + "\"" + f.name + "\"";
    rd.fail("family", "one of " + list);
  }
  r->variant = rd.name("variant", kVariants);
  r->K = int32_t(rd.integer("key_dim", 16, 256));
  r->V = int32_t(rd.integer("value_dim", 16, 256));
  r->in_dtype = rd.name("in_dtype", kDtypes);
  r->max_tokens = obj.contains("max_tokens")
                      ? rd.integer("max_tokens", 0, int64_t(1) << 40)
                      : 0;
  r->time_us = read_time(rd, "time_us");
  if (obj.contains("threads"))
    r->threads = int32_t(rd.integer("threads", 0, 1 << 16));
  if (obj.contains("isa")) {
    CpuIsa x;
    const json &v = obj["isa"];
    if (!v.is_string() || !cpu_isa_by_name(v.get<std::string>(), &x))
      rd.fail("isa", "one of \"generic\", \"avx2\", \"avx512\"");
    else if (fam && fam->device != Device::CPU)
      rd.fail("isa", std::string("absent: ") + fam->name + " runs on CUDA");
    else
      r->isa = v.get<std::string>();
  }
  read_env(rd, &r->env);
  if (fam) {
    r->config = KernelConfig{};
    r->config.family = fam->family;
    for (int k = 0; k < kKnobCount; ++k) {
      const bool reads = fam->knobs & (1u << k);
      // A knob whose values hold 0 (a later knob, e.g. cuda_chunked's split,
      // fuse and scan) may be absent: databases written before it still load.
      if (reads && !obj.contains(kKnobNames[k]) && fam->values[k].contains(0))
        r->config.knob(k) = 0;
      else if (reads)
        r->config.knob(k) = int32_t(rd.integer(kKnobNames[k], 0, 1 << 20));
      else if (obj.contains(kKnobNames[k]))
        rd.fail(kKnobNames[k], std::string("absent: ") + fam->name +
                                   " has no such knob");
    }
  }
  if (rd.error.empty() && fam) {
    // Static legality: the knob values the catalogue lists for the family
    // and the record's own dims.
    Problem p;
    p.variant = r->variant, p.K = r->K, p.V = r->V;
    p.in_dtype = r->in_dtype;
    p.out_dtype = fam->device == Device::CUDA ? r->in_dtype : DELTAC_F32;
    p.max_seqlen = fam->max_tokens ? fam->max_tokens : 1;
    std::string why = check_config(r->config, p);
    if (!why.empty())
      rd.error = "record " + std::to_string(i) + ": " + why;
  }
  if (!rd.error.empty()) {
    *error = rd.error;
    return false;
  }
  return true;
}

} // namespace

const char *variant_name(int32_t v) {
  return v >= 0 && v < 3 ? kVariants[v] : "?";
}
const char *dtype_name(int32_t d) {
  return detail::dtypeName(d);
}

const TuningRecord *TuningDB::lookup(Device d, Mode m,
                                     const Problem &p) const {
  const TuningRecord *best = nullptr;
  for (const TuningRecord &r : records) {
    const FamilyInfo &f = family_info(r.config.family);
    if (f.device != d || r.variant != p.variant || r.K != p.K ||
        r.V != p.V || r.in_dtype != p.in_dtype)
      continue;
    if (m != Mode::Auto && f.mode != m)
      continue;
    if (r.max_tokens && (p.max_seqlen == 0 || p.max_seqlen > r.max_tokens))
      continue;
    if (!check_config(r.config, p).empty())
      continue;
    auto bucket = [](const TuningRecord *x) {
      return x->max_tokens ? x->max_tokens : INT64_MAX;
    };
    if (!best || bucket(&r) < bucket(best))
      best = &r;
  }
  return best;
}

const BackwardRecord *TuningDB::lookup_backward(int32_t variant, int32_t K, int32_t V,
                                                int32_t in_dtype, int32_t HV,
                                                int64_t seqlen) const {
  const BackwardRecord *best = nullptr;
  auto bucket = [](const BackwardRecord *x) { return x->max_tokens ? x->max_tokens : INT64_MAX; };
  for (const BackwardRecord &r : backward) {
    if (r.variant != variant || r.K != K || r.V != V || r.in_dtype != in_dtype || r.HV != HV ||
        (r.max_tokens && seqlen > r.max_tokens))
      continue;
    if (!best || bucket(&r) < bucket(best))
      best = &r;
  }
  return best;
}

bool parse_tuning_db(const std::string &text, const std::string &name,
                     TuningDB *out, std::string *error) {
  auto fail = [&](const std::string &msg) {
    *error = "tuning db '" + name + "': " + msg;
    return false;
  };
  json root = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded())
    return fail("not valid JSON");
  if (!root.is_object())
    return fail("the top level must be an object");
  if (!root.contains("format") || root["format"] != "deltac-tuning-db")
    return fail("'format' must be \"deltac-tuning-db\"");
  if (!root.contains("version") || !root["version"].is_number_integer() ||
      root["version"].get<int64_t>() != 2)
    return fail("'version' must be 2 (got " +
                (root.contains("version") ? root["version"].dump()
                                          : std::string("nothing")) +
                "; version 1 databases are not read: tune again)");
  if (!root.contains("records") || !root["records"].is_array())
    return fail("'records' must be an array");
  TuningDB db;
  const json &recs = root["records"];
  for (size_t i = 0; i < recs.size(); ++i) {
    TuningRecord r;
    std::string why;
    if (!read_record(recs[i], i, &r, &why))
      return fail(why);
    db.records.push_back(r);
  }
  if (root.contains("backward")) {
    const json &bw = root["backward"];
    if (!bw.is_array())
      return fail("'backward' must be an array");
    for (size_t i = 0; i < bw.size(); ++i) {
      BackwardRecord r;
      std::string why;
      if (!read_backward(bw[i], i, &r, &why))
        return fail(why);
      db.backward.push_back(r);
    }
  }
  *out = std::move(db);
  return true;
}

bool load_tuning_db(const std::string &path, TuningDB *out,
                    std::string *error) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    *error = "tuning db '" + path + "': cannot read the file";
    return false;
  }
  std::stringstream ss;
  ss << in.rdbuf();
  if (in.bad()) {
    *error = "tuning db '" + path + "': read error";
    return false;
  }
  return parse_tuning_db(ss.str(), path, out, error);
}

std::string format_tuning_db(const TuningDB &db) {
  json recs = json::array();
  for (const TuningRecord &r : db.records) {
    const FamilyInfo &f = family_info(r.config.family);
    json o;
    o["family"] = f.name;
    o["variant"] = variant_name(r.variant);
    o["key_dim"] = r.K;
    o["value_dim"] = r.V;
    o["in_dtype"] = dtype_name(r.in_dtype);
    o["max_tokens"] = r.max_tokens;
    for (int k = 0; k < kKnobCount; ++k)
      if (f.knobs & (1u << k))
        o[kKnobNames[k]] = r.config.knob(k);
    if (r.time_us > 0)
      o["time_us"] = r.time_us;
    if (r.threads > 0)
      o["threads"] = r.threads;
    if (!r.isa.empty())
      o["isa"] = r.isa;
    if (!r.env.empty())
      o["env"] = r.env;
    recs.push_back(o);
  }
  json root = {{"format", "deltac-tuning-db"}, {"version", 2},
               {"records", recs}};
  if (!db.backward.empty()) {
    json bw = json::array();
    for (const BackwardRecord &r : db.backward) {
      json o;
      o["variant"] = variant_name(r.variant);
      o["key_dim"] = r.K;
      o["value_dim"] = r.V;
      o["in_dtype"] = dtype_name(r.in_dtype);
      o["v_heads"] = r.HV;
      o["max_tokens"] = r.max_tokens;
      o["saved_states"] = kSavedChoices[r.keep ? 1 : 0];
      if (r.time_us > 0)
        o["time_us"] = r.time_us;
      if (r.other_us > 0)
        o["other_us"] = r.other_us;
      if (!r.env.empty())
        o["env"] = r.env;
      bw.push_back(o);
    }
    root["backward"] = bw;
  }
  return root.dump(1) + "\n";
}

bool save_tuning_db(const std::string &path, const TuningDB &db,
                    std::string *error) {
  const std::string tmp = path + ".tmp." + std::to_string(getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << format_tuning_db(db);
    out.flush();
    if (!out) {
      std::remove(tmp.c_str());
      *error = "tuning db '" + path + "': cannot write " + tmp;
      return false;
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    *error = "tuning db '" + path + "': cannot rename " + tmp + " into place";
    return false;
  }
  return true;
}

} // namespace deltac

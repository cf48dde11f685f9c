// The environment of tuning records (deltac/env.h).
#include "deltac/env.h"

#include "dispatch.h"
#include "templates_hash.h" // generated: DELTAC_TEMPLATES_HASH

#include <fstream>
#include <sstream>
#include <thread>

#ifndef DELTAC_VERSION
#define DELTAC_VERSION "unknown"
#endif

namespace deltac {
namespace {

// The value of the first "key : value" line of /proc/cpuinfo ("" if none).
std::string cpuinfoField(const std::string &key) {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    const size_t colon = line.find(':');
    if (colon == std::string::npos)
      continue;
    std::string k = line.substr(0, colon);
    while (!k.empty() && (k.back() == ' ' || k.back() == '\t'))
      k.pop_back();
    if (k != key)
      continue;
    std::string v = line.substr(colon + 1);
    const size_t b = v.find_first_not_of(" \t");
    return b == std::string::npos ? "" : v.substr(b);
  }
  return "";
}

std::string isaFlags() {
  static const char *const kIsa[] = {
      "sse4_2",   "avx",         "avx2",        "fma",      "f16c",
      "avx512f",  "avx512bw",    "avx512vl",    "avx512_vnni",
      "avx512_bf16", "amx_tile", "amx_bf16"};
  std::istringstream flags(" " + cpuinfoField("flags") + " ");
  std::map<std::string, bool> have;
  std::string f;
  while (flags >> f)
    have[f] = true;
  std::string out;
  for (const char *x : kIsa)
    if (have.count(x))
      out += (out.empty() ? "" : " ") + std::string(x);
  return out;
}

Env makeEnv(Device d) {
  Env e;
  e["device"] = device_name(d);
  e["deltac"] = DELTAC_VERSION;
  e["templates"] = DELTAC_TEMPLATES_HASH;
  if (d == Device::CPU) {
    std::string model = cpuinfoField("model name");
    e["cpu"] = model.empty() ? "unknown" : model;
    e["isa"] = isaFlags();
    e["cores"] = std::to_string(std::thread::hardware_concurrency());
  } else {
    rt::cuda_env(&e);
  }
  return e;
}

const char *const kCpuKeys[] = {"device", "deltac", "templates",
                                "cpu",    "isa",    "cores"};
const char *const kCudaKeys[] = {"device",   "deltac", "templates",
                                 "gpu",      "cc",     "sm_count",
                                 "driver",   "cuda_runtime"};

} // namespace

const Env &current_env(Device d) {
  static const Env cpu = makeEnv(Device::CPU);
  if (d == Device::CPU)
    return cpu;
  static const Env cuda = makeEnv(Device::CUDA);
  return cuda;
}

const char *const *env_identity_keys(Device d, int *count) {
  if (d == Device::CPU) {
    *count = int(sizeof(kCpuKeys) / sizeof(kCpuKeys[0]));
    return kCpuKeys;
  }
  *count = int(sizeof(kCudaKeys) / sizeof(kCudaKeys[0]));
  return kCudaKeys;
}

std::string env_mismatch(Device d, const Env &rec, const Env &current) {
  if (rec.empty())
    return "";
  int n = 0;
  const char *const *keys = env_identity_keys(d, &n);
  for (int i = 0; i < n; ++i) {
    auto r = rec.find(keys[i]);
    auto c = current.find(keys[i]);
    const std::string rv = r == rec.end() ? "" : r->second;
    const std::string cv = c == current.end() ? "" : c->second;
    if (r == rec.end() || c == current.end() || rv != cv)
      return std::string("env '") + keys[i] + "' is " +
             (r == rec.end() ? std::string("missing") : "\"" + rv + "\"") +
             " in the record, " +
             (c == current.end() ? std::string("unknown") : "\"" + cv + "\"") +
             " here";
  }
  return "";
}

} // namespace deltac

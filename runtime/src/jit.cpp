// The JIT's device half: load() = this process's modules, else cubin_for()
// (disk cache or NVRTC) and the CUDA runtime's library API (CUDA 12+; no
// driver API, no -lcuda).
#include "jit_internal.h"

#include <cuda_runtime.h>

#include <map>
#include <memory>
#include <mutex>

namespace deltac::rt::jit {
namespace {

struct Loaded {
  Module module;
  cudaLibrary_t library = nullptr; // kept loaded for the process
};

std::mutex &mu() {
  static std::mutex m;
  return m;
}
// Per device and program (its name, source and kernel expressions: with
// this process's options and headers, that is the cache key). Never freed.
std::map<std::string, Loaded *> &modules() {
  static auto *m = new std::map<std::string, Loaded *>;
  return *m;
}

std::string cuda_error(const char *call, cudaError_t e) {
  return std::string(call) + ": " + cudaGetErrorString(e);
}

} // namespace

const Module *load(const Program &prog, std::string *error) {
  std::string dummy;
  if (!error)
    error = &dummy;
  try {
    int dev = 0, major = 0, minor = 0;
    cudaError_t e = cudaGetDevice(&dev);
    if (e == cudaSuccess)
      e = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev);
    if (e == cudaSuccess)
      e = cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev);
    if (e != cudaSuccess) {
      cudaGetLastError();
      *error = "jit: no usable CUDA device for " + prog.name + " (" +
               cuda_error("cudaGetDevice", e) + ")";
      return nullptr;
    }
    const int cc = major * 10 + minor;
    std::string id = std::to_string(dev) + '\n' + prog.name + '\0' + prog.source;
    for (const std::string &k : prog.kernels)
      id += '\0' + k;
    {
      std::lock_guard<std::mutex> lock(mu());
      auto it = modules().find(id);
      if (it != modules().end()) {
        ++detail::counters().memory_hits;
        return &it->second->module;
      }
    }
    // Compiled or read outside the lock: other programs load meanwhile.
    std::string cubin;
    std::vector<std::string> lowered;
    if (!cubin_for(prog, cc, &cubin, &lowered, error))
      return nullptr;
    auto l = std::make_unique<Loaded>();
    const std::string what = prog.name + " (" + detail::arch_of(cc) + ", device " +
                             std::to_string(dev) + ")";
    e = cudaLibraryLoadData(&l->library, cubin.data(), nullptr, nullptr, 0, nullptr, nullptr,
                            0);
    if (e != cudaSuccess) {
      cudaGetLastError();
      *error = "jit: the device refused the cubin of " + what + " (" +
               cuda_error("cudaLibraryLoadData", e) +
               "); a driver older than the NVRTC that compiled it? Try DELTAC_JIT_CACHE=off";
      return nullptr;
    }
    for (size_t i = 0; i < lowered.size(); ++i) {
      cudaKernel_t k = nullptr;
      e = cudaLibraryGetKernel(&k, l->library, lowered[i].c_str());
      if (e != cudaSuccess) {
        cudaGetLastError();
        cudaLibraryUnload(l->library);
        *error = "jit: the cubin of " + what + " has no kernel " + lowered[i] + " (for " +
                 prog.kernels[i] + "; " + cuda_error("cudaLibraryGetKernel", e) + ")";
        return nullptr;
      }
      l->module.kernels.push_back(reinterpret_cast<const void *>(k));
    }
    std::lock_guard<std::mutex> lock(mu());
    auto [it, fresh] = modules().emplace(id, l.get());
    if (fresh)
      l.release();
    else
      cudaLibraryUnload(l->library); // another thread loaded it first
    return &it->second->module;
  } catch (const std::exception &e) {
    *error = "jit: loading " + prog.name + " failed: " + e.what();
    return nullptr;
  }
}

} // namespace deltac::rt::jit

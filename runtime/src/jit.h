// Internal: the runtime's JIT compiler (issue #9). A Program (one CUDA
// translation unit and the kernels it instantiates) is compiled by NVRTC
// (loaded with dlopen, never linked) into a cubin, kept in an on-disk cache
// and loaded with the CUDA runtime's library API. docs/jit.md has the
// design, the cache key and file format, and the environment variables.
// Nothing here throws.
#ifndef DELTAC_RUNTIME_JIT_H
#define DELTAC_RUNTIME_JIT_H

#include <string>
#include <vector>

namespace deltac::rt::jit {

struct Program {
  std::string name;   // for messages and the cache file name
  std::string source; // the translation unit; #includes the embedded headers
                      // by their usual names ("deltac/params.h")
  std::vector<std::string> kernels; // NVRTC name expressions ("&ns::k<1, 96>")
};

struct Module {
  // Per Program::kernels entry: a cudaKernel_t (cudaLibraryGetKernel),
  // usable as `func` of cudaLaunchKernel(Ex) and cudaFuncSetAttribute.
  std::vector<const void *> kernels;
};

// The loaded module of prog for the current device: from this process's
// cache, else the disk cache, else compiled by NVRTC (and then written to
// the disk cache). nullptr with *error set (one sentence: what failed and
// what to do). Thread-safe; modules live until the process ends.
const Module *load(const Program &prog, std::string *error);

// Compiles prog for compute capability cc (90 -> sm_90a, 80 -> sm_80,
// 120 -> sm_120): the cubin and the lowered (mangled) names of
// prog.kernels. No device needed; no cache.
bool compile(const Program &prog, int cc, std::string *cubin,
             std::vector<std::string> *lowered, std::string *error);

// The cubin and lowered names of prog for cc from the disk cache, else
// compiled (then written to the cache). No device needed; load() uses it.
bool cubin_for(const Program &prog, int cc, std::string *cubin,
               std::vector<std::string> *lowered, std::string *error);

// Whether NVRTC can be loaded here; *why says why not (or which library
// and version when it can).
bool available(std::string *why);

// The disk cache's directory for the current environment: DELTAC_JIT_CACHE,
// else $XDG_CACHE_HOME/deltac/jit, else $HOME/.cache/deltac/jit; "" when
// DELTAC_JIT_CACHE=off (or no home is known).
std::string cache_dir();

// The cache file of prog for cc in dir (its name holds part of the key).
std::string cache_file(const Program &prog, int cc, const std::string &dir);

struct Stats {
  int compiles = 0, disk_hits = 0, memory_hits = 0, disk_rejects = 0;
};
Stats stats(); // counters since process start (tests)

} // namespace deltac::rt::jit

#endif

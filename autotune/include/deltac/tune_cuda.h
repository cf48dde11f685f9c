// The CUDA tuner's kernel instances: every legal config of the specs this
// build was configured with (CMake DELTAC_TUNE_CUDA_SPECS, e.g.
// "gated:128:128:bf16"), compiled from the same templates and entries the
// runtime and the generated packages instantiate (deltac/cuda/launch.cuh).
// The runtime ships only the default configs; a tuned record for another
// config is used by `deltac generate --tuning-db` (docs/autotune.md).
// Host-only header: no CUDA types.
#ifndef DELTAC_TUNE_CUDA_H
#define DELTAC_TUNE_CUDA_H

#include "deltac/catalogue.h"
#include "deltac/params.h"

#include <cstddef>
#include <string>
#include <vector>

namespace deltac::tune::cuda {

// config holds the compiled knobs; cuda_chunked's split, fuse and scan are
// run-time values (0 in config): run and workspace take them from c, so one
// instance serves every split, fuse and scan.
struct Instance {
  int32_t variant = 0, K = 0, V = 0, in_dtype = 0;
  KernelConfig config;
  // The family's entry on a stream (a cudaStream_t) with c's run-time knobs;
  // returns a cudaError_t.
  int (*run)(const deltac_fwd_params *p, const KernelConfig *c, void *workspace,
             size_t workspace_bytes, void *stream) = nullptr;
  // Workspace bytes for p and c (0: none).
  size_t (*workspace)(const deltac_fwd_params *p, const KernelConfig *c) = nullptr;
  // The config's kernels (their host handles, for the compiler's resource
  // report: cudaFuncGetAttributes): up to max into out, the count returned.
  // Null: not reported (cuda_recurrent).
  int (*kernels)(const void **out, int max) = nullptr;
};

// c with its run-time knobs cleared: the config of the instance that runs it.
inline KernelConfig compiled_config(KernelConfig c) {
  if (c.family == Family::CudaChunked)
    c.split = 0, c.fuse = 0, c.scan = 0;
  return c;
}

// Every instance of this build (empty without DELTAC_TUNE_CUDA_SPECS or CUDA).
const std::vector<Instance> &instances();

// The instance that runs config c for (variant, K, V, in_dtype)
// (compiled_config(c)), or null.
const Instance *find(int32_t variant, int32_t K, int32_t V, int32_t in_dtype,
                     const KernelConfig &c);

// The specs compiled in, as configured ("gated:128:128:bf16;...").
const char *specs();

// "" when a CUDA device is usable (its SM count in *sm_count), else why not.
std::string usable(int32_t *sm_count);

// CUDA devices this process sees (0 without CUDA or a driver).
int device_count();

} // namespace deltac::tune::cuda

#endif // DELTAC_TUNE_CUDA_H

// Internal interface between the C API (runtime.cpp, select.cpp) and the
// per-device dispatch code (cpu_*.cpp, cuda_dispatch.cu or cuda_none.cpp).
#ifndef DELTAC_RUNTIME_DISPATCH_H
#define DELTAC_RUNTIME_DISPATCH_H

#include "deltac/catalogue.h"
#include "deltac/params.h"
#include "deltac/runtime.h"

#include <map>
#include <string>

namespace deltac {
namespace rt {

// Sets this thread's deltac_last_error() message (runtime.cpp); returns 1,
// the C API's error status. For C API calls outside runtime.cpp.
int set_last_error(const std::string &msg);

// CPU: runs the validated host-pointer params p with config c (a CPU family,
// legal for p) on instruction-set instance isa (check_cpu_isa passed).
// Returns false when no instance exists for c (nothing ran); *specialized
// says whether a compile-time K/V instance ran. One per variant, so that the
// variants compile in parallel.
bool cpu_run_delta(const deltac_fwd_params &p, const KernelConfig &c,
                   CpuIsa isa, bool *specialized);
bool cpu_run_gated(const deltac_fwd_params &p, const KernelConfig &c,
                   CpuIsa isa, bool *specialized);
bool cpu_run_kda(const deltac_fwd_params &p, const KernelConfig &c,
                 CpuIsa isa, bool *specialized);

// CUDA. All are safe to call on machines without a GPU driver.
bool cuda_built();
bool cuda_available();
// Multiprocessors of the current device (0 when unknown).
int cuda_sm_count();
// Whether family f's configs that are not precompiled run compiled at run
// time by NVRTC here (cuda_jit.h; cuda_recurrent, cuda_chunked): not switched off
// (DELTAC_JIT=0), a CUDA device is usable, NVRTC loads and a probe program
// of the kernel headers compiles and loads (once per process). *why says
// why not.
bool cuda_jit_enabled(Family f, std::string *why = nullptr);
// Adds the CUDA keys of deltac/env.h ("gpu", "cc", "sm_count", "driver",
// "cuda_runtime") for the current device when one is usable; else nothing.
void cuda_env(std::map<std::string, std::string> *env);
// Runs p with config c (family cuda_recurrent, legal and precompiled for p).
// Host pointers (opt.device_pointers == 0): allocates, copies, runs, copies
// back and synchronises; p passed check_params (and check_values in checking
// mode). Device pointers: p passed check_params(p, .., false); nothing
// synchronises; in checking mode the device check runs first on the stream
// and guards the kernel through opt.check_flag. Returns false with *error
// set on failure.
// Device workspace bytes config c needs for p (0: none).
// deterministic: options.deterministic (the batch-invariant plan).
// A mixed batch (varlen, mode auto; runtime.cpp): with route > 0 the
// recurrent config `short_config` runs the sequences of at most route tokens
// and c (cuda_chunked) the others, two launches on one stream, each reading
// cu_seqlens on the device (launch.cuh's route). route 0: c runs all.
struct Mixed {
  KernelConfig short_config;
  int32_t route = 0;
  int parts = 3; // bit 0: the short_config launch, bit 1: c's (tests run one)
};
// Padding (runtime/src/cuda_pad.cu): K, V > 0: c is an instance of these
// larger dims; q, k (kda: g), v, h0 are padded with zero channels into
// workspace buffers, c runs there, and o, ht, state_steps are cut back to
// p's K, V. Exact: zero key / value channels leave the rest unchanged.
struct Pad {
  int32_t K = 0, V = 0;
};
size_t cuda_workspace_size(const deltac_fwd_params &p, const KernelConfig &c,
                           bool deterministic, int32_t route = 0,
                           const Pad &pad = Pad{});
bool cuda_run(const deltac_fwd_params &p, const KernelConfig &c,
              const deltac_options &opt, std::string *error,
              const Mixed &mixed = Mixed{}, const Pad &pad = Pad{});

} // namespace rt
} // namespace deltac

#endif // DELTAC_RUNTIME_DISPATCH_H

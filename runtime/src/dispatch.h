// Internal interface between the C API (runtime.cpp, select.cpp) and the
// per-device dispatch code (cpu_*.cpp, cuda_dispatch.cu or cuda_none.cpp).
#ifndef DELTAC_RUNTIME_DISPATCH_H
#define DELTAC_RUNTIME_DISPATCH_H

#include "deltac/backward_rules.h"
#include "deltac/catalogue.h"
#include "deltac/params.h"
#include "deltac/runtime.h"

#include <cstdint>
#include <map>
#include <string>

namespace deltac {
namespace rt {

// Sets this thread's deltac_last_error() message (runtime.cpp); returns 1,
// the C API's error status. For C API calls outside runtime.cpp.
int set_last_error(const std::string &msg);

// Why the saved states buf (bytes long) do not suit the call of params p
// (the forward's or the backward's), or "" when they do; field names the
// struct holding them ("options", "params").
template <class P>
std::string saved_states_refusal(const char *field, const P &p, const void *buf,
                                 size_t bytes) {
  const std::string f = field;
  if (!bwd_saves_states(p.variant, p.K, p.V, p.in_dtype))
    return f + ".saved_states: offered for bf16 inputs (in_dtype 1), variant delta or "
               "gated, K = 64 or 128, V a multiple of 32 up to 256 (bwd_saves_states); got "
               "variant " + std::to_string(p.variant) + ", K = " + std::to_string(p.K) +
           ", V = " + std::to_string(p.V) + ", in_dtype " + std::to_string(p.in_dtype);
  const uint64_t need = bwd_saved_layout_of(p).total;
  if (bytes < need)
    return f + ".saved_states_bytes = " + std::to_string(bytes) + ": expected at least " +
           std::to_string(need) + " (bwd_saved_layout)";
  if (reinterpret_cast<uintptr_t>(buf) % 256 != 0)
    return f + ".saved_states: must be 256-byte aligned";
  return "";
}

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
// Compute capability of the current device as 10 major + minor (90: sm_90;
// 0 when unknown).
int cuda_cc();
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
// dims (larger, or p's own); q, k (kda: g), v, h0 are padded with zero
// channels into workspace buffers, c runs there, and o, ht, state_steps are
// cut back to p's K, V. Exact: zero key / value channels leave the rest
// unchanged. dtype >= 0: the copies of q, k, v and o are of that dtype
// (f32 copies of 16-bit inputs, o rounded back: kda with beta up to 2,
// deltac::f32_copies).
struct Pad {
  int32_t K = 0, V = 0;
  int32_t dtype = -1;
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

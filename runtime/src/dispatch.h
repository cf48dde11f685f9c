// Internal interface between the C API (runtime.cpp) and the per-device
// dispatch code (cpu_*.cpp, cuda_dispatch.cu or cuda_none.cpp).
#ifndef DELTAC_RUNTIME_DISPATCH_H
#define DELTAC_RUNTIME_DISPATCH_H

#include "deltac/params.h"
#include "deltac/runtime.h"

#include <string>

namespace deltac {
namespace rt {

// CPU: runs the validated host-pointer params p. chunk is 0 for the
// recurrent kernel, else 16, 32 or 64. Returns true when a compile-time K/V
// specialisation ran.
bool cpu_run_delta(const deltac_fwd_params &p, int chunk);
bool cpu_run_gated(const deltac_fwd_params &p, int chunk);
bool cpu_run_kda(const deltac_fwd_params &p, int chunk);

// CUDA. All are safe to call on machines without a GPU driver.
bool cuda_built();
bool cuda_available();
// A kernel exists for this variant, K, V, in_dtype, out_dtype (must equal
// in_dtype) and state (f32, KV layout).
bool cuda_supports(const deltac_fwd_params &p);
// Runs p with the recurrent kernel. With host pointers (opt.device_pointers
// == 0) it allocates, copies, runs, copies back and synchronises. Returns
// false with *error set on failure. Validation of p has been done by the
// caller for host pointers; for device pointers this function validates
// after copying cu_seqlens to the host.
bool cuda_run(const deltac_fwd_params &p, const deltac_options &opt,
              std::string *error);

} // namespace rt
} // namespace deltac

#endif // DELTAC_RUNTIME_DISPATCH_H

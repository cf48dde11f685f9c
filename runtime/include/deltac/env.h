// The environment a tuning record holds for: the machine and the build it
// was measured on. The autotuner writes current_env() into every record's
// "env"; the runtime uses a record only when env_mismatch() finds nothing
// (runtime/src/select.cpp). LLVM-free, part of deltac_runtime.
#ifndef DELTAC_ENV_H
#define DELTAC_ENV_H

#include "deltac/catalogue.h"

#include <map>
#include <string>

namespace deltac {

using Env = std::map<std::string, std::string>;

// The running machine and this build, for records of device d:
//   "device"    "cpu" or "cuda"
//   "deltac"    the deltac version (CMake project version)
//   "templates" a hash of the kernel template sources this build compiled
//   CPU:  "cpu" (model name), "isa" (the SIMD extensions present, from
//         sse4_2 avx avx2 fma f16c avx512f avx512bw avx512vl avx512_vnni
//         avx512_bf16 amx_tile amx_bf16), "cores" (online processors)
//   CUDA: "gpu", "cc", "sm_count", "driver", "cuda_runtime" when a GPU is
//         usable (else only the common keys: no CUDA record matches).
const Env &current_env(Device d);

// The keys a record's env must match for device d (the list above).
const char *const *env_identity_keys(Device d, int *count);

// "" when a record with env `rec` may be used on device d here: rec is empty
// (a hand-written record: no claim) or agrees with current on every identity
// key of d. Else one phrase naming the first difference, e.g.
// "env 'cpu' is \"X\" in the record, \"Y\" here".
std::string env_mismatch(Device d, const Env &rec, const Env &current);

} // namespace deltac

#endif // DELTAC_ENV_H

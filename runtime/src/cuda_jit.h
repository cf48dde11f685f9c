// Internal: CUDA kernels the runtime does not ship, compiled at run time by
// NVRTC (jit.h) from the same templates as the precompiled instances and
// launched by the same rules. Today the family cuda_recurrent: any K, V in
// 16..256 (multiples of 16) and any legal tile_v / warps.
#ifndef DELTAC_RUNTIME_CUDA_JIT_H
#define DELTAC_RUNTIME_CUDA_JIT_H

#include "cuda_dispatch.h"
#include "dispatch.h"
#include "jit.h"

#include "deltac/cuda/recurrent_rules.h"

#include <string>

namespace deltac {
namespace rt {

// cuda_jit_enabled: dispatch.h.

// The program NVRTC compiles for p with config c (family cuda_recurrent):
// the kernel form recurrent_choice picks for the call (det: the batch-
// invariant mode), by name expression. false with *error where p does not
// match a recurrent kernel or c has no form for it.
struct RecurrentProgram {
  jit::Program program;
  cuda::RecurrentChoice choice;
};
bool cuda_recurrent_program(const deltac_fwd_params &p, const KernelConfig &c, bool det,
                            RecurrentProgram *out, std::string *error);

// Launches p (device pointers, passed check_params; c legal for p, family
// cuda_recurrent) on s with the kernel NVRTC compiled for c (compiled on the
// first call of its kind in this process, or read from the disk cache).
// false with *error set when it cannot (nothing launched then).
bool cuda_recurrent_jit(const deltac_fwd_params &p, const KernelConfig &c,
                        cudaStream_t s, const Launch &l, std::string *error);

} // namespace rt
} // namespace deltac

#endif // DELTAC_RUNTIME_CUDA_JIT_H

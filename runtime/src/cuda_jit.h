// Internal: CUDA kernels the runtime does not ship, compiled at run time by
// NVRTC (jit.h) from the same templates as the precompiled instances and
// launched by the same code. cuda_recurrent: any K, V in 16..256 (multiples
// of 16) and any legal tile_v / warps; cuda_chunked: any legal config (chunk,
// tile_v, warps, stages; split, fuse and scan are run-time values; the fused
// launch is not compiled: fuse = 1 runs the three launches, the same
// results) for any K, V.
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

// cuda_chunked: the program of config c for p's variant, K, V and input
// dtype (false with *error where c is not legal for them); the workspace
// bytes cuda_chunked_jit needs (0 when c is not legal); the launch (p:
// device pointers, passed check_params; l.ws: null = stream-ordered
// allocation), false with *error when nothing or a failing launch ran.
bool cuda_chunked_program(const deltac_fwd_params &p, const KernelConfig &c,
                          jit::Program *out, std::string *error);
size_t cuda_chunked_jit_workspace(const deltac_fwd_params &p, const KernelConfig &c, bool det,
                                  int32_t route);
bool cuda_chunked_jit(const deltac_fwd_params &p, const KernelConfig &c, cudaStream_t s,
                      const Launch &l, std::string *error);

} // namespace rt
} // namespace deltac

#endif // DELTAC_RUNTIME_CUDA_JIT_H

// Internal: the CUDA backward behind deltac_backward (cuda_backward.cu;
// cuda_backward_none.cpp in builds without CUDA).
#ifndef DELTAC_RUNTIME_CUDA_BACKWARD_H
#define DELTAC_RUNTIME_CUDA_BACKWARD_H

#include "deltac/backward.h"

#include <cstddef>
#include <string>

namespace deltac::rt {

// "" when the CUDA backward has an instance for p (checked by
// deltac_backward's rules), else why not, naming the field.
std::string cuda_backward_unsupported(const deltac_bwd_params &p);

// Workspace bytes of p (device pointers) into *bytes; false with *error set.
bool cuda_backward_workspace(const deltac_bwd_params &p, size_t *bytes, std::string *error);

// Enqueues the backward of p (device pointers) on stream; ws null: one from
// the stream-ordered allocator. false with *error set.
bool cuda_backward(const deltac_bwd_params &p, void *stream, void *ws, size_t ws_bytes,
                   std::string *error);

}  // namespace deltac::rt

#endif  // DELTAC_RUNTIME_CUDA_BACKWARD_H

// Internal: CUDA calls whose K, V have no precompiled instance run one of
// larger dims (Kp, Vp) on zero-padded copies (issues 7, 8). The delta rule is
// exact under zero padding: zero key channels (q, k, and kda's g = 0: no
// decay) leave the extra state rows at 0 (decay times 0 plus k_j u = 0),
// zero value channels leave the extra columns at 0 (u_i = beta (0 - 0)), L2
// norms do not change, and the scale is the call's own (set before). So o's
// first V channels and the state's [K, V] corner are the unpadded results.
// The same machinery runs a call on f32 copies of its 16-bit q, k, v at its
// own dims (Pad::dtype: kda with beta up to 2), o rounded back.
#ifndef DELTAC_RUNTIME_CUDA_PAD_H
#define DELTAC_RUNTIME_CUDA_PAD_H

#include "cuda_dispatch.h"
#include "dispatch.h"

#include <functional>
#include <string>

namespace deltac {
namespace rt {

// Bytes of the padded tensors of p at pad's dims (pieces 256-byte aligned).
// share_state: h0 and ht share one padded buffer (the recurrent family
// updates each sequence's own state in place).
size_t pad_bytes(const deltac_fwd_params &p, const Pad &pad, bool share_state);

// Whether a padded call of family f shares one state buffer (the workspace
// query and the run must agree): the recurrent family, not in a mixed batch.
inline bool pad_shares_state(Family f, int32_t route) {
  return f == Family::CudaRecurrent && route == 0;
}

// p's params as the padded call sees them, its tensors at base (null: only
// the shape, for workspace sizes): dims pad.K, pad.V; a state pool becomes
// one dense state per sequence (gathered from its read slot, zero for -1)
// and is written back to exactly the slots the call writes.
deltac_fwd_params padded_params(const deltac_fwd_params &p, const Pad &pad,
                                bool share_state, char *base);

// Runs launch(pp, lp) on p (device pointers) padded to pad's dims, on s:
// pads the inputs, launches, cuts o, ht and state_steps back (not when
// l.skip's flag is set: nothing is written then). l.ws: the caller's
// workspace, padded tensors first (pad_bytes) and the kernel's after;
// none: the padded tensors come from the stream-ordered allocator. Never
// synchronises. False with *error on failure.
bool run_padded(const deltac_fwd_params &p, const Pad &pad, bool share_state,
                cudaStream_t s, const Launch &l,
                const std::function<bool(const deltac_fwd_params &,
                                         const Launch &)> &launch,
                std::string *error);

} // namespace rt
} // namespace deltac

#endif // DELTAC_RUNTIME_CUDA_PAD_H

// Chunk-end states (deltac_options.chunk_states): their count (CPU and
// CUDA) and the CPU's chunk-by-chunk run.
#ifndef DELTAC_RUNTIME_CHUNK_STATES_H
#define DELTAC_RUNTIME_CHUNK_STATES_H

#include "deltac/params.h"

#include <cstdint>
#include <functional>

namespace deltac::rt {

// Entries a call with chunk size `chunk` writes: the sum over sequences of
// ceil(len / chunk) (host cu_seqlens).
int64_t chunk_count(const deltac_fwd_params &p, int32_t chunk);
// Its bound over any split of the B * T tokens into N sequences, for
// cu_seqlens the host cannot read (the CUDA workspace's chunked_max_chunks).
int64_t chunk_bound(const deltac_fwd_params &p, int32_t chunk);
// The entries a caller's buffer must hold: chunk_count, or chunk_bound when
// cu_seqlens is device memory (never read on the host).
int64_t chunk_states_needed(const deltac_fwd_params &p, int32_t chunk,
                            bool cu_seqlens_on_device);

// Runs p chunk by chunk through run (one sequence, at most `chunk` tokens a
// call), writing each chunk's final state to states (f32, p's layout, in
// order of sequence, then chunk) and the last one to p.ht. False when run
// fails.
bool run_chunk_states(const deltac_fwd_params &p, int32_t chunk, float *states,
                      const std::function<bool(const deltac_fwd_params &)> &run);

} // namespace deltac::rt

#endif // DELTAC_RUNTIME_CHUNK_STATES_H

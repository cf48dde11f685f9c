// Which CUDA backward runs a call: the chunked (WY/UT, tensor-core) one of
// deltac/cuda/backward_chunked.cuh or the recurrent SIMT sweep of
// deltac/cuda/backward.cuh (every shape; the fallback and cross-check).
// Plain C++, no CUDA: the runtime's dispatch and the tests read it.
#ifndef DELTAC_BACKWARD_RULES_H
#define DELTAC_BACKWARD_RULES_H

#include "deltac/params.h"

#include <cstdint>

namespace deltac {

// Tokens per chunk of the chunked backward.
constexpr int kBwdChunk = 64;

// The shapes the chunked backward has instances for: delta and gated
// (scalar gate; kda keeps the recurrent sweep), K = 64 or 128, V a multiple
// of 32 up to 256.
constexpr bool bwd_chunked_covers(int32_t variant, int32_t K, int32_t V) {
  return (variant == DELTAC_VARIANT_DELTA || variant == DELTAC_VARIANT_GATED) &&
         (K == 64 || K == 128) && V >= 32 && V <= 256 && V % 32 == 0;
}

// The rule: chunked when the shape is covered, its workspace is within
// bwd_chunked_workspace_ok (below; the runtime, which knows both sizes,
// checks it) and the sequences average at least two chunks (tokens = B * T,
// sequences = N, or B without cu_seqlens).
// Shorter sequences keep the recurrent sweep: its cost is linear in the
// tokens and it needs no per-chunk states.
constexpr bool bwd_use_chunked(int32_t variant, int32_t K, int32_t V, int64_t tokens,
                               int64_t sequences) {
  return bwd_chunked_covers(variant, K, V) && sequences > 0 &&
         tokens >= 2 * int64_t(kBwdChunk) * sequences;
}

// The chunked path's workspace holds chunk-start states, state gradients,
// u and dr per chunk and value head (f32: ~224 KB per 64 tokens and value
// head at K = V = 128, 2-3.5x the recurrent sweep's; bf16 where the inputs
// and dO are bf16, about half). Where it would
// pass the cap and also kBwdChunkedWorkspaceRatio times the sweep's, the
// sweep runs instead (~4x slower on long sequences; e.g. 2^20 tokens x 16 /
// 32 heads at K = V = 128, f32 states: ~138 GB chunked against ~52 GB; bf16
// inputs and dO keep bf16 states, ~87 GB, and run chunked), and
// deltac_backward_workspace_size asks only for the sweep's. The cap: a
// quarter of the device's memory (bwd_chunked_cap), at least
// kBwdChunkedWorkspaceCap (H200: ~35 GB, so a 4 x 32768-token GDN step,
// ~17 GB, runs chunked).
constexpr uint64_t kBwdChunkedWorkspaceCap = uint64_t(8) << 30;
constexpr uint64_t kBwdChunkedWorkspaceRatio = 2;
constexpr uint64_t bwd_chunked_cap(uint64_t device_bytes) {
  return device_bytes / 4 > kBwdChunkedWorkspaceCap ? device_bytes / 4 : kBwdChunkedWorkspaceCap;
}
constexpr bool bwd_chunked_workspace_ok(uint64_t chunked_bytes, uint64_t recurrent_bytes,
                                        uint64_t cap = kBwdChunkedWorkspaceCap) {
  return chunked_bytes <= cap || chunked_bytes <= kBwdChunkedWorkspaceRatio * recurrent_bytes;
}

// Saved states: the forward (deltac_options.saved_states) may keep what the
// chunked backward's forward scan recomputes, so that the backward skips that
// scan (a memory / time option: the buffer lives from the forward to the
// backward instead of inside the backward's workspace). Chunk slot of chunk c
// of sequence n (first token t0): t0 / kBwdChunk + n + c, slots in all:
// tokens / kBwdChunk + sequences + 1. The buffer (device memory, 256-byte
// aligned): a 256-byte header whose first int32 is nonzero once the forward
// wrote every chunk's data, then bf16 per (slot, value head) the chunk-start
// state transposed [V][K] (at h), then u, the chunk's per-token update
// ("v_new"), transposed [V][kBwdChunk] (at u). Where the forward's kernel
// does not write them (the header stays 0) the backward fills the buffer
// itself. Offered where the chunked backward runs bf16 states: bf16 inputs
// (and dO), delta or gated, bwd_chunked_covers.
constexpr uint64_t kBwdSavedHeader = 256;
constexpr int64_t bwd_slots(int64_t tokens, int64_t sequences) {
  return tokens / kBwdChunk + sequences + 1;
}
struct BwdSavedLayout {
  uint64_t h = 0, u = 0, total = 0;  // byte offsets, total bytes
};
constexpr uint64_t bwd_align256(uint64_t b) { return (b + 255) / 256 * 256; }
constexpr BwdSavedLayout bwd_saved_layout(int64_t tokens, int64_t sequences, int32_t HV,
                                          int32_t K, int32_t V) {
  const uint64_t sh = uint64_t(bwd_slots(tokens, sequences)) * uint64_t(HV);
  BwdSavedLayout l;
  l.h = kBwdSavedHeader;
  l.u = l.h + bwd_align256(sh * uint64_t(K) * uint64_t(V) * 2);
  l.total = l.u + bwd_align256(sh * uint64_t(kBwdChunk) * uint64_t(V) * 2);
  return l;
}
// The layout for a call's params (the forward's or the backward's: B, T, N,
// cu_seqlens, HV, K, V): sequences are N with cu_seqlens, else B.
template <class P>
constexpr BwdSavedLayout bwd_saved_layout_of(const P& p) {
  return bwd_saved_layout(int64_t(p.B) * p.T, p.cu_seqlens ? p.N : p.B, p.HV, p.K, p.V);
}
constexpr bool bwd_saves_states(int32_t variant, int32_t K, int32_t V, int32_t in_dtype) {
  return in_dtype == DELTAC_BF16 && bwd_chunked_covers(variant, K, V);
}

}  // namespace deltac

#endif  // DELTAC_BACKWARD_RULES_H

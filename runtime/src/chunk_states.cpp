// Chunk-end states on the CPU (deltac_options.chunk_states): the chunked
// kernel runs one chunk of one sequence per call, each call's final state
// written to the chunk's entry and read back as the next call's initial
// state (as the compiler's generated code does, EmitCpp.cpp).
#include "chunk_states.h"

#include <algorithm>
#include <cstring>

namespace deltac::rt {
namespace {
// First token and length of sequence n (host cu_seqlens).
void seqRange(const deltac_fwd_params &p, int32_t n, int64_t *start, int64_t *len) {
  *start = p.cu_seqlens ? p.cu_seqlens[n] : int64_t(n) * p.T;
  *len = p.cu_seqlens ? p.cu_seqlens[n + 1] - *start : int64_t(p.T);
}
} // namespace

int64_t chunk_count(const deltac_fwd_params &p, int32_t chunk) {
  if (chunk <= 0)
    return 0;
  int64_t n = 0, start, len;
  for (int32_t s = 0; s < p.N; ++s) {
    seqRange(p, s, &start, &len);
    n += (len + chunk - 1) / chunk;
  }
  return n;
}

int64_t chunk_bound(const deltac_fwd_params &p, int32_t chunk) {
  if (chunk <= 0)
    return 0;
  return (int64_t(p.B) * p.T + int64_t(p.N) * (chunk - 1)) / chunk;
}

int64_t chunk_states_needed(const deltac_fwd_params &p, int32_t chunk,
                            bool cu_seqlens_on_device) {
  return cu_seqlens_on_device && p.cu_seqlens ? chunk_bound(p, chunk)
                                              : chunk_count(p, chunk);
}

bool run_chunk_states(const deltac_fwd_params &p, int32_t chunk, float *states,
                      const std::function<bool(const deltac_fwd_params &)> &run) {
  const size_t hs = size_t(p.HV) * p.K * p.V; // floats a state
  const size_t inB = p.in_dtype == DELTAC_F32 ? 4 : 2;
  const size_t outB = p.out_dtype == DELTAC_F32 ? 4 : 2;
  const int64_t gw = p.variant == DELTAC_VARIANT_KDA ? p.K : 1; // g per head
  int64_t slot = 0;
  for (int32_t n = 0; n < p.N; ++n) {
    int64_t start, len;
    seqRange(p, n, &start, &len);
    const float *h =
        p.h0 ? static_cast<const float *>(p.h0) + size_t(n) * hs : nullptr;
    for (int64_t t0 = 0; t0 < len; t0 += chunk, ++slot) {
      const int64_t tok = start + t0;
      deltac_fwd_params c = p;
      c.B = 1, c.N = 1;
      c.T = int32_t(std::min<int64_t>(chunk, len - t0));
      c.cu_seqlens = nullptr;
      c.q = static_cast<const char *>(p.q) + size_t(tok) * p.H * p.K * inB;
      c.k = static_cast<const char *>(p.k) + size_t(tok) * p.H * p.K * inB;
      c.v = static_cast<const char *>(p.v) + size_t(tok) * p.HV * p.V * inB;
      c.o = static_cast<char *>(p.o) + size_t(tok) * p.HV * p.V * outB;
      c.beta = p.beta + size_t(tok) * p.HV;
      if (p.g)
        c.g = p.g + size_t(tok) * p.HV * gw;
      c.h0 = h;
      c.ht = states + size_t(slot) * hs;
      if (!run(c))
        return false;
      h = states + size_t(slot) * hs;
    }
    if (p.ht) { // the last chunk's state, or the initial one (no tokens)
      float *out = static_cast<float *>(p.ht) + size_t(n) * hs;
      if (!h)
        std::fill(out, out + hs, 0.0f);
      else if (h != out)
        std::memmove(out, h, hs * sizeof(float));
    }
  }
  return true;
}

} // namespace deltac::rt

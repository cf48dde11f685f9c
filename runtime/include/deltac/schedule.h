// Default choice between the recurrent and the chunked kernels. Header-only,
// shared by the runtime (mode=auto) and the compiler (generated dispatch).
#ifndef DELTAC_SCHEDULE_H
#define DELTAC_SCHEDULE_H

#include "deltac/params.h"

#include <cstdint>

namespace deltac {

enum class Device { CPU = 0, CUDA = 1 };

struct Schedule {
  enum Mode { Recurrent = 0, Chunked = 1 } mode;
  int chunk; // 16, 32 or 64 when mode == Chunked; 0 when Recurrent
};

// Sequences of at most this many tokens (decode steps) run recurrently.
constexpr int64_t kDecodeMaxTokens = 8;
// Chunk size of the CPU chunked kernels.
constexpr int kCpuDefaultChunk = 64;

// Schedule for a call whose longest sequence has max_seqlen tokens.
inline Schedule default_schedule(Device device, int64_t max_seqlen) {
  if (device == Device::CUDA) // only the recurrent kernel exists on CUDA
    return {Schedule::Recurrent, 0};
  if (max_seqlen <= kDecodeMaxTokens)
    return {Schedule::Recurrent, 0};
  return {Schedule::Chunked, kCpuDefaultChunk};
}

// Longest sequence described by p (T, or the largest cu_seqlens gap).
// Assumes cu_seqlens, when present, has N + 1 entries.
inline int64_t max_seqlen(const deltac_fwd_params &p) {
  if (!p.cu_seqlens)
    return p.T;
  int64_t best = 0;
  for (int32_t n = 0; n < p.N; ++n) {
    int64_t len = p.cu_seqlens[n + 1] - p.cu_seqlens[n];
    if (len > best)
      best = len;
  }
  return best;
}

inline Schedule default_schedule(Device device, const deltac_fwd_params &p) {
  return default_schedule(device, max_seqlen(p));
}

} // namespace deltac

#endif // DELTAC_SCHEDULE_H

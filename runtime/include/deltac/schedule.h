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

// Under mode=auto on the CPU, sequences of at most this many tokens run the
// recurrent kernel, longer ones the chunked kernel; 0 = no limit (every
// length runs recurrent). 0 because the recurrence measured faster than the
// chunked kernels at every sequence length on AVX2 (docs/performance.md).
constexpr int64_t kCpuRecurrentMaxTokens = 0;
// Chunk size of the CPU chunked kernel when chunked is asked for without a
// chunk size (measured faster than 64 on every variant).
constexpr int kCpuDefaultChunk = 32;

// Schedule for a call whose longest sequence has max_seqlen tokens.
inline Schedule default_schedule(Device device, int64_t max_seqlen) {
  if (device == Device::CUDA) // only the recurrent kernel exists on CUDA
    return {Schedule::Recurrent, 0};
  if (kCpuRecurrentMaxTokens == 0 || max_seqlen <= kCpuRecurrentMaxTokens)
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

// DEPRECATED forwarding shim, kept only while dialects/ and examples/ still
// include it: the default rule lives in the kernel catalogue
// (catalogue/include/deltac/catalogue.h: default_family, default_config),
// which the runtime dispatches with. Include deltac/catalogue.h instead;
// this header goes away once nothing includes it.
#ifndef DELTAC_SCHEDULE_H
#define DELTAC_SCHEDULE_H

#include "deltac/catalogue.h"

#include <cstdint>

namespace deltac {

struct Schedule {
  enum Mode { Recurrent = 0, Chunked = 1 } mode;
  int chunk; // 16, 32 or 64 when mode == Chunked; 0 when Recurrent
};

// The catalogue runs the recurrence at every length under mode=auto on the
// CPU (0 = no limit).
constexpr int64_t kCpuRecurrentMaxTokens = 0;

// The catalogue's default family under mode=auto, as a Schedule.
inline Schedule default_schedule(Device device, int64_t max_seqlen) {
  Problem p;
  p.max_seqlen = max_seqlen;
  Family f;
  if (!default_family(device, Mode::Auto, p, &f, nullptr) ||
      family_info(f).mode != Mode::Chunked)
    return {Schedule::Recurrent, 0};
  return {Schedule::Chunked, default_config(f, p).chunk};
}

inline Schedule default_schedule(Device device, const deltac_fwd_params &p) {
  return default_schedule(device, max_seqlen(p));
}

} // namespace deltac

#endif // DELTAC_SCHEDULE_H

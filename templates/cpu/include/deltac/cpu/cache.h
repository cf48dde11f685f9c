// The CPU's cache sizes, one owner for the kernels (decode.h) and the tuner.
// A shared header: isa_target.inc includes it before its target region, so
// the one inline definition is never compiled for a wider instruction set.
#ifndef DELTAC_CPU_CACHE_H
#define DELTAC_CPU_CACHE_H

#include <unistd.h>

#include <cstddef>
#include <cstdio>

namespace deltac::cpu {

// One core's L2 in bytes: sysconf, else cpu0's sysfs entry, else 1 MiB.
inline size_t l2_cache_bytes() {
  static const size_t bytes = [] {
    const long b = sysconf(_SC_LEVEL2_CACHE_SIZE);
    if (b > 0)
      return size_t(b);
    size_t n = 0;
    char unit = 0;
    if (FILE* f = std::fopen("/sys/devices/system/cpu/cpu0/cache/index2/size", "r")) {
      if (std::fscanf(f, "%zu%c", &n, &unit) < 1)
        n = 0;
      std::fclose(f);
    }
    n <<= unit == 'K' ? 10 : unit == 'M' ? 20 : 0;
    return n ? n : size_t(1) << 20;
  }();
  return bytes;
}

}  // namespace deltac::cpu

#endif  // DELTAC_CPU_CACHE_H

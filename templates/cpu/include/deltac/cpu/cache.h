// The CPU's cache sizes, one owner for the kernels (decode.h) and the tuner.
// A shared header: isa_target.inc includes it before its target region, so
// the one inline definition is never compiled for a wider instruction set.
#ifndef DELTAC_CPU_CACHE_H
#define DELTAC_CPU_CACHE_H

#include <unistd.h>

#include <cstddef>
#include <cstdio>

namespace deltac::cpu {

namespace detail {
// A cache level's size in bytes: sysconf's value, else cpu0's sysfs entry
// (index<level>), else the fallback.
inline size_t cache_bytes(int sc_name, const char* sysfs, size_t fallback) {
  const long b = sysconf(sc_name);
  if (b > 0)
    return size_t(b);
  size_t n = 0;
  char unit = 0;
  if (FILE* f = std::fopen(sysfs, "r")) {
    if (std::fscanf(f, "%zu%c", &n, &unit) < 1)
      n = 0;
    std::fclose(f);
  }
  n <<= unit == 'K' ? 10 : unit == 'M' ? 20 : 0;
  return n ? n : fallback;
}
}  // namespace detail

// One core's L2 in bytes (1 MiB where the system does not say).
inline size_t l2_cache_bytes() {
  static const size_t bytes = detail::cache_bytes(
      _SC_LEVEL2_CACHE_SIZE, "/sys/devices/system/cpu/cpu0/cache/index2/size", size_t(1) << 20);
  return bytes;
}

// The last-level cache cpu0 shares, in bytes (32 MiB where the system does
// not say; a guest's share of it may be smaller).
inline size_t l3_cache_bytes() {
  static const size_t bytes = detail::cache_bytes(
      _SC_LEVEL3_CACHE_SIZE, "/sys/devices/system/cpu/cpu0/cache/index3/size", size_t(32) << 20);
  return bytes;
}

}  // namespace deltac::cpu

#endif  // DELTAC_CPU_CACHE_H

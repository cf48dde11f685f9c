// Seeds of deltac's randomized tests (CPU, runtime and CUDA suites alike).
//
//   const uint64_t seed = deltac::test_seed();
//   SCOPED_TRACE(deltac::test_seed_note(seed));   // on failure:
//                                                 //   "DELTAC_TEST_SEED=<n>"
//   std::mt19937_64 rng(seed);
//
// test_seed() returns the value of the environment variable DELTAC_TEST_SEED
// when it is set (decimal, or hex with 0x), else a fresh random seed. A test
// that draws one seed per random problem and prints it with
// test_seed_note() can be replayed exactly:
//   DELTAC_TEST_SEED=<n> <test binary> --gtest_filter=<the failing test>
// A malformed DELTAC_TEST_SEED aborts with a message (a typo must not
// silently fall back to random seeds). No GoogleTest dependency.
#ifndef DELTAC_TEST_SEED_H
#define DELTAC_TEST_SEED_H

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>

namespace deltac {

inline uint64_t test_seed() {
  if (const char* s = std::getenv("DELTAC_TEST_SEED")) {
    char* end = nullptr;
    errno = 0;
    const unsigned long long v = std::strtoull(s, &end, 0);
    if (*s == '\0' || *s == '-' || *end != '\0' || errno == ERANGE) {
      std::fprintf(stderr,
                   "DELTAC_TEST_SEED=\"%s\": expected an unsigned 64-bit "
                   "integer (decimal or 0x hex)\n",
                   s);
      std::abort();
    }
    return uint64_t(v);
  }
  static std::random_device rd;
  return (uint64_t(rd()) << 32) ^ rd();
}

// "DELTAC_TEST_SEED=<seed>", the line that replays a failure.
inline std::string test_seed_note(uint64_t seed) {
  return "DELTAC_TEST_SEED=" + std::to_string(seed);
}

}  // namespace deltac

#endif  // DELTAC_TEST_SEED_H

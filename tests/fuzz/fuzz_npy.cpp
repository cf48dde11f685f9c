// libFuzzer target for the .npy reader (-DDELTAC_BUILD_FUZZ=ON with clang:
// build-fuzz/runtime/deltac_fuzz_npy [corpus]; runtime/cmake/fuzz.cmake).
// Every accepted array is read to its end: its byte count must match the
// shape and dtype the header claims.
#include "deltac/npy.h"

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  deltac::npy::Array a;
  std::string err;
  if (!deltac::npy::parse(data, size, &a, &err))
    return err.empty() ? (std::abort(), 0) : 0; // a refusal always says why
  if (a.data.size() != size_t(a.count()) * deltac::npy::item_size(a.dtype))
    std::abort();
  volatile unsigned char s = 0;
  for (unsigned char b : a.data)
    s = s ^ b; // touch every byte
  return 0;
}

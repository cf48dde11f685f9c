// libFuzzer target for the safetensors reader (-DDELTAC_BUILD_FUZZ=ON with
// clang: build/runtime/deltac_fuzz_safetensors [corpus]). The gtest
// test_safetensors.cpp calls the same entry point on random mutations.
#include "deltac/safetensors.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  deltac::SafeTensors st;
  std::string err;
  if (!st.parse(data, size, "fuzz", &err)) return 0;
  std::vector<float> out;
  std::vector<int64_t> shape;
  for (const auto &kv : st.tensors()) {
    if (st.get_f32_any(kv.first, &out, &shape, &err)) {
      volatile float s = 0;
      for (float f : out) s = s + f; // touch every value read
      (void)s;
    }
    (void)st.get_f32(kv.first, {2, 3}, &out, &err);
  }
  (void)st.get_f32("missing", {1}, &out, &err);
  return 0;
}

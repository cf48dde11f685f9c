// libFuzzer target for the tuning database reader (-DDELTAC_BUILD_FUZZ=ON
// with clang: build-fuzz/runtime/deltac_fuzz_tuning_db [corpus];
// runtime/cmake/fuzz.cmake). An accepted database must look up (forward and
// backward records) without trouble and survive a format / parse round trip
// unchanged.
#include "deltac/tuning_db.h"

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const std::string text(reinterpret_cast<const char *>(data), size);
  deltac::TuningDB db;
  std::string err;
  if (!deltac::parse_tuning_db(text, "fuzz", &db, &err))
    return err.empty() ? (std::abort(), 0) : 0; // a refusal always says why
  deltac::Problem p;
  p.K = p.V = 128, p.H = p.HV = 1, p.max_seqlen = 64;
  for (deltac::Device d : {deltac::Device::CPU, deltac::Device::CUDA})
    for (deltac::Mode m : {deltac::Mode::Auto, deltac::Mode::Chunked, deltac::Mode::Recurrent})
      (void)db.lookup(d, m, p);
  for (int32_t variant : {DELTAC_VARIANT_DELTA, DELTAC_VARIANT_GATED})
    (void)db.lookup_backward(variant, 64, 64, DELTAC_BF16, 32, 4096);
  const std::string again = deltac::format_tuning_db(db);
  deltac::TuningDB back;
  if (!deltac::parse_tuning_db(again, "round trip", &back, &err) ||
      deltac::format_tuning_db(back) != again)
    std::abort();
  return 0;
}

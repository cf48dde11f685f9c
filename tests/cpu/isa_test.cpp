// The run-time choice of the CPU kernels' instruction set (deltac/cpu/isa.h):
// DELTAC_CPU_ISA, when set to a target this CPU supports, is the one that
// runs (ctest runs the whole suite natively and with avx2 forced).
#include "deltac/cpu/isa.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <string>

namespace {

using namespace deltac::cpu;

TEST(CpuIsa, ActiveIsForcedOrBest) {
  const char* e = std::getenv("DELTAC_CPU_ISA");
  const isa::Isa a = isa::active();
  EXPECT_TRUE(isa::supported(a));
  bool forced = false;
  for (isa::Isa i : {isa::Isa::generic, isa::Isa::avx2, isa::Isa::avx512})
    if (e && std::string(e) == isa::name(i) && isa::supported(i))
      forced = true;
  if (forced)
    EXPECT_STREQ(isa::name(a), e);
  else
    EXPECT_EQ(a, isa::best());
}

TEST(CpuIsa, BestIsTheWidestSupported) {
  EXPECT_TRUE(isa::supported(isa::Isa::generic));
  const isa::Isa b = isa::best();
  EXPECT_TRUE(isa::supported(b));
  if (isa::supported(isa::Isa::avx512))
    EXPECT_EQ(b, isa::Isa::avx512);
  else if (isa::supported(isa::Isa::avx2))
    EXPECT_EQ(b, isa::Isa::avx2);
  std::printf("deltac cpu isa: best %s, active %s\n", isa::name(b), isa::name(isa::active()));
}

TEST(CpuIsa, RecurrenceRunsAvx2UnderAvx512) {
  const isa::Isa a = isa::active();
  EXPECT_EQ(isa::for_family(deltac::Family::CpuChunked), a);
  EXPECT_EQ(isa::for_family(deltac::Family::CpuDecode), a);
  EXPECT_EQ(isa::for_family(deltac::Family::CpuRecurrent),
            a == isa::Isa::avx512 ? isa::Isa::avx2 : a);
}

TEST(CpuIsa, ForwardRejectsUnknownMode) {
  deltac_fwd_params p{};
  EXPECT_FALSE(isa::forward(DELTAC_VARIANT_DELTA, 8, p));
}

}  // namespace

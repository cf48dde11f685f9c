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

// for_family is the catalogue's per-ISA rule at the active target, and the
// rule never names an instance wider than its own row.
TEST(CpuIsa, FamiliesFollowTheCataloguesRule) {
  const isa::Isa a = isa::active();
  deltac::Problem prob;
  isa::set_problem(&prob);
  EXPECT_EQ(prob.cpu_isa, a);
  EXPECT_EQ(prob.cpu_split512, isa::split512());
  for (deltac::Family f : {deltac::Family::CpuRecurrent, deltac::Family::CpuDecode,
                           deltac::Family::CpuChunked}) {
    EXPECT_EQ(isa::for_family(f), deltac::cpu_rule(a, isa::split512()).family_isa[int(f)]);
    EXPECT_EQ(isa::for_family(f), deltac::cpu_isa_for(f, prob));
    EXPECT_EQ(deltac::check_cpu_isa(f, isa::for_family(f), prob), "");
    EXPECT_TRUE(isa::supported(isa::for_family(f)));
  }
}

TEST(CpuIsa, ForwardRejectsUnknownMode) {
  deltac_fwd_params p{};
  EXPECT_FALSE(isa::forward(DELTAC_VARIANT_DELTA, 8, p));
}

// An instance this CPU lacks never runs (it would fault): false, nothing ran.
TEST(CpuIsa, ForwardRefusesAnInstanceTheCpuLacks) {
  if (isa::supported(isa::Isa::avx512))
    GTEST_SKIP() << "this CPU runs every instance";
  deltac_fwd_params p{};
  EXPECT_FALSE(isa::forward(DELTAC_VARIANT_DELTA, 0, p, isa::Isa::avx512));
}

}  // namespace

// Zen 4's row (a 256-bit datapath under AVX-512): the recurrence at every
// length, on avx2; other rows ignore the flag.
TEST(CpuIsa, Split512Row) {
  deltac::Problem prob;
  prob.cpu_isa = deltac::CpuIsa::avx512;
  prob.cpu_split512 = true;
  EXPECT_EQ(deltac::cpu_isa_for(deltac::Family::CpuRecurrent, prob), deltac::CpuIsa::avx2);
  EXPECT_EQ(deltac::cpu_isa_for(deltac::Family::CpuChunked, prob), deltac::CpuIsa::avx512);
  prob.max_seqlen = 1 << 20;
  deltac::Family f;
  std::string why;
  ASSERT_TRUE(deltac::default_family(deltac::Device::CPU, deltac::Mode::Auto, prob, &f, &why))
      << why;
  EXPECT_EQ(f, deltac::Family::CpuRecurrent);
  prob.cpu_split512 = false;
  ASSERT_TRUE(deltac::default_family(deltac::Device::CPU, deltac::Mode::Auto, prob, &f, &why))
      << why;
  EXPECT_EQ(f, deltac::Family::CpuChunked);
  prob.cpu_isa = deltac::CpuIsa::avx2;
  prob.cpu_split512 = true;
  EXPECT_EQ(&deltac::cpu_rule(prob.cpu_isa, true), &deltac::cpu_rule(prob.cpu_isa));
}

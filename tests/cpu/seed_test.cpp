// DELTAC_TEST_SEED (deltac/test_seed.h): set, it fixes every random problem,
// so a failure's printed seed replays it.
#include "harness.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <optional>
#include <string>

namespace deltac::test {
namespace {

// Sets DELTAC_TEST_SEED for one scope and restores the old value.
class SeedEnv {
 public:
  explicit SeedEnv(const char* value) {
    if (const char* old = std::getenv("DELTAC_TEST_SEED"))
      old_ = old;
    ::setenv("DELTAC_TEST_SEED", value, 1);
  }
  ~SeedEnv() {
    if (old_)
      ::setenv("DELTAC_TEST_SEED", old_->c_str(), 1);
    else
      ::unsetenv("DELTAC_TEST_SEED");
  }

 private:
  std::optional<std::string> old_;
};

TEST(Seed, EnvironmentSetsTheSeed) {
  {
    SeedEnv env("12345");
    EXPECT_EQ(fresh_seed(), 12345u);
    EXPECT_EQ(fresh_seed(), 12345u);
    EXPECT_EQ(seed_note(fresh_seed()), "DELTAC_TEST_SEED=12345");
  }
  {
    SeedEnv env("18446744073709551615");
    EXPECT_EQ(fresh_seed(), 18446744073709551615ull);
  }
  {
    SeedEnv env("0x10");
    EXPECT_EQ(fresh_seed(), 16u);
  }
}

TEST(Seed, SameSeedSameProblem) {
  SeedEnv env("777");
  Case c;
  c.var = DELTAC_VARIANT_KDA;
  std::mt19937_64 r1(fresh_seed()), r2(fresh_seed());
  const Data a = make_data(c, r1), b = make_data(c, r2);
  EXPECT_EQ(a.q, b.q);
  EXPECT_EQ(a.v, b.v);
  EXPECT_EQ(a.g, b.g);
  EXPECT_EQ(a.h0, b.h0);
  // And run_vs_reference reports the seed it used.
  EXPECT_EQ(run_vs_reference(c).seed, 777u);
}

TEST(SeedDeathTest, MalformedSeedAborts) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  for (const char* bad : {"", "12x", "-5", "99999999999999999999999"}) {
    SeedEnv env(bad);
    EXPECT_DEATH(fresh_seed(), "DELTAC_TEST_SEED") << '"' << bad << '"';
  }
}

}  // namespace
}  // namespace deltac::test

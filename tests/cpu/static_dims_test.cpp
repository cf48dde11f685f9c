// Compile-time dims (KC/VC != 0) give the same results as the reference.
#include "harness.h"

#include <gtest/gtest.h>

namespace deltac::test {
namespace {

using namespace deltac::cpu;

template <deltac_variant Var>
void check(KernelFn fn, int K, int V, int T) {
  Case c;
  c.var = Var;
  c.T = T;
  c.B = 2;
  c.H = 2;
  c.HV = 4;
  c.K = K;
  c.V = V;
  Errors e = run_vs_reference(c, fn);
  SCOPED_TRACE(seed_note(e.seed));
  EXPECT_LE(e.o, 1e-5) << describe(c);
  EXPECT_LE(e.ht, 1e-5) << describe(c);
}

TEST(StaticDims, Recurrent128) {
  check<DELTAC_VARIANT_DELTA>(&recurrent<DELTAC_VARIANT_DELTA, 128, 128>, 128, 128, 70);
  check<DELTAC_VARIANT_GATED>(&recurrent<DELTAC_VARIANT_GATED, 128, 128>, 128, 128, 70);
  check<DELTAC_VARIANT_KDA>(&recurrent<DELTAC_VARIANT_KDA, 128, 128>, 128, 128, 70);
}

TEST(StaticDims, Chunked64x128) {
  check<DELTAC_VARIANT_DELTA>(&chunked<DELTAC_VARIANT_DELTA, 64, 128, 128>, 128, 128, 150);
  check<DELTAC_VARIANT_GATED>(&chunked<DELTAC_VARIANT_GATED, 64, 128, 128>, 128, 128, 150);
  check<DELTAC_VARIANT_KDA>(&chunked<DELTAC_VARIANT_KDA, 64, 128, 128>, 128, 128, 150);
}

TEST(StaticDims, KNotEqualV) {
  check<DELTAC_VARIANT_GATED>(&recurrent<DELTAC_VARIANT_GATED, 64, 256>, 64, 256, 40);
  check<DELTAC_VARIANT_KDA>(&chunked<DELTAC_VARIANT_KDA, 32, 256, 64>, 256, 64, 40);
  check<DELTAC_VARIANT_DELTA>(&chunked<DELTAC_VARIANT_DELTA, 16, 96, 32>, 96, 32, 40);
}

}  // namespace
}  // namespace deltac::test

// Chunk-end states (deltac_options.chunk_states) through the C API on the
// CPU, against the float64 reference's state after each chunk's last token;
// the count helper; and the calls it must refuse.
#include "test_util.h"

#include "deltac/runtime.h"

#include <gtest/gtest.h>

#include <string>
#include <tuple>
#include <vector>

using namespace deltac;

namespace {

struct CsShape {
  const char *name;
  int B, T, H, HV, K, V;
  std::vector<int64_t> cu; // empty: B sequences of T tokens
};

// A 33-token sequence (not a multiple of any chunk), an empty one, one of
// exactly 32 tokens and a 1-token tail; a fixed-length batch with GVA 2.
const CsShape kCsShapes[] = {
    {"varlen_tail1", 1, 66, 1, 2, 32, 48, {0, 33, 33, 65, 66}},
    {"batch2_gva2", 2, 67, 2, 4, 16, 16, {}},
};

struct CsCase {
  int variant, shape, chunk, layout, in_dtype;
};

std::string caseName(const ::testing::TestParamInfo<CsCase> &i) {
  const CsCase &c = i.param;
  return std::string(c.variant == 0 ? "delta" : c.variant == 1 ? "gated" : "kda") +
         "_" + kCsShapes[c.shape].name + "_C" + std::to_string(c.chunk) +
         (c.layout == DELTAC_STATE_VK ? "_vk" : "_kv") +
         (c.in_dtype == DELTAC_BF16 ? "_bf16" : "_f32");
}

std::vector<CsCase> allCases() {
  std::vector<CsCase> v;
  for (int var = 0; var < 3; ++var)
    for (int s = 0; s < 2; ++s)
      for (int c : {16, 32, 64})
        for (int l : {DELTAC_STATE_KV, DELTAC_STATE_VK})
          for (int d : {DELTAC_F32, DELTAC_BF16})
            v.push_back({var, s, c, l, d});
  return v;
}

test::Problem makeCsProblem(const CsCase &c, uint64_t seed) {
  const CsShape &s = kCsShapes[c.shape];
  test::Problem pr;
  pr.variant = c.variant;
  pr.B = s.B, pr.T = s.T, pr.H = s.H, pr.HV = s.HV, pr.K = s.K, pr.V = s.V;
  pr.cu = s.cu;
  pr.fill(seed);
  return pr;
}

class ChunkStates : public ::testing::TestWithParam<CsCase> {};

TEST_P(ChunkStates, MatchReference) {
  const CsCase c = GetParam();
  const uint64_t seed = test::freshSeed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  test::Problem pr = makeCsProblem(c, seed);
  std::vector<float> o(pr.oCount(), -7.f), ht(pr.stateCount(), -7.f);
  deltac_fwd_params p = pr.params(o.data(), ht.data());
  p.state_layout = c.layout;
  std::vector<uint16_t> q16, k16, v16;
  if (c.in_dtype == DELTAC_BF16) {
    q16 = test::toBf16(pr.q), k16 = test::toBf16(pr.k), v16 = test::toBf16(pr.v);
    p.in_dtype = DELTAC_BF16;
    p.q = q16.data(), p.k = k16.data(), p.v = v16.data();
  }
  deltac_options opt = deltac_default_options();
  opt.device = DELTAC_DEVICE_CPU; // CUDA's: test_cuda_chunk_states.cpp
  opt.chunk = c.chunk;
  int64_t count = -1;
  ASSERT_EQ(deltac_chunk_states_count(&p, &opt, &count), 0) << deltac_last_error();
  std::vector<double> oRef, htRef;
  const std::vector<double> want = test::expectedChunkStates(p, c.chunk, &oRef, &htRef);
  const size_t hs = size_t(p.HV) * p.K * p.V;
  ASSERT_EQ(size_t(count) * hs, want.size());
  // One spare entry past the count: never written.
  std::vector<float> cs((size_t(count) + 1) * hs, -9.f);
  opt.chunk_states = cs.data();
  opt.chunk_states_count = count;
  deltac_run_info info{};
  ASSERT_EQ(deltac_forward_info(&p, &opt, &info), 0) << deltac_last_error();
  EXPECT_EQ(info.device, DELTAC_DEVICE_CPU);
  EXPECT_STREQ(info.family, "cpu_chunked");
  EXPECT_EQ(info.chunk, c.chunk);
  EXPECT_LE(ref::rel_rms(cs.data(), want), 1e-5) << "chunk states";
  EXPECT_LE(ref::rel_rms(o.data(), oRef), 1e-5) << "o";
  EXPECT_LE(ref::rel_rms(ht.data(), htRef), 1e-5) << "ht";
  for (size_t i = size_t(count) * hs; i < cs.size(); ++i)
    ASSERT_EQ(cs[i], -9.f) << "written past chunk_states_count at " << i;
}

INSTANTIATE_TEST_SUITE_P(Cpu, ChunkStates, ::testing::ValuesIn(allCases()), caseName);

// A call on the fixed-length shape, f32, chunk 16, ready to run.
struct Call {
  test::Problem pr;
  std::vector<float> o, ht, cs;
  deltac_fwd_params p{};
  deltac_options opt{};
  explicit Call(uint64_t seed) {
    pr = makeCsProblem({DELTAC_VARIANT_GATED, 1, 16, DELTAC_STATE_KV, DELTAC_F32}, seed);
    o.assign(pr.oCount(), -7.f);
    ht.assign(pr.stateCount(), -7.f);
    p = pr.params(o.data(), ht.data());
    opt = deltac_default_options();
    opt.device = DELTAC_DEVICE_CPU;
    opt.chunk = 16;
    cs.assign(size_t(2 * 5) * p.HV * p.K * p.V, -9.f); // 2 x ceil(67 / 16)
    opt.chunk_states = cs.data();
    opt.chunk_states_count = 10;
  }
  // The call fails with a message containing what (any message for ""),
  // and writes nothing.
  void expectRefused(const std::string &what) {
    EXPECT_NE(deltac_forward(&p, &opt), 0);
    const std::string e = deltac_last_error();
    EXPECT_FALSE(e.empty());
    EXPECT_NE(e.find(what), std::string::npos) << e;
    EXPECT_TRUE(untouched());
  }
  bool untouched() const {
    for (float x : o)
      if (x != -7.f)
        return false;
    for (float x : ht)
      if (x != -7.f)
        return false;
    for (float x : cs)
      if (x != -9.f)
        return false;
    return true;
  }
};

TEST(ChunkStatesApi, CountOfFixedAndVarlenCalls) {
  Call c(1);
  int64_t n = -1;
  ASSERT_EQ(deltac_chunk_states_count(&c.p, &c.opt, &n), 0) << deltac_last_error();
  EXPECT_EQ(n, 10);
  c.opt.chunk = 64;
  ASSERT_EQ(deltac_chunk_states_count(&c.p, &c.opt, &n), 0);
  EXPECT_EQ(n, 4); // 2 x ceil(67 / 64)
  test::Problem v = makeCsProblem({DELTAC_VARIANT_GATED, 0, 32, DELTAC_STATE_KV, DELTAC_F32}, 2);
  deltac_fwd_params pv = v.params(nullptr, nullptr);
  c.opt.chunk = 32;
  ASSERT_EQ(deltac_chunk_states_count(&pv, &c.opt, &n), 0) << deltac_last_error();
  EXPECT_EQ(n, 2 + 0 + 1 + 1); // 33, 0, 32 and 1 tokens
  // Device cu_seqlens are not read: the bound over any split.
  c.opt.device_pointers = 1;
  ASSERT_EQ(deltac_chunk_states_count(&pv, &c.opt, &n), 0) << deltac_last_error();
  EXPECT_EQ(n, (66 + 4 * 31) / 32);
}

TEST(ChunkStatesApi, CountNeedsAChunkAndPointers) {
  Call c(3);
  int64_t n = -1;
  c.opt.chunk = 0;
  EXPECT_NE(deltac_chunk_states_count(&c.p, &c.opt, &n), 0);
  EXPECT_NE(std::string(deltac_last_error()).find("16, 32 or 64"), std::string::npos)
      << deltac_last_error();
  c.opt.chunk = 16;
  EXPECT_NE(deltac_chunk_states_count(nullptr, &c.opt, &n), 0);
  EXPECT_NE(std::string(deltac_last_error()).find("params is null"), std::string::npos);
  EXPECT_NE(deltac_chunk_states_count(&c.p, &c.opt, nullptr), 0);
  EXPECT_NE(std::string(deltac_last_error()).find("count is null"), std::string::npos);
}

TEST(ChunkStatesApi, RefusedWithoutAChunkSize) {
  Call c(4);
  c.opt.chunk = 0;
  c.opt.mode = DELTAC_MODE_CHUNKED;
  c.expectRefused("options.chunk_states");
}

TEST(ChunkStatesApi, RefusedWhenTheBufferIsShort) {
  Call c(5);
  c.opt.chunk_states_count = 9;
  c.expectRefused("options.chunk_states_count = 9: expected at least 10");
  c.opt.chunk_states_count = -1;
  c.expectRefused("chunk_states_count = -1");
}

TEST(ChunkStatesApi, RefusedByTheRecurrentFamilies) {
  Call c(6);
  c.opt.chunk = 0;
  c.opt.config.family = "cpu_recurrent";
  c.expectRefused("chunked families only");
}

TEST(ChunkStatesApi, InPlaceInitialState) {
  const uint64_t seed = test::freshSeed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  Call c(seed);
  std::vector<double> oRef, htRef;
  const std::vector<double> want = test::expectedChunkStates(c.p, 16, &oRef, &htRef);
  std::vector<float> state = c.pr.h0; // h0 == ht
  c.p.h0 = state.data();
  c.p.ht = state.data();
  ASSERT_EQ(deltac_forward(&c.p, &c.opt), 0) << deltac_last_error();
  EXPECT_LE(ref::rel_rms(c.cs.data(), want), 1e-5);
  EXPECT_LE(ref::rel_rms(state.data(), htRef), 1e-5);
}

} // namespace

// The backward's saved states (deltac/backward_rules.h): their size, and the
// calls that must refuse them (no GPU needed: refused before any device).
namespace {

TEST(SavedStatesApi, SizeFollowsTheRule) {
  // 2 x 4096 tokens, 4 value heads, K = V = 64: 128 + 2 + 1 slots, bf16
  // [V][K] and [V][64] per slot and head, after the 256-byte header.
  const size_t per = size_t(131) * 4 * 64 * 64 * 2;
  EXPECT_EQ(deltac_saved_states_size(DELTAC_VARIANT_DELTA, 8192, 2, 4, 64, 64, DELTAC_BF16),
            256 + 2 * per);
  EXPECT_EQ(deltac_saved_states_size(DELTAC_VARIANT_GATED, 8192, 2, 4, 64, 64, DELTAC_BF16),
            256 + 2 * per);
  EXPECT_EQ(deltac_saved_states_size(DELTAC_VARIANT_GATED, 8192, 2, 4, 64, 64, DELTAC_F32), 0u);
  EXPECT_EQ(deltac_saved_states_size(DELTAC_VARIANT_KDA, 8192, 2, 4, 64, 64, DELTAC_BF16), 0u);
  EXPECT_EQ(deltac_saved_states_size(DELTAC_VARIANT_GATED, 8192, 2, 4, 256, 256, DELTAC_BF16),
            0u);
  // sequences under two chunks on average: the backward runs its sweep
  EXPECT_EQ(deltac_saved_states_size(DELTAC_VARIANT_GATED, 8192, 65, 4, 64, 64, DELTAC_BF16), 0u);
  EXPECT_EQ(deltac_saved_states_size(DELTAC_VARIANT_GATED, -1, 1, 4, 64, 64, DELTAC_BF16), 0u);
}

// Keeping them pays only where a forward's kernel writes them: never where
// they are not offered, nor without a CUDA device (the GPU side:
// BackwardRule.SavedStatesPayWhereTheForwardWritesThem).
TEST(SavedStatesApi, PayNeedsAForwardThatWritesThem) {
  EXPECT_EQ(deltac_saved_states_pay(DELTAC_VARIANT_KDA, 8192, 2, 64, 64, 64, DELTAC_BF16), 0);
  EXPECT_EQ(deltac_saved_states_pay(DELTAC_VARIANT_DELTA, 8192, 2, 64, 64, 64, DELTAC_F32), 0);
  EXPECT_EQ(deltac_saved_states_pay(DELTAC_VARIANT_DELTA, 8192, 65, 64, 64, 64, DELTAC_BF16), 0);
  if (deltac_cuda_available())
    GTEST_SKIP() << "a CUDA device is present: the GPU suite checks the rule";
  EXPECT_EQ(deltac_saved_states_pay(DELTAC_VARIANT_DELTA, 8192, 2, 64, 64, 64, DELTAC_BF16), 0);
}

TEST(SavedStatesApi, ForwardNeedsDevicePointers) {
  Call c(7);
  c.opt.chunk_states = nullptr;
  c.opt.chunk_states_count = 0;
  std::vector<char> buf(1 << 20);
  c.opt.saved_states = buf.data();
  c.opt.saved_states_bytes = buf.size();
  c.expectRefused("options.saved_states is set: it needs options.device_pointers = 1");
}

TEST(SavedStatesApi, BackwardOnTheCpuRefusesThem) {
  std::vector<float> x(4096, 0.f);
  deltac_bwd_params p{};
  p.variant = DELTAC_VARIANT_DELTA;
  p.B = p.N = 1, p.T = 4, p.H = p.HV = 1, p.K = p.V = 16;
  p.in_dtype = p.out_dtype = DELTAC_F32;
  p.q = p.k = p.v = p.beta = p.dout = x.data();
  p.dq = p.dk = p.dv = p.dbeta = x.data() + 1024;
  p.saved_states = x.data() + 2048;
  p.saved_states_bytes = 4096;
  deltac_options opt = deltac_default_options();
  EXPECT_NE(deltac_backward(&p, &opt), 0);
  EXPECT_NE(std::string(deltac_last_error()).find("params.saved_states is set"),
            std::string::npos)
      << deltac_last_error();
}

} // namespace

// CUDA calls whose K, V have no precompiled instance run one of larger dims
// on zero-padded copies (issues 7, 8; runtime/src/cuda_pad.cu), or, for the
// recurrent family where NVRTC works, a kernel compiled at run time for the
// exact dims or knobs (issue 9; runtime/src/cuda_jit.cu): the choice of the
// padded pair (no GPU needed), the NVRTC compile of every recurrent kernel
// form (no GPU needed), and on a GPU (skipped without one) every variant
// against the float64 reference, with outputs poisoned past their extent,
// state pools with -1 slots, state_steps, accepted counts, bf16 states,
// mixed batches and the checking mode. The padded cases run with DELTAC_JIT=0.
#include "cuda_jit.h"
#include "deltac/catalogue.h"
#include "deltac/runtime.h"
#include "dispatch.h"
#include "jit.h"
#include "select.h"
#include "test_util.h"

#include <cuda_runtime.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace deltac {
namespace {

bool gpu() { return deltac_cuda_available() != 0; }

using test::JitEnv;

// --- the padded pair (catalogue + select.cpp; no GPU) ---------------------

rt::Choice choose(int K, int V, int64_t len, int mode, std::string *err) {
  Problem prob;
  prob.variant = DELTAC_VARIANT_GATED;
  prob.K = K, prob.V = V, prob.H = 1, prob.HV = 2;
  prob.max_seqlen = len;
  deltac_options opt = deltac_default_options();
  opt.mode = mode;
  rt::Choice c;
  EXPECT_TRUE(rt::choose_config(Device::CUDA, opt, prob, &c, err)) << *err;
  return c;
}

TEST(CudaPadChoice, SmallestPrecompiledPairOfTheRulesFamily) {
  JitEnv off("0");
  std::string err;
  struct Row {
    int K, V;
    int64_t len;
    int mode;
    Family family;
    int Kp, Vp;
  } rows[] = {
      {96, 80, 1, DELTAC_MODE_AUTO, Family::CudaRecurrent, 128, 128},
      {16, 16, 1, DELTAC_MODE_AUTO, Family::CudaRecurrent, 64, 64},
      {16, 16, 500, DELTAC_MODE_AUTO, Family::CudaChunked, 64, 64},
      {192, 64, 500, DELTAC_MODE_AUTO, Family::CudaChunked, 256, 256},
      {192, 64, 500, DELTAC_MODE_RECURRENT, Family::CudaRecurrent, 256, 128},
      {48, 256, 500, DELTAC_MODE_AUTO, Family::CudaChunked, 128, 256},
      {80, 160, 4, DELTAC_MODE_CHUNKED, Family::CudaChunked, 128, 256},
      {128, 128, 500, DELTAC_MODE_AUTO, Family::CudaChunked, 128, 128}, // own
      {256, 128, 500, DELTAC_MODE_AUTO, Family::CudaRecurrent, 256, 128}, // own
  };
  for (const Row &r : rows) {
    SCOPED_TRACE("K " + std::to_string(r.K) + " V " + std::to_string(r.V) +
                 " len " + std::to_string(r.len));
    const rt::Choice c = choose(r.K, r.V, r.len, r.mode, &err);
    EXPECT_EQ(c.config.family, r.family);
    EXPECT_EQ(c.K, r.Kp);
    EXPECT_EQ(c.V, r.Vp);
  }
}

TEST(CudaPadChoice, PinnedConfigsAreNotPadded) {
  JitEnv off("0");
  Problem prob;
  prob.K = 96, prob.V = 96;
  deltac_options opt = deltac_default_options();
  opt.config.family = "cuda_recurrent";
  opt.config.tile_v = 16;
  opt.config.warps = 4;
  rt::Choice c;
  std::string err;
  EXPECT_FALSE(rt::choose_config(Device::CUDA, opt, prob, &c, &err));
  EXPECT_NE(err.find("not precompiled"), std::string::npos) << err;
}

// --- on a GPU --------------------------------------------------------------

constexpr size_t kTail = 512; // poisoned bytes after every device tensor
constexpr uint8_t kPoison = 0xA5;

size_t bytesOf(int32_t dt) { return dt == DELTAC_F32 ? 4 : 2; }

// Byte sizes of the tensors of p (params.h).
struct Sizes {
  size_t qk, v, beta, g, state, o, cu, slots, steps;
  explicit Sizes(const deltac_fwd_params &p) {
    const size_t tok = size_t(p.B) * p.T, in = bytesOf(p.in_dtype);
    const size_t kv = size_t(p.K) * p.V * bytesOf(p.state_dtype);
    qk = tok * p.H * p.K * in;
    v = tok * p.HV * p.V * in;
    beta = tok * p.HV * 4;
    g = p.variant == DELTAC_VARIANT_KDA ? beta * p.K
        : p.variant == DELTAC_VARIANT_GATED ? beta : 0;
    state = size_t(p.read_slots ? p.num_slots : p.N) * p.HV * kv;
    o = tok * p.HV * p.V * bytesOf(p.out_dtype);
    cu = p.cu_seqlens ? (size_t(p.N) + 1) * 8 : 0;
    slots = size_t(p.N) * 4;
    steps = p.state_steps ? tok * p.HV * kv : 0;
  }
};

// A device copy of n host bytes (src null: none) followed by kTail poisoned
// bytes; null when src is null.
struct Dev {
  void *ptr = nullptr;
  size_t n = 0;
  Dev(const void *src, size_t bytes) : n(bytes) {
    if (!src)
      return;
    EXPECT_EQ(cudaMalloc(&ptr, n + kTail), cudaSuccess);
    cudaMemset(ptr, kPoison, n + kTail);
    cudaMemcpy(ptr, src, n, cudaMemcpyHostToDevice);
  }
  Dev(const Dev &) = delete;
  Dev &operator=(const Dev &) = delete;
  ~Dev() {
    if (ptr)
      cudaFree(ptr);
  }
  // Copies the n bytes back to dst; false when the tail was written.
  bool back(void *dst) const {
    std::vector<uint8_t> h(n + kTail);
    EXPECT_EQ(cudaMemcpy(h.data(), ptr, h.size(), cudaMemcpyDeviceToHost),
              cudaSuccess);
    std::memcpy(dst, h.data(), n);
    for (size_t i = n; i < h.size(); ++i)
      if (h[i] != kPoison)
        return false;
    return true;
  }
};

// Runs hp (host pointers, outputs included) through device pointers on a
// stream with the workspace deltac_workspace_size asks for, and copies o,
// ht and state_steps back into hp's buffers; expects nothing written past
// their extent.
int runDevice(const deltac_fwd_params &hp, deltac_options opt,
              deltac_run_info *info, size_t ws_bytes = size_t(-1), bool needs_ws = false) {
  const Sizes s(hp);
  Dev q(hp.q, s.qk), k(hp.k, s.qk), v(hp.v, s.v), beta(hp.beta, s.beta),
      g(hp.g, s.g), cu(hp.cu_seqlens, s.cu), rs(hp.read_slots, s.slots),
      wsl(hp.write_slots, s.slots), acc(hp.accepted, s.slots),
      h0(hp.h0, s.state), o(hp.o, s.o), steps(hp.state_steps, s.steps);
  const bool inPlace = hp.h0 && hp.h0 == hp.ht;
  Dev ht(inPlace ? nullptr : hp.ht, s.state);
  deltac_fwd_params d = hp;
  d.q = q.ptr, d.k = k.ptr, d.v = v.ptr;
  d.beta = static_cast<const float *>(beta.ptr);
  d.g = static_cast<const float *>(g.ptr);
  d.cu_seqlens = static_cast<const int64_t *>(cu.ptr);
  d.read_slots = static_cast<const int32_t *>(rs.ptr);
  d.write_slots = static_cast<const int32_t *>(wsl.ptr);
  d.accepted = static_cast<const int32_t *>(acc.ptr);
  d.h0 = h0.ptr;
  d.ht = inPlace ? h0.ptr : ht.ptr;
  d.o = o.ptr;
  d.state_steps = steps.ptr;
  cudaStream_t stream;
  EXPECT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  opt.device = DELTAC_DEVICE_CUDA;
  opt.device_pointers = 1;
  opt.cuda_stream = stream;
  size_t need = 0;
  EXPECT_EQ(deltac_workspace_size(&d, &opt, &need), 0) << deltac_last_error();
  if (needs_ws)
    EXPECT_GT(need, 0u) << "deltac_workspace_size";
  void *ws = nullptr;
  if (ws_bytes == size_t(-1))
    ws_bytes = need;
  if (ws_bytes)
    EXPECT_EQ(cudaMalloc(&ws, ws_bytes), cudaSuccess);
  opt.workspace = ws, opt.workspace_bytes = ws_bytes;
  const int rc = deltac_forward_info(&d, &opt, info);
  EXPECT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  cudaStreamDestroy(stream);
  if (ws)
    cudaFree(ws);
  EXPECT_TRUE(o.back(hp.o)) << "o: written past its extent";
  if (hp.ht)
    EXPECT_TRUE((inPlace ? h0 : ht).back(hp.ht)) << "ht: written past its extent";
  if (hp.state_steps)
    EXPECT_TRUE(steps.back(hp.state_steps)) << "state_steps: written past its extent";
  return rc;
}

const char *variantName(int v) {
  return v == 0 ? "delta" : v == 1 ? "gated" : "kda";
}

std::string padNote(int K, int V) {
  return "padded K=" + std::to_string(K) + ",V=" + std::to_string(V) + " to ";
}

// One prompt-style call: T tokens (batch of 2, or varlen with a 1-token last
// sequence), GVA 2 (H = 1, HV = 2), h0 in and ht out.
struct PadCase {
  int variant, K, V, T;
  bool varlen, bf16, vk, device;
  int mode;
  bool jit = false; // the NVRTC path (recurrent), not the padded one
};

std::string caseName(const PadCase &c) {
  return std::string(variantName(c.variant)) + "_K" + std::to_string(c.K) + "_V" +
         std::to_string(c.V) + "_T" + std::to_string(c.T) +
         (c.bf16 ? "_bf16" : "_f32") + (c.vk ? "_VK" : "_KV") +
         (c.varlen ? "_varlen" : "_batch") + (c.device ? "_dev" : "_host") +
         (c.mode == DELTAC_MODE_CHUNKED     ? "_chunked"
          : c.mode == DELTAC_MODE_RECURRENT ? "_recurrent"
                                            : "") +
         (c.jit ? "_jit" : "");
}

// Every variant x pair, each pair at T = 1, 65 and 1000 across the variants,
// both dtypes and layouts, batch and varlen, host and device pointers; then
// the modes pinned.
std::vector<PadCase> padCases() {
  const int pairs[][2] = {{16, 16}, {32, 48}, {96, 96},
                          {80, 160}, {192, 64}, {48, 256}};
  const int Ts[] = {1, 65, 1000};
  std::vector<PadCase> cases;
  for (int vi = 0; vi < 3; ++vi)
    for (int pi = 0; pi < 6; ++pi)
      cases.push_back({vi, pairs[pi][0], pairs[pi][1], Ts[(pi + vi) % 3],
                       (pi + vi) % 2 == 0, (pi + vi) % 2 == 1,
                       (pi / 2 + vi) % 2 == 1, (pi + 2 * vi) % 3 != 0,
                       DELTAC_MODE_AUTO});
  cases.push_back({1, 32, 48, 65, true, false, false, true, DELTAC_MODE_CHUNKED});
  cases.push_back({2, 96, 80, 65, false, true, true, true, DELTAC_MODE_RECURRENT});
  cases.push_back({0, 112, 240, 40, true, false, true, false, DELTAC_MODE_CHUNKED});
  return cases;
}

// The NVRTC path: decode-sized calls (T = 1: the one-token kernel; 4, 13:
// several tokens, varlen with a 1-token tail) of dims with no instance, every
// variant, both dtypes and layouts; T = 65 with the recurrent mode pinned.
std::vector<PadCase> jitCases() {
  const int pairs[][2] = {{16, 16}, {32, 48}, {96, 96}, {80, 160},
                          {192, 64}, {48, 256}, {112, 240}, {256, 80}};
  const int Ts[] = {1, 4, 13, 65};
  std::vector<PadCase> cases;
  for (int i = 0; i < 12; ++i) {
    const int T = Ts[i % 4];
    cases.push_back({i % 3, pairs[i % 8][0], pairs[i % 8][1], T, i % 4 == 2, i % 2 == 1,
                     (i / 2) % 2 == 1, i % 3 != 1,
                     T > 16 ? DELTAC_MODE_RECURRENT : DELTAC_MODE_AUTO, true});
  }
  return cases;
}

std::string jitNote() { return "compiled at run time by NVRTC"; }

// Skips the test where NVRTC cannot run the recurrent family here; fails
// instead with DELTAC_TEST_REQUIRE_JIT=1 (GPU runs that must test it).
#define SKIP_WITHOUT_JIT()                                                     \
  do {                                                                         \
    std::string why_;                                                          \
    if (!rt::cuda_jit_enabled(Family::CudaRecurrent, &why_)) {                 \
      if (std::getenv("DELTAC_TEST_REQUIRE_JIT"))                              \
        FAIL() << why_;                                                        \
      GTEST_SKIP() << why_;                                                    \
    }                                                                          \
  } while (0)

class CudaPadPrompt : public ::testing::TestWithParam<PadCase> {};

TEST_P(CudaPadPrompt, MatchesReference) {
  if (!gpu())
    GTEST_SKIP() << "no CUDA device";
  const PadCase c = GetParam();
  JitEnv env(c.jit ? nullptr : "0");
  if (c.jit)
    SKIP_WITHOUT_JIT();
  const uint64_t seed = test::freshSeed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  test::Problem pr;
  pr.variant = c.variant;
  pr.B = c.varlen ? 1 : 2;
  pr.T = c.T;
  pr.H = 1, pr.HV = 2, pr.K = c.K, pr.V = c.V;
  if (c.varlen) // the last sequence has one token
    pr.cu = c.T >= 3 ? std::vector<int64_t>{0, c.T / 3, c.T - 1, c.T}
                     : std::vector<int64_t>{0, c.T - 1, c.T};
  pr.fill(seed);
  std::vector<uint16_t> q16 = test::toBf16(pr.q), k16 = test::toBf16(pr.k),
                        v16 = test::toBf16(pr.v), o16(pr.oCount());
  std::vector<float> o(pr.oCount()), ht(pr.stateCount());
  deltac_fwd_params p = pr.params(c.bf16 ? (void *)o16.data() : o.data(), ht.data());
  if (c.bf16) {
    p.in_dtype = p.out_dtype = DELTAC_BF16;
    p.q = q16.data(), p.k = k16.data(), p.v = v16.data();
  }
  p.state_layout = c.vk ? DELTAC_STATE_VK : DELTAC_STATE_KV;
  p.qk_l2norm = int(seed % 2);
  p.scale = 0; // the default: 1/sqrt(K) of the call's own K
  std::vector<double> oRef, htRef;
  ref::forward(p, &oRef, &htRef);

  deltac_options opt = deltac_default_options();
  opt.device = DELTAC_DEVICE_CUDA;
  opt.mode = c.mode;
  deltac_run_info info{};
  ASSERT_EQ(c.device ? runDevice(p, opt, &info) : deltac_forward_info(&p, &opt, &info), 0)
      << deltac_last_error();
  EXPECT_EQ(info.device, DELTAC_DEVICE_CUDA);
  ASSERT_NE(info.note, nullptr);
  EXPECT_NE(std::string(info.note).find(c.jit ? jitNote() : padNote(c.K, c.V)),
            std::string::npos)
      << info.note;
  if (c.jit)
    EXPECT_STREQ(info.family, "cuda_recurrent");
  const bool chunked = std::string(info.family) == "cuda_chunked";
  // f32: the chunked kernel's three-TF32 products (tests/cuda/chunked_test).
  const double tol = c.bf16 ? 5e-3 : chunked ? 1e-4 : 1e-5;
  const double eo = c.bf16 ? ref::rel_rms(o16.data(), oRef) : ref::rel_rms(o.data(), oRef);
  EXPECT_LE(eo, tol) << "o, " << info.family;
  EXPECT_LE(ref::rel_rms(ht.data(), htRef), c.bf16 ? 5e-3 : tol) << "ht, " << info.family;
}

INSTANTIATE_TEST_SUITE_P(Gpu, CudaPadPrompt, ::testing::ValuesIn(padCases()),
                         [](const auto &info) { return caseName(info.param); });
INSTANTIATE_TEST_SUITE_P(GpuJit, CudaPadPrompt, ::testing::ValuesIn(jitCases()),
                         [](const auto &info) { return caseName(info.param); });

// Decode: 4 sequences from a pool of 6 states updated in place; sequence 1 is
// padding (-1, -1), sequence 2 reads slot 0 and writes slot 1, sequence 3
// reads slot 2 and writes nothing. T = 3: state_steps and accepted counts.
struct PoolCase {
  int variant, K, V, T;
  bool bf16State, vk, device;
  bool jit = false; // the NVRTC path, not the padded one
};

class CudaPadPool : public ::testing::TestWithParam<PoolCase> {};

TEST_P(CudaPadPool, MatchesReferenceAndLeavesOtherSlots) {
  if (!gpu())
    GTEST_SKIP() << "no CUDA device";
  const PoolCase c = GetParam();
  JitEnv env(c.jit ? nullptr : "0");
  if (c.jit)
    SKIP_WITHOUT_JIT();
  const uint64_t seed = test::freshSeed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  test::Problem pr;
  pr.variant = c.variant;
  pr.B = 4, pr.T = c.T, pr.H = 1, pr.HV = 2, pr.K = c.K, pr.V = c.V;
  pr.withH0 = false;
  pr.fill(seed);
  const int slots = 6;
  const size_t hs = size_t(pr.HV) * c.K * c.V;
  std::mt19937_64 rng(seed + 1);
  std::normal_distribution<float> nd(0.f, 0.3f);
  std::vector<float> pool32(slots * hs);
  for (float &x : pool32)
    x = nd(rng);
  std::vector<uint16_t> pool16 = test::toBf16(pool32);
  std::vector<int32_t> read = {5, -1, 0, 2}, write = {5, -1, 1, -1}, acc = {2, 0, 3, 1};
  std::vector<float> o(pr.oCount()), steps32(size_t(pr.B) * c.T * hs);
  std::vector<uint16_t> steps16(steps32.size());
  deltac_fwd_params p = pr.params(o.data(), nullptr);
  void *pool = c.bf16State ? (void *)pool16.data() : (void *)pool32.data();
  p.state_dtype = c.bf16State ? DELTAC_BF16 : DELTAC_F32;
  p.state_layout = c.vk ? DELTAC_STATE_VK : DELTAC_STATE_KV;
  p.h0 = p.ht = pool;
  p.num_slots = slots;
  p.read_slots = read.data();
  p.write_slots = write.data();
  if (c.T > 1) {
    p.accepted = acc.data();
    p.state_steps = c.bf16State ? (void *)steps16.data() : (void *)steps32.data();
  }
  p.qk_l2norm = 1;
  std::vector<double> oRef, htRef, stepsRef;
  ref::forward(p, &oRef, &htRef, p.state_steps ? &stepsRef : nullptr);
  std::vector<double> before(slots * hs);
  for (size_t i = 0; i < before.size(); ++i)
    before[i] = c.bf16State ? ref::bf16_to_float(pool16[i]) : pool32[i];
  const std::vector<double> poolRef = ref::pool_after(p, htRef, before);
  const std::vector<uint16_t> pool16Before = pool16;
  const std::vector<float> pool32Before = pool32;

  deltac_options opt = deltac_default_options();
  opt.device = DELTAC_DEVICE_CUDA;
  deltac_run_info info{};
  ASSERT_EQ(c.device ? runDevice(p, opt, &info) : deltac_forward_info(&p, &opt, &info), 0)
      << deltac_last_error();
  EXPECT_STREQ(info.family, "cuda_recurrent");
  EXPECT_NE(std::string(info.note).find(c.jit ? jitNote() : padNote(c.K, c.V)),
            std::string::npos)
      << info.note;
  const double st = c.bf16State ? 5e-3 : 1e-5;
  EXPECT_LE(ref::rel_rms(o.data(), oRef), c.bf16State ? 5e-3 : 1e-5) << "o";
  if (c.bf16State)
    EXPECT_LE(ref::rel_rms(pool16.data(), poolRef), st) << "pool";
  else
    EXPECT_LE(ref::rel_rms(pool32.data(), poolRef), st) << "pool";
  for (int s : {0, 2, 3, 4}) { // written by no sequence: untouched, bit for bit
    const size_t b = size_t(s) * hs;
    if (c.bf16State)
      EXPECT_EQ(std::memcmp(&pool16[b], &pool16Before[b], hs * 2), 0) << "slot " << s;
    else
      EXPECT_EQ(std::memcmp(&pool32[b], &pool32Before[b], hs * 4), 0) << "slot " << s;
  }
  if (p.state_steps) {
    if (c.bf16State)
      EXPECT_LE(ref::rel_rms(steps16.data(), stepsRef), st) << "state_steps";
    else
      EXPECT_LE(ref::rel_rms(steps32.data(), stepsRef), st) << "state_steps";
  }
}

INSTANTIATE_TEST_SUITE_P(
    Gpu, CudaPadPool,
    ::testing::Values(PoolCase{1, 32, 48, 1, false, false, true},
                      PoolCase{2, 96, 80, 1, true, true, false},
                      PoolCase{1, 80, 112, 3, true, false, false},
                      PoolCase{2, 48, 32, 3, false, true, true},
                      PoolCase{0, 192, 64, 1, false, false, true},
                      PoolCase{1, 96, 96, 1, false, false, true, true},
                      PoolCase{2, 96, 80, 1, true, true, false, true},
                      PoolCase{1, 80, 112, 3, true, false, true, true},
                      PoolCase{0, 48, 32, 3, false, true, false, true}),
    [](const auto &info) {
      const PoolCase &c = info.param;
      return std::string(variantName(c.variant)) + "_K" + std::to_string(c.K) + "_V" +
             std::to_string(c.V) + "_T" + std::to_string(c.T) +
             (c.bf16State ? "_bf16state" : "_f32state") + (c.vk ? "_VK" : "_KV") +
             (c.device ? "_dev" : "_host") + (c.jit ? "_jit" : "");
    });

// A mixed batch (prompts and decode steps, one varlen call) runs both kernels
// on the same padded tensors.
TEST(CudaPad, MixedBatchRunsBothKernelsPadded) {
  JitEnv off("0");
  if (!gpu())
    GTEST_SKIP() << "no CUDA device";
  const uint64_t seed = test::freshSeed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  test::Problem pr;
  pr.variant = DELTAC_VARIANT_GATED;
  pr.B = 1, pr.T = 145, pr.H = 2, pr.HV = 4, pr.K = 80, pr.V = 96;
  pr.cu = {0, 1, 41, 44, 144, 145};
  pr.fill(seed);
  std::vector<float> o(pr.oCount()), ht(pr.stateCount());
  deltac_fwd_params p = pr.params(o.data(), ht.data());
  std::vector<double> oRef, htRef;
  ref::forward(p, &oRef, &htRef);
  deltac_options opt = deltac_default_options();
  deltac_run_info info{};
  ASSERT_EQ(runDevice(p, opt, &info), 0) << deltac_last_error();
  EXPECT_STREQ(info.family, "cuda_chunked");
  const std::string note = info.note;
  EXPECT_NE(note.find(padNote(80, 96) + "128/128"), std::string::npos) << note;
  EXPECT_NE(note.find("mixed batch"), std::string::npos) << note;
  EXPECT_LE(ref::rel_rms(o.data(), oRef), 1e-4);
  EXPECT_LE(ref::rel_rms(ht.data(), htRef), 1e-4);
}

// Checking mode: a bad value sets the flag on the device, and neither the
// kernel nor the unpadding writes anything (o and ht keep their bytes).
TEST(CudaPad, CheckingModeFlagStopsEveryWrite) {
  JitEnv off("0");
  if (!gpu())
    GTEST_SKIP() << "no CUDA device";
  test::Problem pr;
  pr.B = 2, pr.T = 5, pr.K = 32, pr.V = 48;
  pr.fill(test::freshSeed());
  pr.beta[3] = 7.f; // beta must be in [0, 1]
  std::vector<float> o(pr.oCount(), 1.5f), ht(pr.stateCount(), 2.5f);
  deltac_fwd_params p = pr.params(o.data(), ht.data());
  int32_t *flag = nullptr;
  ASSERT_EQ(cudaMalloc(&flag, 4), cudaSuccess);
  cudaMemset(flag, 0, 4);
  deltac_options opt = deltac_default_options();
  opt.check_values = 1;
  opt.check_flag = flag;
  deltac_run_info info{};
  ASSERT_EQ(runDevice(p, opt, &info), 0) << deltac_last_error();
  int32_t got = 0;
  cudaMemcpy(&got, flag, 4, cudaMemcpyDeviceToHost);
  cudaFree(flag);
  EXPECT_NE(got, 0);
  for (float x : o)
    ASSERT_EQ(x, 1.5f) << "o was written";
  for (float x : ht)
    ASSERT_EQ(x, 2.5f) << "ht was written";
}

TEST(CudaPad, TooSmallWorkspaceIsAnErrorNamingIt) {
  JitEnv off("0");
  if (!gpu())
    GTEST_SKIP() << "no CUDA device";
  test::Problem pr;
  pr.B = 2, pr.T = 40, pr.K = 96, pr.V = 96;
  pr.fill(test::freshSeed());
  std::vector<float> o(pr.oCount()), ht(pr.stateCount());
  deltac_fwd_params p = pr.params(o.data(), ht.data());
  deltac_options opt = deltac_default_options();
  deltac_run_info info{};
  EXPECT_NE(runDevice(p, opt, &info, 256), 0);
  EXPECT_NE(std::string(deltac_last_error()).find("options.workspace_bytes"),
            std::string::npos)
      << deltac_last_error();
}

// --- the NVRTC path ---------------------------------------------------------

// A problem's params (host pointers into pr and the buffers) with input
// dtype `in`, for building a program (nothing runs).
struct ProgramCall {
  test::Problem pr;
  std::vector<float> o, ht;
  deltac_fwd_params p;
  ProgramCall(int variant, int K, int V, int T, int in) {
    pr.variant = variant;
    pr.B = 1, pr.T = T, pr.H = 1, pr.HV = 2, pr.K = K, pr.V = V;
    pr.fill(1);
    o.resize(pr.oCount()), ht.resize(pr.stateCount());
    p = pr.params(o.data(), ht.data());
    p.in_dtype = p.out_dtype = in;
  }
};

// prog compiles for compute capability cc: a cubin and one lowered name per
// kernel expression.
void expectCompiles(const rt::jit::Program &prog, int cc) {
  std::string why, cubin;
  std::vector<std::string> lowered;
  ASSERT_TRUE(rt::jit::compile(prog, cc, &cubin, &lowered, &why)) << why;
  ASSERT_EQ(lowered.size(), prog.kernels.size());
  for (const std::string &l : lowered)
    EXPECT_FALSE(l.empty());
  ASSERT_GE(cubin.size(), 4u);
  EXPECT_EQ(cubin.compare(0, 4, "\x7f" "ELF"), 0) << "not an ELF cubin";
}

// Every recurrent kernel form compiles through NVRTC from the embedded
// headers (no GPU needed: compile only, for sm_90a and sm_80), as the
// runtime builds them for a call.
// Skips a compile-only test where NVRTC does not load here.
#define SKIP_WITHOUT_NVRTC(why)                                                \
  if (!rt::jit::available(&why))                                               \
  GTEST_SKIP() << why

TEST(CudaJitCompile, EveryRecurrentFormCompiles) {
  std::string why;
  SKIP_WITHOUT_NVRTC(why);
  // seqs: the batch (a narrow one-token tile runs the split kernel on large
  // grids, the strip kernel on small ones: recurrent_choice).
  struct Row {
    int variant, K, V, in, state, tile_v, warps, T;
    bool steps;
    cuda::RecurrentKernel form;
    int seqs = 1;
    bool staged = false;  // the staged one-token kernel (recurrent_staged)
  } rows[] = {
      {1, 96, 96, DELTAC_BF16, DELTAC_F32, 16, 2, 1, false, cuda::RecurrentKernel::Split, 4096},
      {1, 96, 96, DELTAC_BF16, DELTAC_F32, 16, 2, 1, false, cuda::RecurrentKernel::StripOne, 1,
       true},
      {1, 96, 96, DELTAC_BF16, DELTAC_F32, 32, 2, 1, false, cuda::RecurrentKernel::StripOne, 1,
       true},
      {2, 80, 112, DELTAC_F32, DELTAC_BF16, 16, 2, 4, true, cuda::RecurrentKernel::Strip},
      {0, 256, 80, DELTAC_BF16, DELTAC_BF16, 16, 4, 3, false, cuda::RecurrentKernel::Strip},
      {1, 128, 128, DELTAC_BF16, DELTAC_F32, 16, 4, 1, false, cuda::RecurrentKernel::Split, 4096},
      {0, 16, 16, DELTAC_F32, DELTAC_F32, 16, 1, 1, false, cuda::RecurrentKernel::StripOne, 1,
       true},
      // the staged one-token kernel on small grids: an f32 state up to
      // kRecurrentStagedF32Grid blocks, others up to kRecurrentSmallGrid
      // (512 blocks here: two value heads, four tiles, 64 sequences)
      {1, 128, 128, DELTAC_BF16, DELTAC_BF16, 32, 2, 1, false, cuda::RecurrentKernel::StripOne, 1,
       true},
      {1, 128, 128, DELTAC_BF16, DELTAC_BF16, 32, 2, 1, false, cuda::RecurrentKernel::StripOne, 64,
       true},
      {1, 128, 128, DELTAC_BF16, DELTAC_F32, 32, 2, 1, false, cuda::RecurrentKernel::StripOne, 64,
       false},
      // the kernel cuda_jit_enabled's probe compiles
      {1, 16, 16, DELTAC_F32, DELTAC_F32, 16, 1, 1, false, cuda::RecurrentKernel::StripOne, 1,
       true},
  };
  for (const Row &r : rows) {
    ProgramCall call(r.variant, r.K, r.V, r.T, r.in);
    deltac_fwd_params &p = call.p;
    p.N = p.B = r.seqs;  // only the grid size matters here (nothing runs)
    p.state_dtype = r.state;
    if (r.steps)
      p.state_steps = call.ht.data(); // only its presence matters here
    KernelConfig c;
    c.family = Family::CudaRecurrent, c.tile_v = r.tile_v, c.warps = r.warps;
    rt::RecurrentProgram rp;
    ASSERT_TRUE(rt::cuda_recurrent_program(p, c, false, &rp, &why)) << why;
    SCOPED_TRACE(rp.program.name);
    EXPECT_EQ(int(rp.choice.kernel), int(r.form));
    EXPECT_EQ(rp.program.name.find("_staged") != std::string::npos, r.staged);
    EXPECT_EQ(rp.program.kernels.size(), 1u);
    for (int cc : {90, 80})
      expectCompiles(rp.program, cc);
  }
}

// Chunked configs compile through NVRTC too (no GPU needed): a non-default
// chunk with the warp scan, a block-scan config with the split's kernels,
// f32 at dims no instance has, kda f16 (compile only).
TEST(CudaJitCompile, ChunkedConfigsCompile) {
  std::string why;
  SKIP_WITHOUT_NVRTC(why);
  struct Row {
    int variant, K, V, dtype, chunk, tile_v, warps, stages;
    size_t kernels; // index, prep, fold, fix, the legal block and warp scans
  } rows[] = {
      {1, 128, 128, DELTAC_BF16, 32, 64, 8, 2, 8},
      {0, 96, 80, DELTAC_F32, 32, 16, 4, 2, 5},
      {2, 64, 64, DELTAC_F16, 16, 32, 4, 1, 5},
  };
  for (const Row &r : rows) {
    ProgramCall call(r.variant, r.K, r.V, 8, r.dtype);
    KernelConfig c;
    c.family = Family::CudaChunked, c.chunk = r.chunk, c.tile_v = r.tile_v;
    c.warps = r.warps, c.stages = r.stages;
    rt::jit::Program prog;
    ASSERT_TRUE(rt::cuda_chunked_program(call.p, c, &prog, &why)) << why;
    SCOPED_TRACE(prog.name);
    EXPECT_EQ(prog.kernels.size(), r.kernels);
    expectCompiles(prog, 90);
  }
  KernelConfig bad;
  bad.family = Family::CudaChunked, bad.chunk = 48, bad.tile_v = 64, bad.warps = 8, bad.stages = 2;
  ProgramCall call(1, 128, 128, 8, DELTAC_F32);
  rt::jit::Program prog;
  EXPECT_FALSE(rt::cuda_chunked_program(call.p, bad, &prog, &why));
  EXPECT_NE(why.find("not a legal cuda_chunked config"), std::string::npos) << why;
}

// Chunked configs the runtime does not ship run compiled at run time,
// against the float64 reference: options.chunk 32 (the warp scan), a pinned
// block-scan config with a forced split (the fold and fix-up kernels), a
// pinned config at dims no instance has (f32), kda chunk 16, and the
// batch-invariant mode; device pointers with the workspace
// deltac_workspace_size names.
struct ChunkedJitCase {
  const char *name;
  int variant, K, V, dtype;
  int64_t T;
  bool varlen, det;
  int chunk;             // options.chunk (0: none)
  const char *family;    // options.config (null: none)
  int cchunk, tile_v, warps, stages, split, scan;
};

class CudaJitChunked : public ::testing::TestWithParam<ChunkedJitCase> {};

TEST_P(CudaJitChunked, MatchesReference) {
  if (!gpu())
    GTEST_SKIP() << "no CUDA device";
  JitEnv env(nullptr);
  SKIP_WITHOUT_JIT();
  const ChunkedJitCase c = GetParam();
  const uint64_t seed = test::freshSeed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  test::Problem pr;
  pr.variant = c.variant;
  pr.B = c.varlen ? 1 : 2;
  pr.T = int(c.T);
  pr.H = 1, pr.HV = 2, pr.K = c.K, pr.V = c.V;
  if (c.varlen)
    pr.cu = {0, c.T / 3, c.T - 1, c.T};
  pr.fill(seed);
  const bool half = c.dtype == DELTAC_BF16;
  std::vector<uint16_t> q16 = test::toBf16(pr.q), k16 = test::toBf16(pr.k),
                        v16 = test::toBf16(pr.v), o16(pr.oCount());
  std::vector<float> o(pr.oCount()), ht(pr.stateCount());
  deltac_fwd_params p = pr.params(half ? (void *)o16.data() : o.data(), ht.data());
  if (half) {
    p.in_dtype = p.out_dtype = DELTAC_BF16;
    p.q = q16.data(), p.k = k16.data(), p.v = v16.data();
  }
  p.qk_l2norm = 1;
  std::vector<double> oRef, htRef;
  ref::forward(p, &oRef, &htRef);
  deltac_options opt = deltac_default_options();
  opt.mode = DELTAC_MODE_CHUNKED;
  opt.chunk = c.chunk;
  opt.deterministic = c.det;
  if (c.family) {
    opt.config.family = c.family;
    opt.config.chunk = c.cchunk, opt.config.tile_v = c.tile_v, opt.config.warps = c.warps;
    opt.config.stages = c.stages, opt.config.split = c.split, opt.config.scan = c.scan;
  }
  deltac_run_info info{};
  ASSERT_EQ(runDevice(p, opt, &info, size_t(-1), true), 0) << deltac_last_error();
  EXPECT_STREQ(info.family, "cuda_chunked");
  EXPECT_NE(std::string(info.note).find(jitNote()), std::string::npos) << info.note;
  const double tol = half ? 5e-3 : 1e-4; // f32: three TF32 products
  const double eo = half ? ref::rel_rms(o16.data(), oRef) : ref::rel_rms(o.data(), oRef);
  EXPECT_LE(eo, tol) << "o";
  EXPECT_LE(ref::rel_rms(ht.data(), htRef), tol) << "ht";
}

INSTANTIATE_TEST_SUITE_P(
    GpuJit, CudaJitChunked,
    ::testing::Values(
        ChunkedJitCase{"gated_bf16_chunk32_warp", 1, 128, 128, DELTAC_BF16, 300, true, false,
                       32, nullptr, 0, 0, 0, 0, 0, 0},
        ChunkedJitCase{"gated_bf16_block_split4", 1, 128, 128, DELTAC_BF16, 2100, false, false,
                       0, "cuda_chunked", 32, 32, 4, 1, 4, 1},
        ChunkedJitCase{"delta_f32_K96_V80", 0, 96, 80, DELTAC_F32, 130, true, false, 0,
                       "cuda_chunked", 32, 16, 4, 2, 0, 0},
        ChunkedJitCase{"kda_bf16_chunk16", 2, 64, 64, DELTAC_BF16, 77, false, false, 0,
                       "cuda_chunked", 16, 32, 4, 1, 0, 1},
        ChunkedJitCase{"gated_bf16_chunk32_deterministic", 1, 128, 128, DELTAC_BF16, 200, true,
                       true, 32, nullptr, 0, 0, 0, 0, 0, 0}),
    [](const auto &info) { return std::string(info.param.name); });

// A config the runtime does not ship for a shape it ships (tile_v 16 with
// 4 warps at K = V = 128; the default is 2) runs compiled at run time, one
// and several tokens, against the float64 reference.
TEST(CudaJit, PinnedWarpsOfAShippedShape) {
  if (!gpu())
    GTEST_SKIP() << "no CUDA device";
  JitEnv env(nullptr);
  SKIP_WITHOUT_JIT();
  for (int T : {1, 5}) {
    const uint64_t seed = test::freshSeed();
    SCOPED_TRACE("seed " + std::to_string(seed) + ", T " + std::to_string(T));
    test::Problem pr;
    pr.variant = DELTAC_VARIANT_GATED;
    pr.B = 3, pr.T = T, pr.H = 2, pr.HV = 4, pr.K = 128, pr.V = 128;
    pr.fill(seed);
    std::vector<float> o(pr.oCount()), ht(pr.stateCount());
    deltac_fwd_params p = pr.params(o.data(), ht.data());
    std::vector<double> oRef, htRef;
    ref::forward(p, &oRef, &htRef);
    deltac_options opt = deltac_default_options();
    opt.config.family = "cuda_recurrent";
    opt.config.tile_v = 16;
    opt.config.warps = 4;
    deltac_run_info info{};
    ASSERT_EQ(runDevice(p, opt, &info), 0) << deltac_last_error();
    EXPECT_STREQ(info.family, "cuda_recurrent");
    EXPECT_NE(std::string(info.note).find(jitNote()), std::string::npos) << info.note;
    EXPECT_LE(ref::rel_rms(o.data(), oRef), 1e-5) << "o";
    EXPECT_LE(ref::rel_rms(ht.data(), htRef), 1e-5) << "ht";
  }
}

// Decode of dims with no instance chooses the recurrent family at its own
// dims where NVRTC works here, else the padded instance (no GPU needed for
// the choice itself).
TEST(CudaJitChoice, DecodeOfUnshippedDimsRunsItsOwnDims) {
  JitEnv env(nullptr);
  std::string err;
  const rt::Choice c = choose(96, 80, 1, DELTAC_MODE_AUTO, &err);
  EXPECT_EQ(c.config.family, Family::CudaRecurrent);
  if (rt::cuda_jit_enabled(Family::CudaRecurrent)) {
    EXPECT_EQ(c.K, 96);
    EXPECT_EQ(c.V, 80);
    EXPECT_NE(c.note.find(jitNote()), std::string::npos) << c.note;
  } else {
    EXPECT_EQ(c.K, 128);
    EXPECT_EQ(c.V, 128);
  }
  // Prompts of such dims still run the chunked family padded.
  const rt::Choice l = choose(96, 80, 500, DELTAC_MODE_AUTO, &err);
  EXPECT_EQ(l.config.family, Family::CudaChunked);
  EXPECT_EQ(l.K, 128);
}

} // namespace
} // namespace deltac

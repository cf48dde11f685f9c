// The decode fields of params.h through the C API: which family runs a pool,
// bf16-state or multi-token-verify call (the chunked families refuse them),
// host-side rule checks, and on a GPU (skipped without one) the host- and
// device-pointer paths, the device checking mode's slot bit and agreement
// with the CPU.
#include "deltac/check.h"
#include "deltac/runtime.h"
#include "test_util.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <utility>
#include <vector>

#if DELTAC_TEST_HAVE_CUDA
#include <cuda_runtime.h>
#endif

namespace deltac {
namespace test {
namespace {

// One gated call, 4 sequences of T tokens, K = V = 64, 2/4 heads, a pool of
// 6 f32 states updated in place; sequence 1 is padding.
struct PoolCall {
  int T;
  std::vector<float> q, k, v, g, beta, o, pool, steps;
  std::vector<int32_t> read = {5, -1, 0, 2}, acc;
  deltac_fwd_params p{};
  explicit PoolCall(int T_ = 1, uint64_t seed = 7, int KV = 64) : T(T_) {
    std::mt19937_64 rng(seed);
    std::normal_distribution<float> nd(0.f, 1.f);
    std::uniform_real_distribution<float> ud(0.f, 1.f);
    const int N = 4, H = 2, HV = 4, K = KV, V = KV;
    q.resize(size_t(N) * T * H * K);
    k.resize(q.size());
    v.resize(size_t(N) * T * HV * V);
    g.resize(size_t(N) * T * HV);
    beta.resize(g.size());
    o.assign(v.size(), 0.f);
    pool.resize(size_t(6) * HV * K * V);
    steps.assign(size_t(N) * T * HV * K * V, 0.f);
    for (auto *x : {&q, &k, &v, &pool})
      for (float &e : *x)
        e = 0.5f * nd(rng);
    for (float &e : g) e = -ud(rng);
    for (float &e : beta) e = ud(rng);
    p.variant = DELTAC_VARIANT_GATED;
    p.B = N, p.T = T, p.H = H, p.HV = HV, p.K = K, p.V = V, p.N = N;
    p.q = q.data(), p.k = k.data(), p.v = v.data(), p.g = g.data();
    p.beta = beta.data(), p.o = o.data();
    p.h0 = p.ht = pool.data();
    p.qk_l2norm = 1;
    p.num_slots = 6;
    p.read_slots = read.data();
  }
};

std::vector<float> runCpu(PoolCall &c, deltac_run_info *info) {
  deltac_options opt = deltac_default_options();
  opt.device = DELTAC_DEVICE_CPU;
  EXPECT_EQ(deltac_forward_info(&c.p, &opt, info), 0) << deltac_last_error();
  return c.pool;
}

TEST(DecodePoolApi, CpuAutoRunsDecodeFamilyAndMatchesReference) {
  PoolCall c(1);
  std::vector<double> o, ht;
  ref::forward(c.p, &o, &ht);
  const std::vector<double> want =
      ref::pool_after(c.p, ht, std::vector<double>(c.pool.begin(), c.pool.end()));
  const std::vector<float> before = c.pool;
  deltac_run_info info{};
  runCpu(c, &info);
  EXPECT_STREQ(info.family, "cpu_decode");
  EXPECT_LE(ref::rel_rms(c.o.data(), o), 1e-5);
  EXPECT_LE(ref::rel_rms(c.pool.data(), want), 1e-5);
  // Slots 1, 3, 4 (nobody writes them) are bit-identical.
  const size_t hs = size_t(4) * 64 * 64;
  for (int s : {1, 3, 4})
    EXPECT_EQ(std::memcmp(c.pool.data() + s * hs, before.data() + s * hs, hs * 4), 0) << s;
}

TEST(DecodePoolApi, CpuMultiTokenVerifyRunsRecurrent) {
  PoolCall c(4);
  c.acc = {4, 0, 2, 1};
  c.p.accepted = c.acc.data();
  c.p.state_steps = c.steps.data();
  std::vector<double> o, ht, st;
  ref::forward(c.p, &o, &ht, &st);
  const std::vector<double> want =
      ref::pool_after(c.p, ht, std::vector<double>(c.pool.begin(), c.pool.end()));
  deltac_run_info info{};
  runCpu(c, &info);
  EXPECT_STREQ(info.family, "cpu_recurrent");
  EXPECT_LE(ref::rel_rms(c.o.data(), o), 1e-5);
  EXPECT_LE(ref::rel_rms(c.pool.data(), want), 1e-5);
  EXPECT_LE(ref::rel_rms(c.steps.data(), st), 1e-5);
}

TEST(DecodePoolApi, ChunkedFamiliesRefusePools) {
  PoolCall c(4);
  deltac_options opt = deltac_default_options();
  opt.device = DELTAC_DEVICE_CPU;
  opt.mode = DELTAC_MODE_CHUNKED;
  EXPECT_NE(deltac_forward(&c.p, &opt), 0);
  EXPECT_NE(std::string(deltac_last_error()).find("cpu_chunked: state pools"),
            std::string::npos)
      << deltac_last_error();
  opt.mode = DELTAC_MODE_AUTO;
  opt.config.family = "cpu_chunked";
  opt.config.chunk = 32;
  EXPECT_NE(deltac_forward(&c.p, &opt), 0);
  EXPECT_NE(std::string(deltac_last_error()).find("recurrent families only"),
            std::string::npos)
      << deltac_last_error();
  // A bf16 state too.
  PoolCall b(4);
  std::vector<uint16_t> pool16(b.pool.size());
  b.p.state_dtype = DELTAC_BF16;
  b.p.h0 = b.p.ht = pool16.data();
  opt = deltac_default_options();
  opt.device = DELTAC_DEVICE_CPU;
  opt.chunk = 32;
  EXPECT_NE(deltac_forward(&b.p, &opt), 0);
  EXPECT_NE(std::string(deltac_last_error()).find("the state must be f32"),
            std::string::npos)
      << deltac_last_error();
}

// An fp8 e4m3 pool (a scale per value head) through the C API: the CPU
// runs it (cpu_decode for one token, cpu_recurrent with steps and accepted
// counts), as the reference rounds it; unwritten slots stay bit-identical;
// on a GPU the same call with host pointers agrees with the CPU.
struct Fp8Pool {
  std::vector<float> scale = {0.5f, 0.25f, 1.0f / 3.0f, 2.0f};
  std::vector<uint8_t> pool, steps;
  size_t kv;  // elements of one head's state
  explicit Fp8Pool(PoolCall &c) : kv(size_t(c.p.K) * c.p.V) {
    pool.resize(c.pool.size());
    for (size_t i = 0; i < pool.size(); ++i)
      pool[i] = f32_to_fp8e4m3(c.pool[i] * (1.0f / scale[(i / kv) % 4]));
    steps.assign(c.steps.size(), 0);
    c.p.state_dtype = DELTAC_FP8_E4M3;
    c.p.state_scale = scale.data();
    c.p.h0 = c.p.ht = pool.data();
    if (c.p.state_steps)
      c.p.state_steps = steps.data();
  }
  std::vector<double> values(const std::vector<uint8_t> &x) const {
    std::vector<double> v(x.size());
    for (size_t i = 0; i < x.size(); ++i)
      v[i] = ref::load_state(x.data(), DELTAC_FP8_E4M3, int64_t(i), scale[(i / kv) % 4]);
    return v;
  }
  std::vector<double> rounded(std::vector<double> x) const {
    for (size_t i = 0; i < x.size(); ++i)
      x[i] = ref::stored_state(x[i], DELTAC_FP8_E4M3, scale[(i / kv) % 4]);
    return x;
  }
};

double relDiff(const std::vector<double> &x, const std::vector<double> &r) {
  double num = 0, den = 0;
  for (size_t i = 0; i < r.size(); ++i)
    num += (x[i] - r[i]) * (x[i] - r[i]), den += r[i] * r[i];
  return std::isfinite(num) && den > 0 ? std::sqrt(num / den) : INFINITY;
}

TEST(DecodePoolApi, Fp8PoolOnTheCpu) {
  for (int T : {1, 4}) {
    SCOPED_TRACE("T " + std::to_string(T));
    PoolCall c(T);
    if (T == 4) {
      c.acc = {4, 0, 2, 1};
      c.p.accepted = c.acc.data();
      c.p.state_steps = c.steps.data();
    }
    Fp8Pool f(c);
    std::vector<double> o, ht, st;
    ref::forward(c.p, &o, &ht, T == 4 ? &st : nullptr);
    const std::vector<double> want =
        f.rounded(ref::pool_after(c.p, ht, f.values(f.pool)));
    const std::vector<uint8_t> before = f.pool;
    deltac_run_info info{};
    deltac_options opt = deltac_default_options();
    opt.device = DELTAC_DEVICE_CPU;
    ASSERT_EQ(deltac_forward_info(&c.p, &opt, &info), 0) << deltac_last_error();
    EXPECT_STREQ(info.family, T == 1 ? "cpu_decode" : "cpu_recurrent");
    EXPECT_LE(ref::rel_rms(c.o.data(), o), 1e-5);
    EXPECT_LE(relDiff(f.values(f.pool), want), 5e-3);
    if (T == 4)
      EXPECT_LE(relDiff(f.values(f.steps), f.rounded(st)), 5e-3);
    const size_t hs = size_t(4) * 64 * 64;
    for (int s : {1, 3, 4})
      EXPECT_EQ(std::memcmp(f.pool.data() + s * hs, before.data() + s * hs, hs), 0) << s;
  }
}

TEST(DecodePoolApi, Fp8ScaleIsChecked) {
  PoolCall c(1);
  Fp8Pool f(c);
  f.scale[2] = 0.0f;
  deltac_options opt = deltac_default_options();
  opt.device = DELTAC_DEVICE_CPU;
  opt.check_values = 1;
  EXPECT_NE(deltac_forward(&c.p, &opt), 0);
  EXPECT_NE(std::string(deltac_last_error()).find("params.state_scale[2] = 0: expected finite values > 0"),
            std::string::npos)
      << deltac_last_error();
  // An fp8 state on a chunked family: refused, naming it.
  f.scale[2] = 1.0f;
  opt = deltac_default_options();
  opt.device = DELTAC_DEVICE_CPU;
  opt.mode = DELTAC_MODE_CHUNKED;
  c.p.read_slots = nullptr, c.p.num_slots = 0;
  EXPECT_NE(deltac_forward(&c.p, &opt), 0);
  EXPECT_NE(std::string(deltac_last_error()).find("the state must be f32"), std::string::npos)
      << deltac_last_error();
}

TEST(DecodePoolApi, BadSlotsAreRejectedNamingTheField) {
  PoolCall c(1);
  c.read[3] = 5;  // slot 5 twice, in place
  EXPECT_NE(deltac_forward(&c.p, nullptr), 0);
  EXPECT_NE(std::string(deltac_last_error())
                .find("params.read_slots[3] = 5: slot already written by sequence 0"),
            std::string::npos)
      << deltac_last_error();
  c.read[3] = 6;
  EXPECT_NE(deltac_forward(&c.p, nullptr), 0);
  EXPECT_NE(std::string(deltac_last_error()).find("params.read_slots[3] = 6: expected a slot in [0, 6)"),
            std::string::npos)
      << deltac_last_error();
  EXPECT_STREQ(deltac_check_flag_string(DELTAC_CHECK_SLOTS | DELTAC_CHECK_Q), "q, slots");
}

#if DELTAC_TEST_HAVE_CUDA
bool gpu() { return deltac_cuda_available() != 0; }

// The same call on CUDA with host pointers: the pool round-trips (unwritten
// slots included) and agrees with the CPU.
TEST(DecodePoolApi, CudaHostPointersAgreeWithCpu) {
  if (!gpu())
    GTEST_SKIP() << "no CUDA device";
  for (int T : {1, 4}) {
    PoolCall a(T), b(T);
    if (T == 4) {
      a.acc = b.acc = {3, 0, 4, 1};
      a.p.accepted = a.acc.data(), b.p.accepted = b.acc.data();
      a.p.state_steps = a.steps.data(), b.p.state_steps = b.steps.data();
    }
    runCpu(a, nullptr);
    deltac_options opt = deltac_default_options();
    opt.device = DELTAC_DEVICE_CUDA;
    deltac_run_info info{};
    ASSERT_EQ(deltac_forward_info(&b.p, &opt, &info), 0) << deltac_last_error();
    EXPECT_STREQ(info.family, "cuda_recurrent");
    std::vector<double> pa(a.pool.begin(), a.pool.end()), oa(a.o.begin(), a.o.end());
    EXPECT_LE(ref::rel_rms(b.pool.data(), pa), 1e-5) << "T " << T;
    EXPECT_LE(ref::rel_rms(b.o.data(), oa), 1e-5) << "T " << T;
    if (T == 4) {
      std::vector<double> sa(a.steps.begin(), a.steps.end());
      EXPECT_LE(ref::rel_rms(b.steps.data(), sa), 1e-5);
    }
  }
}

// K = V = 96 has no precompiled instance: NVRTC compiles the fp8 kernel
// (where the build has it; else the padded path runs).
TEST(DecodePoolApi, CudaFp8PoolAgreesWithCpu) {
  if (!gpu())
    GTEST_SKIP() << "no CUDA device";
  for (auto [T, KV] : {std::pair{1, 64}, {4, 64}, {1, 96}, {4, 96}}) {
    SCOPED_TRACE("T " + std::to_string(T) + " K = V = " + std::to_string(KV));
    PoolCall a(T, 7, KV), b(T, 7, KV);
    if (T == 4) {
      a.acc = b.acc = {3, 0, 4, 1};
      a.p.accepted = a.acc.data(), b.p.accepted = b.acc.data();
      a.p.state_steps = a.steps.data(), b.p.state_steps = b.steps.data();
    }
    Fp8Pool fa(a), fb(b);
    deltac_options opt = deltac_default_options();
    opt.device = DELTAC_DEVICE_CPU;
    ASSERT_EQ(deltac_forward(&a.p, &opt), 0) << deltac_last_error();
    opt.device = DELTAC_DEVICE_CUDA;
    deltac_run_info info{};
    ASSERT_EQ(deltac_forward_info(&b.p, &opt, &info), 0) << deltac_last_error();
    EXPECT_STREQ(info.family, "cuda_recurrent");
    EXPECT_LE(relDiff(fb.values(fb.pool), fa.values(fa.pool)), 5e-3);
    std::vector<double> oa(a.o.begin(), a.o.end());
    EXPECT_LE(ref::rel_rms(b.o.data(), oa), 1e-5);
    if (T == 4)
      EXPECT_LE(relDiff(fb.values(fb.steps), fa.values(fa.steps)), 5e-3);
  }
}

// A bf16 pool at Qwen3-Next's decode size on a large grid (40 sequences x
// 32 value heads x 4 tiles of 32 columns: more than kRecurrentSmallGrid
// blocks): the default takes 64-column tiles on 2 warps (the staged kernel)
// for one token and 32 for several; both agree with the CPU. Seed printed,
// DELTAC_TEST_SEED replays it.
TEST(DecodePoolApi, CudaWideTileBf16AgreesWithCpu) {
  if (!gpu())
    GTEST_SKIP() << "no CUDA device";
  const uint64_t seed = freshSeed();
  SCOPED_TRACE(test_seed_note(seed));
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> nd(0.f, 1.f);
  std::uniform_real_distribution<float> ud(0.f, 1.f);
  const int N = 40, H = 16, HV = 32, K = 128, V = 128, slots = 48;
  for (int T : {1, 2}) {
    SCOPED_TRACE("T " + std::to_string(T));
    std::vector<float> q(size_t(N) * T * H * K), k(q.size()), v(size_t(N) * T * HV * V),
        g(size_t(N) * T * HV), beta(g.size()), pool(size_t(slots) * HV * K * V);
    for (auto *x : {&q, &k, &v, &pool})
      for (float &e : *x) e = 0.5f * nd(rng);
    for (float &e : g) e = -ud(rng);
    for (float &e : beta) e = ud(rng);
    std::vector<int32_t> read(N);
    for (int n = 0; n < N; ++n) read[n] = n % 9 == 4 ? -1 : slots - 1 - n;
    const std::vector<uint16_t> start = toBf16(pool);
    std::vector<uint16_t> cpu = start, gpu_pool = start;
    std::vector<float> oc(v.size()), og(v.size());
    deltac_fwd_params p{};
    p.variant = DELTAC_VARIANT_GATED;
    p.B = N, p.T = T, p.H = H, p.HV = HV, p.K = K, p.V = V, p.N = N;
    p.q = q.data(), p.k = k.data(), p.v = v.data(), p.g = g.data(), p.beta = beta.data();
    p.state_dtype = DELTAC_BF16;
    p.qk_l2norm = 1;
    p.num_slots = slots, p.read_slots = read.data();
    deltac_options opt = deltac_default_options();
    deltac_run_info info{};
    opt.device = DELTAC_DEVICE_CPU;
    p.h0 = p.ht = cpu.data(), p.o = oc.data();
    ASSERT_EQ(deltac_forward(&p, &opt), 0) << deltac_last_error();
    opt.device = DELTAC_DEVICE_CUDA;
    p.h0 = p.ht = gpu_pool.data(), p.o = og.data();
    ASSERT_EQ(deltac_forward_info(&p, &opt, &info), 0) << deltac_last_error();
    EXPECT_STREQ(info.family, "cuda_recurrent");
    EXPECT_EQ(info.tile_v, T == 1 ? 64 : 32);
    EXPECT_EQ(info.warps, 2);
    std::vector<double> a(cpu.size()), b(cpu.size()), oa(oc.begin(), oc.end());
    for (size_t i = 0; i < cpu.size(); ++i)
      a[i] = ref::bf16_to_float(cpu[i]), b[i] = ref::bf16_to_float(gpu_pool[i]);
    EXPECT_LE(relDiff(b, a), 5e-3) << "pool";
    EXPECT_LE(ref::rel_rms(og.data(), oa), 1e-4) << "o";
    for (int s = 0; s < slots; ++s)  // slots no sequence reads stay as they were
      if (std::find(read.begin(), read.end(), s) == read.end())
        EXPECT_EQ(std::memcmp(gpu_pool.data() + size_t(s) * HV * K * V,
                              start.data() + size_t(s) * HV * K * V, size_t(HV) * K * V * 2),
                  0)
            << "slot " << s;
  }
}

// Device pointers in checking mode: a slot written twice sets the slots bit
// on the device and the kernel writes nothing.
TEST(DecodePoolApi, CudaDeviceCheckFlagsSlots) {
  if (!gpu())
    GTEST_SKIP() << "no CUDA device";
  PoolCall c(1);
  c.read[3] = 5;
  auto up = [](const void *h, size_t bytes) {
    void *d = nullptr;
    EXPECT_EQ(cudaMalloc(&d, bytes), cudaSuccess);
    cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice);
    return d;
  };
  deltac_fwd_params d = c.p;
  d.q = up(c.q.data(), c.q.size() * 4);
  d.k = up(c.k.data(), c.k.size() * 4);
  d.v = up(c.v.data(), c.v.size() * 4);
  d.g = static_cast<const float *>(up(c.g.data(), c.g.size() * 4));
  d.beta = static_cast<const float *>(up(c.beta.data(), c.beta.size() * 4));
  d.o = up(c.o.data(), c.o.size() * 4);
  d.h0 = d.ht = up(c.pool.data(), c.pool.size() * 4);
  d.read_slots = static_cast<const int32_t *>(up(c.read.data(), 16));
  int32_t *flag = static_cast<int32_t *>(up(std::vector<int32_t>{0}.data(), 4));
  deltac_options opt = deltac_default_options();
  opt.device = DELTAC_DEVICE_CUDA;
  opt.device_pointers = 1;
  opt.check_values = 1;
  opt.check_flag = flag;
  ASSERT_EQ(deltac_forward(&d, &opt), 0) << deltac_last_error();
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  int32_t got = 0;
  cudaMemcpy(&got, flag, 4, cudaMemcpyDeviceToHost);
  EXPECT_EQ(got, DELTAC_CHECK_SLOTS) << deltac_check_flag_string(got);
  std::vector<float> pool(c.pool.size());
  cudaMemcpy(pool.data(), d.ht, pool.size() * 4, cudaMemcpyDeviceToHost);
  EXPECT_EQ(std::memcmp(pool.data(), c.pool.data(), pool.size() * 4), 0)
      << "the kernel ran despite the flag";
  // Good slots: the flag stays 0 (a fresh flag), the pool changes.
  c.read[3] = 2;
  c.read[2] = 0;
  cudaMemcpy(const_cast<int32_t *>(d.read_slots), c.read.data(), 16, cudaMemcpyHostToDevice);
  cudaMemset(flag, 0, 4);
  ASSERT_EQ(deltac_forward(&d, &opt), 0) << deltac_last_error();
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  cudaMemcpy(&got, flag, 4, cudaMemcpyDeviceToHost);
  EXPECT_EQ(got, 0) << deltac_check_flag_string(got);
  cudaMemcpy(pool.data(), d.ht, pool.size() * 4, cudaMemcpyDeviceToHost);
  EXPECT_NE(std::memcmp(pool.data(), c.pool.data(), pool.size() * 4), 0);
  for (const void *x : {d.q, d.k, d.v, (const void *)d.g, (const void *)d.beta, (const void *)d.o,
                        d.h0, (const void *)d.read_slots, (const void *)flag})
    cudaFree(const_cast<void *>(x));
}
#endif

} // namespace
} // namespace test
} // namespace deltac

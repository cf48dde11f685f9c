// Mixed batches (issue 8): one varlen call with decode steps and prompts.
// Under mode auto on CUDA the recurrent kernel takes the sequences of at most
// kCudaAutoRecurrentMaxTokens tokens and the chunked kernel the others, each
// reading cu_seqlens on the device. Checked: every sequence within tolerance
// of its own float64 reference (CUDA device and host pointers, and the CPU,
// which runs the whole batch with one family), bitwise equal to the sequence
// alone under deltac_options.deterministic, nothing written past o and ht,
// and neither kernel writing a sequence of the other's (each launched alone
// on poisoned buffers). Seeds printed; DELTAC_TEST_SEED replays. CUDA cases
// skip without a GPU.
#include "deltac/catalogue.h"
#include "deltac/reference.h"
#include "deltac/runtime.h"
#include "deltac/test_seed.h"
#include "dispatch.h"
#include "batch_inputs.h"

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <tuple>
#include <vector>

namespace deltac {
namespace {

constexpr int kH = 2, kHV = 4, kK = 128, kV = 128;
// Decode steps, the threshold's edges (16, 17), an empty sequence, prompts.
const int kLens[] = {1, 37, 2, 0, 600, 3, 16, 17, 1, 150, 8};
constexpr int kExtraRows = 8;  // poisoned o rows past the last token


struct Batch {
  int variant = 0, T = 0, N = 0;
  bool bf16 = false;
  std::vector<int64_t> cu{0};
  std::vector<float> q, k, v, g, beta, h0;
  std::vector<uint8_t> qb, kb, vb;  // in the call's dtype
  size_t inB() const { return bf16 ? 2 : 4; }
  size_t oBytes() const { return (size_t(T) + kExtraRows) * kHV * kV * inB(); }
  size_t stBytes() const { return (size_t(N) + 1) * kHV * kK * kV * 4; }  // + 1 poisoned

  Batch(int var, bool b16, const std::vector<int> &lens, uint64_t seed) : variant(var), bf16(b16) {
    for (int l : lens)
      cu.push_back(cu.back() + l);
    T = int(cu.back()), N = int(lens.size());
    test_inputs::Inputs in = test_inputs::draw_inputs(var, T, N, kH, kHV, kK, kV, seed);
    q = std::move(in.q), k = std::move(in.k), v = std::move(in.v);
    g = std::move(in.g), beta = std::move(in.beta), h0 = std::move(in.h0);
    qb = test_inputs::as_bytes(q, bf16), kb = test_inputs::as_bytes(k, bf16), vb = test_inputs::as_bytes(v, bf16);
  }

  // Params over host buffers o, ht (or device copies, see Dev).
  deltac_fwd_params params() const {
    deltac_fwd_params p{};
    p.variant = variant;
    p.B = 1, p.T = T, p.H = kH, p.HV = kHV, p.K = kK, p.V = kV, p.N = N;
    p.in_dtype = p.out_dtype = bf16 ? DELTAC_BF16 : DELTAC_F32;
    p.state_dtype = DELTAC_F32;
    p.qk_l2norm = 1;
    p.q = qb.data(), p.k = kb.data(), p.v = vb.data();
    p.g = g.empty() ? nullptr : g.data();
    p.beta = beta.data(), p.h0 = h0.data(), p.cu_seqlens = cu.data();
    return p;
  }

  // Sequence n alone, float64.
  void reference(int n, std::vector<double> *o, std::vector<double> *ht) const {
    deltac_fwd_params p{};
    p.variant = variant;
    p.B = 1, p.T = int(cu[size_t(n) + 1] - cu[size_t(n)]), p.H = kH, p.HV = kHV, p.K = kK;
    p.V = kV, p.N = 1;
    p.in_dtype = p.out_dtype = p.state_dtype = DELTAC_F32;
    const size_t t0 = size_t(cu[size_t(n)]);
    p.q = q.data() + t0 * kH * kK, p.k = k.data() + t0 * kH * kK;
    p.v = v.data() + t0 * kHV * kV;
    p.g = g.empty() ? nullptr
                    : g.data() + t0 * kHV * (variant == DELTAC_VARIANT_KDA ? kK : 1);
    p.beta = beta.data() + t0 * kHV;
    p.h0 = h0.data() + size_t(n) * kHV * kK * kV;
    p.qk_l2norm = 1;
    p.scale = float(1.0 / std::sqrt(double(kK)));
    ref::forward(p, o, ht);
  }
};

// Device copies of a batch's inputs and poisoned outputs (0xff: NaN).
struct Dev {
  std::vector<void *> bufs;
  deltac_fwd_params p{};
  void *put(const void *src, size_t bytes, int fill = -1) {
    void *d = nullptr;
    EXPECT_EQ(cudaMalloc(&d, bytes + 256), cudaSuccess);
    if (src)
      EXPECT_EQ(cudaMemcpy(d, src, bytes, cudaMemcpyHostToDevice), cudaSuccess);
    if (fill >= 0)
      EXPECT_EQ(cudaMemset(d, fill, bytes), cudaSuccess);
    bufs.push_back(d);
    return d;
  }
  explicit Dev(const Batch &b) {
    p = b.params();
    p.q = put(b.qb.data(), b.qb.size());
    p.k = put(b.kb.data(), b.kb.size());
    p.v = put(b.vb.data(), b.vb.size());
    p.beta = static_cast<const float *>(put(b.beta.data(), b.beta.size() * 4));
    if (!b.g.empty())
      p.g = static_cast<const float *>(put(b.g.data(), b.g.size() * 4));
    p.h0 = put(b.h0.data(), b.h0.size() * 4);
    p.cu_seqlens = static_cast<const int64_t *>(put(b.cu.data(), b.cu.size() * 8));
    p.o = put(nullptr, b.oBytes(), 0xff);
    p.ht = put(nullptr, b.stBytes(), 0xff);
  }
  void fetch(const Batch &b, std::vector<uint8_t> *o, std::vector<uint8_t> *ht) const {
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    o->resize(b.oBytes()), ht->resize(b.stBytes());
    EXPECT_EQ(cudaMemcpy(o->data(), p.o, o->size(), cudaMemcpyDeviceToHost), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(ht->data(), p.ht, ht->size(), cudaMemcpyDeviceToHost), cudaSuccess);
  }
  ~Dev() {
    for (void *d : bufs)
      cudaFree(d);
  }
};

bool allFF(const uint8_t *x, size_t n) {
  for (size_t i = 0; i < n; ++i)
    if (x[i] != 0xff)
      return false;
  return true;
}

double rms(const uint8_t *x, bool bf16, const std::vector<double> &ref) {
  return bf16 ? ref::rel_rms(reinterpret_cast<const uint16_t *>(x), ref)
              : ref::rel_rms(reinterpret_cast<const float *>(x), ref);
}

enum Where { kCudaDevice = 0, kCudaHost = 1, kCpu = 2 };

// Runs the batch through deltac_forward (auto); o and ht with their poisoned
// tails; the run's note.
void runBatch(const Batch &b, Where w, bool det, std::vector<uint8_t> *o,
              std::vector<uint8_t> *ht, std::string *note) {
  deltac_options opt = deltac_default_options();
  opt.device = w == kCpu ? DELTAC_DEVICE_CPU : DELTAC_DEVICE_CUDA;
  opt.deterministic = det ? 1 : 0;
  deltac_run_info info{};
  if (w == kCudaDevice) {
    Dev d(b);
    opt.device_pointers = 1;
    ASSERT_EQ(deltac_forward_info(&d.p, &opt, &info), 0) << deltac_last_error();
    d.fetch(b, o, ht);
  } else {
    o->assign(b.oBytes(), 0xff), ht->assign(b.stBytes(), 0xff);
    deltac_fwd_params p = b.params();
    p.o = o->data(), p.ht = ht->data();
    ASSERT_EQ(deltac_forward_info(&p, &opt, &info), 0) << deltac_last_error();
  }
  *note = info.note ? info.note : "";
}

class MixedBatch : public ::testing::TestWithParam<std::tuple<int, bool, int>> {};

TEST_P(MixedBatch, EachSequenceMatchesItsReference) {
  const auto [variant, bf16, where] = GetParam();
  if (where != kCpu && !deltac_cuda_available())
    GTEST_SKIP() << "no CUDA device";
  const uint64_t seed = test_seed();
  SCOPED_TRACE(test_seed_note(seed));
  const Batch b(variant, bf16, std::vector<int>(std::begin(kLens), std::end(kLens)), seed);
  std::vector<uint8_t> o, ht;
  std::string note;
  runBatch(b, Where(where), false, &o, &ht, &note);
  std::printf("  %s %s %s: %s\n", variant_name(variant), bf16 ? "bf16" : "f32",
              where == kCpu ? "cpu" : where == kCudaHost ? "cuda host" : "cuda device",
              note.c_str());
  if (where != kCpu)
    EXPECT_NE(note.find("mixed batch"), std::string::npos) << note;
  const size_t row = size_t(kHV) * kV * b.inB(), st = size_t(kHV) * kK * kV * 4;
  const double tol = bf16 ? 5e-3 : 1e-4;
  for (int n = 0; n < b.N; ++n) {
    std::vector<double> oRef, htRef;
    b.reference(n, &oRef, &htRef);
    const int len = int(b.cu[size_t(n) + 1] - b.cu[size_t(n)]);
    if (len > 0)
      EXPECT_LE(rms(o.data() + size_t(b.cu[size_t(n)]) * row, bf16, oRef), tol)
          << "sequence " << n << " (" << len << " tokens): o";
    EXPECT_LE(ref::rel_rms(reinterpret_cast<const float *>(ht.data() + size_t(n) * st), htRef),
              tol)
        << "sequence " << n << " (" << len << " tokens): ht";
  }
  if (where != kCudaHost) {  // the host path copies back only o and ht proper
    EXPECT_TRUE(allFF(o.data() + size_t(b.T) * row, kExtraRows * row)) << "o past T written";
    EXPECT_TRUE(allFF(ht.data() + size_t(b.N) * st, st)) << "ht past N written";
  }
}

// Under deterministic = 1, every sequence of the mixed batch is bitwise the
// sequence run alone as a plain call (its own length picks its family).
TEST_P(MixedBatch, DeterministicEqualsAlone) {
  const auto [variant, bf16, where] = GetParam();
  if (where != kCpu && !deltac_cuda_available())
    GTEST_SKIP() << "no CUDA device";
  const uint64_t seed = test_seed();
  SCOPED_TRACE(test_seed_note(seed));
  const std::vector<int> lens(std::begin(kLens), std::end(kLens));
  const Batch b(variant, bf16, lens, seed);
  std::vector<uint8_t> o, ht;
  std::string note;
  runBatch(b, Where(where), true, &o, &ht, &note);
  const size_t row = size_t(kHV) * kV * b.inB(), st = size_t(kHV) * kK * kV * 4;
  for (int n = 0; n < b.N; ++n) {
    if (lens[size_t(n)] == 0)
      continue;
    // The same sequence alone: a batch of one, its inputs cut from b.
    Batch a = b;
    const size_t t0 = size_t(b.cu[size_t(n)]), len = size_t(lens[size_t(n)]);
    auto cut = [&](std::vector<float> &x, const std::vector<float> &src, size_t per) {
      x.assign(src.begin() + long(t0 * per), src.begin() + long((t0 + len) * per));
    };
    cut(a.q, b.q, kH * kK), cut(a.k, b.k, kH * kK), cut(a.v, b.v, kHV * kV);
    cut(a.beta, b.beta, kHV);
    if (!b.g.empty())
      cut(a.g, b.g, kHV * (variant == DELTAC_VARIANT_KDA ? kK : 1));
    a.h0.assign(b.h0.begin() + long(size_t(n) * kHV * kK * kV),
                b.h0.begin() + long(size_t(n + 1) * kHV * kK * kV));
    auto cutB = [&](std::vector<uint8_t> &x, const std::vector<uint8_t> &src, size_t per) {
      x.assign(src.begin() + long(t0 * per * b.inB()), src.begin() + long((t0 + len) * per * b.inB()));
    };
    cutB(a.qb, b.qb, kH * kK), cutB(a.kb, b.kb, kH * kK), cutB(a.vb, b.vb, kHV * kV);
    a.T = int(len), a.N = 1, a.cu = {0, int64_t(len)};
    std::vector<uint8_t> oa, hta;
    std::string na;
    runBatch(a, Where(where), true, &oa, &hta, &na);
    EXPECT_EQ(std::memcmp(oa.data(), o.data() + t0 * row, len * row), 0)
        << "sequence " << n << " (" << len << " tokens): o not bitwise equal to alone";
    EXPECT_EQ(std::memcmp(hta.data(), ht.data() + size_t(n) * st, st), 0)
        << "sequence " << n << " (" << len << " tokens): ht not bitwise equal to alone";
  }
}

INSTANTIATE_TEST_SUITE_P(
    All, MixedBatch,
    ::testing::Combine(::testing::Values(0, 1, 2), ::testing::Bool(),
                       ::testing::Values(int(kCudaDevice), int(kCudaHost), int(kCpu))),
    [](const auto &info) {
      const int w = std::get<2>(info.param);
      return std::string(w == kCpu ? "Cpu_" : w == kCudaHost ? "GpuHost_" : "Gpu_") +
             test_inputs::variant_dtype(std::get<0>(info.param), std::get<1>(info.param));
    });

// Each kernel of a mixed batch alone (rt::cuda_run's parts), on poisoned o
// and ht: the recurrent launch writes exactly the sequences of at most 16
// tokens (o rows and ht), the chunked launch exactly the others.
class MixedParts : public ::testing::TestWithParam<std::tuple<int, bool>> {};

TEST_P(MixedParts, NeitherKernelWritesTheOthers) {
  const auto [variant, bf16] = GetParam();
  if (!deltac_cuda_available())
    GTEST_SKIP() << "no CUDA device";
  const uint64_t seed = test_seed();
  SCOPED_TRACE(test_seed_note(seed));
  const Batch b(variant, bf16, std::vector<int>(std::begin(kLens), std::end(kLens)), seed);
  const int64_t L = kCudaAutoRecurrentMaxTokens;
  const size_t row = size_t(kHV) * kV * b.inB(), st = size_t(kHV) * kK * kV * 4;
  for (int part : {1, 2}) {
    Dev d(b);
    const Problem prob = problem_of(d.p, b.T);
    rt::Mixed mixed;
    mixed.short_config = default_config(Family::CudaRecurrent, prob);
    mixed.route = int32_t(L);
    mixed.parts = part;
    deltac_options opt = deltac_default_options();
    opt.device = DELTAC_DEVICE_CUDA;
    opt.device_pointers = 1;
    std::string err;
    ASSERT_TRUE(rt::cuda_run(d.p, default_config(Family::CudaChunked, prob), opt, &err, mixed))
        << err;
    std::vector<uint8_t> o, ht;
    d.fetch(b, &o, &ht);
    for (int n = 0; n < b.N; ++n) {
      const int64_t len = b.cu[size_t(n) + 1] - b.cu[size_t(n)];
      const bool mine = (part == 1) == (len <= L);
      const uint8_t *on = o.data() + size_t(b.cu[size_t(n)]) * row;
      const uint8_t *hn = ht.data() + size_t(n) * st;
      if (mine) {
        EXPECT_FALSE(len > 0 && allFF(on, size_t(len) * row))
            << (part == 1 ? "recurrent" : "chunked") << " did not write o of sequence " << n;
        EXPECT_FALSE(allFF(hn, st))
            << (part == 1 ? "recurrent" : "chunked") << " did not write ht of sequence " << n;
      } else {
        EXPECT_TRUE(allFF(on, size_t(len) * row))
            << (part == 1 ? "recurrent" : "chunked") << " wrote o of sequence " << n << " ("
            << len << " tokens)";
        EXPECT_TRUE(allFF(hn, st)) << (part == 1 ? "recurrent" : "chunked")
                                   << " wrote ht of sequence " << n << " (" << len
                                   << " tokens)";
      }
    }
    EXPECT_TRUE(allFF(o.data() + size_t(b.T) * row, kExtraRows * row)) << "o past T written";
    EXPECT_TRUE(allFF(ht.data() + size_t(b.N) * st, st)) << "ht past N written";
  }
}

INSTANTIATE_TEST_SUITE_P(Gpu, MixedParts,
                         ::testing::Combine(::testing::Values(0, 1, 2), ::testing::Bool()),
                         [](const auto &info) {
                           return test_inputs::variant_dtype(std::get<0>(info.param),
                                                             std::get<1>(info.param));
                         });

}  // namespace
}  // namespace deltac

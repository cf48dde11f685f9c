// GPU tests of the decode fields of deltac::cuda::recurrent (params.h: state
// pool with read/write slots, bf16 and fp8 states, state_steps, accepted counts)
// against the float64 reference; mirrors tests/cpu/decode_pool_test.cpp.
// Pool entries no sequence writes, and padding, are poisoned and must come
// back bit-identical. Each case is its own test; all skip without a GPU.
#include "deltac/check.h"
#include "deltac/reference.h"
#include "deltac/test_seed.h"
#include "harness.h"
#include "kernels.h"
#include "slot_writer.h"

#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace deltac::test {
namespace {

struct PoolCase {
  std::string name;
  deltac_variant var = DELTAC_VARIANT_GATED;
  int N = 4, T = 1, H = 2, HV = 4, K = 128, V = 128;
  std::vector<int64_t> lens;  // varlen (overrides N, T)
  int slots = 9;
  std::vector<int32_t> read, write, accepted;  // write/accepted empty: NULL
  bool inplace = true, bf16_state = false, bf16_in = false, steps = false;
  bool fp8_state = false;  // e4m3 with a scale per value head (fp8_scale)
  int layout = DELTAC_STATE_KV;
  int bv = 0;
};
void PrintTo(const PoolCase& c, std::ostream* os) { *os << c.name; }

// The fp8 state scale of value head j: powers of two and 1/3, whose
// reciprocal rounds (params.h: e4m3(x * (1 / scale))).
float fp8_scale(int j) {
  const float s[] = {0.25f, 1.0f / 3.0f, 2.0f, 0.0625f};
  return s[j % 4];
}

// Host tensor of n elements in f32 or bf16, or fp8 with fp8_scale of head
// (i / head) % hv (raw bytes).
struct Buf {
  std::vector<uint8_t> b;
  bool bf16 = false, fp8 = false;
  size_t n = 0, head = 1;
  int hv = 1;
  void init(size_t count, bool is_bf16, bool is_fp8 = false, size_t head_elems = 1,
            int heads = 1) {
    n = count, bf16 = is_bf16 && !is_fp8, fp8 = is_fp8, head = head_elems, hv = heads;
    b.assign(n * (fp8 ? 1 : bf16 ? 2 : 4), 0);
  }
  float scale(size_t i) const { return fp8_scale(int((i / head) % size_t(hv))); }
  void set(size_t i, float x) {
    if (fp8) {
      b[i] = f32_to_fp8e4m3(x * (1.0f / scale(i)));
    } else if (bf16) {
      const uint16_t h = ref::float_to_bf16(x);
      std::memcpy(b.data() + 2 * i, &h, 2);
    } else {
      std::memcpy(b.data() + 4 * i, &x, 4);
    }
  }
  double get(size_t i) const {
    if (fp8)
      return ref::load_state(b.data(), DELTAC_FP8_E4M3, int64_t(i), scale(i));
    return ref::load_in(b.data(), bf16 ? DELTAC_BF16 : DELTAC_F32, i);
  }
  size_t esz() const { return fp8 ? 1 : bf16 ? 2 : 4; }
  std::vector<double> all() const {
    std::vector<double> v(n);
    for (size_t i = 0; i < n; ++i) v[i] = get(i);
    return v;
  }
};

struct Dev {
  void* p = nullptr;
  ~Dev() {
    if (p)
      cudaFree(p);
  }
  template <class T>
  T* up(const T* host, size_t bytes) {
    if (cudaMalloc(&p, bytes ? bytes : 4) != cudaSuccess)
      return nullptr;
    if (host)
      cudaMemcpy(p, host, bytes, cudaMemcpyHostToDevice);
    return static_cast<T*>(p);
  }
};

double rel(const std::vector<double>& x, const std::vector<double>& r) {
  double num = 0, den = 0;
  for (size_t i = 0; i < r.size(); ++i) {
    num += (x[i] - r[i]) * (x[i] - r[i]);
    den += r[i] * r[i];
  }
  if (!std::isfinite(num))
    return INFINITY;
  return den == 0 ? (num == 0 ? 0 : INFINITY) : std::sqrt(num / den);
}

// Inputs of one call on the host.
struct Inputs {
  Buf q, k, v, o, in_pool, out_pool, steps;
  std::vector<float> g, beta, sscale;
  std::vector<int64_t> cu;
  deltac_fwd_params p{};
  size_t rows = 0, hs = 0, o_elems = 0;
};

void make_inputs(const PoolCase& c, std::mt19937_64& rng, Inputs* in) {
  std::normal_distribution<float> normal(0.f, 1.f);
  std::uniform_real_distribution<float> uni(0.f, 1.f);
  int B = c.N, T = c.T, N = c.N;
  if (!c.lens.empty()) {
    B = 1, T = 0, N = int(c.lens.size());
    in->cu.push_back(0);
    for (int64_t l : c.lens) in->cu.push_back(T += int(l));
  }
  in->rows = size_t(B) * T;
  in->hs = size_t(c.HV) * c.K * c.V;
  in->o_elems = in->rows * c.HV * c.V;
  in->q.init(in->rows * c.H * c.K, c.bf16_in);
  in->k.init(in->rows * c.H * c.K, c.bf16_in);
  in->v.init(in->o_elems, c.bf16_in);
  for (size_t i = 0; i < in->q.n; ++i) in->q.set(i, normal(rng));
  for (size_t i = 0; i < in->k.n; ++i) in->k.set(i, normal(rng));
  for (size_t i = 0; i < in->v.n; ++i) in->v.set(i, normal(rng));
  in->beta.resize(in->rows * c.HV);
  for (auto& x : in->beta) x = uni(rng);
  if (c.var != DELTAC_VARIANT_DELTA) {
    in->g.resize(in->rows * c.HV * (c.var == DELTAC_VARIANT_KDA ? c.K : 1));
    for (auto& x : in->g) x = -uni(rng);
  }
  const size_t kv = size_t(c.K) * c.V;
  in->in_pool.init(c.slots * in->hs, c.bf16_state, c.fp8_state, kv, c.HV);
  for (size_t i = 0; i < in->in_pool.n; ++i) in->in_pool.set(i, 0.5f * normal(rng));
  if (!c.inplace) {
    in->out_pool.init(c.slots * in->hs, c.bf16_state, c.fp8_state, kv, c.HV);
    for (size_t i = 0; i < in->out_pool.n; ++i) in->out_pool.set(i, 1234.5f);
  }
  in->steps.init(in->rows * in->hs, c.bf16_state, c.fp8_state, kv, c.HV);
  for (size_t i = 0; i < in->steps.n; ++i) in->steps.set(i, -777.f);

  deltac_fwd_params& p = in->p;
  p.variant = c.var;
  p.B = B, p.T = T, p.H = c.H, p.HV = c.HV, p.K = c.K, p.V = c.V, p.N = N;
  p.in_dtype = p.out_dtype = c.bf16_in ? DELTAC_BF16 : DELTAC_F32;
  p.state_dtype = c.fp8_state ? DELTAC_FP8_E4M3 : c.bf16_state ? DELTAC_BF16 : DELTAC_F32;
  p.state_layout = c.layout;
  if (c.fp8_state) {
    for (int j = 0; j < c.HV; ++j) in->sscale.push_back(fp8_scale(j));
    p.state_scale = in->sscale.data();
  }
  in->o.init(in->o_elems, c.bf16_in);
  p.q = in->q.b.data(), p.k = in->k.b.data(), p.v = in->v.b.data(), p.o = in->o.b.data();
  p.g = in->g.empty() ? nullptr : in->g.data();
  p.beta = in->beta.data();
  p.h0 = in->in_pool.b.data();
  p.ht = c.inplace ? in->in_pool.b.data() : in->out_pool.b.data();
  p.cu_seqlens = in->cu.empty() ? nullptr : in->cu.data();
  p.qk_l2norm = 1;
  p.num_slots = c.slots;
  p.read_slots = c.read.data();
  p.write_slots = c.write.empty() ? nullptr : c.write.data();
  p.accepted = c.accepted.empty() ? nullptr : c.accepted.data();
  p.state_steps = c.steps ? in->steps.b.data() : nullptr;
}

// The device copy of in->p; `devs` owns the allocations.
deltac_fwd_params to_device(const Inputs& in, std::vector<Dev>* devs) {
  devs->resize(14);
  deltac_fwd_params d = in.p;
  auto up = [&](int i, const void* host, size_t bytes) -> void* {
    return host ? (*devs)[i].up(static_cast<const uint8_t*>(host), bytes) : nullptr;
  };
  const size_t ob = in.o_elems * (in.p.out_dtype == DELTAC_BF16 ? 2 : 4);
  d.q = up(0, in.q.b.data(), in.q.b.size());
  d.k = up(1, in.k.b.data(), in.k.b.size());
  d.v = up(2, in.v.b.data(), in.v.b.size());
  d.g = static_cast<const float*>(up(3, in.p.g, in.g.size() * 4));
  d.beta = static_cast<const float*>(up(4, in.p.beta, in.beta.size() * 4));
  d.h0 = up(5, in.in_pool.b.data(), in.in_pool.b.size());
  d.ht = in.p.ht == in.p.h0 ? const_cast<void*>(d.h0)
                            : up(6, in.out_pool.b.data(), in.out_pool.b.size());
  d.o = (*devs)[7].up<uint8_t>(nullptr, ob);
  cudaMemset(d.o, 0xff, ob);  // NaN: an unwritten output fails
  d.cu_seqlens = static_cast<const int64_t*>(up(8, in.p.cu_seqlens, in.cu.size() * 8));
  d.read_slots = static_cast<const int32_t*>(up(9, in.p.read_slots, size_t(in.p.N) * 4));
  d.write_slots = static_cast<const int32_t*>(up(10, in.p.write_slots, size_t(in.p.N) * 4));
  d.accepted = static_cast<const int32_t*>(up(11, in.p.accepted, size_t(in.p.N) * 4));
  d.state_steps = in.p.state_steps ? up(12, in.steps.b.data(), in.steps.b.size()) : nullptr;
  d.state_scale = static_cast<const float*>(up(13, in.p.state_scale, in.sscale.size() * 4));
  return d;
}

void download(void* host, const void* dev, size_t bytes) {
  ASSERT_EQ(cudaMemcpy(host, dev, bytes, cudaMemcpyDeviceToHost), cudaSuccess);
}

std::vector<double> o_values(const std::vector<uint8_t>& raw, int dtype, size_t n) {
  std::vector<double> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = ref::load_in(raw.data(), dtype, i);
  return v;
}

void expect_outputs(const PoolCase& c, Inputs& in, const deltac_fwd_params& d,
                    const std::vector<double>& o, std::vector<double> ht,
                    std::vector<double> st);

class DecodePool : public ::testing::TestWithParam<PoolCase> {};

TEST_P(DecodePool, MatchesFloat64Reference) {
  const PoolCase& c = GetParam();
  const uint64_t seed = deltac::test_seed();
  SCOPED_TRACE(deltac::test_seed_note(seed));
  std::mt19937_64 rng(seed);
  Inputs in;
  make_inputs(c, rng, &in);
  std::string err;
  ASSERT_TRUE(check_params(in.p, &err)) << err;  // the case itself is legal
  if (!have_gpu())
    GTEST_SKIP() << "no CUDA device";
  std::vector<double> o, ht, st;
  ref::forward(in.p, &o, &ht, c.steps ? &st : nullptr);

  std::vector<Dev> devs;
  const deltac_fwd_params d = to_device(in, &devs);
  KernelFn fn = find_kernel(c.var, c.K, c.V, c.bf16_in);
  ASSERT_NE(fn, nullptr);
  ASSERT_EQ(fn(d, nullptr, c.bv), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  expect_outputs(c, in, d, o, ht, st);
}

// The call's o, pool and state_steps on the device (d) against the float64
// reference (o, ht, st); pool entries no sequence writes unchanged.
void expect_outputs(const PoolCase& c, Inputs& in, const deltac_fwd_params& d,
                    const std::vector<double>& o, std::vector<double> ht,
                    std::vector<double> st) {
  const int odt = in.p.out_dtype;
  std::vector<uint8_t> oraw(in.o_elems * (odt == DELTAC_BF16 ? 2 : 4));
  download(oraw.data(), d.o, oraw.size());
  const double o_tol = c.bf16_in ? 5e-3 : 1e-5;
  EXPECT_LE(rel(o_values(oraw, odt, in.o_elems), o), o_tol) << "o";

  Buf& pool = c.inplace ? in.in_pool : in.out_pool;
  const std::vector<uint8_t> before = pool.b;
  download(pool.b.data(), d.ht, pool.b.size());
  // fp8: the reference's states rounded as the kernels store them (a value
  // computed in f32 may round to the neighbouring e4m3 value, rarely).
  if (c.fp8_state)
    for (std::vector<double>* x : {&ht, &st})
      for (size_t i = 0; i < x->size(); ++i)
        (*x)[i] = ref::stored_state((*x)[i], DELTAC_FP8_E4M3,
                                    fp8_scale(int((i / (size_t(c.K) * c.V)) % size_t(c.HV))));
  const double tol = c.bf16_state || c.fp8_state ? 5e-3 : 1e-5;
  const size_t esz = pool.esz(), hs = in.hs;
  std::vector<int> writer(c.slots, -1);
  for (int n = 0; n < in.p.N; ++n)
    if (ref::write_slot(in.p, n) >= 0)
      writer[ref::write_slot(in.p, n)] = n;
  for (int s = 0; s < c.slots; ++s) {
    if (writer[s] < 0) {
      EXPECT_EQ(std::memcmp(pool.b.data() + s * hs * esz, before.data() + s * hs * esz, hs * esz),
                0)
          << "slot " << s << " was written though no sequence writes it";
      continue;
    }
    std::vector<double> a(hs), r(ht.begin() + writer[s] * hs, ht.begin() + (writer[s] + 1) * hs);
    for (size_t i = 0; i < hs; ++i) a[i] = pool.get(s * hs + i);
    EXPECT_LE(rel(a, r), tol) << "slot " << s << " (sequence " << writer[s] << ")";
  }
  if (c.steps) {
    download(in.steps.b.data(), d.state_steps, in.steps.b.size());
    EXPECT_LE(rel(in.steps.all(), st), tol) << "state_steps";
  }
}

std::vector<PoolCase> pool_cases() {
  std::vector<PoolCase> cs;
  const char* vn[] = {"delta", "gated", "kda"};
  for (int vi = 0; vi < 3; ++vi) {
    const deltac_variant var = deltac_variant(vi);
    auto make = [&](const std::string& what) {
      PoolCase c;
      c.var = var;
      c.name = std::string(vn[vi]) + "_" + what;
      return c;
    };
    PoolCase c = make("inplace_padding");
    c.N = 5, c.read = {7, -1, 2, 0, -1};
    cs.push_back(c);
    for (int bv : {16, 32, kKnobs32x2, kKnobs16x1}) {
      c = make("inplace_padding_" + std::string(bv == kKnobs32x2   ? "tile32_warps2"
                                                : bv == kKnobs16x1 ? "tile16_warps1"
                                                                   : "bv" + std::to_string(bv)));
      c.N = 5, c.read = {7, -1, 2, 0, -1}, c.bv = bv;
      cs.push_back(c);
    }
    for (int bv : {kKnobs32x2, kKnobs16x1}) {
      c = make(std::string("accepted_0_to_4_steps_") +
               (bv == kKnobs32x2 ? "tile32_warps2" : "tile16_warps1"));
      c.N = 5, c.T = 4, c.steps = true, c.bv = bv;
      c.read = {4, 0, 6, 2, 8}, c.accepted = {0, 1, 2, 3, 4};
      cs.push_back(c);
    }
    c = make("copy_on_write");
    c.N = 3, c.read = {2, 2, 0}, c.write = {5, 6, 0};
    cs.push_back(c);
    c = make("separate_frozen_zero_start");
    c.inplace = false, c.read = {1, 4, -1, -1}, c.write = {-1, 4, 2, -1};
    cs.push_back(c);
    c = make("vk_layout");
    c.layout = DELTAC_STATE_VK, c.read = {3, 1, -1, 8};
    cs.push_back(c);
    // bv 32 and the knobs (32, 2), (16, 1): the strip kernel's 8-column
    // (16-byte) bf16 state accesses.
    const std::pair<int, const char*> bvs[] = {
        {0, ""}, {32, "_bv32"}, {kKnobs32x2, "_tile32_warps2"}, {kKnobs16x1, "_tile16_warps1"}};
    for (int layout : {DELTAC_STATE_KV, DELTAC_STATE_VK})
      for (int T : {1, 4})
        for (auto [bv, bv_name] : bvs) {
          c = make(std::string("bf16_state_") + (layout ? "vk" : "kv") + "_T" + std::to_string(T) +
                   bv_name);
          c.bf16_state = true, c.bf16_in = true, c.layout = layout, c.T = T, c.bv = bv;
          c.read = {3, 0, -1, 8};
          cs.push_back(c);
        }
    // 64 columns on 2 warps (one token; bf16 and fp8 states only): the
    // staged kernel's tensor-core sums over two 16-column tiles a warp,
    // bf16 and f32 inputs (the latter as bf16 hi + lo).
    for (bool bf16_in : {true, false})
      for (bool fp8 : {false, true}) {
        c = make(std::string(fp8 ? "fp8" : "bf16") + "_state_tile64_warps2" +
                 (bf16_in ? "" : "_f32_in"));
        c.bf16_state = !fp8, c.fp8_state = fp8, c.bf16_in = bf16_in, c.bv = kKnobs64x2;
        c.N = 6, c.read = {3, 0, -1, 8, 5, 2};
        cs.push_back(c);
      }
    for (bool steps : {false, true})
      for (bool bf16 : {false, true}) {
        c = make(std::string("accepted_0_to_4") + (steps ? "_steps" : "") + (bf16 ? "_bf16" : ""));
        c.N = 5, c.T = 4, c.steps = steps, c.bf16_state = bf16, c.bf16_in = bf16;
        c.read = {4, 0, 6, 2, 8}, c.accepted = {0, 1, 2, 3, 4};
        cs.push_back(c);
      }
    // fp8 e4m3 states (the strip kernel, or the split kernel at bv 16 / 32).
    for (int layout : {DELTAC_STATE_KV, DELTAC_STATE_VK})
      for (int T : {1, 4})
        for (auto [bv, bv_name] : bvs) {
          c = make(std::string("fp8_state_") + (layout ? "vk" : "kv") + "_T" + std::to_string(T) +
                   bv_name);
          c.fp8_state = true, c.bf16_in = true, c.layout = layout, c.T = T, c.bv = bv;
          c.read = {3, 0, -1, 8};
          cs.push_back(c);
        }
    for (int bv : {16, kKnobs16x1}) {
      c = make(std::string("fp8_state_bv16") + (bv == 16 ? "" : "_tile16_warps1"));
      c.fp8_state = true, c.bf16_in = true, c.bv = bv;
      c.read = {3, 0, -1, 8};
      cs.push_back(c);
    }
    c = make("fp8_accepted_steps_copy_on_write");
    c.N = 5, c.T = 4, c.steps = true, c.fp8_state = true;
    c.read = {4, 0, 6, 2, 4}, c.write = {5, 0, 7, 2, 1}, c.accepted = {0, 1, 2, 3, 4};
    cs.push_back(c);
    c = make("varlen_steps_accepted");
    c.lens = {1, 3, 0, 8, 2}, c.steps = true, c.inplace = false;
    c.read = {0, 1, 2, 3, 4}, c.write = {5, 6, 7, 8, -1}, c.accepted = {1, 2, 0, 5, 2};
    cs.push_back(c);
    c = make("T8_steps");
    c.T = 8, c.N = 3, c.steps = true, c.read = {0, 1, 2}, c.accepted = {8, 3, 0};
    cs.push_back(c);
    c = make("K64_V64_gva");
    c.K = c.V = 64, c.H = 1, c.HV = 4, c.read = {0, 5, 6, -1};
    cs.push_back(c);
    c = make("batch64");
    c.N = 64, c.slots = 80, c.H = 2, c.HV = 4;
    for (int n = 0; n < 64; ++n) c.read.push_back(n % 7 == 3 ? -1 : 79 - n);
    cs.push_back(c);
    c.name += "_bf16_state", c.bf16_state = true;
    cs.push_back(c);
    c.name = std::string(vn[vi]) + "_batch64_fp8_state", c.bf16_state = false, c.fp8_state = true;
    cs.push_back(c);
    // More than 1024 blocks of several tokens: the stream kernel under Auto
    // (recurrent_rules.h, stream_auto; kda keeps the strip kernel).
    for (bool bf16 : {false, true}) {
      c = make(std::string("batch128_T4") + (bf16 ? "_bf16_state" : ""));
      c.N = 128, c.T = 4, c.slots = 160, c.H = 2, c.HV = 4, c.bf16_state = bf16;
      for (int n = 0; n < 128; ++n) c.read.push_back(n % 7 == 3 ? -1 : 159 - n);
      cs.push_back(c);
    }
  }
  return cs;
}

INSTANTIATE_TEST_SUITE_P(Cuda, DecodePool, ::testing::ValuesIn(pool_cases()),
                         [](const ::testing::TestParamInfo<PoolCase>& info) {
                           return info.param.name;
                         });

// Six one-token steps through an in-place pool slot, captured once in a
// CUDA graph per step shape and replayed, equal one six-token call from the
// same state (no pool): the decode state continues a prefill exactly.
void steps_equal_prefill(bool bf16_state) {
  if (!have_gpu())
    GTEST_SKIP() << "no CUDA device";
  const uint64_t seed = deltac::test_seed();
  SCOPED_TRACE(deltac::test_seed_note(seed));
  std::mt19937_64 rng(seed);
  PoolCase c;
  c.N = 1, c.T = 6, c.slots = 3, c.read = {1}, c.bf16_state = bf16_state;
  Inputs in;
  make_inputs(c, rng, &in);
  std::vector<Dev> devs;
  deltac_fwd_params d = to_device(in, &devs);
  KernelFn fn = find_kernel(c.var, c.K, c.V, false);
  ASSERT_NE(fn, nullptr);
  // The whole sequence from slot 1 into a separate f32 ht (no pool).
  Buf whole_ht;
  whole_ht.init(in.hs, false);
  deltac_fwd_params w = d;
  w.state_dtype = DELTAC_F32;
  w.num_slots = 0, w.read_slots = nullptr;
  std::vector<float> h0f(in.hs);
  for (size_t i = 0; i < in.hs; ++i) h0f[i] = float(in.in_pool.get(in.hs + i));
  Dev h0d, htd, od;
  w.h0 = h0d.up(h0f.data(), in.hs * 4);
  w.ht = htd.up<float>(nullptr, in.hs * 4);
  w.o = od.up<float>(nullptr, in.o_elems * 4);
  ASSERT_EQ(fn(w, nullptr, 0), cudaSuccess);
  // Six captured steps, T = 1 each, replayed in order.
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  cudaGraph_t graph;
  ASSERT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  for (int t = 0; t < 6; ++t) {
    deltac_fwd_params p = d;
    p.T = 1;
    p.q = static_cast<const float*>(d.q) + size_t(t) * c.H * c.K;
    p.k = static_cast<const float*>(d.k) + size_t(t) * c.H * c.K;
    p.v = static_cast<const float*>(d.v) + size_t(t) * c.HV * c.V;
    p.beta = d.beta + size_t(t) * c.HV;
    p.g = d.g + size_t(t) * c.HV;
    p.o = static_cast<float*>(d.o) + size_t(t) * c.HV * c.V;
    ASSERT_EQ(fn(p, s, 0), cudaSuccess);
  }
  ASSERT_EQ(cudaStreamEndCapture(s, &graph), cudaSuccess);
  cudaGraphExec_t exec;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  ASSERT_EQ(cudaGraphLaunch(exec, s), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  std::vector<float> ow(in.o_elems), os(in.o_elems), hw(in.hs);
  download(ow.data(), w.o, ow.size() * 4);
  download(os.data(), d.o, os.size() * 4);
  download(hw.data(), w.ht, hw.size() * 4);
  download(in.in_pool.b.data(), d.h0, in.in_pool.b.size());
  std::vector<double> a(ow.begin(), ow.end()), b(os.begin(), os.end()), hp(in.hs),
      hwd(hw.begin(), hw.end());
  for (size_t i = 0; i < in.hs; ++i) hp[i] = in.in_pool.get(in.hs + i);
  const double tol = bf16_state ? 5e-3 : 1e-5;
  EXPECT_LE(rel(b, a), tol) << "o";
  EXPECT_LE(rel(hp, hwd), tol) << "state";
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(s);
}

TEST(DecodePoolGraph, StepsEqualPrefillF32) { steps_equal_prefill(false); }
TEST(DecodePoolGraph, StepsEqualPrefillBf16State) { steps_equal_prefill(true); }

// A pool's read slots written by the kernel just before the call, which
// lets its dependents start at once and writes the slots 50 us later: the
// one-token kernels start their state loads from the slot read before the
// PDL wait and must end with the one read after it (recurrent_strip.cuh,
// slot_guess). c.read: the slots written; `stale`: those in place before.
struct StaleCase {
  PoolCase c;
  std::vector<int32_t> stale;
};
void PrintTo(const StaleCase& s, std::ostream* os) { *os << s.c.name; }

class DecodePoolPdl : public ::testing::TestWithParam<StaleCase> {};

TEST_P(DecodePoolPdl, SlotsWrittenByThePredecessor) {
  const PoolCase& c = GetParam().c;
  const std::vector<int32_t>& stale = GetParam().stale;
  const uint64_t seed = deltac::test_seed();
  SCOPED_TRACE(deltac::test_seed_note(seed));
  std::mt19937_64 rng(seed);
  Inputs in;
  make_inputs(c, rng, &in);
  if (!have_gpu())
    GTEST_SKIP() << "no CUDA device";
  std::vector<double> o, ht, st;
  ref::forward(in.p, &o, &ht, nullptr);
  std::vector<Dev> devs;
  const deltac_fwd_params d = to_device(in, &devs);
  Dev fresh;
  const int32_t* slots = fresh.up(c.read.data(), c.read.size() * 4);
  ASSERT_NE(slots, nullptr);
  int32_t* dst = const_cast<int32_t*>(d.read_slots);
  ASSERT_EQ(cudaMemcpy(dst, stale.data(), stale.size() * 4, cudaMemcpyHostToDevice), cudaSuccess);
  KernelFn fn = find_kernel(c.var, c.K, c.V, c.bf16_in);
  ASSERT_NE(fn, nullptr);
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  ASSERT_EQ(launch_slot_writer(dst, slots, c.N, 50000, s), cudaSuccess);
  ASSERT_EQ(fn(d, s, c.bv), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  cudaStreamDestroy(s);
  expect_outputs(c, in, d, o, ht, st);
}

std::vector<StaleCase> stale_cases() {
  std::vector<StaleCase> cs;
  for (auto [name, var, bf16] : {std::tuple{"gated", DELTAC_VARIANT_GATED, false},
                                 {"gated_bf16_state", DELTAC_VARIANT_GATED, true},
                                 {"delta", DELTAC_VARIANT_DELTA, false},
                                 {"kda", DELTAC_VARIANT_KDA, false}}) {
    StaleCase s;
    s.c.name = name, s.c.var = var, s.c.bf16_state = bf16;
    // Moved, kept, a slot that becomes padding and padding that becomes a
    // slot.
    s.c.N = 6, s.c.slots = 9, s.c.read = {7, 1, -1, 8, 0, 4};
    s.stale = {0, 1, 2, -1, 3, 5};
    cs.push_back(s);
  }
  return cs;
}

INSTANTIATE_TEST_SUITE_P(Cuda, DecodePoolPdl, ::testing::ValuesIn(stale_cases()),
                         [](const ::testing::TestParamInfo<StaleCase>& info) {
                           return info.param.c.name;
                         });

}  // namespace
}  // namespace deltac::test

// Non-finite inputs (params.h, "Non-finite values"):
//  - g = -inf is a legal gate: exp(-inf) = 0 resets the state (kda: the key
//    rows whose gate is -inf) exactly, in every kernel;
//  - NaN or +-inf in any input never comes back as a finite output: every
//    output the float64 reference makes non-finite is non-finite.
// Every kernel: recurrent, its decode path (T = 1), chunked 16/32/64.
#include "harness.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <sstream>

namespace deltac::test {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// Kernel modes: 0 recurrent, 16/32/64 chunked; kDecode: recurrent on T = 1
// (decode.h).
constexpr int kDecode = -1;
const int kKernels[] = {0, 16, 32, 64};

std::string kernel_name(int mode) {
  if (mode == kDecode)
    return "decode";
  return mode ? "chunk" + std::to_string(mode) : std::string("recurrent");
}

// Outputs of a kernel call on d as f32 (o decoded from bf16 if need be).
struct Out {
  std::vector<float> o, ht;
};

Out kernel_out(const Data& d, const Case& c) {
  Out r;
  if (c.bf16_out)
    for (uint16_t x : d.ob) r.o.push_back(ref::bf16_to_float(x));
  else
    r.o = d.o;
  if (d.p.ht) {
    const float* ht = static_cast<const float*>(d.p.ht);
    r.ht.assign(ht, ht + size_t(d.N) * c.HV * c.K * c.V);
  }
  return r;
}

// Kernel output x against reference ref, element by element.
struct Cmp {
  size_t ref_nonfinite = 0;  // reference elements that are NaN or +-inf
  size_t leaked = 0;         // ... of which the kernel has finite: never allowed
  size_t extra = 0;          // kernel non-finite where the reference is finite
  size_t extra_lo = SIZE_MAX, extra_hi = 0;  // ... their first and last index
  double err = 0.0;          // relative RMS over elements finite in both
  std::string first_leak;
};

Cmp compare(const std::vector<float>& x, const std::vector<double>& ref) {
  Cmp c;
  double num = 0.0, den = 0.0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const bool rf = std::isfinite(ref[i]), xf = std::isfinite(x[i]);
    if (!rf) {
      ++c.ref_nonfinite;
      if (xf && c.leaked++ == 0) {
        std::ostringstream s;
        s << "element " << i << ": reference " << ref[i] << ", kernel " << x[i];
        c.first_leak = s.str();
      }
    } else if (!xf) {
      ++c.extra;
      c.extra_lo = std::min(c.extra_lo, i);
      c.extra_hi = i;
    } else {
      const double d = double(x[i]) - ref[i];
      num += d * d;
      den += ref[i] * ref[i];
    }
  }
  c.err = den == 0.0 ? (num == 0.0 ? 0.0 : INFINITY) : std::sqrt(num / den);
  return c;
}

struct Result {
  Cmp o, ht;
  uint64_t seed = 0;
};

// Inputs from a fresh seed, changed by `edit`, run through the kernel of
// c.var/c.mode and the reference.
Result run_edited(const Case& c, const std::function<void(Data&)>& edit) {
  Result r;
  r.seed = fresh_seed();
  std::mt19937_64 rng(r.seed);
  Data d = make_data(c, rng);
  edit(d);
  if (c.bf16_in) {  // re-convert the edited f32 inputs
    for (size_t i = 0; i < d.q.size(); ++i) d.qb[i] = ref::float_to_bf16(d.q[i]);
    for (size_t i = 0; i < d.k.size(); ++i) d.kb[i] = ref::float_to_bf16(d.k[i]);
    for (size_t i = 0; i < d.v.size(); ++i) d.vb[i] = ref::float_to_bf16(d.v[i]);
  }
  std::vector<double> o, ht;
  ref::forward(d.p, &o, d.p.ht ? &ht : nullptr);
  kernel_for(c.var, c.mode)(d.p);
  const Out out = kernel_out(d, c);
  r.o = compare(out.o, o);
  if (d.p.ht)
    r.ht = compare(out.ht, ht);
  return r;
}

// Sets the gate of token `t` (row of the flattened token axis), value head j
// to x; kda: the channels k with k % stride == 0.
void set_gate(Data& d, const Case& c, int64_t t, int j, float x, int stride = 1) {
  if (c.var == DELTAC_VARIANT_KDA) {
    for (int k = 0; k < c.K; k += stride) d.g[(size_t(t) * c.HV + j) * c.K + k] = x;
  } else {
    d.g[size_t(t) * c.HV + j] = x;
  }
}

Case base_case(deltac_variant var, int mode) {
  Case c;
  c.var = var;
  c.mode = mode == kDecode ? 0 : mode;
  if (mode == kDecode) {
    c.B = 3;
    c.T = 1;
    c.H = 2;
    c.HV = 4;
    c.K = c.V = 64;
  } else {
    c.B = 2;
    c.T = 150;
    c.H = 1;
    c.HV = 2;
    c.K = 32;
    c.V = 48;
  }
  return c;
}

// ---------------------------------------------------------------------------
// -inf gates: results match the reference (all finite).

struct GateCase {
  deltac_variant var;
  int mode;
};

std::string gate_case_name(const ::testing::TestParamInfo<GateCase>& info) {
  return std::string(info.param.var == DELTAC_VARIANT_GATED ? "gated" : "kda") +
         "_" + kernel_name(info.param.mode);
}

std::vector<GateCase> gate_cases() {
  std::vector<GateCase> out;
  for (auto v : {DELTAC_VARIANT_GATED, DELTAC_VARIANT_KDA})
    for (int m : {0, 16, 32, 64, kDecode}) out.push_back({v, m});
  return out;
}

class NegInfGate : public ::testing::TestWithParam<GateCase> {};

void expect_matches(const Result& r, const Case& c, const std::string& what) {
  SCOPED_TRACE(seed_note(r.seed));
  SCOPED_TRACE(what + " " + describe(c));
  EXPECT_EQ(r.o.ref_nonfinite + r.ht.ref_nonfinite, 0u);
  EXPECT_EQ(r.o.extra, 0u) << "non-finite o";
  EXPECT_EQ(r.ht.extra, 0u) << "non-finite ht";
  EXPECT_LE(r.o.err, o_tolerance(c));
  EXPECT_LE(r.ht.err, 1e-5);
}

// One -inf gate at token positions of sequence 0 (value head 1): the first
// token, mid-chunk, both sides of each chunk boundary, the last token; for
// kda every channel (a full reset) or every other one.
TEST_P(NegInfGate, SingleGate) {
  const auto [var, mode] = GetParam();
  Case c = base_case(var, mode);
  std::vector<int> positions = {0};
  if (mode != kDecode)
    positions = {0, 7, 15, 16, 31, 32, 33, 63, 64, 65, 100, 128, c.T - 1};
  for (int stride : {1, 2}) {
    if (stride == 2 && var != DELTAC_VARIANT_KDA)
      continue;
    for (int pos : positions) {
      const Result r = run_edited(c, [&](Data& d) { set_gate(d, c, pos, 1, -kInf, stride); });
      expect_matches(r, c, "position " + std::to_string(pos) + " stride " +
                               std::to_string(stride));
    }
  }
}

// Several -inf gates: in a row, at every chunk boundary, and in every head
// of a token; random ones (each gate -inf with probability 1/8), also on
// strongly decaying gates and in varlen batches.
TEST_P(NegInfGate, SeveralGates) {
  const auto [var, mode] = GetParam();
  Case c = base_case(var, mode);
  if (mode != kDecode) {
    const std::vector<std::vector<int>> sets = {
        {5, 6, 7, 8}, {0, 16, 32, 48, 64, 80, 96, 112, 128, 144}, {3, 40, 41, 149}};
    for (const auto& set : sets) {
      const Result r = run_edited(c, [&](Data& d) {
        for (int pos : set)
          for (int j = 0; j < c.HV; ++j) set_gate(d, c, pos, j, -kInf);
      });
      expect_matches(r, c, "set of " + std::to_string(set.size()));
    }
  }
  Case s = c;
  s.g_spike = -kInf;
  expect_matches(run_edited(s, [](Data&) {}), s, "random");
  s.g_lo = -30.0f;
  s.g_hi = -29.0f;
  expect_matches(run_edited(s, [](Data&) {}), s, "random, strong decay");
  Case v = s;
  v.g_lo = -1.0f;
  v.g_hi = 0.0f;
  v.B = 1;
  v.lens = mode == kDecode ? std::vector<int64_t>{1, 0, 1, 1}
                           : std::vector<int64_t>{17, 0, 64, 1, 90};
  expect_matches(run_edited(v, [](Data&) {}), v, "random, varlen");
  Case o = s;  // state options: VK layout, no h0, in place, bf16
  o.layout = DELTAC_STATE_VK;
  expect_matches(run_edited(o, [](Data&) {}), o, "random, VK");
  o.layout = DELTAC_STATE_KV;
  o.h0 = false;
  expect_matches(run_edited(o, [](Data&) {}), o, "random, no h0");
  o.h0 = true;
  o.inplace = true;
  expect_matches(run_edited(o, [](Data&) {}), o, "random, in place");
  o.inplace = false;
  o.bf16_in = o.bf16_out = true;
  expect_matches(run_edited(o, [](Data&) {}), o, "random, bf16");
}

// The reset is exact: from a full reset on (all channels -inf) the outputs
// and the final state do not depend, to the last bit, on the state before it
// (h0 and every earlier token replaced).
TEST_P(NegInfGate, ResetIsExact) {
  const auto [var, mode] = GetParam();
  const Case c = base_case(var, mode);
  std::vector<int> positions = {0};
  if (mode != kDecode)
    positions = {0, 20, 63, 64, 149};
  for (int pos : positions) {
    const uint64_t seed = fresh_seed();
    SCOPED_TRACE(seed_note(seed));
    SCOPED_TRACE("position " + std::to_string(pos));
    std::mt19937_64 r1(seed), r2(seed ^ 0x9e3779b97f4a7c15ull);
    Data a = make_data(c, r1), b = make_data(c, r2);
    // b: a's tokens from pos on (a's other sequences too); its own h0 and
    // earlier tokens.
    const int64_t from = pos;  // sequence 0 starts at row 0
    auto copy_rows = [&](std::vector<float>& dst, const std::vector<float>& src,
                         size_t per_row) {
      for (size_t i = 0; i < src.size(); ++i)
        if (int64_t(i / per_row) >= from)
          dst[i] = src[i];
    };
    const size_t gw = var == DELTAC_VARIANT_KDA ? c.K : 1;
    copy_rows(b.q, a.q, size_t(c.H) * c.K);
    copy_rows(b.k, a.k, size_t(c.H) * c.K);
    copy_rows(b.v, a.v, size_t(c.HV) * c.V);
    copy_rows(b.beta, a.beta, size_t(c.HV));
    copy_rows(b.g, a.g, size_t(c.HV) * gw);
    const size_t hs = size_t(c.HV) * c.K * c.V;  // other sequences' h0 alike
    std::copy(a.h0.begin() + hs, a.h0.end(), b.h0.begin() + hs);
    for (Data* d : {&a, &b})
      for (int j = 0; j < c.HV; ++j) set_gate(*d, c, pos, j, -kInf);
    kernel_for(var, c.mode)(a.p);
    kernel_for(var, c.mode)(b.p);
    const Out oa = kernel_out(a, c), ob = kernel_out(b, c);
    const size_t orow = size_t(c.HV) * c.V;
    size_t diff = 0;
    for (size_t i = size_t(pos) * orow; i < oa.o.size(); ++i) diff += !(oa.o[i] == ob.o[i]);
    EXPECT_EQ(diff, 0u) << "o elements that depend on the state before the reset";
    EXPECT_EQ(oa.ht, ob.ht) << "ht depends on the state before the reset";
  }
}

INSTANTIATE_TEST_SUITE_P(Kernels, NegInfGate, ::testing::ValuesIn(gate_cases()),
                         gate_case_name);

// ---------------------------------------------------------------------------
// NaN / +-inf in an input: never a finite output where the reference has a
// non-finite one; the finite outputs still match.

struct BadCase {
  deltac_variant var;
  int mode;
};

std::vector<BadCase> bad_cases() {
  std::vector<BadCase> out;
  for (auto v : {DELTAC_VARIANT_DELTA, DELTAC_VARIANT_GATED, DELTAC_VARIANT_KDA})
    for (int m : {0, 16, 32, 64, kDecode}) out.push_back({v, m});
  return out;
}

std::string bad_case_name(const ::testing::TestParamInfo<BadCase>& info) {
  static const char* vars[] = {"delta", "gated", "kda"};
  return std::string(vars[info.param.var]) + "_" + kernel_name(info.param.mode);
}

class NonFiniteInput : public ::testing::TestWithParam<BadCase> {};

// Element `e` of token row t (q/k: q/k head 0; v, beta, g: value head 1; h0:
// sequence 0, head 1) set to x.
void poison(Data& d, const Case& c, const std::string& input, int64_t t, int e,
            float x) {
  if (input == "q")
    d.q[size_t(t) * c.H * c.K + e] = x;
  else if (input == "k")
    d.k[size_t(t) * c.H * c.K + e] = x;
  else if (input == "v")
    d.v[(size_t(t) * c.HV + 1) * c.V + e] = x;
  else if (input == "beta")
    d.beta[size_t(t) * c.HV + 1] = x;
  else if (input == "g")
    set_gate(d, c, t, 1, x, c.var == DELTAC_VARIANT_KDA ? c.K : 1);  // one channel
  else if (input == "h0")
    d.h0[size_t(1) * c.K * c.V + size_t(e) * c.V + e % c.V] = x;
}

void check_bad(const Case& c, const std::string& input, float x, int64_t t) {
  const int e = 3;
  const Result r = run_edited(c, [&](Data& d) { poison(d, c, input, t, e, x); });
  SCOPED_TRACE(seed_note(r.seed));
  std::ostringstream what;
  what << input << " = " << x << " at token " << t << " " << describe(c);
  SCOPED_TRACE(what.str());
  // The input reaches some output in the reference.
  EXPECT_GT(r.o.ref_nonfinite + r.ht.ref_nonfinite, 0u);
  EXPECT_EQ(r.o.leaked, 0u) << "o finite where the reference is not: " << r.o.first_leak;
  EXPECT_EQ(r.ht.leaked, 0u) << "ht finite where the reference is not: " << r.ht.first_leak;
  EXPECT_LE(r.o.err, o_tolerance(c)) << "error of the finite o";
  EXPECT_LE(r.ht.err, 1e-5) << "error of the finite ht";
  // The state: exactly the reference's non-finite elements. o: the same for
  // the recurrent kernel and decode; the chunked kernels may also mark
  // earlier tokens of the poisoned token's chunk (its triangular products
  // run over whole row tiles: 0 * NaN = NaN), never tokens outside it.
  EXPECT_EQ(r.ht.extra, 0u) << "ht non-finite where the reference is finite";
  if (c.mode == 0) {
    EXPECT_EQ(r.o.extra, 0u) << "o non-finite where the reference is finite";
  } else if (r.o.extra) {
    const size_t row = size_t(c.HV) * c.V;
    const int64_t lo = int64_t(r.o.extra_lo / row), hi = int64_t(r.o.extra_hi / row);
    EXPECT_GE(lo, t - t % c.mode) << "extra non-finite o before the chunk";
    EXPECT_LT(hi, t) << "extra non-finite o at or after the token";
  }
}

TEST_P(NonFiniteInput, NeverBecomesFinite) {
  const auto [var, mode] = GetParam();
  Case c = base_case(var, mode);
  const std::vector<int64_t> tokens =
      mode == kDecode ? std::vector<int64_t>{1} : std::vector<int64_t>{0, 40, 64, c.T - 1};
  std::vector<std::string> inputs = {"q", "k", "v", "beta", "h0"};
  if (var != DELTAC_VARIANT_DELTA)
    inputs.push_back("g");
  for (const auto& in : inputs)
    for (float x : {kNaN, kInf, -kInf}) {
      if (in == "g" && x == -kInf)
        continue;  // a legal gate (NegInfGate)
      for (int64_t t : tokens) {
        if (in == "h0" && t != tokens[0])
          continue;
        check_bad(c, in, x, t);
      }
    }
  // Without the L2 norm, in bf16, and in the VK layout.
  Case o = c;
  o.l2norm = false;
  check_bad(o, "q", kNaN, tokens.back());
  check_bad(o, "k", kInf, tokens[0]);
  o = c;
  o.bf16_in = o.bf16_out = true;
  check_bad(o, "v", kNaN, tokens.back());
  o = c;
  o.layout = DELTAC_STATE_VK;
  check_bad(o, "h0", kNaN, tokens[0]);
  if (var != DELTAC_VARIANT_DELTA)
    check_bad(o, "g", kNaN, tokens.back());
}

// A NaN is not reset away: with a -inf gate after a NaN value, what the
// reference keeps NaN stays non-finite.
TEST_P(NonFiniteInput, NaNSurvivesAReset) {
  const auto [var, mode] = GetParam();
  if (var == DELTAC_VARIANT_DELTA || mode == kDecode)
    return;
  const Case c = base_case(var, mode);
  for (const char* in : {"v", "h0", "g"}) {
    const Result r = run_edited(c, [&](Data& d) {
      poison(d, c, in, 10, 3, kNaN);
      for (int j = 0; j < c.HV; ++j) set_gate(d, c, 30, j, -kInf);
    });
    SCOPED_TRACE(seed_note(r.seed));
    SCOPED_TRACE(in);
    EXPECT_GT(r.o.ref_nonfinite, 0u);
    EXPECT_EQ(r.o.leaked, 0u) << r.o.first_leak;
    EXPECT_EQ(r.ht.leaked, 0u) << r.ht.first_leak;
  }
}

INSTANTIATE_TEST_SUITE_P(Kernels, NonFiniteInput, ::testing::ValuesIn(bad_cases()),
                         bad_case_name);

// ---------------------------------------------------------------------------
// The float64 reference itself: a -inf gate is the same as starting over
// from a zero state (bitwise), and NaN propagates.

TEST(ReferenceSemantics, NegInfGateRestartsFromZero) {
  for (auto var : {DELTAC_VARIANT_GATED, DELTAC_VARIANT_KDA}) {
    Case c;
    c.var = var;
    c.T = 40;
    c.H = 1;
    c.HV = 2;
    const uint64_t seed = fresh_seed();
    SCOPED_TRACE(seed_note(seed));
    std::mt19937_64 rng(seed);
    Data d = make_data(c, rng);
    const int pos = 13;
    for (int j = 0; j < c.HV; ++j) set_gate(d, c, pos, j, -kInf);
    std::vector<double> o, ht, o2, ht2;
    ref::forward(d.p, &o, &ht);
    // The suffix from pos with h0 = 0 and gate 0 at pos.
    for (int j = 0; j < c.HV; ++j) set_gate(d, c, pos, j, 0.0f);
    const size_t gw = var == DELTAC_VARIANT_KDA ? c.K : 1;
    deltac_fwd_params p = d.p;
    p.T = c.T - pos;
    p.q = d.q.data() + size_t(pos) * c.H * c.K;
    p.k = d.k.data() + size_t(pos) * c.H * c.K;
    p.v = d.v.data() + size_t(pos) * c.HV * c.V;
    p.beta = d.beta.data() + size_t(pos) * c.HV;
    p.g = d.g.data() + size_t(pos) * c.HV * gw;
    p.h0 = nullptr;
    ref::forward(p, &o2, &ht2);
    EXPECT_EQ(ht, ht2);
    EXPECT_EQ(std::vector<double>(o.begin() + size_t(pos) * c.HV * c.V, o.end()), o2);
  }
}

TEST(ReferenceSemantics, NaNPropagatesAndIsNotReset) {
  Case c;
  c.var = DELTAC_VARIANT_GATED;
  c.T = 20;
  c.H = 1;
  c.HV = 1;
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  Data d = make_data(c, rng);
  d.v[size_t(5) * c.V] = kNaN;  // token 5, value column 0
  d.g[10] = -kInf;
  std::vector<double> o, ht;
  ref::forward(d.p, &o, &ht);
  for (int t = 0; t < c.T; ++t) {
    EXPECT_EQ(std::isnan(o[size_t(t) * c.V]), t >= 5) << "token " << t;
    EXPECT_TRUE(std::isfinite(o[size_t(t) * c.V + 1])) << "token " << t;
  }
  EXPECT_TRUE(std::isnan(ht[0]));
}

}  // namespace
}  // namespace deltac::test

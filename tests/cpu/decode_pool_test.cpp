// Decode for serving engines on the CPU (params.h: state pool, read/write
// slots, bf16 and fp8 states, state_steps, accepted counts) against the float64
// reference, through both families that take it (cpu_decode, cpu_recurrent)
// and the run-time ISA dispatch. Pool entries no sequence writes are
// poisoned and must come back bit-identical.
#include "deltac/check.h"
#include "deltac/cpu/isa.h"
#include "harness.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <numeric>

namespace deltac::test {
namespace {

struct PoolCase {
  deltac_variant var = DELTAC_VARIANT_GATED;
  int N = 4, T = 1, H = 2, HV = 4, K = 64, V = 64;
  std::vector<int64_t> lens;  // varlen (overrides N, T)
  int slots = 9;
  std::vector<int32_t> read, write;  // write empty: write_slots = NULL
  std::vector<int32_t> accepted;     // empty: NULL
  bool inplace = true;               // h0 == ht (one pool)
  bool bf16_state = false, steps = false;
  bool fp8_state = false;  // e4m3 with a scale per value head (kFp8Scales)
  int layout = DELTAC_STATE_KV;
  Family family = Family::CpuRecurrent;
  int tile_v = 0;  // 0: the family's default (avx2 row)
  int misalign_in = 0, misalign_out = 0;  // bytes past a 64-byte line
};

// fp8 state scales of value heads 0, 1, 2, ... (repeating): powers of two
// and 1/3, whose reciprocal rounds (params.h: e4m3(x * (1 / scale))).
const float kFp8Scales[] = {0.25f, 1.0f / 3.0f, 2.0f, 0.0625f};
std::vector<float> fp8_scales(int HV) {
  std::vector<float> s(HV);
  for (int j = 0; j < HV; ++j) s[j] = kFp8Scales[j % 4];
  return s;
}

// A pool of `slots` states in f32, bf16 or fp8 (scale per value head:
// element i is in head (i / head) % scales.size()), held as raw bytes that
// start `misalign` bytes past a 64-byte line, between guard bytes.
struct Pool {
  std::vector<uint8_t> buf;  // guard, the pool's bytes, guard
  size_t off = 0;            // where the pool starts in buf
  size_t elems = 0;
  bool bf16 = false;
  int32_t dtype = DELTAC_F32;
  std::vector<float> scales;
  size_t head = 1;
  float scale_at(size_t i) const { return scales[(i / head) % scales.size()]; }
  size_t esz() const { return dtype == DELTAC_F32 ? 4 : dtype == DELTAC_BF16 ? 2 : 1; }
  uint8_t* data() { return buf.data() + off; }
  const uint8_t* data() const { return buf.data() + off; }
  std::vector<uint8_t> raw() const { return {data(), data() + elems * esz()}; }
  double at(size_t i) const {
    if (dtype == DELTAC_FP8_E4M3)
      return ref::load_state(data(), dtype, int64_t(i), scale_at(i));
    if (bf16) {
      uint16_t x;
      std::memcpy(&x, data() + 2 * i, 2);
      return ref::bf16_to_float(x);
    }
    float x;
    std::memcpy(&x, data() + 4 * i, 4);
    return x;
  }
  std::vector<double> values() const {
    std::vector<double> v(elems);
    for (size_t i = 0; i < elems; ++i) v[i] = at(i);
    return v;
  }
};

constexpr uint8_t kGuard = 0xa5;  // the bytes around a pool

// fp8: scales per value head of `head` elements each (else unused).
Pool make_pool(size_t elems, bool bf16, std::mt19937_64& rng, float poison,
               bool fp8 = false, std::vector<float> scales = {1.0f}, size_t head = 1,
               int misalign = 0) {
  Pool p;
  p.elems = elems;
  p.bf16 = bf16;
  p.dtype = fp8 ? DELTAC_FP8_E4M3 : bf16 ? DELTAC_BF16 : DELTAC_F32;
  p.scales = scales;
  p.head = head;
  p.buf.assign(elems * p.esz() + 192, kGuard);
  p.off = 64 + (size_t(misalign) + 64 - reinterpret_cast<uintptr_t>(p.buf.data()) % 64) % 64;
  std::normal_distribution<float> normal(0.0f, 0.5f);
  for (size_t i = 0; i < elems; ++i) {
    const float x = poison != 0.0f ? poison : normal(rng);
    if (fp8) {
      p.data()[i] = f32_to_fp8e4m3(x * (1.0f / p.scale_at(i)));
    } else if (bf16) {
      const uint16_t b = ref::float_to_bf16(x);
      std::memcpy(p.data() + 2 * i, &b, 2);
    } else {
      std::memcpy(p.data() + 4 * i, &x, 4);
    }
  }
  return p;
}

double rel(const std::vector<double>& x, const std::vector<double>& ref) {
  double num = 0, den = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double d = x[i] - ref[i];
    num += d * d;
    den += ref[i] * ref[i];
  }
  if (!std::isfinite(num))
    return INFINITY;
  return den == 0 ? (num == 0 ? 0 : INFINITY) : std::sqrt(num / den);
}

void run_kernel(const deltac_fwd_params& p, Family f, int tile_v = 0) {
  Problem prob = problem_of(p, max_seqlen(p));
  KernelConfig c = default_config(f, prob);
  if (tile_v)
    c.tile_v = tile_v;
  ASSERT_EQ(check_config(c, prob), "");
  bool spec = false;
  ASSERT_TRUE(cpu::isa::launch_dims(deltac_variant(p.variant), c, p, &spec,
                                    cpu::isa::active()));
}

// Runs c on fresh inputs and checks o, the pool and state_steps.
void check_case(const PoolCase& pc) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  Case c;
  c.var = pc.var;
  c.B = pc.N, c.T = pc.T, c.H = pc.H, c.HV = pc.HV, c.K = pc.K, c.V = pc.V;
  c.lens = pc.lens;
  c.layout = pc.layout;
  c.h0 = c.ht = false;
  Data d = make_data(c, rng);
  deltac_fwd_params& p = d.p;
  const size_t hs = size_t(pc.HV) * pc.K * pc.V;
  const std::vector<float> scales = pc.fp8_state ? fp8_scales(pc.HV) : std::vector<float>{1.0f};
  const size_t kv = size_t(pc.K) * pc.V;
  auto new_pool = [&](size_t elems, float poison, int misalign = 0) {
    return make_pool(elems, pc.bf16_state, rng, poison, pc.fp8_state, scales, kv, misalign);
  };
  Pool in = new_pool(pc.slots * hs, 0.0f, pc.misalign_in);
  Pool out = pc.inplace ? Pool{} : new_pool(pc.slots * hs, 1234.5f, pc.misalign_out);
  Pool steps = new_pool(size_t(d.rows) * hs, -777.0f);
  p.state_dtype = pc.fp8_state ? DELTAC_FP8_E4M3 : pc.bf16_state ? DELTAC_BF16 : DELTAC_F32;
  p.state_scale = pc.fp8_state ? scales.data() : nullptr;
  p.num_slots = pc.slots;
  p.read_slots = pc.read.data();
  p.write_slots = pc.write.empty() ? nullptr : pc.write.data();
  p.accepted = pc.accepted.empty() ? nullptr : pc.accepted.data();
  p.h0 = in.data();
  p.ht = pc.inplace ? in.data() : out.data();
  p.state_steps = pc.steps ? steps.data() : nullptr;
  std::string err;
  ASSERT_TRUE(check_params(p, &err)) << err;

  std::vector<double> o, ht, st;
  ref::forward(p, &o, &ht, pc.steps ? &st : nullptr);
  const std::vector<double> before = (pc.inplace ? in : out).values();
  const std::vector<uint8_t> raw_before = (pc.inplace ? in : out).raw();
  run_kernel(p, pc.family, pc.tile_v);
  if (::testing::Test::HasFatalFailure())
    return;

  EXPECT_LE(ref::rel_rms(d.o.data(), o), 1e-5) << "o";
  for (const Pool* g : {&in, &out}) {  // nothing written around the pools
    const size_t end = g->off + g->elems * g->esz();
    for (size_t i = 0; i < g->buf.size(); ++i)
      if (i < g->off || i >= end)
        ASSERT_EQ(g->buf[i], kGuard) << "byte " << i - g->off << " from the pool's start";
  }
  const Pool& pool = pc.inplace ? in : out;
  // fp8: the reference's states rounded as the kernels store them (a value
  // computed in f32 may round to the neighbouring e4m3 value, rarely).
  if (pc.fp8_state) {
    auto quantize = [&](std::vector<double>& x) {
      for (size_t i = 0; i < x.size(); ++i)
        x[i] = ref::stored_state(x[i], DELTAC_FP8_E4M3, scales[(i / kv) % scales.size()]);
    };
    quantize(ht);
    quantize(st);
  }
  const double tol = pc.bf16_state || pc.fp8_state ? 5e-3 : 1e-5;
  const size_t esz = pool.esz();
  std::vector<int> writer(pc.slots, -1);
  for (int n = 0; n < p.N; ++n)
    if (ref::write_slot(p, n) >= 0)
      writer[ref::write_slot(p, n)] = n;
  const std::vector<double> got = pool.values();
  for (int s = 0; s < pc.slots; ++s) {
    if (writer[s] < 0) {  // untouched, to the bit
      EXPECT_EQ(std::memcmp(pool.data() + s * hs * esz,
                            raw_before.data() + s * hs * esz, hs * esz),
                0)
          << "slot " << s << " was written though no sequence writes it";
      continue;
    }
    const int n = writer[s];
    std::vector<double> a(got.begin() + s * hs, got.begin() + (s + 1) * hs);
    std::vector<double> r(ht.begin() + n * hs, ht.begin() + (n + 1) * hs);
    EXPECT_LE(rel(a, r), tol) << "slot " << s << " (sequence " << n << ")";
  }
  (void)before;
  if (pc.steps)
    EXPECT_LE(rel(steps.values(), st), tol) << "state_steps";
}

const deltac_variant kVars[] = {DELTAC_VARIANT_DELTA, DELTAC_VARIANT_GATED,
                                DELTAC_VARIANT_KDA};
const Family kFamilies1[] = {Family::CpuDecode, Family::CpuRecurrent};

TEST(DecodePool, InPlaceSlotsWithPadding) {
  for (deltac_variant var : kVars)
    for (Family f : kFamilies1) {
      SCOPED_TRACE(std::string(family_info(f).name) + " var " + std::to_string(var));
      PoolCase c;
      c.var = var, c.family = f, c.N = 5;
      c.read = {7, -1, 2, 0, -1};  // two padding sequences, slots 1 3 4 5 6 8 unused
      check_case(c);
    }
}

TEST(DecodePool, VkLayoutAndK128) {
  // Every variant: the VK decode tile has a per-key (kda), a per-head
  // (gated) and no decay (delta) form.
  for (deltac_variant var : kVars)
    for (Family f : kFamilies1) {
      SCOPED_TRACE("var " + std::to_string(var));
      PoolCase c;
      c.var = var;
      c.family = f, c.layout = DELTAC_STATE_VK, c.K = c.V = 128, c.HV = 2, c.H = 1;
      c.read = {3, 1, -1};
      c.N = 3, c.slots = 5;
      check_case(c);
    }
}

TEST(DecodePool, OutputWithoutFinalState) {
  // h0 in, no ht: the decode tiles' o-only form (dot products, no update),
  // both layouts, K an odd number of 16-float vectors, zero-state rows too.
  for (deltac_variant var : kVars)
    for (int layout : {DELTAC_STATE_KV, DELTAC_STATE_VK})
      for (bool h0 : {true, false}) {
        Case c;
        c.var = var, c.layout = layout, c.B = 3, c.T = 1, c.H = 1, c.HV = 2;
        c.K = 48, c.V = 128, c.h0 = h0, c.ht = false;
        SCOPED_TRACE(describe(c));
        const Errors e = run_vs_reference(c);
        SCOPED_TRACE(seed_note(e.seed));
        EXPECT_LE(e.o, o_tolerance(c));
      }
}

TEST(DecodePool, EveryDecodeTile) {
  // Each cpu_decode tile width (whole rows of 128 columns: the avx512 rule's)
  // over two tiles a row and K an odd number of 16-float vectors, every
  // variant, layout and state dtype, with a padding slot.
  const KnobValues& tiles = family_info(Family::CpuDecode).values[knob_index(kKnobTileV)];
  for (int i = 0; i < tiles.n; ++i)
    for (deltac_variant var : kVars)
      for (int layout : {DELTAC_STATE_KV, DELTAC_STATE_VK})
        for (int dt = 0; dt < 3; ++dt) {
          SCOPED_TRACE("tile_v " + std::to_string(tiles.v[i]) + " var " + std::to_string(var) +
                       " layout " + std::to_string(layout) + " state " + std::to_string(dt));
          PoolCase c;
          c.var = var, c.layout = layout, c.bf16_state = dt == 1, c.fp8_state = dt == 2;
          c.family = Family::CpuDecode, c.tile_v = tiles.v[i];
          c.K = 48, c.V = 256, c.N = 3, c.slots = 4;
          c.read = {2, -1, 0};
          check_case(c);
        }
}

TEST(DecodePool, MisalignedStates) {
  // Pools 4 to 60 bytes past a cache line (states as callers may hand them
  // in), in place and apart, equally and differently off, a zero start and a
  // padding slot: o, the pool and the bytes around it.
  const KnobValues& tiles = family_info(Family::CpuDecode).values[knob_index(kKnobTileV)];
  for (int i = 0; i < tiles.n; ++i)
    for (deltac_variant var : kVars)
      for (int mis : {4, 16, 32, 60})
        for (int apart = 0; apart < 3; ++apart) {
          SCOPED_TRACE("tile_v " + std::to_string(tiles.v[i]) + " var " + std::to_string(var) +
                       " misalign " + std::to_string(mis) + " apart " + std::to_string(apart));
          PoolCase c;
          c.var = var, c.family = Family::CpuDecode, c.tile_v = tiles.v[i];
          c.K = 32, c.V = 128, c.N = 4, c.slots = 5;
          c.read = {3, -1, 0, 1};
          c.inplace = apart == 0;
          c.write = {3, 2, 0, -1};
          c.misalign_in = mis;
          c.misalign_out = apart == 2 ? (mis + 16) % 64 : mis;
          check_case(c);
        }
}

TEST(DecodePool, CopyOnWritePrefixShared) {
  // Sequences 0 and 1 read slot 2 (a shared prefix) and write fresh slots;
  // sequence 2 updates slot 0 in place.
  for (Family f : kFamilies1) {
    PoolCase c;
    c.family = f, c.N = 3;
    c.read = {2, 2, 0};
    c.write = {5, 6, 0};
    check_case(c);
  }
}

TEST(DecodePool, SeparatePoolsFrozenAndZeroStart) {
  // write -1: verify without committing; read -1: start from zero.
  for (Family f : kFamilies1) {
    PoolCase c;
    c.family = f, c.N = 4, c.inplace = false;
    c.read = {1, 4, -1, -1};
    c.write = {-1, 4, 2, -1};
    check_case(c);
  }
}

// A 16-bit or fp8 state: every variant, both layouts, one token (the decode
// family) and four (the recurrent one).
void narrow_state_cases(bool bf16, bool fp8) {
  for (deltac_variant var : kVars)
    for (int layout : {DELTAC_STATE_KV, DELTAC_STATE_VK})
      for (int T : {1, 4}) {
        SCOPED_TRACE("var " + std::to_string(var) + " layout " + std::to_string(layout) +
                     " T " + std::to_string(T));
        PoolCase c;
        c.var = var, c.layout = layout, c.T = T, c.bf16_state = bf16, c.fp8_state = fp8;
        c.family = T == 1 ? Family::CpuDecode : Family::CpuRecurrent;
        c.read = {3, 0, -1, 8};
        check_case(c);
      }
}

TEST(DecodePool, Bf16State) { narrow_state_cases(true, false); }
TEST(DecodePool, Fp8State) { narrow_state_cases(false, true); }

TEST(DecodePool, Fp8StepsAcceptedCopyOnWrite) {
  for (deltac_variant var : kVars) {
    SCOPED_TRACE("var " + std::to_string(var));
    PoolCase c;
    c.var = var, c.N = 5, c.T = 4, c.steps = true, c.fp8_state = true;
    c.read = {4, 0, 6, 2, 4};
    c.write = {5, 0, 7, 2, 1};
    c.accepted = {0, 1, 2, 3, 4};
    check_case(c);
  }
}

// fp8 states saturate finite values at +-448 * scale and keep inf / NaN
// as NaN (params.h); the reference's stored_state is the rule.
TEST(DecodePool, Fp8SaturatesAndKeepsNaN) {
  const float scale = 0.5f;
  EXPECT_EQ(ref::stored_state(1e6, DELTAC_FP8_E4M3, scale), 448.0 * scale);
  EXPECT_EQ(ref::stored_state(-1e6, DELTAC_FP8_E4M3, scale), -448.0 * scale);
  EXPECT_TRUE(std::isnan(ref::stored_state(INFINITY, DELTAC_FP8_E4M3, scale)));
  EXPECT_TRUE(std::isnan(ref::stored_state(NAN, DELTAC_FP8_E4M3, scale)));
  EXPECT_EQ(ref::stored_state(0.0, DELTAC_FP8_E4M3, scale), 0.0);
  // 2^-9 * scale is the smallest subnormal step; 0.3 * that rounds to 0.
  EXPECT_EQ(ref::stored_state(std::ldexp(1.0, -9) * scale, DELTAC_FP8_E4M3, scale),
            std::ldexp(1.0, -9) * scale);
  EXPECT_EQ(ref::stored_state(0.3 * std::ldexp(1.0, -9) * scale, DELTAC_FP8_E4M3, scale), 0.0);
  // Through a kernel: every element of the initial state at the limit
  // (448 * scale), plain delta rule: the update pushes about half of them
  // past it, and they come back saturated, never NaN, as the reference
  // rounds them.
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  Case c;
  c.var = DELTAC_VARIANT_DELTA;
  c.B = 1, c.T = 1, c.H = 1, c.HV = 1, c.K = c.V = 64;
  c.h0 = c.ht = false;
  Data d = make_data(c, rng);
  std::vector<uint8_t> h0(size_t(c.K) * c.V, 0x7e), ht(h0.size(), 0);
  d.p.state_dtype = DELTAC_FP8_E4M3;
  d.p.state_scale = &scale;
  d.p.h0 = h0.data();
  d.p.ht = ht.data();
  std::vector<double> o, want;
  ref::forward(d.p, &o, &want);
  run_kernel(d.p, Family::CpuDecode);
  int saturated = 0;
  for (uint8_t b : ht) {
    saturated += (b & 0x7fu) == 0x7eu;
    EXPECT_NE(b & 0x7fu, 0x7fu) << "a finite state became NaN";
  }
  EXPECT_GT(saturated, int(ht.size() / 8)) << "too few elements reached the limit";
  std::vector<double> got(ht.size());
  for (size_t i = 0; i < ht.size(); ++i) {
    got[i] = ref::load_state(ht.data(), DELTAC_FP8_E4M3, int64_t(i), scale);
    want[i] = ref::stored_state(want[i], DELTAC_FP8_E4M3, scale);
  }
  EXPECT_LE(rel(got, want), 5e-3);
}

TEST(DecodePool, AcceptedZeroToTWithSteps) {
  // T = 4: every count 0..4 once, with and without state_steps, in place.
  for (deltac_variant var : kVars)
    for (bool steps : {false, true})
      for (bool bf16 : {false, true}) {
        SCOPED_TRACE("var " + std::to_string(var) + (steps ? " steps" : "") +
                     (bf16 ? " bf16" : ""));
        PoolCase c;
        c.var = var, c.N = 5, c.T = 4, c.steps = steps, c.bf16_state = bf16;
        c.read = {4, 0, 6, 2, 8};
        c.accepted = {0, 1, 2, 3, 4};
        check_case(c);
      }
}

TEST(DecodePool, AcceptedOneTokenDecodeFamily) {
  for (int acc : {0, 1}) {
    PoolCase c;
    c.family = Family::CpuDecode, c.N = 2;
    c.read = {1, 5};
    c.write = {2, 5};
    c.accepted = {acc, 1 - acc};
    c.steps = true;
    check_case(c);
  }
}

TEST(DecodePool, VarlenStepsAccepted) {
  for (bool bf16 : {false, true}) {
    PoolCase c;
    c.lens = {1, 3, 0, 8, 2};
    c.N = 5, c.bf16_state = bf16, c.steps = true;
    c.read = {0, 1, 2, 3, 4};
    c.write = {5, 6, 7, 8, -1};
    c.inplace = false;
    c.accepted = {1, 2, 0, 5, 2};
    check_case(c);
  }
}

TEST(DecodePool, MaxTokensEight) {
  PoolCase c;
  c.T = 8, c.N = 3, c.steps = true;
  c.read = {0, 1, 2};
  c.accepted = {8, 3, 0};
  check_case(c);
}

// N one-token steps through an in-place pool slot equal one call of N tokens
// from the same initial state (contiguous, no pool).
TEST(DecodePool, StepsEqualPrefill) {
  for (bool bf16 : {false, true})
    for (deltac_variant var : kVars) {
      SCOPED_TRACE(std::string(bf16 ? "bf16 " : "f32 ") + std::to_string(var));
      const uint64_t seed = fresh_seed();
      SCOPED_TRACE(seed_note(seed));
      std::mt19937_64 rng(seed);
      const int steps = 6;
      Case c;
      c.var = var, c.B = 1, c.T = steps, c.H = 2, c.HV = 4, c.K = c.V = 64;
      c.ht = true;
      Data whole = make_data(c, rng);
      const size_t hs = size_t(c.HV) * c.K * c.V;
      // The pool: 3 slots, the sequence lives in slot 1, f32 or bf16.
      Pool pool = make_pool(3 * hs, bf16, rng, 0.0f);
      std::vector<float> h0f(hs);
      for (size_t i = 0; i < hs; ++i) h0f[i] = float(pool.at(hs + i));
      whole.h0 = h0f;
      whole.p.h0 = whole.h0.data();
      run_kernel(whole.p, Family::CpuRecurrent);
      const int32_t slot = 1;
      std::vector<float> o(size_t(steps) * c.HV * c.V);
      for (int t = 0; t < steps; ++t) {
        deltac_fwd_params p = whole.p;
        p.T = 1;
        const size_t e = p.in_dtype == DELTAC_BF16 ? 2 : 4;
        p.q = static_cast<const char*>(whole.p.q) + size_t(t) * c.H * c.K * e;
        p.k = static_cast<const char*>(whole.p.k) + size_t(t) * c.H * c.K * e;
        p.v = static_cast<const char*>(whole.p.v) + size_t(t) * c.HV * c.V * e;
        p.beta = whole.p.beta + size_t(t) * c.HV;
        if (p.g)
          p.g = whole.p.g + size_t(t) * c.HV * (var == DELTAC_VARIANT_KDA ? c.K : 1);
        p.o = o.data() + size_t(t) * c.HV * c.V;
        p.state_dtype = bf16 ? DELTAC_BF16 : DELTAC_F32;
        p.num_slots = 3;
        p.read_slots = &slot;
        p.h0 = p.ht = pool.data();
        run_kernel(p, Family::CpuDecode);
      }
      std::vector<double> ow(whole.o.begin(), whole.o.end()), ho(hs), hw(hs);
      for (size_t i = 0; i < hs; ++i) {
        ho[i] = pool.at(hs + i);
        hw[i] = static_cast<const float*>(whole.p.ht)[i];
      }
      std::vector<double> od(o.begin(), o.end());
      const double tol = bf16 ? 5e-3 : 1e-5;
      EXPECT_LE(rel(od, ow), tol) << "o";
      EXPECT_LE(rel(ho, hw), tol) << "state";
    }
}

// ---------------------------------------------------------------------------
// Bad input: check_params names the field and says what was expected.

struct BadCall {
  Case c;
  Data d;
  std::vector<float> pool;
  std::vector<int32_t> read, write, acc;
  explicit BadCall(int N = 3, int T = 1) {
    std::mt19937_64 rng(1);
    c.B = N, c.T = T, c.h0 = c.ht = false;
    d = make_data(c, rng);
    pool.resize(size_t(4) * c.HV * c.K * c.V);
    d.p.h0 = d.p.ht = pool.data();
    d.p.num_slots = 4;
    read = {0, 1, 2};
    read.resize(N, -1);
    d.p.read_slots = read.data();
  }
  std::string error() {
    std::string e;
    return check_params(d.p, &e) ? std::string() : e;
  }
};

TEST(DecodePoolCheck, GoodCallPasses) {
  BadCall b;
  EXPECT_EQ(b.error(), "");
}

TEST(DecodePoolCheck, ReadSlotOutOfRange) {
  BadCall b;
  b.read[1] = 4;
  EXPECT_NE(b.error().find("params.read_slots[1] = 4: expected a slot in [0, 4)"),
            std::string::npos)
      << b.error();
  b.read[1] = -2;
  EXPECT_NE(b.error().find("read_slots[1] = -2"), std::string::npos) << b.error();
}

TEST(DecodePoolCheck, WriteSlotOutOfRange) {
  BadCall b;
  b.write = {0, 9, 2};
  b.d.p.write_slots = b.write.data();
  EXPECT_NE(b.error().find("params.write_slots[1] = 9"), std::string::npos) << b.error();
}

TEST(DecodePoolCheck, SameSlotWrittenTwice) {
  BadCall b;
  b.write = {3, 1, 3};
  b.d.p.write_slots = b.write.data();
  EXPECT_NE(b.error().find("params.write_slots[2] = 3: slot already written by sequence 0"),
            std::string::npos)
      << b.error();
  b.read = {1, 1, 2};  // in-place pool, one slot for two sequences
  b.d.p.write_slots = nullptr;
  EXPECT_NE(b.error().find("params.read_slots[1] = 1: slot already written"),
            std::string::npos)
      << b.error();
}

TEST(DecodePoolCheck, ReadOfSlotAnotherWritesInPlace) {
  BadCall b;
  b.write = {3, 0, 2};  // sequence 1 writes slot 0, which sequence 0 reads
  b.d.p.write_slots = b.write.data();
  EXPECT_NE(b.error().find("params.read_slots[0] = 0: slot written by sequence 1"),
            std::string::npos)
      << b.error();
  // Separate pools: no race, allowed.
  std::vector<float> out(b.pool.size());
  b.d.p.ht = out.data();
  EXPECT_EQ(b.error(), "");
}

TEST(DecodePoolCheck, NumSlotsRules) {
  BadCall b;
  b.d.p.num_slots = 0;
  EXPECT_NE(b.error().find("params.num_slots = 0: expected > 0 with read_slots"),
            std::string::npos)
      << b.error();
  b.d.p.read_slots = nullptr;
  b.d.p.num_slots = 4;
  EXPECT_NE(b.error().find("params.num_slots = 4: expected 0 without read_slots"),
            std::string::npos)
      << b.error();
  b.d.p.num_slots = 0;
  b.d.p.write_slots = b.read.data();
  EXPECT_NE(b.error().find("write_slots is set but read_slots is null"), std::string::npos)
      << b.error();
}

TEST(DecodePoolCheck, TooManyTokensWithStepsOrAccepted) {
  BadCall b(3, 9);
  std::vector<float> steps(size_t(3) * 9 * b.c.HV * b.c.K * b.c.V);
  EXPECT_EQ(b.error(), "");  // a pool alone takes any length
  b.d.p.state_steps = steps.data();
  EXPECT_NE(b.error().find("params.T = 9: expected at most 8 tokens with state_steps"),
            std::string::npos)
      << b.error();
  b.d.p.state_steps = nullptr;
  b.acc = {1, 1, 1};
  b.d.p.accepted = b.acc.data();
  EXPECT_NE(b.error().find("params.T = 9: expected at most 8 tokens with accepted"),
            std::string::npos)
      << b.error();
}

TEST(DecodePoolCheck, VarlenTooLongWithAccepted) {
  std::mt19937_64 rng(2);
  Case c;
  c.lens = {2, 9};
  c.h0 = c.ht = false;
  Data d = make_data(c, rng);
  std::vector<int32_t> acc = {1, 1};
  d.p.accepted = acc.data();
  std::string e;
  EXPECT_FALSE(check_params(d.p, &e));
  EXPECT_NE(e.find("params.cu_seqlens: sequence 1 has 9 tokens: expected at most 8"),
            std::string::npos)
      << e;
}

TEST(DecodePoolCheck, AcceptedAboveT) {
  BadCall b(3, 4);
  b.acc = {4, 5, 0};
  b.d.p.accepted = b.acc.data();
  EXPECT_NE(b.error().find("params.accepted[1] = 5: expected a count in [0, 4]"),
            std::string::npos)
      << b.error();
  b.acc = {0, -1, 0};
  EXPECT_NE(b.error().find("params.accepted[1] = -1"), std::string::npos) << b.error();
}

TEST(DecodePoolCheck, StateDtype) {
  BadCall b;
  b.d.p.state_dtype = DELTAC_F16;
  EXPECT_NE(b.error().find("params.state_dtype = 2: expected 0 (f32), 1 (bf16) or 3 (fp8 e4m3)"),
            std::string::npos)
      << b.error();
  b.d.p.state_dtype = DELTAC_BF16;
  EXPECT_EQ(b.error(), "");
  // A scale for a state that is not fp8.
  const float s = 0.5f;
  b.d.p.state_scale = &s;
  EXPECT_NE(b.error().find("params.state_scale is set: it applies to fp8 e4m3 states only"),
            std::string::npos)
      << b.error();
  b.d.p.state_scale = nullptr;
  b.d.p.state_steps = reinterpret_cast<char*>(b.pool.data()) + 1;
  EXPECT_NE(b.error().find("params.state_steps: expected 2-byte alignment"),
            std::string::npos)
      << b.error();
  // fp8: any byte alignment; state_scale NULL (every head's scale 1) or set.
  b.d.p.state_dtype = DELTAC_FP8_E4M3;
  EXPECT_EQ(b.error(), "");
  const float per_head[2] = {0.5f, 0.25f};  // HV = 2
  b.d.p.state_scale = per_head;
  EXPECT_EQ(b.error(), "");
}

// The catalogue: chunked families refuse pools, steps, accepted, bf16 state.
TEST(DecodePoolCheck, ChunkedFamiliesRefuse) {
  BadCall b;
  Problem prob = problem_of(b.d.p, 1);
  EXPECT_EQ(check_family(Family::CpuDecode, prob), "");
  EXPECT_EQ(check_family(Family::CpuRecurrent, prob), "");
  EXPECT_EQ(check_family(Family::CudaRecurrent, prob), "");
  for (Family f : {Family::CpuChunked, Family::CudaChunked})
    EXPECT_NE(check_family(f, prob).find("state pools (read_slots) run on the recurrent "
                                         "families only"),
              std::string::npos)
        << check_family(f, prob);
  prob.pool = false;
  prob.state_dtype = DELTAC_BF16;
  EXPECT_NE(check_family(Family::CpuChunked, prob).find("the state must be f32"),
            std::string::npos);
  EXPECT_EQ(check_family(Family::CpuRecurrent, prob), "");
  // Auto still finds a family on both devices.
  Family f;
  std::string why;
  prob.pool = true;
  prob.max_seqlen = 100;
  ASSERT_TRUE(default_family(Device::CUDA, Mode::Auto, prob, &f, &why)) << why;
  EXPECT_EQ(f, Family::CudaRecurrent);
  ASSERT_TRUE(default_family(Device::CPU, Mode::Auto, prob, &f, &why)) << why;
  EXPECT_EQ(f, Family::CpuRecurrent);
  EXPECT_FALSE(default_family(Device::CPU, Mode::Chunked, prob, &f, &why));
  EXPECT_NE(why.find("cpu_chunked"), std::string::npos) << why;
}

}  // namespace
}  // namespace deltac::test

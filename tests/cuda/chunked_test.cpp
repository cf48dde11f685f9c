// GPU tests of deltac::cuda::chunked (the chunked WY/UT prefill) against the
// float64 reference, and against deltac::cuda::recurrent on the same inputs.
// GPU cases skip without a CUDA device; the argument checks run everywhere.
// Every randomized case prints its seed; DELTAC_TEST_SEED=<seed> reruns it.
#include "deltac/cuda/chunked_rules.h"
#include "harness.h"
#include "kernels_chunked.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

namespace deltac::test {
namespace {

const char* vname(deltac_variant v) {
  return v == DELTAC_VARIANT_DELTA ? "delta" : v == DELTAC_VARIANT_GATED ? "gated" : "kda";
}
const deltac_variant kVars[] = {DELTAC_VARIANT_DELTA, DELTAC_VARIANT_GATED, DELTAC_VARIANT_KDA};

enum Dt { F32, BF16, F16 };
const char* dname(Dt d) { return d == F32 ? "f32" : d == BF16 ? "bf16" : "f16"; }

Case make(deltac_variant var, Dt dt, const std::string& what) {
  Case c;
  c.var = var;
  c.bf16 = dt == BF16;
  c.f16 = dt == F16;
  c.chunked = true;
  c.B = 1, c.H = 2, c.HV = 4;
  c.name = std::string(vname(var)) + "_" + dname(dt) + "_" + what;
  return c;
}

std::vector<Case> all_cases() {
  std::vector<Case> cs;
  for (deltac_variant var : kVars) {
    for (Dt dt : {BF16, F32}) {
      // Lengths around the chunk: 1, < 64, 64 + 1, long; K = V = 128, GVA 2.
      for (int T : {1, 17, 65, 1000}) {
        Case c = make(var, dt, "T" + std::to_string(T));
        c.T = T;
        cs.push_back(c);
      }
      // Batch of 3 (no cu_seqlens).
      Case c = make(var, dt, "batch3_T100");
      c.B = 3, c.T = 100;
      cs.push_back(c);
      // Varlen: lengths 1, 64, 130, 3, 0.
      c = make(var, dt, "varlen");
      c.cu_seqlens = {0, 1, 65, 195, 198, 198};
      cs.push_back(c);
      // Transposed (VK) state, no h0, no ht, in place.
      c = make(var, dt, "vk_layout");
      c.layout = DELTAC_STATE_VK, c.T = 70;
      cs.push_back(c);
      c = make(var, dt, "no_h0");
      c.h0 = false, c.T = 70;
      cs.push_back(c);
      c = make(var, dt, "no_ht");
      c.ht = false, c.T = 70;
      cs.push_back(c);
      c = make(var, dt, "inplace");
      c.inplace = true, c.T = 130;
      cs.push_back(c);
      // beta near 0 and near 2; no L2 norm with an explicit scale.
      c = make(var, dt, "beta0");
      c.beta_lo = 0.f, c.beta_hi = 0.01f, c.T = 100;
      cs.push_back(c);
      c = make(var, dt, "beta2");
      c.beta_lo = 1.99f, c.beta_hi = 2.f, c.T = 100;
      cs.push_back(c);
      c = make(var, dt, "no_l2norm_scale");
      c.l2norm = 0, c.scale = 0.3f, c.T = 100;
      cs.push_back(c);
      if (var != DELTAC_VARIANT_DELTA) {
        c = make(var, dt, "gate_near0");
        c.g_lo = -1e-4f, c.g_hi = 0.f, c.T = 200;
        cs.push_back(c);
        c = make(var, dt, "gate_near_m30");
        c.g_lo = -30.f, c.g_hi = -29.f, c.T = 200;
        cs.push_back(c);
        // kda: half a 16-token block of these spans ~27.6 +- 0.8 per
        // channel, so about half the diagonal blocks stay within
        // chunked_kda_diag.cuh's limit (30) on all 128 channels (tensor
        // cores) and the others take the exact path, mixed within chunks.
        c = make(var, dt, "gate_span_edge");
        c.g_lo = -3.95f, c.g_hi = -2.95f, c.T = 200;
        cs.push_back(c);
        // One -inf gate (an exact reset) in the middle of a chunk, and one
        // on a chunk's first token.
        c = make(var, dt, "neg_inf_gate");
        c.neg_inf_at = 37, c.T = 150;
        cs.push_back(c);
        c = make(var, dt, "neg_inf_gate_chunk_start");
        c.neg_inf_at = 64, c.T = 150;
        cs.push_back(c);
      }
      // GVA group sizes 1, 2, 4, 8 (K = V = 64).
      for (int group : {1, 2, 4, 8}) {
        c = make(var, dt, "gva" + std::to_string(group));
        c.K = c.V = 64, c.HV = 8, c.H = 8 / group, c.T = 90;
        cs.push_back(c);
      }
    }
    // Every compiled shape.
    struct S {
      int K, V;
      Dt dt;
    };
    const S shapes[] = {{64, 64, BF16},   {256, 256, BF16}, {128, 256, BF16}, {96, 96, BF16},
                        {192, 192, BF16}, {48, 80, BF16},   {256, 256, F32},  {48, 80, F32},
                        {128, 128, F16}};
    for (const S& s : shapes) {
      Case c = make(var, s.dt, "K" + std::to_string(s.K) + "_V" + std::to_string(s.V));
      c.K = s.K, c.V = s.V, c.T = 150;
      cs.push_back(c);
    }
    // Other configs (chunk 32/16, BV 16/64, 2/8 warps, 1 or 3 stages) and the
    // default's V tiles forced (widest, half).
    for (int cfg = 1; cfg < kChunkedConfigs; ++cfg) {
      if (var != DELTAC_VARIANT_DELTA || cfg >= 4) {
        Case c = make(var, BF16, "config" + std::to_string(cfg));
        c.config = cfg, c.T = 300;
        c.cu_seqlens = {0, 1, 40, 300};
        cs.push_back(c);
      }
      Case c = make(var, F32, "K64_config" + std::to_string(cfg));
      c.K = c.V = 64, c.config = cfg, c.T = 300;
      cs.push_back(c);
    }
    // The sequence split (configs 6 / 7 / 8: 2 / 4 / 8 segments forced; bf16
    // K = V = 128 and f32 K = V = 64, GVA 2): lengths of 1, 2, 16 and 65
    // chunks (fewer chunks than segments: fewer segments), varlen with
    // 1-token and empty sequences, in place, VK state, no ht, chunk 32 with
    // BV 32, and the default rule on one head (T = 4097: it picks 4).
    for (Dt dt : {BF16, F32}) {
      const int D = dt == BF16 ? 128 : 64;
      for (int cfg : kChunkedSplitConfigs) {
        const std::string sp = "split" + std::to_string(1 << (cfg - 5)) + "_";
        for (int T : {1, 65, 1000, 4097}) {
          Case c = make(var, dt, sp + "T" + std::to_string(T));
          c.K = c.V = D, c.config = cfg, c.T = T;
          cs.push_back(c);
        }
        Case c = make(var, dt, sp + "varlen");
        c.K = c.V = D, c.config = cfg;
        c.cu_seqlens = {0, 1, 65, 1065, 1065, 1068, 2100};
        cs.push_back(c);
      }
      Case c = make(var, dt, "split4_inplace");
      c.K = c.V = D, c.config = 7, c.inplace = true, c.T = 1000;
      cs.push_back(c);
      c = make(var, dt, "split4_vk_layout");
      c.K = c.V = D, c.config = 7, c.layout = DELTAC_STATE_VK, c.T = 1000;
      cs.push_back(c);
      c = make(var, dt, "split2_no_ht");
      c.K = c.V = D, c.config = 6, c.ht = false, c.T = 700;
      cs.push_back(c);
      c = make(var, dt, "split4_narrow");
      c.K = c.V = D, c.config = kChunkedSplitNarrow, c.T = 1000;
      cs.push_back(c);
      c = make(var, dt, "split_default_rule");
      c.K = c.V = D, c.H = c.HV = 1, c.T = 4097;
      cs.push_back(c);
    }
    // The cases of a scan forced by `config` (prefix w): T = 1, 65, 1000
    // (and 64 where asked), batch 3, varlen with 1-token and empty
    // sequences, VK state, in place, no h0, beta near 2, a -inf gate.
    auto scan_cases = [&](Dt dt, const std::string& w, int config, bool t64) {
      for (int T : {1, 64, 65, 1000}) {
        if (T == 64 && !t64)
          continue;
        Case c = make(var, dt, w + "T" + std::to_string(T));
        c.config = config, c.T = T;
        cs.push_back(c);
      }
      Case c = make(var, dt, w + "batch3_T100");
      c.config = config, c.B = 3, c.T = 100;
      cs.push_back(c);
      c = make(var, dt, w + "varlen");
      c.config = config, c.cu_seqlens = {0, 1, 65, 195, 198, 198, 1200};
      cs.push_back(c);
      c = make(var, dt, w + "vk_layout");
      c.config = config, c.layout = DELTAC_STATE_VK, c.T = 300;
      cs.push_back(c);
      c = make(var, dt, w + "inplace");
      c.config = config, c.inplace = true, c.T = 130;
      cs.push_back(c);
      c = make(var, dt, w + "no_h0");
      c.config = config, c.h0 = false, c.T = 130;
      cs.push_back(c);
      c = make(var, dt, w + "beta2");
      c.config = config, c.beta_lo = 1.99f, c.beta_hi = 2.f, c.T = 100;
      cs.push_back(c);
      if (var != DELTAC_VARIANT_DELTA) {
        c = make(var, dt, w + "neg_inf_gate");
        c.config = config, c.neg_inf_at = 37, c.T = 150;
        cs.push_back(c);
      }
      if (dt == BF16) {
        c = make(var, dt, w + "K64_gva4");
        c.config = config, c.K = c.V = 64, c.HV = 8, c.H = 2, c.T = 300;
        cs.push_back(c);
        c = make(var, dt, w + "K128_V256");
        c.config = config, c.V = 256, c.T = 300;
        cs.push_back(c);
      }
    };
    // The TMA scan (config kChunkedTma, chunked_scan_tma.cuh): GDN and delta,
    // bf16 and f16, K = V = 128 (GVA 2), bf16 K = V = 64 GVA 4 and K = 128 /
    // V = 256; partial last chunks.
    if (var != DELTAC_VARIANT_KDA)
      for (Dt dt : {BF16, F16}) scan_cases(dt, "tma_", kChunkedTma, true);
    // The transposed TMA scan (config kChunkedTmat, chunked_scan_tmat.cuh):
    // the same shapes (one warpgroup a block: short grids), and a grid of
    // 3 x 48 heads of 128 columns (two warpgroups a block on up to 144
    // multiprocessors).
    if (var != DELTAC_VARIANT_KDA)
      for (Dt dt : {BF16, F16}) {
        scan_cases(dt, "tmat_", kChunkedTmat, true);
        Case c = make(var, dt, "tmat_two_warpgroups");
        c.config = kChunkedTmat, c.B = 3, c.T = 130, c.H = 16, c.HV = 48;
        cs.push_back(c);
        // The default config on that grid: the rule's pick on an H100 / H200.
        c = make(var, dt, "rule_full_grid");
        c.B = 3, c.T = 130, c.H = 16, c.HV = 48;
        cs.push_back(c);
        // K = V = 256: the key split (two warpgroups on 64 columns, half the
        // keys each, their partial products summed through shared memory).
        auto k256 = [&](const std::string& what, int T) {
          Case x = make(var, dt, "tmat_K256_" + what);
          x.config = kChunkedTmat, x.K = x.V = 256, x.T = T;
          return x;
        };
        for (int T : {1, 64, 65, 1000}) cs.push_back(k256("T" + std::to_string(T), T));
        c = k256("batch3_T100", 100);
        c.B = 3;
        cs.push_back(c);
        c = k256("varlen", 0);
        c.cu_seqlens = {0, 1, 65, 195, 198, 198, 1200};
        cs.push_back(c);
        c = k256("vk_layout", 300);
        c.layout = DELTAC_STATE_VK;
        cs.push_back(c);
        c = k256("inplace", 130);
        c.inplace = true;
        cs.push_back(c);
        c = k256("no_h0", 130);
        c.h0 = false;
        cs.push_back(c);
        c = k256("gva4", 200);
        c.H = 1, c.HV = 4;
        cs.push_back(c);
        c = k256("beta2", 100);
        c.beta_lo = 1.99f, c.beta_hi = 2.f;
        cs.push_back(c);
        if (var != DELTAC_VARIANT_DELTA) {
          c = k256("neg_inf_gate", 150);
          c.neg_inf_at = 37;
          cs.push_back(c);
        }
        // The rule at K = 256 on a grid of 3 x 48 heads of 64 columns: the
        // key split on an H100 / H200.
        c = make(var, dt, "rule_K256_full_grid");
        c.K = c.V = 256, c.B = 3, c.T = 130, c.H = 16, c.HV = 48;
        cs.push_back(c);
        // Warm-up segments (configs kChunkedTmatWarm2 / 4: GDN; delta runs
        // unsplit): lengths of 1, 2, 16 and 65 chunks, varlen with 1-token and
        // empty sequences, no h0, no ht, VK state, in place (unsplit: h0 and
        // ht share bytes), K = 64 GVA 4 (bf16), K = 256, beta near 2 (GDN); gates near 0
        // (every warm-up reaches back to the sequence start), -0.05 .. 0
        // (about 11 warm-up chunks: some segments start mid-sequence), and
        // near 0 with one -inf gate (a warm-up that stops a chunk short of it
        // is off by O(1)).
        for (int cfg : {kChunkedTmatWarm2, kChunkedTmatWarm4}) {
          const std::string w = cfg == kChunkedTmatWarm2 ? "tmat_warm2_" : "tmat_warm4_";
          auto wc = [&](const std::string& what, int T) {
            Case x = make(var, dt, w + what);
            x.config = cfg, x.T = T;
            return x;
          };
          for (int T : {1, 65, 1000, 4097}) cs.push_back(wc("T" + std::to_string(T), T));
          c = wc("varlen", 0);
          c.cu_seqlens = {0, 1, 65, 1065, 1065, 1068, 2100};
          cs.push_back(c);
          c = wc("no_h0", 1000);
          c.h0 = false;
          cs.push_back(c);
          c = wc("no_ht", 1000);
          c.ht = false;
          cs.push_back(c);
          c = wc("vk_layout", 1000);
          c.layout = DELTAC_STATE_VK;
          cs.push_back(c);
          c = wc("inplace", 1000);
          c.inplace = true;
          cs.push_back(c);
          if (dt == BF16) {  // K = 64: bf16 instances only, as scan_cases
            c = wc("K64_gva4", 1000);
            c.K = c.V = 64, c.H = 1, c.HV = 4;
            cs.push_back(c);
          }
          c = wc("K256", 1000);
          c.K = c.V = 256;
          cs.push_back(c);
          if (var != DELTAC_VARIANT_DELTA) {
            c = wc("beta2", 1000);
            c.beta_lo = 1.99f, c.beta_hi = 2.f;
            cs.push_back(c);
            c = wc("gate_near0", 2000);
            c.g_lo = -1e-4f, c.g_hi = 0.f;
            cs.push_back(c);
            c = wc("gate_near0_varlen", 0);
            c.g_lo = -1e-4f, c.g_hi = 0.f, c.cu_seqlens = {0, 1, 65, 1065, 1065, 1068, 2100};
            cs.push_back(c);
            c = wc("gate_moderate", 3000);
            c.g_lo = -0.05f, c.g_hi = 0.f;
            cs.push_back(c);
            c = wc("gate_moderate_K256", 3000);
            c.g_lo = -0.05f, c.g_hi = 0.f, c.K = c.V = 256;
            cs.push_back(c);
            c = wc("gate_near0_neg_inf", 2000);
            c.g_lo = -1e-4f, c.g_hi = 0.f, c.neg_inf_at = 1500;
            cs.push_back(c);
          }
        }
        // The rule at K = 256 on a short grid (2 heads of 4 blocks, 65 chunks):
        // GDN 4 warm-up segments on an H100 / H200 where kChunkedWarmRule is on,
        // else (and delta) the warp scan.
        c = make(var, dt, "rule_K256_short_grid");
        c.K = c.V = 256, c.H = c.HV = 2, c.T = 4097;
        cs.push_back(c);
        c = make(var, dt, "rule_K256_short_grid_gate_moderate");
        c.K = c.V = 256, c.H = c.HV = 2, c.T = 4097, c.g_lo = -0.05f, c.g_hi = 0.f;
        cs.push_back(c);
      }
    // Scan 5 (config kChunkedPrecise: the block scan with two-term
    // products, what calls whose beta may exceed 1 run): the scan cases in
    // bf16 and f16, then beta near 2 over long sequences, where the other
    // 16-bit scans' error grows with T (an H100 measured o 9.7e-3, ht
    // 1.1e-2 for delta at 1000 tokens on the transposed scan: session 36):
    // 1000 and 4000 tokens, gates near 0, K = V = 256, varlen; f32 runs it
    // as the block scan, and so does kda (chunked_precise_runs).
    for (Dt dt : {BF16, F16}) {
      if (var == DELTAC_VARIANT_KDA)
        break;
      scan_cases(dt, "precise_", kChunkedPrecise, true);
      auto beta2 = [&](const std::string& what, int T) {
        Case x = make(var, dt, "precise_beta2_" + what);
        x.config = kChunkedPrecise, x.T = T, x.beta_lo = 1.99f, x.beta_hi = 2.f;
        if (var != DELTAC_VARIANT_DELTA)
          x.g_lo = -1e-4f, x.g_hi = 0.f;
        return x;
      };
      cs.push_back(beta2("T1000", 1000));
      cs.push_back(beta2("T4000", 4000));
      Case c = beta2("K256_T1000", 1000);
      c.K = c.V = 256;
      cs.push_back(c);
      c = beta2("varlen", 0);
      c.cu_seqlens = {0, 1, 65, 1065, 1065, 1068, 3100};
      cs.push_back(c);
      c = beta2("uniform02_T2000", 2000);
      c.beta_lo = 0.f;
      cs.push_back(c);
    }
    if (var != DELTAC_VARIANT_KDA) {
      Case c = make(var, F32, "precise_beta2_T1000");
      c.config = kChunkedPrecise, c.T = 1000, c.beta_lo = 1.99f, c.beta_hi = 2.f;
      cs.push_back(c);
    }
    // The warp scan (config kChunkedWarp, chunked_scan_warp.cuh): bf16 and
    // f16 K = V = 128 (GVA 2) and K = V = 256, bf16 K = V = 64, K = 128 /
    // V = 256 and GVA 4; with output warps (kChunkedWarpSplitO) a subset.
    for (Dt dt : {BF16, F16}) {
      const std::string w = "warp_";
      scan_cases(dt, w, kChunkedWarp, false);
      Case c;
      // With output warps (config kChunkedWarpSplitO).
      for (int T : {65, 1000}) {
        c = make(var, dt, "warpo_T" + std::to_string(T));
        c.config = kChunkedWarpSplitO, c.T = T;
        cs.push_back(c);
      }
      c = make(var, dt, "warpo_varlen");
      c.config = kChunkedWarpSplitO, c.cu_seqlens = {0, 1, 65, 195, 198, 198, 1200};
      cs.push_back(c);
      c = make(var, dt, "warpo_vk_inplace");
      c.config = kChunkedWarpSplitO, c.layout = DELTAC_STATE_VK, c.inplace = true, c.T = 300;
      cs.push_back(c);
      if (dt == BF16) {
        c = make(var, dt, "warpo_K64_gva4");
        c.config = kChunkedWarpSplitO, c.K = c.V = 64, c.HV = 8, c.H = 2, c.T = 300;
        cs.push_back(c);
      }
      // K = V = 256: two chain warps per 16 columns, each with half of the
      // keys (their exchange of partial products), GVA 2 and 4.
      const std::string w2 = "warp_K256_";
      auto k256 = [&](const std::string& what) {
        Case x = make(var, dt, w2 + what);
        x.config = kChunkedWarp, x.K = x.V = 256;
        return x;
      };
      for (int T : {1, 65, 1000}) {
        c = k256("T" + std::to_string(T));
        c.T = T;
        cs.push_back(c);
      }
      c = k256("batch3_T100");
      c.B = 3, c.T = 100;
      cs.push_back(c);
      c = k256("varlen");
      c.cu_seqlens = {0, 1, 65, 195, 198, 198, 1200};
      cs.push_back(c);
      c = k256("vk_layout");
      c.layout = DELTAC_STATE_VK, c.T = 300;
      cs.push_back(c);
      c = k256("inplace");
      c.inplace = true, c.T = 130;
      cs.push_back(c);
      c = k256("no_h0");
      c.h0 = false, c.T = 130;
      cs.push_back(c);
      c = k256("gva4");
      c.H = 1, c.HV = 4, c.T = 200;
      cs.push_back(c);
      c = k256("beta2");
      c.beta_lo = 1.99f, c.beta_hi = 2.f, c.T = 100;
      cs.push_back(c);
      if (var != DELTAC_VARIANT_DELTA) {
        c = k256("neg_inf_gate");
        c.neg_inf_at = 37, c.T = 150;
        cs.push_back(c);
      }
    }
  }
  return cs;
}

class Chunked : public ::testing::TestWithParam<Case> {};

TEST_P(Chunked, MatchesFloat64Reference) {
  if (!have_gpu())
    GTEST_SKIP() << "no CUDA device";
  const Case& c = GetParam();
  if ((c.config == kChunkedTma || c.config == kChunkedTmat || c.config == kChunkedTmatWarm2 ||
       c.config == kChunkedTmatWarm4) &&
      !tma_scan_device())
    GTEST_SKIP() << "the TMA scans need compute capability 9.0 and sm_90a code";
  const uint64_t seed = test_seed();
  std::printf("  seed %llu\n", static_cast<unsigned long long>(seed));
  SCOPED_TRACE("seed " + std::to_string(seed) + " (DELTAC_TEST_SEED reproduces it)");
  Result r = run_case(c, seed);
  ASSERT_TRUE(r.error.empty()) << r.error;
  const double tol = (c.bf16 || c.f16) ? 5e-3 : 1e-4;
  EXPECT_TRUE(r.o_finite) << "o has unwritten (NaN) or non-finite elements";
  EXPECT_LE(r.o_err, tol) << "o relative RMS error";
  if (c.ht) {
    EXPECT_TRUE(r.ht_finite) << "ht has unwritten (NaN) or non-finite elements";
    EXPECT_LE(r.ht_err, tol) << "ht relative RMS error";
  }
  EXPECT_TRUE(r.repeat_identical) << "a second run on the same inputs differed";
  std::printf("  %-36s o %.2e  ht %.2e\n", c.name.c_str(), r.o_err, r.ht_err);
}

INSTANTIATE_TEST_SUITE_P(Cuda, Chunked, ::testing::ValuesIn(all_cases()),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           return info.param.name;
                         });

// Chunked and recurrent on the same inputs agree (to the rounding of the
// input dtype's products).
TEST(ChunkedVsRecurrent, SameInputsSameOutputs) {
  if (!have_gpu())
    GTEST_SKIP() << "no CUDA device";
  const uint64_t seed = test_seed();
  std::printf("  seed %llu\n", static_cast<unsigned long long>(seed));
  SCOPED_TRACE("seed " + std::to_string(seed));
  for (deltac_variant var : kVars) {
    for (bool bf16 : {false, true}) {
      Case c = make(var, bf16 ? BF16 : F32, "vs_recurrent");
      c.T = 333, c.B = 2;
      Case rc = c;
      rc.chunked = false;
      Result a = run_case(c, seed), b = run_case(rc, seed);
      ASSERT_TRUE(a.error.empty()) << a.error;
      ASSERT_TRUE(b.error.empty()) << b.error;
      const double tol = bf16 ? 5e-3 : 1e-4;
      EXPECT_LE(rel_diff(a.o, b.o), tol) << vname(var) << (bf16 ? " bf16" : " f32") << " o";
      EXPECT_LE(rel_diff(a.ht, b.ht), tol) << vname(var) << (bf16 ? " bf16" : " f32") << " ht";
      std::printf("  %s %s chunked vs recurrent: o %.2e ht %.2e\n", vname(var),
                  bf16 ? "bf16" : "f32", rel_diff(a.o, b.o), rel_diff(a.ht, b.ht));
    }
  }
}

// The split and the unsplit kernel agree on the same inputs (o and ht):
// f32 to the reference tolerance; bf16 to twice it, since each rounds
// differently and each is within 5e-3 of float64 (the cases above; delta
// bf16 measured 3.7-5.0e-3 apart, T = 1500, H200).
TEST(ChunkedSplit, SplitMatchesNoSplit) {
  if (!have_gpu())
    GTEST_SKIP() << "no CUDA device";
  const uint64_t seed = test_seed();
  std::printf("  seed %llu\n", static_cast<unsigned long long>(seed));
  SCOPED_TRACE("seed " + std::to_string(seed));
  for (deltac_variant var : kVars) {
    for (bool bf16 : {false, true}) {
      for (int cfg : kChunkedSplitConfigs) {
        Case c = make(var, bf16 ? BF16 : F32, "split_vs_none");
        c.K = c.V = bf16 ? 128 : 64, c.T = 1500, c.config = cfg;
        Case rc = c;
        rc.config = kChunkedNoSplit;
        Result a = run_case(c, seed), b = run_case(rc, seed);
        ASSERT_TRUE(a.error.empty()) << a.error;
        ASSERT_TRUE(b.error.empty()) << b.error;
        const double tol = bf16 ? 1e-2 : 1e-4;
        EXPECT_LE(rel_diff(a.o, b.o), tol) << vname(var) << " config " << cfg << " o";
        EXPECT_LE(rel_diff(a.ht, b.ht), tol) << vname(var) << " config " << cfg << " ht";
        EXPECT_LE(a.o_err, tol / 2) << vname(var) << " config " << cfg << " o vs float64";
        EXPECT_LE(a.ht_err, tol / 2) << vname(var) << " config " << cfg << " ht vs float64";
        std::printf("  %s %s config %d vs no split: o %.2e ht %.2e\n", vname(var),
                    bf16 ? "bf16" : "f32", cfg, rel_diff(a.o, b.o), rel_diff(a.ht, b.ht));
      }
    }
  }
}

// The fused launch (intra-chunk work and scan in one grid, chunked_fused.cuh:
// on request, where the scan's grid is one wave, 16-bit inputs) gives what
// the two launches give on the same inputs: the same arithmetic (H200: equal
// bit for bit); each within 5e-3 of float64. Shapes: one sequence,
// a batch (items in chunk order across sequences), varlen with one
// sequence, 32 value heads (128 scan blocks beside 136 workers on an H200).
TEST(ChunkedFused, FusedMatchesUnfused) {
  if (!have_gpu())
    GTEST_SKIP() << "no CUDA device";
  const uint64_t seed = test_seed();
  std::printf("  seed %llu\n", static_cast<unsigned long long>(seed));
  SCOPED_TRACE("seed " + std::to_string(seed));
  for (deltac_variant var : kVars) {
    for (Dt dt : {BF16, F16}) {
      for (int shape = 0; shape < 4; ++shape) {
        Case c = make(var, dt, "fused");
        c.T = 1000;
        if (shape == 1)
          c.B = 3, c.T = 300;
        if (shape == 2)
          c.cu_seqlens = {0, 777};
        if (shape == 3)
          c.H = 16, c.HV = 32, c.T = 700;
        c.config = kChunkedFused;
        Case rc = c;
        rc.config = 0;
        Result a = run_case(c, seed), b = run_case(rc, seed);
        ASSERT_TRUE(a.error.empty()) << a.error;
        ASSERT_TRUE(b.error.empty()) << b.error;
        EXPECT_LE(rel_diff(a.o, b.o), 1e-3) << vname(var) << " shape " << shape << " o";
        EXPECT_LE(rel_diff(a.ht, b.ht), 1e-3) << vname(var) << " shape " << shape << " ht";
        EXPECT_LE(a.o_err, 5e-3) << vname(var) << " shape " << shape << " o vs float64";
        EXPECT_LE(a.ht_err, 5e-3) << vname(var) << " shape " << shape << " ht vs float64";
        EXPECT_TRUE(a.repeat_identical) << vname(var) << " shape " << shape;
        std::printf("  %s %s shape %d fused vs unfused: o %.2e ht %.2e (vs float64 o %.2e)\n",
                    vname(var), dname(dt), shape, rel_diff(a.o, b.o), rel_diff(a.ht, b.ht),
                    a.o_err);
      }
    }
  }
}

// The warp scan with the sequence split (segments in parallel, later ones
// with the identity columns, then chunked_split.cuh's fold and fix-up):
// within 5e-3 of float64 and within 1e-2 of the unsplit warp scan (each
// rounds differently), on every variant, bf16 and f16, around the chunk
// (T = 1, 65, 1000, 4097), varlen with a 1-token, an empty and a 3-token
// sequence, in place, the VK state, no ht, GVA 4 at K = V = 64, K = V =
// 256 and K = 128, V = 256; splits 2, 4, 8 (T = 1000), else 4. One case
// per test.
struct WarpSplitCase {
  deltac_variant var;
  Dt dt;
  std::string shape;
  int split;
};
class ChunkedWarpSplit : public ::testing::TestWithParam<WarpSplitCase> {};

TEST_P(ChunkedWarpSplit, MatchesFloat64AndNoSplit) {
  if (!have_gpu())
    GTEST_SKIP() << "no CUDA device";
  const WarpSplitCase wc = GetParam();
  const uint64_t seed = test_seed();
  std::printf("  seed %llu\n", static_cast<unsigned long long>(seed));
  SCOPED_TRACE("seed " + std::to_string(seed));
  Case c = make(wc.var, wc.dt, "warp_split");
  c.T = 1000;
  const std::string& s = wc.shape;
  if (s == "T1")
    c.T = 1;
  else if (s == "T65")
    c.T = 65;
  else if (s == "T4097")
    c.T = 4097;
  else if (s == "varlen")
    c.cu_seqlens = {0, 1, 65, 1065, 1065, 1068, 2100};
  else if (s == "inplace")
    c.inplace = true;
  else if (s == "vk")
    c.layout = DELTAC_STATE_VK;
  else if (s == "no_ht")
    c.ht = false;
  else if (s == "gva4_K64")
    c.K = c.V = 64, c.HV = 8, c.H = 2, c.T = 700;
  else if (s == "K256")
    c.K = c.V = 256, c.T = 700;
  else if (s == "K128_V256")
    c.V = 256, c.T = 700;
  c.config = wc.split == 2 ? kChunkedWarpSplit2 : wc.split == 4 ? kChunkedWarpSplit4
                                                                : kChunkedWarpSplit8;
  Case rc = c;
  rc.config = kChunkedWarp;
  Result a = run_case(c, seed), b = run_case(rc, seed);
  ASSERT_TRUE(a.error.empty()) << a.error;
  ASSERT_TRUE(b.error.empty()) << b.error;
  EXPECT_LE(a.o_err, 5e-3) << "o vs float64";
  EXPECT_LE(a.ht_err, 5e-3) << "ht vs float64";
  EXPECT_LE(rel_diff(a.o, b.o), 1e-2) << "o vs no split";
  EXPECT_LE(rel_diff(a.ht, b.ht), 1e-2) << "ht vs no split";
  EXPECT_TRUE(a.repeat_identical);
  std::printf("  %s %s %s split %d: vs float64 o %.2e ht %.2e, vs no split o %.2e ht %.2e\n",
              vname(wc.var), dname(wc.dt), s.c_str(), wc.split, a.o_err, a.ht_err,
              rel_diff(a.o, b.o), rel_diff(a.ht, b.ht));
}

std::vector<WarpSplitCase> warp_split_cases() {
  std::vector<WarpSplitCase> v;
  for (deltac_variant var : kVars)
    for (Dt dt : {BF16, F16}) {
      for (int split : {2, 4, 8}) v.push_back({var, dt, "T1000", split});
      if (dt == F16)
        continue;
      for (const char* s : {"T1", "T65", "T4097", "varlen", "inplace", "vk", "no_ht",
                            "gva4_K64", "K256", "K128_V256"})
        v.push_back({var, dt, s, 4});
    }
  return v;
}
INSTANTIATE_TEST_SUITE_P(Cases, ChunkedWarpSplit, ::testing::ValuesIn(warp_split_cases()),
                         [](const ::testing::TestParamInfo<WarpSplitCase>& i) {
                           return std::string(vname(i.param.var)) + "_" + dname(i.param.dt) +
                                  "_" + i.param.shape + "_split" +
                                  std::to_string(i.param.split);
                         });


// NaN is non-finite here too (chunked and recurrent).
TEST(ChunkedNan, NaNInputIsNeverFiniteGarbage) {
  if (!have_gpu())
    GTEST_SKIP() << "no CUDA device";
  const uint64_t seed = test_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  for (deltac_variant var : kVars) {
    for (bool chunked : {true, false}) {
      Case c = make(var, BF16, "nan");
      c.chunked = chunked;
      c.T = 150, c.nan_at = 70;
      Result r = run_case(c, seed);
      ASSERT_TRUE(r.error.empty()) << r.error;
      EXPECT_TRUE(r.nan_kept) << vname(var) << (chunked ? " chunked" : " recurrent")
                              << ": a NaN input gave finite output";
    }
  }
}

// Argument checks: rejected before any CUDA call, so they run without a GPU.
TEST(ChunkedArgs, RejectsMismatchedParams) {
  ChunkedFns fn = find_chunked(DELTAC_VARIANT_GATED, 64, 64, DELTAC_F32, 0);
  ASSERT_NE(fn.run, nullptr);
  alignas(256) static float dummy[1024];
  deltac_fwd_params base{};
  base.variant = DELTAC_VARIANT_GATED;
  base.B = 1, base.T = 1, base.H = 1, base.HV = 1, base.K = 64, base.V = 64, base.N = 1;
  base.in_dtype = base.out_dtype = DELTAC_F32;
  base.state_dtype = DELTAC_F32;
  base.q = base.k = base.v = dummy;
  base.g = base.beta = dummy;
  base.o = dummy;
  const size_t need = fn.ws(base);
  EXPECT_GT(need, 0u);
  auto invalid = [&](deltac_fwd_params p, size_t bytes, void* ws, const char* what) {
    EXPECT_EQ(fn.run(p, ws, bytes, nullptr, nullptr), cudaErrorInvalidValue) << what;
  };
  deltac_fwd_params p = base;
  p.K = 128;
  invalid(p, need, dummy, "K differs from the template");
  p = base;
  p.V = 32;
  invalid(p, need, dummy, "V differs");
  p = base;
  p.variant = DELTAC_VARIANT_KDA;
  invalid(p, need, dummy, "variant differs");
  p = base;
  p.in_dtype = p.out_dtype = DELTAC_BF16;
  invalid(p, need, dummy, "dtype differs");
  p = base;
  p.out_dtype = DELTAC_BF16;
  invalid(p, need, dummy, "o dtype differs");
  p = base;
  p.state_dtype = DELTAC_BF16;
  invalid(p, need, dummy, "state not f32");
  p = base;
  p.g = nullptr;
  invalid(p, need, dummy, "gated without g");
  p = base;
  p.q = nullptr;
  invalid(p, need, dummy, "null q");
  p = base;
  p.HV = 3, p.H = 2;
  invalid(p, need, dummy, "HV not a multiple of H");
  p = base;
  p.N = 2;
  invalid(p, need, dummy, "N != B without cu_seqlens");
  p = base;
  p.v = dummy + 1;
  invalid(p, need, dummy, "misaligned v");
  p = base;
  p.ht = dummy + 2;
  invalid(p, need, dummy, "misaligned ht");
  invalid(base, need - 1, dummy, "workspace too small");
  invalid(base, need, nullptr, "no workspace");
  invalid(base, need, dummy + 1, "misaligned workspace");
}

// The legal space the catalogue reads (host only, runs everywhere): every
// (variant, dtype, K, V) with K, V multiples of 16 in [16, 256] has a default
// config, and that config is legal and made of the listed knob values.
TEST(ChunkedRules, DefaultsAreLegalEverywhereTheyExist) {
  using namespace deltac::cuda;
  auto in = [](int x, const int* v, int n) {
    for (int i = 0; i < n; ++i)
      if (v[i] == x)
        return true;
    return false;
  };
  for (int var = 0; var < 3; ++var)
    for (int bytes : {2, 4})
      for (int K = 16; K <= 256; K += 16)
        for (int V = 16; V <= 256; V += 16) {
          const ChunkedChoice c = chunked_default(var, K, V, bytes);
          ASSERT_NE(c.chunk, 0) << var << " " << bytes << " " << K << " " << V;
          EXPECT_TRUE(chunked_legal(var, K, V, bytes, c.chunk, c.bv, c.warps, c.stages));
          EXPECT_TRUE(in(c.chunk, kChunkedChunks, 3) && in(c.bv, kChunkedBVs, 3) &&
                      in(c.warps, kChunkedWarps, 3) && in(c.stages, kChunkedStages, 3));
          EXPECT_LE(chunked_prep_smem(var, K, V, bytes, c.chunk), kChunkedSmemSm90);
          EXPECT_LE(chunked_scan_smem(var, K, bytes, c.chunk, c.bv, c.stages), kChunkedSmemSm90);
        }
  // Knob values outside the lists, and a BV that does not divide V.
  EXPECT_FALSE(chunked_legal(1, 128, 128, 2, 128, 32, 4, 2));
  EXPECT_FALSE(chunked_legal(1, 128, 128, 2, 64, 48, 4, 2));
  EXPECT_FALSE(chunked_legal(1, 128, 128, 2, 64, 32, 3, 2));
  EXPECT_FALSE(chunked_legal(1, 128, 128, 2, 64, 32, 4, 4));
  EXPECT_FALSE(chunked_legal(1, 128, 80, 2, 64, 32, 4, 2));
  // Shared memory: the sm_90 default does not fit 99 KB; a smaller one does.
  EXPECT_FALSE(chunked_legal(1, 128, 128, 2, 64, 32, 4, 2, 101376));
  EXPECT_NE(chunked_default(1, 128, 128, 2, 101376).chunk, 0);
}

// The default sequence split (host only): (K, V, heads x sequences, chunks
// per sequence, the unsplit V tile, the split's V tile, multiprocessors).
TEST(ChunkedRules, DefaultSplit) {
  using deltac::cuda::chunked_default_split;
  EXPECT_EQ(chunked_default_split(128, 128, 8, 512, 16, 64, 132), 4);   // GDN 2/8 1x32768
  EXPECT_EQ(chunked_default_split(128, 128, 32, 512, 32, 64, 132), 1);  // 16/32: grid full
  EXPECT_EQ(chunked_default_split(128, 128, 12, 512, 16, 64, 132), 1);  // only S = 2 fits
  EXPECT_EQ(chunked_default_split(128, 128, 1, 512, 16, 64, 132), 16);  // one head
  EXPECT_EQ(chunked_default_split(128, 128, 1, 65, 16, 64, 132), 4);    // >= 16 chunks each
  EXPECT_EQ(chunked_default_split(128, 128, 1, 40, 16, 64, 132), 1);    // too short
  EXPECT_EQ(chunked_default_split(128, 128, 8, 512, 16, 0, 132), 1);    // no V tile divides K
  EXPECT_EQ(chunked_default_split(128, 128, 8, 512, 16, 64, 0), 1);     // unknown device
  // The warp scan's rule (min_split 2; unsplit at its V tile 32, split at 64).
  EXPECT_EQ(chunked_default_split(128, 128, 8, 512, 32, 64, 132, 2), 4);   // GDN 2/8 1x32768
  EXPECT_EQ(chunked_default_split(128, 128, 12, 512, 32, 64, 132, 2), 2);  // only S = 2 fits
  EXPECT_EQ(chunked_default_split(128, 128, 32, 512, 32, 64, 132, 2), 1);  // grid full
}

}  // namespace
}  // namespace deltac::test

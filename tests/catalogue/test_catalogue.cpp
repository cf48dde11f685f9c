// The kernel catalogue (deltac/catalogue.h): every listed knob value is
// accepted, every other value rejected, knobs a family does not read must be
// 0, and the default rule gives a legal config for every supported K, V.
#include "deltac/catalogue.h"

#include <gtest/gtest.h>

#include <string>

namespace deltac {
namespace {

Problem problem(int K, int V, int in_dtype = DELTAC_F32) {
  Problem p;
  p.K = K;
  p.V = V;
  p.H = 2;
  p.HV = 4;
  p.in_dtype = in_dtype;
  p.out_dtype = in_dtype;
  p.max_seqlen = 1; // decode fits too
  return p;
}

// A config of family f whose knobs are the defaults for p.
KernelConfig base(Family f, const Problem &p) { return default_config(f, p); }

TEST(Catalogue, FamilyTableIsIndexedByFamily) {
  for (int i = 0; i < kFamilyCount; ++i) {
    EXPECT_EQ(int(kFamilies[i].family), i);
    const FamilyInfo *byName = family_by_name(kFamilies[i].name);
    ASSERT_NE(byName, nullptr) << kFamilies[i].name;
    EXPECT_EQ(byName, &kFamilies[i]);
    EXPECT_NE(std::string(kFamilies[i].entry), "");
    EXPECT_NE(std::string(kFamilies[i].header), "");
  }
  EXPECT_EQ(family_by_name("cuda_chunked_nope"), nullptr);
}

// Every value listed for a knob is accepted (where the family's own rules
// allow it for this K, V); every other value in -1..300 is rejected with a
// message naming the family and the knob.
TEST(Catalogue, CheckConfigAcceptsListedValuesOnly) {
  const Problem p = problem(128, 128);
  for (const FamilyInfo &fi : kFamilies) {
    for (int k = 0; k < kKnobCount; ++k) {
      SCOPED_TRACE(std::string(fi.name) + "." + kKnobNames[k]);
      const bool reads = fi.knobs & (1u << k);
      for (int x = -1; x <= 300; ++x) {
        KernelConfig c = base(fi.family, p);
        c.knob(k) = x;
        std::string why = check_config(c, p);
        const bool listed = reads ? fi.values[k].contains(x) : x == 0;
        if (!listed) {
          EXPECT_FALSE(why.empty()) << "value " << x << " accepted";
          EXPECT_NE(why.find(fi.name), std::string::npos) << why;
          EXPECT_NE(why.find(kKnobNames[k]), std::string::npos) << why;
        } else if (fi.family == Family::CudaRecurrent) {
          // Listed values can still fail the family's geometry rule (p:
          // an f32 state, one token).
          EXPECT_EQ(why.empty(), cuda_recurrent_knobs_ok(p.K, c.tile_v, c.warps, 4, true))
              << "value " << x << ": " << why;
        } else if (fi.family == Family::CudaChunked) {
          // ... or the chunked kernel's tiling and shared memory.
          EXPECT_EQ(why.empty(),
                    cuda::chunked_legal(p.variant, p.K, p.V,
                                        p.in_dtype == DELTAC_F32 ? 4 : 2,
                                        c.chunk, c.tile_v, c.warps, c.stages))
              << "value " << x << ": " << why;
        } else {
          EXPECT_EQ(why, "") << "value " << x;
        }
      }
    }
  }
}

TEST(Catalogue, KnobsTheFamilyDoesNotReadMustBeZero) {
  const Problem p = problem(64, 64);
  KernelConfig c = base(Family::CpuChunked, p);
  c.warps = 4;
  std::string why = check_config(c, p);
  EXPECT_NE(why.find("cpu_chunked has no knob 'warps'"), std::string::npos)
      << why;
}

TEST(Catalogue, TileVMustDivideV) {
  const Problem p = problem(64, 48); // 32 does not divide 48
  KernelConfig c = base(Family::CpuRecurrent, p);
  EXPECT_EQ(c.tile_v, 16);
  c.tile_v = 32;
  EXPECT_NE(check_config(c, p).find("must divide V = 48"), std::string::npos);
}

// cpu_decode's default tile: the widest listed width that divides V, up to
// the rule's (whole rows of up to 128 columns on avx512, 32 on avx2).
TEST(Catalogue, CpuDecodeTilePerInstructionSet) {
  const struct {
    CpuIsa isa;
    bool split512;
    int V, want;
  } cases[] = {
      {CpuIsa::avx512, false, 128, 128}, {CpuIsa::avx512, true, 128, 128},
      {CpuIsa::avx512, false, 256, 128}, {CpuIsa::avx512, false, 64, 64},
      {CpuIsa::avx512, false, 96, 32},   {CpuIsa::avx512, false, 48, 16},
      {CpuIsa::avx512, true, 192, 64},   {CpuIsa::avx2, false, 128, 32},
      {CpuIsa::avx2, false, 80, 16},     {CpuIsa::generic, false, 256, 32},
  };
  for (const auto &c : cases) {
    SCOPED_TRACE(std::string(cpu_isa_name(c.isa)) + (c.split512 ? " split512" : "") +
                 " V " + std::to_string(c.V));
    Problem p = problem(64, c.V);
    p.cpu_isa = c.isa, p.cpu_split512 = c.split512;
    const KernelConfig k = default_config(Family::CpuDecode, p);
    EXPECT_EQ(k.tile_v, c.want);
    EXPECT_EQ(check_config(k, p), "");
  }
}

TEST(Catalogue, CudaWarpsGeometry) {
  // K = 128, BV = 32: 8 lanes per row, 4 rows per warp step, 32 groups;
  // 1 warp would give each thread 32 rows (> 16), 2 warps 16: the limit.
  EXPECT_FALSE(cuda_recurrent_warps_ok(128, 32, 1));
  EXPECT_TRUE(cuda_recurrent_warps_ok(128, 32, 2));
  EXPECT_FALSE(cuda_recurrent_warps_ok(128, 32, 3));
  EXPECT_TRUE(cuda_recurrent_warps_ok(128, 32, 4));
  EXPECT_TRUE(cuda_recurrent_warps_ok(128, 32, 8));
  EXPECT_EQ(cuda_recurrent_default_warps(128, 32), 2);
  EXPECT_EQ(cuda_recurrent_default_warps(128, 16), 2);
  EXPECT_EQ(cuda_recurrent_default_warps(256, 32), 4);
  EXPECT_EQ(cuda_recurrent_default_warps(256, 16), 2);
  for (int k = 16; k <= 256; k += 16)
    for (int bv : {16, 32})
      EXPECT_TRUE(cuda_recurrent_warps_ok(k, bv, cuda_recurrent_default_warps(k, bv)))
          << k << " " << bv;
  // The default tile (recurrent_rules.h): the widest of 32 and 16 that
  // divides V, and what the catalogue's default config takes.
  for (int v = 16; v <= 256; v += 16) {
    const int t = cuda_recurrent_default_tile(v);
    EXPECT_TRUE(v % t == 0 && (t == 32 || v % 32 != 0)) << v;
    EXPECT_EQ(default_config(Family::CudaRecurrent, problem(128, v)).tile_v, t) << v;
  }
}

// The wide tile (64 columns): its kernels are the strip kernels', so which
// knobs are legal depends on the state and on whether every call is one
// token; the default takes it for one-token calls of 16-bit and fp8 states
// on large grids only.
TEST(Catalogue, CudaRecurrentWideTile) {
  Problem p = problem(128, 128);
  p.H = 16, p.HV = 32;
  p.state_dtype = DELTAC_BF16;
  KernelConfig c = base(Family::CudaRecurrent, p);
  EXPECT_EQ(c.tile_v, 32) << "batch 1: 128 blocks";
  p.seqs = 64;
  c = base(Family::CudaRecurrent, p);
  EXPECT_EQ(c.tile_v, 64);
  EXPECT_EQ(c.warps, 2);
  EXPECT_EQ(check_config(c, p), "");
  EXPECT_TRUE(precompiled(c, p));
  // Several tokens, cu_seqlens, state_steps or the batch-invariant mode:
  // no kernel at 64 / 2 (a several-token bf16 lane would hold 128 floats),
  // and the default keeps 32 columns.
  for (int what = 0; what < 4; ++what) {
    Problem q = p;
    if (what == 0) q.max_seqlen = 4;
    if (what == 1) q.varlen = true;
    if (what == 2) q.state_steps = true;
    if (what == 3) q.deterministic = true;
    EXPECT_FALSE(one_token(q)) << what;
    EXPECT_NE(check_config(c, q).find("has no kernel"), std::string::npos)
        << what << ": " << check_config(c, q);
    EXPECT_EQ(base(Family::CudaRecurrent, q).tile_v, 32) << what;
  }
  // f32 states: 64 / 2 has no kernel, 64 / 4 has (the strip kernels), the
  // default keeps 32.
  p.state_dtype = DELTAC_F32;
  EXPECT_NE(check_config(c, p).find("f32 state"), std::string::npos) << check_config(c, p);
  c.warps = 4;
  EXPECT_EQ(check_config(c, p), "");
  EXPECT_FALSE(precompiled(c, p)) << "not the default warps";
  EXPECT_EQ(base(Family::CudaRecurrent, p).tile_v, 32);
  // fp8 states as bf16; V = 96 (64 does not divide it): 32 columns.
  p.state_dtype = DELTAC_FP8_E4M3;
  EXPECT_EQ(base(Family::CudaRecurrent, p).tile_v, 64);
  p.V = 96;
  EXPECT_EQ(base(Family::CudaRecurrent, p).tile_v, 32);
  // Every K: the wide tile's default warps have a one-token kernel for
  // 16-bit and fp8 states.
  for (int k = 16; k <= 256; k += 16)
    for (int sb : {2, 1})
      EXPECT_TRUE(cuda_recurrent_knobs_ok(k, 64, cuda_recurrent_default_warps(k, 64), sb, true))
          << k << " " << sb;
}

TEST(Catalogue, CudaStreamRule) {
  using cuda::RecurrentKernel;
  using cuda::detail::Form;
  // The stream kernel's geometry is the several-token strip geometry with
  // rows of whole 16-byte pieces: 32/2 f32 (vec 4) and bf16 (vec 8) have
  // it, and fp8 at 16/2; 64/2 f32 has no strip geometry (32 rows x 4
  // floats a lane > 64).
  EXPECT_TRUE(cuda::stream_geom_ok(128, 32, 2, 4, 4));
  EXPECT_TRUE(cuda::stream_geom_ok(128, 32, 2, 8, 2));
  EXPECT_FALSE(cuda::stream_geom_ok(128, 64, 2, 4, 4));
  EXPECT_TRUE(cuda::stream_geom_ok(128, 16, 2, 8, 1));
  EXPECT_EQ(cuda::recurrent_choice(128, 32, 2, 4, true, Form::Stream, 64).kernel,
            RecurrentKernel::Stream);
  // Forced where it has no geometry: the Auto choice.
  EXPECT_EQ(cuda::recurrent_choice(128, 64, 2, 4, false, Form::Stream, 64).kernel,
            cuda::recurrent_choice(128, 64, 2, 4, false, Form::Auto, 64).kernel);
  // Auto: several tokens on more than kRecurrentSmallGrid blocks, not kda,
  // never one token.
  const int64_t big = cuda::kRecurrentSmallGrid + 1;
  EXPECT_TRUE(cuda::stream_auto(DELTAC_VARIANT_GATED, false, big));
  EXPECT_TRUE(cuda::stream_auto(DELTAC_VARIANT_DELTA, false, big));
  EXPECT_FALSE(cuda::stream_auto(DELTAC_VARIANT_KDA, false, big));
  EXPECT_FALSE(cuda::stream_auto(DELTAC_VARIANT_GATED, true, big));
  EXPECT_FALSE(cuda::stream_auto(DELTAC_VARIANT_GATED, false, cuda::kRecurrentSmallGrid));
  EXPECT_EQ(cuda::recurrent_choice(128, 32, 2, 4, false, Form::Auto, big).kernel,
            RecurrentKernel::Strip);  // launch_st asks stream_auto, not recurrent_choice
}

// The default rule: for every K, V in 16..256 step 16, both dtypes, every
// family's default config is legal, and default_family picks a family.
TEST(Catalogue, DefaultsAreLegalEverywhere) {
  for (int K = 16; K <= 256; K += 16)
    for (int V = 16; V <= 256; V += 16)
      for (int dt : {DELTAC_F32, DELTAC_BF16})
        for (int64_t len : {int64_t(1), int64_t(4096)})
          for (int sms : {0, 132}) {
            Problem p = problem(K, V, dt);
            p.max_seqlen = len;
            p.sm_count = sms;
            for (const FamilyInfo &fi : kFamilies) {
              if (!check_family(fi.family, p).empty())
                continue; // e.g. decode for long sequences
              KernelConfig c = default_config(fi.family, p);
              EXPECT_EQ(check_config(c, p), "")
                  << fi.name << " K=" << K << " V=" << V << " len=" << len
                  << " sms=" << sms;
            }
            for (Device d : {Device::CPU, Device::CUDA})
              for (Mode m : {Mode::Auto, Mode::Recurrent, Mode::Chunked}) {
                Family f;
                std::string why;
                const bool ok = default_family(d, m, p, &f, &why);
                // CUDA chunked has no legal config where V is much
                // larger than K (chunked_rules.h); everything else runs.
                const bool expect =
                    !(d == Device::CUDA && m == Mode::Chunked) ||
                    check_family(Family::CudaChunked, p).empty();
                EXPECT_EQ(ok, expect) << device_name(d) << " " << int(m);
                if (!ok)
                  EXPECT_NE(why, "");
                else
                  EXPECT_EQ(family_info(f).device, d);
              }
          }
}

TEST(Catalogue, DefaultFamilyPicksDecodeForOneToken) {
  Problem p = problem(128, 128);
  Family f;
  std::string why;
  p.max_seqlen = 1;
  ASSERT_TRUE(default_family(Device::CPU, Mode::Auto, p, &f, &why));
  EXPECT_EQ(f, Family::CpuDecode);
  p.max_seqlen = 2;
  ASSERT_TRUE(default_family(Device::CPU, Mode::Auto, p, &f, &why));
  EXPECT_EQ(f, Family::CpuRecurrent);
  ASSERT_TRUE(default_family(Device::CPU, Mode::Chunked, p, &f, &why));
  EXPECT_EQ(f, Family::CpuChunked);
  EXPECT_EQ(default_config(f, p).chunk, kCpuDefaultChunk);
}

TEST(Catalogue, CheckProblemRejectsBadDims) {
  Problem p = problem(128, 128);
  p.K = 24;
  EXPECT_NE(check_problem(p).find("K = 24"), std::string::npos);
  p = problem(128, 128);
  p.HV = 3;
  EXPECT_NE(check_problem(p), "");
  p = problem(128, 128);
  p.state_dtype = DELTAC_BF16; // recurrent families only (decode fields)
  EXPECT_NE(check_family(Family::CpuChunked, p), "");
  EXPECT_EQ(check_family(Family::CpuRecurrent, p), "");
  p = problem(128, 128);
  p.out_dtype = DELTAC_F32;
  p.in_dtype = DELTAC_BF16;
  EXPECT_NE(check_family(Family::CudaRecurrent, p), "");
  EXPECT_EQ(check_family(Family::CpuRecurrent, p), "");
}

TEST(Catalogue, OnlyDefaultWarpsArePrecompiled) {
  Problem p = problem(128, 128);
  KernelConfig c = default_config(Family::CudaRecurrent, p);
  EXPECT_TRUE(precompiled(c, p));
  c.warps = 8; // legal, but only the default warps are shipped
  EXPECT_EQ(check_config(c, p), "");
  EXPECT_FALSE(precompiled(c, p));
  Problem odd = problem(96, 96);
  KernelConfig d = default_config(Family::CudaRecurrent, odd);
  EXPECT_EQ(check_config(d, odd), "");
  EXPECT_FALSE(precompiled(d, odd));
  // Every CPU config is precompiled (the dims-at-run-time instance).
  EXPECT_TRUE(precompiled(default_config(Family::CpuChunked, odd), odd));
}

// cuda_chunked's split and fuse are run-time values of the kernel: the
// runtime's instance of the default chunk, tile_v, warps and stages runs
// every listed value; another chunk is not shipped whatever they are.
TEST(Catalogue, ChunkedSplitAndFuseArePrecompiledAtEveryValue) {
  Problem p = problem(128, 128);
  p.in_dtype = p.out_dtype = DELTAC_BF16;
  const FamilyInfo &fi = family_info(Family::CudaChunked);
  ASSERT_TRUE(fi.knobs & kKnobSplit);
  ASSERT_TRUE(fi.knobs & kKnobFuse);
  EXPECT_TRUE(fi.values[knob_index(kKnobSplit)].contains(0)); // 0 = the kernel's rule
  KernelConfig d = default_config(Family::CudaChunked, p);
  EXPECT_EQ(d.split, 0);
  EXPECT_EQ(d.fuse, 0);
  for (int i = 0; i < fi.values[knob_index(kKnobSplit)].n; ++i)
    for (int fuse : {0, 1}) {
      KernelConfig c = d;
      c.split = fi.values[knob_index(kKnobSplit)].v[i], c.fuse = fuse;
      EXPECT_EQ(check_config(c, p), "");
      EXPECT_TRUE(precompiled(c, p)) << c.split << " " << fuse;
      c.chunk = d.chunk == 32 ? 64 : 32;
      if (check_config(c, p).empty())
        EXPECT_FALSE(precompiled(c, p)) << c.chunk;
    }
}

// cuda_chunked's scan: 0 the kernel's rule (the TMA or warp scan where it
// runs and no split > 1 or fused launch is asked for), 1 the block scan, 3
// and 4 the TMA scans (the rule's scans where they do not run), 5 the block
// scan with two-term products; all precompiled, all legal everywhere.
TEST(Catalogue, ChunkedScanRule) {
  const FamilyInfo &fi = family_info(Family::CudaChunked);
  ASSERT_TRUE(fi.knobs & kKnobScan);
  EXPECT_STREQ(kKnobNames[7], "scan");
  for (int32_t dt : {DELTAC_BF16, DELTAC_F16, DELTAC_F32})
    for (auto [k, v] : {std::pair{64, 64}, std::pair{128, 128}, std::pair{256, 256},
                        std::pair{128, 256}}) {
      Problem p = problem(k, v);
      p.in_dtype = p.out_dtype = dt;
      KernelConfig d = default_config(Family::CudaChunked, p);
      EXPECT_EQ(d.scan, 0);
      const bool warp = dt != DELTAC_F32; // K = 64, 128, 256 (two chain warps per 16 columns)
      EXPECT_EQ(cuda::chunked_uses_warp_scan(p.variant, k, v, dt == DELTAC_F32 ? 4 : 2,
                                             d.chunk, d.scan),
                warp)
          << k << "x" << v << " dtype " << dt;
      for (int scan : {0, 1, 3, 4, 5}) {
        KernelConfig c = d;
        c.scan = scan;
        EXPECT_EQ(check_config(c, p), "");
        EXPECT_TRUE(precompiled(c, p));
      }
      // Beta above 1: 16-bit inputs run scan 5 unsplit and unfused whatever
      // the config says; f32 keeps it (its products are f32-exact); chunk
      // states alone run the block scan.
      KernelConfig t = d;
      t.split = 4, t.fuse = 1, t.scan = 4;
      Problem b = p;
      b.beta_two = true;
      const KernelConfig r = call_knobs(t, b);
      if (dt == DELTAC_F32) {
        EXPECT_EQ(r.split, 4);
        EXPECT_EQ(r.fuse, 1);
        EXPECT_EQ(r.scan, 4);
      } else {
        EXPECT_EQ(r.split, 1);
        EXPECT_EQ(r.fuse, 0);
        EXPECT_EQ(r.scan, 5);
      }
      b.beta_two = false, b.chunk_states = true;
      const KernelConfig s = call_knobs(t, b);
      EXPECT_EQ(s.split, 1);
      EXPECT_EQ(s.fuse, 0);
      EXPECT_EQ(s.scan, 1);
      EXPECT_EQ(call_knobs(t, p).scan, 4);
      // kda keeps its knobs (chunked_precise_runs).
      Problem kb = p;
      kb.variant = DELTAC_VARIANT_KDA, kb.beta_two = true;
      EXPECT_EQ(call_knobs(t, kb).scan, 4);
      EXPECT_EQ(call_knobs(t, kb).split, 4);
      KernelConfig c = d;
      c.scan = 2;
      EXPECT_NE(check_config(c, p).find("scan = 2, expected one of 0, 1, 3"), std::string::npos);
      // The TMA scan: GDN / delta, 16-bit inputs, K = 64 or 128 at chunk 64.
      EXPECT_EQ(cuda::chunked_tma_runs(p.variant, k, v, dt == DELTAC_F32 ? 4 : 2, d.chunk),
                dt != DELTAC_F32 && k <= 128 && d.chunk == 64)
          << k << "x" << v << " dtype " << dt;
    }
  EXPECT_FALSE(cuda::chunked_tma_runs(DELTAC_VARIANT_KDA, 128, 128, 2, 64));
  EXPECT_FALSE(cuda::chunked_tma_runs(DELTAC_VARIANT_GATED, 128, 128, 2, 32));
  EXPECT_FALSE(cuda::chunked_tma_runs(DELTAC_VARIANT_GATED, 128, 80, 2, 64));
  EXPECT_TRUE(cuda::chunked_uses_warp_scan(DELTAC_VARIANT_GATED, 128, 128, 2, 64, 3));
  // The rule leaves chunk 16 to the block scan (a split or fuse does not
  // change it: the warp scan splits too, and runs unfused).
  EXPECT_FALSE(cuda::chunked_uses_warp_scan(DELTAC_VARIANT_GATED, 128, 128, 2, 16, 0));
  EXPECT_FALSE(cuda::chunked_uses_warp_scan(DELTAC_VARIANT_GATED, 128, 128, 2, 64, 1));
  EXPECT_TRUE(cuda::chunked_uses_warp_scan(DELTAC_VARIANT_KDA, 64, 64, 2, 32, 0));
  // K = 256: V tile 32 only; kda at chunk 64 does not fit two stages; no
  // other K in between; no output warps.
  EXPECT_TRUE(cuda::chunked_uses_warp_scan(DELTAC_VARIANT_GATED, 256, 256, 2, 64, 0));
  EXPECT_TRUE(cuda::chunked_uses_warp_scan(DELTAC_VARIANT_KDA, 256, 256, 2, 32, 0));
  EXPECT_FALSE(cuda::chunked_uses_warp_scan(DELTAC_VARIANT_KDA, 256, 256, 2, 64, 0));
  EXPECT_FALSE(cuda::chunked_uses_warp_scan(DELTAC_VARIANT_GATED, 192, 192, 2, 64, 0));
  EXPECT_TRUE(cuda::chunked_warp_ok(DELTAC_VARIANT_GATED, 256, 256, 2, 64, 32));
  EXPECT_FALSE(cuda::chunked_warp_ok(DELTAC_VARIANT_GATED, 256, 256, 2, 64, 64));
  EXPECT_FALSE(cuda::chunked_warp_ok(DELTAC_VARIANT_GATED, 256, 256, 2, 64, 32,
                                     cuda::kChunkedSmemSm90, true));
}

// The dispatch order per device and mode (families_for / default_family).
TEST(Catalogue, FamilyOrderPerDeviceAndMode) {
  Problem p = problem(128, 128, DELTAC_BF16);
  Family f;
  std::string why;
  ASSERT_TRUE(default_family(Device::CPU, Mode::Auto, p, &f, &why));
  EXPECT_EQ(f, Family::CpuDecode);
  ASSERT_TRUE(default_family(Device::CUDA, Mode::Auto, p, &f, &why));
  EXPECT_EQ(f, Family::CudaRecurrent);
  p.max_seqlen = kCudaAutoRecurrentMaxTokens + 1;
  ASSERT_TRUE(default_family(Device::CPU, Mode::Auto, p, &f, &why));
  EXPECT_EQ(f, Family::CpuRecurrent);
  ASSERT_TRUE(default_family(Device::CPU, Mode::Chunked, p, &f, &why));
  EXPECT_EQ(f, Family::CpuChunked);
  ASSERT_TRUE(default_family(Device::CUDA, Mode::Auto, p, &f, &why));
  EXPECT_EQ(f, Family::CudaChunked);
  ASSERT_TRUE(default_family(Device::CUDA, Mode::Recurrent, p, &f, &why));
  EXPECT_EQ(f, Family::CudaRecurrent);
  // Unknown length (device cu_seqlens without a bound): the unbounded entry.
  p.max_seqlen = 0;
  ASSERT_TRUE(default_family(Device::CUDA, Mode::Auto, p, &f, &why));
  EXPECT_EQ(f, Family::CudaChunked);
  // Where chunked cannot run (here: a state pool, recurrent families only),
  // auto falls back to the recurrence.
  p = problem(128, 128, DELTAC_BF16);
  p.max_seqlen = 4096;
  p.pool = true;
  ASSERT_TRUE(default_family(Device::CUDA, Mode::Auto, p, &f, &why));
  EXPECT_EQ(f, Family::CudaRecurrent);
  EXPECT_FALSE(default_family(Device::CUDA, Mode::Chunked, p, &f, &why));
  EXPECT_NE(why.find("cuda_chunked"), std::string::npos) << why;
  // f16: only the CUDA chunked kernel takes it.
  p = problem(128, 128, DELTAC_F16);
  p.max_seqlen = 4096;
  ASSERT_TRUE(default_family(Device::CUDA, Mode::Auto, p, &f, &why));
  EXPECT_EQ(f, Family::CudaChunked);
  EXPECT_FALSE(default_family(Device::CPU, Mode::Auto, p, &f, &why));
  p.state_dtype = DELTAC_BF16;
  EXPECT_FALSE(default_family(Device::CUDA, Mode::Auto, p, &f, &why));
  EXPECT_NE(why.find("state must be f32"), std::string::npos) << why;
}

// f32 copies: only kda with beta up to 2 on 16-bit inputs, on cuda_chunked
// (the runtime and the dialect's templateInType both read this).
TEST(Catalogue, F32CopiesOnlyForKdaBetaTwoOn16BitChunked) {
  Problem p;
  p.variant = DELTAC_VARIANT_KDA, p.K = p.V = 128, p.beta_two = true;
  for (int32_t dt : {DELTAC_BF16, DELTAC_F16}) {
    p.in_dtype = p.out_dtype = dt;
    EXPECT_TRUE(f32_copies(p, Family::CudaChunked)) << dt;
    EXPECT_FALSE(f32_copies(p, Family::CudaRecurrent)) << dt;
    EXPECT_FALSE(f32_copies(p, Family::CpuChunked)) << dt;
  }
  p.in_dtype = p.out_dtype = DELTAC_F32;
  EXPECT_FALSE(f32_copies(p, Family::CudaChunked));
  p.in_dtype = p.out_dtype = DELTAC_BF16;
  p.beta_two = false;
  EXPECT_FALSE(f32_copies(p, Family::CudaChunked));
  p.beta_two = true;
  for (int32_t v : {DELTAC_VARIANT_DELTA, DELTAC_VARIANT_GATED}) {
    p.variant = v;
    EXPECT_FALSE(f32_copies(p, Family::CudaChunked)) << v; // scan 5 covers them
  }
}

} // namespace
} // namespace deltac

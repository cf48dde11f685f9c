// The autotuner's library: the candidate space is the catalogue's, a wrong
// answer never wins, the pick is never slower than the default in the
// final A/B, a killed tune resumes (finished buckets are skipped), merge
// keeps the faster record per key and records of other machines apart, and
// the report draws every candidate.
#include "deltac/autotune.h"
#include "deltac/cpu/isa.h"
#include "deltac/runtime.h"
#include "deltac/test_seed.h"
#include "deltac/tune_cuda.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <algorithm>
#include <functional>
#include <set>
#include <thread>
#include <tuple>
#include <sstream>
#include <unistd.h>

namespace deltac::tune {
namespace {

Spec smallSpec() {
  Spec s;
  s.variant = DELTAC_VARIANT_GATED;
  s.H = 1, s.HV = 2, s.K = 64, s.V = 64;
  return s;
}

Settings fast() {
  Settings s;
  s.buckets = {1, 16, 64};
  s.decode_batch = 2;
  s.repeats = 3;
  s.min_sample_s = 1e-4;
  s.threads = {1, 2};
  return s;
}

struct TempDir {
  std::string path;
  TempDir() {
    char t[] = "/tmp/deltac_tune_XXXXXX";
    path = ::mkdtemp(t);
  }
  ~TempDir() { std::system(("rm -rf '" + path + "'").c_str()); }
  std::string file(const std::string &n) const { return path + "/" + n; }
};

std::string readFile(const std::string &path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(Enumerate, EveryLegalConfigOfTheCatalogueTimesThreads) {
  const Spec sp = smallSpec();
  Settings s = fast();
  for (int64_t tokens : {int64_t(1), int64_t(16)}) {
    const std::vector<Candidate> c = enumerate(sp, s, tokens, 2);
    ASSERT_FALSE(c.empty());
    EXPECT_TRUE(c[0].is_default);
    EXPECT_EQ(c[0].threads, 0);
    Problem p;
    p.variant = sp.variant, p.K = sp.K, p.V = sp.V, p.H = sp.H, p.HV = sp.HV;
    p.seqs = 2, p.max_seqlen = tokens;
    cpu::isa::set_problem(&p);
    // Instances: avx2 up to the active one (x86-64), else generic alone.
    const size_t isas = std::max(1, int(p.cpu_isa));
    std::set<std::string> names;
    size_t expected = 1; // the default
    for (const FamilyInfo &f : kFamilies) {
      if (f.device != Device::CPU || !check_family(f.family, p).empty())
        continue;
      // Combinations of the listed values that check_config accepts for p
      // (e.g. cpu_decode's tile_v 128 does not divide V = 64).
      size_t n = 0;
      KernelConfig k;
      k.family = f.family;
      std::function<void(int)> walk = [&](int i) {
        if (i == kKnobCount) {
          n += check_config(k, p).empty();
          return;
        }
        if (!(f.knobs & (1u << i)))
          return walk(i + 1);
        for (int j = 0; j < f.values[i].n; ++j) {
          k.knob(i) = f.values[i].v[j];
          walk(i + 1);
        }
      };
      walk(0);
      expected += n * s.threads.size() * isas;
    }
    // The default config on all cores is the default candidate's own run
    // above the kernels' one-thread threshold: not listed twice.
    const int cores = int(std::thread::hardware_concurrency());
    if (std::find(s.threads.begin(), s.threads.end(), cores) != s.threads.end() &&
        !std::getenv("OMP_NUM_THREADS") &&
        2 * tokens * sp.HV * sp.K * sp.V >= (int64_t(1) << 17))
      --expected;
    EXPECT_EQ(c.size(), expected) << "tokens " << tokens;
    for (const Candidate &x : c) {
      EXPECT_EQ(check_config(x.config, p), "") << candidate_string(x);
      EXPECT_EQ(check_cpu_isa(x.config.family, x.isa, p), "") << candidate_string(x);
      EXPECT_TRUE(names.insert(candidate_string(x)).second) << candidate_string(x);
      if (x.config.family == Family::CpuDecode)
        EXPECT_EQ(tokens, 1);
    }
  }
}

TEST(Enumerate, FamiliesRestrictTheSearchButKeepTheDefault) {
  Settings s = fast();
  s.families = {"cpu_chunked"};
  const std::vector<Candidate> c = enumerate(smallSpec(), s, 16, 2);
  Problem p;
  cpu::isa::set_problem(&p);
  const size_t isas = std::max(1, int(p.cpu_isa)); // avx2.. or generic
  ASSERT_EQ(c.size(), 1 + 3 * s.threads.size() * isas);
  EXPECT_TRUE(c[0].is_default);
  for (size_t i = 1; i < c.size(); ++i)
    EXPECT_EQ(c[i].config.family, Family::CpuChunked);
  s.families = {"cuda_recurrent"};
  std::vector<BucketResult> r;
  std::string err;
  EXPECT_FALSE(tune(smallSpec(), s, "", &r, &err));
  EXPECT_NE(err.find("not a cpu family"), std::string::npos) << err;
}

TEST(Tune, WrongAnswersNeverWinAndThePickBeatsTheDefault) {
  const Spec sp = smallSpec();
  Settings s = fast();
  s.buckets = {16};
  std::vector<BucketResult> first;
  std::string err;
  ASSERT_TRUE(tune(sp, s, "", &first, &err)) << err;
  ASSERT_EQ(first.size(), 1u);
  const BucketResult &b = first[0];
  ASSERT_GE(b.winner, 0);
  EXPECT_LE(b.winner_us, b.default_us);
  for (const Measurement &m : b.all)
    EXPECT_TRUE(m.ok) << candidate_string(m.cand) << ": " << m.why;

  // The same tune with the pick's output corrupted (or, when the default
  // won, the fastest other candidate's: a corrupt default aborts the tune):
  // it is refused before it is timed and something else wins.
  int victim = b.winner;
  if (b.all[victim].cand.is_default) {
    victim = -1;
    for (size_t i = 1; i < b.all.size(); ++i)
      if (b.all[i].rounds > 0 &&
          (victim < 0 || b.all[i].rounds > b.all[victim].rounds ||
           (b.all[i].rounds == b.all[victim].rounds &&
            b.all[i].median_us < b.all[victim].median_us)))
        victim = int(i);
  }
  ASSERT_GE(victim, 1);
  s.corrupt = candidate_string(b.all[victim].cand);
  std::vector<BucketResult> second;
  ASSERT_TRUE(tune(sp, s, "", &second, &err)) << err;
  const BucketResult &c = second[0];
  int refused = 0;
  for (const Measurement &m : c.all)
    if (candidate_string(m.cand) == s.corrupt) {
      ++refused;
      EXPECT_FALSE(m.ok);
      EXPECT_NE(m.why.find("wrong answer"), std::string::npos) << m.why;
      EXPECT_EQ(m.rounds, 0); // never timed
    }
  EXPECT_EQ(refused, 1);
  EXPECT_NE(candidate_string(c.all[c.winner].cand), s.corrupt);
}

TEST(Tune, WritesEachBucketAndResumesWhereItStopped) {
  TempDir dir;
  const std::string db = dir.file("db.json");
  const Spec sp = smallSpec();
  Settings s = fast();
  std::vector<BucketResult> r;
  std::string err;
  ASSERT_TRUE(tune(sp, s, db, &r, &err)) << err;
  TuningDB loaded;
  ASSERT_TRUE(load_tuning_db(db, &loaded, &err)) << err;
  ASSERT_EQ(loaded.records.size(), 3u);
  EXPECT_EQ(loaded.records[0].max_tokens, 1);
  EXPECT_EQ(loaded.records[1].max_tokens, 16);
  EXPECT_EQ(loaded.records[2].max_tokens, 0); // the last bucket: any length
  for (const TuningRecord &rec : loaded.records) {
    EXPECT_EQ(rec.env, current_env(Device::CPU));
    EXPECT_GT(rec.time_us, 0);
  }

  // Everything is there: a second run measures nothing.
  ASSERT_TRUE(tune(sp, s, db, &r, &err)) << err;
  for (const BucketResult &b : r)
    EXPECT_TRUE(b.skipped) << b.tokens;

  // As if killed during the last bucket: only that one is tuned again.
  loaded.records.pop_back();
  ASSERT_TRUE(save_tuning_db(db, loaded, &err)) << err;
  ASSERT_TRUE(tune(sp, s, db, &r, &err)) << err;
  EXPECT_TRUE(r[0].skipped);
  EXPECT_TRUE(r[1].skipped);
  EXPECT_FALSE(r[2].skipped);
  ASSERT_TRUE(load_tuning_db(db, &loaded, &err)) << err;
  EXPECT_EQ(loaded.records.size(), 3u);

  // A record of another machine does not count as done.
  for (TuningRecord &rec : loaded.records)
    rec.env["cpu"] = "elsewhere";
  ASSERT_TRUE(save_tuning_db(db, loaded, &err)) << err;
  s.buckets = {1};
  ASSERT_TRUE(tune(sp, s, db, &r, &err)) << err;
  EXPECT_FALSE(r[0].skipped);
  ASSERT_TRUE(load_tuning_db(db, &loaded, &err)) << err;
  EXPECT_EQ(loaded.records.size(), 4u);

  // A corrupt database is not overwritten.
  std::ofstream(db) << "{\"format\": \"deltac-tuning-db\", \"vers";
  EXPECT_FALSE(tune(sp, s, db, &r, &err));
  EXPECT_NE(err.find("not overwritten"), std::string::npos) << err;
  EXPECT_EQ(readFile(db), "{\"format\": \"deltac-tuning-db\", \"vers");
}

TEST(Verify, TheRuntimeRunsTheTunedRecordOfEveryBucket) {
  TempDir dir;
  const std::string db = dir.file("db.json");
  const Spec sp = smallSpec();
  Settings s = fast();
  std::vector<BucketResult> r;
  std::string err;
  ASSERT_TRUE(tune(sp, s, db, &r, &err)) << err;
  std::vector<VerifyResult> v;
  ASSERT_TRUE(verify(sp, s, db, &v, &err)) << err;
  ASSERT_EQ(v.size(), r.size());
  for (size_t i = 0; i < v.size(); ++i) {
    EXPECT_TRUE(v[i].tuned) << v[i].tokens << ": " << v[i].ran;
    const Candidate &pick = r[i].all[r[i].winner].cand;
    EXPECT_EQ(v[i].ran.rfind(family_info(pick.config.family).name, 0), 0u)
        << v[i].ran << " vs " << candidate_string(pick);
    EXPECT_GT(v[i].default_us, 0);
    EXPECT_GT(v[i].tuned_us, 0);
  }
  EXPECT_FALSE(verify(sp, s, dir.file("missing.json"), &v, &err));
}

TEST(Merge, KeepsTheFasterRecordPerKeyAndOtherMachinesApart) {
  TuningRecord a;
  a.variant = DELTAC_VARIANT_GATED, a.K = 64, a.V = 64, a.max_tokens = 64;
  a.config.family = Family::CpuRecurrent;
  a.config.tile_v = 16;
  a.time_us = 10;
  a.env = current_env(Device::CPU);
  TuningRecord b = a; // same key, faster
  b.config.tile_v = 32;
  b.time_us = 8;
  TuningRecord c = a; // another machine
  c.env["cpu"] = "elsewhere";
  TuningRecord d = a; // another bucket
  d.max_tokens = 0;
  TuningDB x, y;
  x.records = {a, d};
  y.records = {b, c};
  int dropped = 0;
  TuningDB m = merge({x, y}, &dropped);
  EXPECT_EQ(dropped, 1);
  ASSERT_EQ(m.records.size(), 3u);
  EXPECT_EQ(m.records[0].config.tile_v, 32); // b replaced a
  EXPECT_EQ(m.records[0].time_us, 8);
  EXPECT_EQ(m.records[1].max_tokens, 0);
  EXPECT_EQ(m.records[2].env.at("cpu"), "elsewhere");
  // Round trip keeps env and threads.
  m.records[0].threads = 1;
  TuningDB back;
  std::string err;
  ASSERT_TRUE(parse_tuning_db(format_tuning_db(m), "m", &back, &err)) << err;
  EXPECT_EQ(back.records[0].threads, 1);
  EXPECT_EQ(back.records[2].env, c.env);
}

TEST(Report, DrawsEveryCandidate) {
  TempDir dir;
  const Spec sp = smallSpec();
  Settings s = fast();
  s.buckets = {1};
  s.compare_exhaustive = true;
  std::vector<BucketResult> r;
  std::string err;
  ASSERT_TRUE(tune(sp, s, "", &r, &err)) << err;
  EXPECT_GE(r[0].exhaustive_winner, 0);
  EXPECT_TRUE(std::isfinite(r[0].gap));
  for (const char *name : {"r.html", "r.svg"}) {
    ASSERT_TRUE(write_report(dir.file(name), sp, r, &err)) << err;
    const std::string text = readFile(dir.file(name));
    EXPECT_NE(text.find("<svg"), std::string::npos);
    for (const Measurement &m : r[0].all)
      EXPECT_NE(text.find(candidate_string(m.cand)), std::string::npos)
          << candidate_string(m.cand);
  }
}

TEST(Tune, RefusesBadSpecs) {
  Spec sp = smallSpec();
  std::vector<BucketResult> r;
  std::string err;
  sp.K = 60;
  EXPECT_FALSE(tune(sp, fast(), "", &r, &err));
  EXPECT_NE(err.find("K = 60"), std::string::npos) << err;
}

// cuda_chunked's split, fuse and scan: only values that change what runs
// are candidates (run_time_knobs_matter). Where the warp scan runs (bf16,
// K = 128), scan 0 is it ("w", with its splits; fuse 0 only), scan 1 the
// block scan with its split and fuse; elsewhere (f32) scan 0 is the block
// scan.
TEST(Enumerate, ChunkedSplitFuseAndScanValuesThatChangeWhatRuns) {
  Problem p;
  p.variant = DELTAC_VARIANT_GATED, p.K = p.V = 128, p.H = 16, p.HV = 32;
  p.in_dtype = p.out_dtype = DELTAC_BF16;
  p.sm_count = 132;
  KernelConfig c = default_config(Family::CudaChunked, p); // chunk 64, tile_v 64
  ASSERT_EQ(c.chunk, 64);
  auto kept = [&](int64_t seqs, int64_t tokens) {
    p.seqs = seqs, p.max_seqlen = tokens;
    std::string s;
    for (int scan : {0, 1})
      for (int split : {0, 1, 2, 4, 8, 16})
        for (int fuse : {0, 1}) {
          KernelConfig x = c;
          x.split = split, x.fuse = fuse, x.scan = scan;
          if (run_time_knobs_matter(x, p))
            s += (scan == 0 && p.in_dtype == DELTAC_BF16 ? "w" : "") + std::to_string(split) +
                 (fuse ? "f " : " ");
        }
    return s;
  };
  // One token: one chunk, no split can run; the rule runs none; 64 x 32 x 2
  // blocks are more than one wave: no fused launch.
  EXPECT_EQ(kept(64, 1), "w0 0 ");
  // 1 x 8192 tokens = 128 chunks, 32 heads x 2 V tiles < 7/8 of 132 SMs:
  // the block scan's rule may split, so 1 differs from 0; every split has
  // its own length. The warp scan's grid (32 heads x 4 V tiles of 32) is
  // not short: its rule runs no split (1 = 0).
  EXPECT_EQ(kept(1, 8192), "w0 w2 w4 w8 w16 0 1 1f 2 4 8 16 ");
  // 1 x 1024 tokens = 16 chunks: the rule cannot split (segments of 16).
  EXPECT_EQ(kept(1, 1024), "w0 w2 w4 w8 w16 0 0f 2 4 8 16 ");
  // 3 chunks: split 2 runs segments of 2 chunks, 4 of 1 (3 segments); 8
  // and 16 run those same 3 segments.
  EXPECT_EQ(kept(1, 192), "w0 w2 w4 0 0f 2 4 ");
  // 8 x 8192: 32 x 8 x 2 blocks fill the GPU: the rule runs no split, and
  // the grid is more than one wave (no fused launch).
  EXPECT_EQ(kept(8, 8192), "w0 w2 w4 w8 w16 0 2 4 8 16 ");
  // 2 / 8 heads, 1 x 32768: 8 x 4 warp-scan blocks are short: its rule may
  // split (1 differs from 0).
  p.H = 2, p.HV = 8;
  EXPECT_EQ(kept(1, 32768).substr(0, 21), "w0 w1 w2 w4 w8 w16 0 ");
  p.H = 16, p.HV = 32;
  // The warp scan reads no tile_v: another one is not a candidate.
  KernelConfig n = c;
  n.tile_v = 32;
  EXPECT_FALSE(run_time_knobs_matter(n, p));
  // f32: no warp scan; scan 0 is the block scan and scan 1 the same run.
  p.in_dtype = p.out_dtype = DELTAC_F32;
  c = default_config(Family::CudaChunked, p);
  EXPECT_EQ(kept(1, 8192), "0 1 1f 2 4 8 16 ");
  // Other families: always.
  EXPECT_TRUE(run_time_knobs_matter(default_config(Family::CudaRecurrent, p), p));
}

// CUDA: without a GPU the tune says so; with one, a spec this build has no
// instances of names the CMake option that compiles them.
TEST(TuneCuda, NeedsAGpuAndCompiledInstances) {
  Spec sp = smallSpec();
  sp.device = Device::CUDA;
  sp.K = sp.V = 32; // never in DELTAC_TUNE_CUDA_SPECS here
  sp.out_dtype = sp.in_dtype;
  std::vector<BucketResult> r;
  std::string err;
  EXPECT_FALSE(tune(sp, fast(), "", &r, &err));
  int32_t sms = 0;
  if (!cuda::usable(&sms).empty())
    EXPECT_NE(err.find("target cuda: "), std::string::npos) << err;
  else
    EXPECT_NE(err.find("DELTAC_TUNE_CUDA_SPECS"), std::string::npos) << err;
}

// The instances of every compiled spec are exactly the legal configs of the
// catalogue's CUDA families (one per config).
TEST(TuneCuda, InstancesAreEveryLegalConfig) {
  const std::vector<cuda::Instance> &all = cuda::instances();
  if (all.empty())
    GTEST_SKIP() << "this build compiled no CUDA tuner instances "
                    "(DELTAC_TUNE_CUDA_SPECS is empty)";
  std::set<std::string> specs;
  for (const cuda::Instance &in : all)
    specs.insert(std::to_string(in.variant) + ":" + std::to_string(in.K) + ":" +
                 std::to_string(in.V) + ":" + std::to_string(in.in_dtype));
  for (const std::string &key : specs) {
    int var, K, V, dt;
    ASSERT_EQ(std::sscanf(key.c_str(), "%d:%d:%d:%d", &var, &K, &V, &dt), 4);
    Problem p;
    p.variant = var, p.K = K, p.V = V, p.H = 1, p.HV = 1, p.in_dtype = dt,
    p.out_dtype = dt, p.seqs = 1, p.max_seqlen = 4096;
    size_t legal = 0;
    for (const FamilyInfo &f : kFamilies) {
      if (f.device != Device::CUDA || !check_family(f.family, p).empty())
        continue;
      for (const KernelConfig &c : knob_product(f)) {
        if (!check_config(c, p).empty())
          continue;
        // One instance per compiled config: it runs every split and fuse.
        legal += cuda::compiled_config(c) == c;
        EXPECT_NE(cuda::find(var, K, V, dt, c), nullptr)
            << key << ": " << candidate_string(Candidate{c});
      }
    }
    const size_t have = size_t(std::count_if(all.begin(), all.end(), [&](const cuda::Instance &in) {
      return in.variant == var && in.K == K && in.V == V && in.in_dtype == dt;
    }));
    EXPECT_EQ(have, legal) << key;
  }
}

// On the GPU: a tune of the first compiled spec checks every candidate
// against float64, a corrupted candidate never wins, and the pick is never
// slower than the default in the final A/B.
TEST(TuneCuda, TunesACompiledSpecOnTheGpu) {
  int32_t sms = 0;
  const std::string why = cuda::usable(&sms);
  if (!why.empty())
    GTEST_SKIP() << why;
  if (cuda::instances().empty())
    GTEST_SKIP() << "no CUDA tuner instances in this build (DELTAC_TUNE_CUDA_SPECS)";
  const cuda::Instance &first = cuda::instances()[0];
  Spec sp;
  sp.device = Device::CUDA;
  sp.variant = first.variant, sp.K = first.K, sp.V = first.V;
  sp.H = 2, sp.HV = 8;
  sp.in_dtype = sp.out_dtype = first.in_dtype;
  sp.qk_l2norm = true;
  Settings s = fast();
  s.buckets = {1, 64, 2048};
  s.decode_batch = 16;
  s.batch = 2;
  // corrupt a non-default chunked candidate
  for (const Candidate &c : enumerate(sp, s, 2048, 2))
    if (!c.is_default && c.config.family == Family::CudaChunked) {
      s.corrupt = candidate_string(c);
      break;
    }
  TempDir dir;
  std::vector<BucketResult> r;
  std::string err;
  ASSERT_TRUE(tune(sp, s, dir.file("db.json"), &r, &err)) << err;
  ASSERT_EQ(r.size(), 3u);
  for (const BucketResult &b : r) {
    ASSERT_GE(b.winner, 0);
    EXPECT_LE(b.winner_us, b.default_us) << "bucket " << b.tokens;
    for (const Measurement &m : b.all)
      if (candidate_string(m.cand) == s.corrupt && b.tokens == 2048) {
        EXPECT_FALSE(m.ok) << s.corrupt;
        EXPECT_NE(m.why.find("wrong answer"), std::string::npos) << m.why;
      }
    EXPECT_NE(candidate_string(b.all[b.winner].cand), s.corrupt);
    for (const Measurement &m : b.all) // the compiler's resource report
      if (m.cand.config.family == Family::CudaChunked)
        EXPECT_GT(m.regs, 0) << candidate_string(m.cand);
    std::printf("bucket %lld: %zu candidates, default %.1f us, pick %s %.1f us\n",
                (long long)b.tokens, b.all.size(), b.default_us,
                candidate_string(b.all[b.winner].cand).c_str(), b.winner_us);
  }
  TuningDB db;
  ASSERT_TRUE(load_tuning_db(dir.file("db.json"), &db, &err)) << err;
  EXPECT_EQ(db.records.size(), 3u);
  for (const TuningRecord &rec : db.records)
    EXPECT_EQ(rec.env.at("device"), "cuda");

  // --max-spill=0: exactly the non-default candidates whose kernels spill
  // (the compiler's resource report) are not timed.
  s.buckets = {64};
  s.max_spill = 0;
  s.corrupt.clear();
  TempDir dir2;
  std::vector<BucketResult> r2;
  ASSERT_TRUE(tune(sp, s, dir2.file("db.json"), &r2, &err)) << err;
  int spilling = 0;
  for (const Measurement &m : r2[0].all) {
    const bool spills = m.ok && m.spill > 0 && !m.cand.is_default;
    spilling += spills;
    EXPECT_EQ(spills, m.why.find("pruned: spills") != std::string::npos)
        << candidate_string(m.cand) << ": " << m.why;
  }
  std::printf("--max-spill=0: %d of %zu candidates spill\n", spilling, r2[0].all.size());
}

// --backward: only the CUDA backward's saved-states option, where the
// catalogue offers it (bwd_saves_states), on one process.
TEST(TuneBackward, RefusesWhereThereIsNoOption) {
  Spec sp;
  sp.variant = DELTAC_VARIANT_DELTA, sp.H = sp.HV = 4, sp.K = sp.V = 64;
  sp.in_dtype = sp.out_dtype = DELTAC_BF16;
  Settings s = fast();
  s.buckets = {256};
  std::vector<BackwardBucket> r;
  std::string err;
  EXPECT_FALSE(tune_backward(sp, s, "", &r, &err));
  EXPECT_NE(err.find("--target=cuda"), std::string::npos) << err;
  sp.device = Device::CUDA;
  for (auto [variant, K, dtype] : {std::tuple{DELTAC_VARIANT_KDA, 64, DELTAC_BF16},
                                   std::tuple{DELTAC_VARIANT_GATED, 64, DELTAC_F32},
                                   std::tuple{DELTAC_VARIANT_GATED, 256, DELTAC_BF16}}) {
    Spec x = sp;
    x.variant = variant, x.K = x.V = K, x.in_dtype = x.out_dtype = dtype;
    err.clear();
    EXPECT_FALSE(tune_backward(x, s, "", &r, &err));
    EXPECT_NE(err.find("bwd_saves_states"), std::string::npos) << err;
  }
  s.workers = 2;
  err.clear();
  EXPECT_FALSE(tune_backward(sp, s, "", &r, &err));
  EXPECT_NE(err.find("one process"), std::string::npos) << err;
  s.workers = 1;
  int32_t sms = 0;
  if (cuda::usable(&sms).empty())
    GTEST_SKIP() << "a CUDA device is present: TuneBackward.WritesARecordTheRuntimeFollows";
  err.clear();
  EXPECT_FALSE(tune_backward(sp, s, "", &r, &err));
  EXPECT_NE(err.find("target cuda: "), std::string::npos) << err;
}

TEST(TuneBackward, MergeKeepsTheFasterRecordPerKey) {
  BackwardRecord a;
  a.variant = DELTAC_VARIANT_DELTA, a.K = a.V = 64, a.in_dtype = DELTAC_BF16, a.HV = 32;
  a.max_tokens = 4096, a.keep = true, a.time_us = 2900;
  int n = 0; // a GPU machine's env (this one may have none)
  const char *const *keys = env_identity_keys(Device::CUDA, &n);
  for (int i = 0; i < n; ++i)
    a.env[keys[i]] = "x";
  BackwardRecord b = a; // same key, faster
  b.keep = false, b.time_us = 2850;
  BackwardRecord c = a; // other value heads
  c.HV = 16;
  TuningDB x, y;
  x.backward = {a, c};
  y.backward = {b};
  int dropped = 0;
  const TuningDB m = merge({x, y}, &dropped);
  EXPECT_EQ(dropped, 1);
  ASSERT_EQ(m.backward.size(), 2u);
  EXPECT_FALSE(m.backward[0].keep);
  EXPECT_EQ(m.backward[0].time_us, 2850);
  EXPECT_EQ(m.backward[1].HV, 16);
}

// On a GPU: both choices checked against the float64 reference and timed,
// the record written where the chunked backward runs (not in the 64-token
// bucket: its sweep), the runtime following it; a choice corrupted
// (Settings::corrupt) never wins.
TEST(TuneBackward, WritesARecordTheRuntimeFollows) {
  int32_t sms = 0;
  const std::string why = cuda::usable(&sms);
  if (!why.empty())
    GTEST_SKIP() << why;
  TempDir dir;
  Spec sp;
  sp.variant = DELTAC_VARIANT_DELTA, sp.H = 2, sp.HV = 4, sp.K = sp.V = 64;
  sp.in_dtype = sp.out_dtype = DELTAC_BF16;
  sp.device = Device::CUDA;
  Settings s = fast();
  s.buckets = {64, 512};
  s.batch = 2;
  s.seed = deltac::test_seed(); // fresh inputs; DELTAC_TEST_SEED replays them
  std::printf("%s\n", deltac::test_seed_note(s.seed).c_str());
  SCOPED_TRACE(deltac::test_seed_note(s.seed));
  std::vector<BackwardBucket> r;
  std::string err;
  const std::string db = dir.file("bwd.json");
  ASSERT_TRUE(tune_backward(sp, s, db, &r, &err)) << err;
  ASSERT_EQ(r.size(), 2u);
  EXPECT_TRUE(r[0].no_option);
  const BackwardBucket &b = r[1];
  EXPECT_FALSE(b.no_option);
  EXPECT_TRUE(b.why_keep.empty()) << b.why_keep;
  EXPECT_LE(b.err_keep, 1e-2);
  EXPECT_LE(b.err_recompute, 1e-2);
  EXPECT_GT(b.keep_us, 0);
  EXPECT_GT(b.recompute_us, 0);
  EXPECT_GT(b.saved_bytes, 0u);
  EXPECT_LT(b.ws_keep, b.ws_recompute) << "kept states shrink the backward's workspace";
  TuningDB back;
  ASSERT_TRUE(load_tuning_db(db, &back, &err)) << err;
  ASSERT_EQ(back.backward.size(), 1u);
  EXPECT_EQ(back.backward[0].keep, b.keep);
  EXPECT_EQ(back.backward[0].max_tokens, 0); // the last bucket: any length
  ASSERT_EQ(deltac_load_tuning_db(db.c_str()), 0) << deltac_last_error();
  EXPECT_EQ(deltac_saved_states_pay(sp.variant, 2 * 512, 2, sp.HV, 64, 64, DELTAC_BF16),
            b.keep ? 1 : 0);
  deltac_load_tuning_db(nullptr);

  s.corrupt = "saved_states=keep";
  s.min_gain = 0;
  ASSERT_TRUE(tune_backward(sp, s, "", &r, &err)) << err;
  EXPECT_NE(r[1].why_keep.find("wrong answer"), std::string::npos) << r[1].why_keep;
  EXPECT_FALSE(r[1].keep);
}

} // namespace
} // namespace deltac::tune

// options.config (run exactly one named kernel config), the tuning record's
// environment check (a record from another machine or build never runs) and
// its thread count, deltac_environment.
#include "deltac/catalogue.h"
#include "deltac/env.h"
#include "deltac/tuning_db.h"
#include "deltac/runtime.h"

#include "test_util.h"

#include <fstream>

namespace deltac {
namespace {

test::Problem problem(int variant, int K, int V, int T, int B = 2) {
  test::Problem pr;
  pr.variant = variant;
  pr.B = B;
  pr.T = T;
  pr.H = 1;
  pr.HV = 2;
  pr.K = K;
  pr.V = V;
  pr.fill(test::freshSeed());
  return pr;
}

// Runs pr on the CPU with opt; on success checks it against the reference.
int run(const test::Problem &pr, const deltac_options &opt,
        deltac_run_info *info, int threads = 0) {
  std::vector<float> o(pr.oCount()), ht(pr.stateCount());
  deltac_fwd_params p = pr.params(o.data(), ht.data());
  p.threads = threads;
  const int rc = deltac_forward_info(&p, &opt, info);
  if (rc == 0) {
    std::vector<double> oRef, htRef;
    ref::forward(p, &oRef, &htRef);
    EXPECT_LE(ref::rel_rms(o.data(), oRef), 1e-5) << info->family;
    EXPECT_LE(ref::rel_rms(ht.data(), htRef), 1e-5) << info->family;
  }
  return rc;
}

deltac_options withConfig(const char *family, int chunk, int tileV) {
  deltac_options opt = deltac_default_options();
  opt.config.family = family;
  opt.config.chunk = chunk;
  opt.config.tile_v = tileV;
  return opt;
}

TEST(ConfigOption, RunsExactlyEveryLegalCpuConfig) {
  for (int variant : {0, 1, 2})
    for (const FamilyInfo &f : kFamilies) {
      if (f.device != Device::CPU)
        continue;
      const bool chunked = f.knobs == kKnobChunk;
      const int knob = chunked ? 0 : 2;
      for (int i = 0; i < f.values[knob].n; ++i) {
        const int x = f.values[knob].v[i];
        SCOPED_TRACE(std::string(f.name) + " " + std::to_string(x));
        const int T = f.family == Family::CpuDecode ? 1 : 41;
        deltac_run_info info{};
        ASSERT_EQ(run(problem(variant, 64, 128, T),
                      withConfig(f.name, chunked ? x : 0, chunked ? 0 : x), &info),
                  0)
            << deltac_last_error();
        EXPECT_STREQ(info.family, f.name);
        EXPECT_EQ(chunked ? info.chunk : info.tile_v, x);
        EXPECT_EQ(info.device, DELTAC_DEVICE_CPU); // auto: the family's device
        EXPECT_EQ(info.tuned, 0);
      }
    }
}

TEST(ConfigOption, IllegalConfigsAreErrorsNamingTheField) {
  struct Bad {
    deltac_options opt;
    int T;
    const char *mention;
  };
  auto opt = [](const char *f, int c, int t) { return withConfig(f, c, t); };
  deltac_options chunkToo = opt("cpu_chunked", 32, 0);
  chunkToo.chunk = 32;
  deltac_options recurrentMode = opt("cpu_chunked", 32, 0);
  recurrentMode.mode = DELTAC_MODE_RECURRENT;
  deltac_options cpuDevice = opt("cuda_recurrent", 0, 32);
  cpuDevice.config.warps = 4;
  cpuDevice.device = DELTAC_DEVICE_CPU;
  const Bad cases[] = {
      {opt("cpu_fancy", 0, 0), 10, "options.config.family = 'cpu_fancy'"},
      {opt("cpu_chunked", 24, 0), 10, "chunk = 24"},
      {opt("cpu_recurrent", 32, 16), 10, "has no knob 'chunk'"},
      {opt("cpu_recurrent", 0, 32), 10, "tile_v = 32 must divide V = 48"},
      {opt("cpu_decode", 0, 16), 10, "at most 1 tokens"},
      {chunkToo, 10, "options.chunk"},
      {recurrentMode, 10, "options.mode"},
      {cpuDevice, 10, "runs on cuda"},
  };
  for (const Bad &c : cases) {
    SCOPED_TRACE(c.mention);
    deltac_run_info info{};
    EXPECT_NE(run(problem(1, 64, 48, c.T), c.opt, &info), 0);
    EXPECT_NE(std::string(deltac_last_error()).find(c.mention), std::string::npos)
        << deltac_last_error();
  }
}

TEST(Environment, NamesThisMachineAndBuild) {
  const std::string env = deltac_environment(DELTAC_DEVICE_CPU);
  for (const char *key : {"\"device\": \"cpu\"", "\"cpu\":", "\"isa\":",
                          "\"cores\":", "\"deltac\":", "\"templates\":"})
    EXPECT_NE(env.find(key), std::string::npos) << env;
  const Env &cur = current_env(Device::CPU);
  EXPECT_EQ(env_mismatch(Device::CPU, cur, cur), "");
  EXPECT_EQ(env_mismatch(Device::CPU, {}, cur), ""); // no claim: usable
  Env other = cur;
  other["cpu"] = "Some Other CPU";
  EXPECT_NE(env_mismatch(Device::CPU, other, cur).find("'cpu'"), std::string::npos);
  Env older = cur;
  older["templates"] = "0000000000000000";
  EXPECT_NE(env_mismatch(Device::CPU, older, cur).find("'templates'"),
            std::string::npos);
  Env partial = cur;
  partial.erase("isa");
  EXPECT_NE(env_mismatch(Device::CPU, partial, cur).find("missing"),
            std::string::npos);
  // Keys outside the identity list do not matter.
  Env extra = cur;
  extra["tuned_by"] = "someone";
  EXPECT_EQ(env_mismatch(Device::CPU, extra, cur), "");
}

// The CPU (a CPU record), also on a machine with a GPU.
deltac_options cpuOptions() {
  deltac_options o = deltac_default_options();
  o.device = DELTAC_DEVICE_CPU;
  return o;
}

class EnvCheck : public ::testing::Test {
protected:
  void TearDown() override { EXPECT_EQ(deltac_load_tuning_db(nullptr), 0); }
  // A database of one cpu_recurrent tile_v=16 record for gated K = V = 64.
  void load(const Env &env, int threads = 0) {
    TuningDB db;
    TuningRecord r;
    r.variant = DELTAC_VARIANT_GATED, r.K = 64, r.V = 64;
    r.in_dtype = DELTAC_F32;
    r.config.family = Family::CpuRecurrent;
    r.config.tile_v = 16;
    r.threads = threads;
    r.env = env;
    db.records.push_back(r);
    std::string err;
    ASSERT_TRUE(save_tuning_db(dir.file("db.json"), db, &err)) << err;
    ASSERT_EQ(deltac_load_tuning_db(dir.file("db.json").c_str()), 0)
        << deltac_last_error();
  }
  test::TempDir dir;
};

TEST_F(EnvCheck, ARecordOfThisMachineRuns) {
  load(current_env(Device::CPU));
  deltac_run_info info{};
  ASSERT_EQ(run(problem(1, 64, 64, 20), cpuOptions(), &info), 0);
  EXPECT_EQ(info.tuned, 1);
  EXPECT_EQ(info.tile_v, 16);
  EXPECT_STREQ(info.note, "");
}

TEST_F(EnvCheck, ARecordOfAnotherMachineOrBuildNeverRuns) {
  for (const char *key : {"cpu", "isa", "cores", "deltac", "templates"}) {
    SCOPED_TRACE(key);
    Env env = current_env(Device::CPU);
    env[key] = "elsewhere";
    load(env);
    deltac_run_info info{};
    ASSERT_EQ(run(problem(1, 64, 64, 20), cpuOptions(), &info), 0);
    EXPECT_EQ(info.tuned, 0);
    EXPECT_EQ(info.tile_v, 32); // the default rule
    const std::string note = info.note;
    EXPECT_NE(note.find("another machine or build"), std::string::npos) << note;
    EXPECT_NE(note.find(std::string("'") + key + "'"), std::string::npos) << note;
    EXPECT_NE(note.find("the default config"), std::string::npos) << note;
  }
}

TEST_F(EnvCheck, ARecordsThreadsApplyUnlessTheCallerSetsThem) {
  load(current_env(Device::CPU), 1);
  deltac_run_info info{};
  ASSERT_EQ(run(problem(1, 64, 64, 20), cpuOptions(), &info), 0);
  EXPECT_EQ(info.tuned, 1);
  EXPECT_EQ(info.threads, 1);
  ASSERT_EQ(run(problem(1, 64, 64, 20), cpuOptions(), &info, 2), 0);
  EXPECT_EQ(info.threads, 2);
}

} // namespace
} // namespace deltac

// The runtime and the tuning database: a record changes the kernel that
// runs (deltac_run_info says which), every CPU config it can name matches
// the reference, bad databases are refused with the file and field named,
// and a bad DELTAC_TUNING_DB falls back to the default rule with a warning.
#include "deltac/catalogue.h"
#include "deltac/cli.h"
#include "deltac/runtime.h"

#include "select.h" // runtime/src: the config choice, testable without a GPU
#include "test_util.h"

#include <fstream>
#include <iterator>
#include <sys/wait.h>

namespace deltac {
namespace {

const char *variantName(int v) {
  return v == 0 ? "delta" : v == 1 ? "gated" : "kda";
}

std::string writeText(const test::TempDir &dir, const std::string &name,
                      const std::string &text) {
  std::ofstream(dir.file(name)) << text;
  return dir.file(name);
}

// A database of one record.
std::string oneRecord(const std::string &family, int variant, int K, int V,
                      const std::string &knobs, int maxTokens = 0) {
  return R"({"format": "deltac-tuning-db", "version": 2, "records": [)"
         R"({"family": ")" +
         family + R"(", "variant": ")" + variantName(variant) +
         R"(", "key_dim": )" + std::to_string(K) +
         R"(, "value_dim": )" + std::to_string(V) +
         R"(, "in_dtype": "f32", "max_tokens": )" + std::to_string(maxTokens) +
         ", " + knobs + "}]}";
}

test::Problem problem(int variant, int K, int V, int T) {
  test::Problem pr;
  pr.variant = variant;
  pr.B = 2;
  pr.T = T;
  pr.H = 1;
  pr.HV = 2;
  pr.K = K;
  pr.V = V;
  pr.fill(test::freshSeed());
  return pr;
}

// Runs pr on the CPU under mode/chunk, checks it against the reference and
// returns what ran.
deltac_run_info runCpu(const test::Problem &pr, int mode = DELTAC_MODE_AUTO,
                       int chunk = 0) {
  std::vector<float> o(pr.oCount()), ht(pr.stateCount());
  deltac_fwd_params p = pr.params(o.data(), ht.data());
  deltac_options opt = deltac_default_options();
  opt.device = DELTAC_DEVICE_CPU;
  opt.mode = mode;
  opt.chunk = chunk;
  deltac_run_info info{};
  EXPECT_EQ(deltac_forward_info(&p, &opt, &info), 0) << deltac_last_error();
  std::vector<double> oRef, htRef;
  ref::forward(p, &oRef, &htRef);
  EXPECT_LE(ref::rel_rms(o.data(), oRef), 1e-5) << info.family;
  EXPECT_LE(ref::rel_rms(ht.data(), htRef), 1e-5) << info.family;
  return info;
}

class TuningDbRun : public ::testing::Test {
protected:
  void TearDown() override { EXPECT_EQ(deltac_load_tuning_db(nullptr), 0); }
  void load(const std::string &text) {
    ASSERT_EQ(deltac_load_tuning_db(writeText(dir, "db.json", text).c_str()), 0)
        << deltac_last_error();
  }
  test::TempDir dir;
};

TEST_F(TuningDbRun, RecordChangesTheRecurrentTile) {
  test::Problem pr = problem(DELTAC_VARIANT_GATED, 64, 64, 20);
  deltac_run_info info = runCpu(pr);
  EXPECT_STREQ(info.family, "cpu_recurrent");
  EXPECT_EQ(info.tile_v, 32); // the default rule
  EXPECT_EQ(info.tuned, 0);

  load(oneRecord("cpu_recurrent", DELTAC_VARIANT_GATED, 64, 64, R"("tile_v": 16)"));
  info = runCpu(pr);
  EXPECT_STREQ(info.family, "cpu_recurrent");
  EXPECT_EQ(info.tile_v, 16); // the record
  EXPECT_EQ(info.tuned, 1);
  EXPECT_STREQ(info.note, "");
  // Another variant or K, V: no record, the default.
  info = runCpu(problem(DELTAC_VARIANT_KDA, 64, 64, 20));
  EXPECT_EQ(info.tile_v, 32);
  EXPECT_EQ(info.tuned, 0);
  info = runCpu(problem(DELTAC_VARIANT_GATED, 64, 128, 20));
  EXPECT_EQ(info.tuned, 0);

  ASSERT_EQ(deltac_load_tuning_db(nullptr), 0); // unloaded: the default again
  EXPECT_EQ(runCpu(pr).tile_v, 32);
}

TEST_F(TuningDbRun, ChunkedRecordSelectsTheChunk) {
  test::Problem pr = problem(DELTAC_VARIANT_KDA, 32, 48, 70);
  EXPECT_EQ(runCpu(pr, DELTAC_MODE_CHUNKED).chunk, kCpuDefaultChunk);
  load(oneRecord("cpu_chunked", DELTAC_VARIANT_KDA, 32, 48, R"("chunk": 64)"));
  deltac_run_info info = runCpu(pr, DELTAC_MODE_CHUNKED);
  EXPECT_STREQ(info.family, "cpu_chunked");
  EXPECT_EQ(info.chunk, 64);
  EXPECT_EQ(info.tuned, 1);
  // An explicit chunk size wins over the database.
  info = runCpu(pr, DELTAC_MODE_CHUNKED, 16);
  EXPECT_EQ(info.chunk, 16);
  EXPECT_EQ(info.tuned, 0);
  // Mode auto may run any family the database measured best.
  info = runCpu(pr, DELTAC_MODE_AUTO);
  EXPECT_EQ(info.chunk, 64);
  EXPECT_EQ(info.mode, DELTAC_MODE_CHUNKED);
  // Mode recurrent never takes a chunked record.
  info = runCpu(pr, DELTAC_MODE_RECURRENT);
  EXPECT_STREQ(info.family, "cpu_recurrent");
  EXPECT_EQ(info.tuned, 0);
}

TEST_F(TuningDbRun, SizeBucketsChooseByTheLongestSequence) {
  test::Problem shortPr = problem(DELTAC_VARIANT_DELTA, 64, 64, 8);
  test::Problem longPr = problem(DELTAC_VARIANT_DELTA, 64, 64, 40);
  load(R"({"format": "deltac-tuning-db", "version": 2, "records": [
    {"family": "cpu_recurrent", "variant": "delta", "key_dim": 64,
     "value_dim": 64, "in_dtype": "f32", "max_tokens": 16, "tile_v": 16},
    {"family": "cpu_chunked", "variant": "delta", "key_dim": 64,
     "value_dim": 64, "in_dtype": "f32", "max_tokens": 0, "chunk": 16}]})");
  EXPECT_STREQ(runCpu(shortPr).family, "cpu_recurrent");
  EXPECT_EQ(runCpu(shortPr).tile_v, 16);
  EXPECT_STREQ(runCpu(longPr).family, "cpu_chunked");
  EXPECT_EQ(runCpu(longPr).chunk, 16);
}

// Every CPU config a database can name runs and matches the reference, for
// each precompiled dims instance (K = V = 128, 64) and the dynamic one.
TEST_F(TuningDbRun, EveryCpuConfigMatchesTheReference) {
  struct Dims {
    int K, V;
  };
  for (Dims d : {Dims{128, 128}, Dims{64, 64}, Dims{32, 96}})
    for (int variant : {0, 1, 2})
      for (const FamilyInfo &f : kFamilies) {
        if (f.device != Device::CPU)
          continue;
        const int knob = f.knobs == kKnobChunk ? 0 : 2;
        for (int i = 0; i < f.values[knob].n; ++i) {
          const int x = f.values[knob].v[i];
          if (knob == 2 && d.V % x != 0)
            continue; // tile_v must divide V: the database refuses it
          SCOPED_TRACE(std::string(f.name) + " " + kKnobNames[knob] + "=" +
                       std::to_string(x) + " K=" + std::to_string(d.K) +
                       " V=" + std::to_string(d.V));
          load(oneRecord(f.name, variant, d.K, d.V,
                         "\"" + std::string(kKnobNames[knob]) +
                             "\": " + std::to_string(x),
                         f.max_tokens));
          const int T = f.family == Family::CpuDecode ? 1 : 37;
          deltac_run_info info = runCpu(problem(variant, d.K, d.V, T));
          EXPECT_STREQ(info.family, f.name);
          EXPECT_EQ(info.tuned, 1);
          EXPECT_EQ(knob == 0 ? info.chunk : info.tile_v, x);
          EXPECT_EQ(info.specialized, d.K == d.V && d.K != 32 ? 1 : 0);
        }
      }
}

// A CPU record's "isa" picks the instruction-set instance (deltac_run_info
// says which); one wider than the call may run (the CPU's, or
// DELTAC_CPU_ISA's) is never run: the default rule runs, the note says why.
// options.config.isa pins one per call.
TEST_F(TuningDbRun, RecordPicksTheInstructionSet) {
  const test::Problem pr = problem(DELTAC_VARIANT_GATED, 64, 64, 20);
  // Whether avx512 may run here: a pinned call says.
  std::vector<float> o(pr.oCount()), ht(pr.stateCount());
  deltac_fwd_params p = pr.params(o.data(), ht.data());
  deltac_options opt = deltac_default_options();
  opt.device = DELTAC_DEVICE_CPU;
  opt.config.family = "cpu_recurrent";
  opt.config.tile_v = 32;
  opt.config.isa = "avx512";
  const bool wide = deltac_forward(&p, &opt) == 0;
  if (!wide)
    EXPECT_NE(std::string(deltac_last_error()).find("options.config.isa"),
              std::string::npos) << deltac_last_error();
  opt.config.isa = "avx9";
  EXPECT_NE(deltac_forward(&p, &opt), 0);
  EXPECT_NE(std::string(deltac_last_error()).find("options.config.isa = 'avx9'"),
            std::string::npos) << deltac_last_error();
  opt.config.family = nullptr;
  opt.config.tile_v = 0;
  opt.config.isa = "generic";
  EXPECT_NE(deltac_forward(&p, &opt), 0);
  EXPECT_NE(std::string(deltac_last_error()).find("needs options.config.family"),
            std::string::npos) << deltac_last_error();

  for (const char *isa : {"generic", "avx2", "avx512"}) {
    SCOPED_TRACE(isa);
    load(oneRecord("cpu_recurrent", DELTAC_VARIANT_GATED, 64, 64,
                   std::string(R"("tile_v": 16, "isa": ")") + isa + "\""));
    const deltac_run_info info = runCpu(pr); // checks the reference too
    const bool runs = std::string(isa) != "avx512" || wide;
    if (std::string(isa) != "generic" && !runs) {
      EXPECT_EQ(info.tuned, 0);
      EXPECT_NE(std::string(info.note).find("wider than"), std::string::npos)
          << info.note;
      continue;
    }
    // generic always runs; avx2 where the CPU has it (else refused: wider).
    if (info.tuned) {
      EXPECT_STREQ(info.isa, isa);
      EXPECT_EQ(info.tile_v, 16);
    } else {
      EXPECT_NE(std::string(info.note).find("wider than"), std::string::npos)
          << info.note;
    }
  }
}

struct BadDb {
  const char *name;
  std::string text;
  std::vector<std::string> mention;
};

TEST_F(TuningDbRun, BadDatabasesAreRefusedNamingFileAndField) {
  const std::string good =
      oneRecord("cpu_recurrent", DELTAC_VARIANT_GATED, 64, 64, R"("tile_v": 16)");
  const BadDb cases[] = {
      {"corrupt", "{\"format\": \"deltac-tuning-db\", \"vers", {"not valid JSON"}},
      {"version",
       R"({"format": "deltac-tuning-db", "version": 1, "records": []})",
       {"'version' must be 2", "got 1"}},
      {"unknown_family",
       oneRecord("cuda_wgmma", 1, 64, 64, R"("chunk": 64)"),
       {"record 0", "'family'", "cuda_chunked"}},
      {"knob_not_read",
       oneRecord("cpu_recurrent", 1, 64, 64, R"("tile_v": 16, "chunk": 32)"),
       {"record 0", "'chunk'", "cpu_recurrent has no such knob"}},
      {"illegal_value", oneRecord("cpu_chunked", 1, 64, 64, R"("chunk": 24)"),
       {"record 0", "chunk = 24", "16, 32, 64"}},
      {"tile_does_not_divide",
       oneRecord("cpu_recurrent", 1, 64, 48, R"("tile_v": 32)"),
       {"record 0", "tile_v = 32", "V = 48"}},
      {"unknown_isa",
       oneRecord("cpu_recurrent", 1, 64, 64, R"("tile_v": 16, "isa": "sse9")"),
       {"record 0", "'isa'", "avx512"}},
      {"isa_on_cuda",
       oneRecord("cuda_recurrent", 1, 64, 64,
                 R"("tile_v": 16, "warps": 4, "isa": "avx2")"),
       {"record 0", "'isa'", "runs on CUDA"}},
  };
  load(good);
  const test::Problem pr = problem(DELTAC_VARIANT_GATED, 64, 64, 20);
  for (const BadDb &c : cases) {
    SCOPED_TRACE(c.name);
    const std::string path = writeText(dir, std::string(c.name) + ".json", c.text);
    EXPECT_NE(deltac_load_tuning_db(path.c_str()), 0);
    const std::string err = deltac_last_error();
    EXPECT_NE(err.find("tuning db '" + path + "'"), std::string::npos) << err;
    for (const std::string &m : c.mention)
      EXPECT_NE(err.find(m), std::string::npos) << "'" << m << "' in: " << err;
    EXPECT_EQ(err.find('\n'), std::string::npos) << err;
    // The previous database stays.
    EXPECT_EQ(runCpu(pr).tile_v, 16);
  }
  EXPECT_NE(deltac_load_tuning_db(dir.file("missing.json").c_str()), 0);
  EXPECT_NE(std::string(deltac_last_error()).find("missing.json"),
            std::string::npos);
}

// The CUDA config choice needs no GPU (the launch does): a legal,
// precompiled record is taken; a legal record the runtime does not ship
// (warps other than the default) gives the default config and a note
// where run-time compilation is off.
TEST_F(TuningDbRun, CudaRecordsAreTakenOnlyWhenPrecompiled) {
  test::JitEnv jitOff("0"); // with NVRTC such a record runs (test_cuda_check.cpp)
  deltac::Problem prob;
  prob.variant = DELTAC_VARIANT_GATED;
  prob.K = prob.V = 128;
  prob.seqs = 64;
  prob.HV = 32;
  prob.max_seqlen = 1;
  prob.sm_count = 132;
  const deltac_options opt = deltac_default_options();
  rt::Choice choice;
  std::string err;
  ASSERT_TRUE(rt::choose_config(Device::CUDA, opt, prob, &choice, &err)) << err;
  EXPECT_TRUE(choice.config == default_config(Family::CudaRecurrent, prob));
  EXPECT_EQ(choice.config.tile_v, 32);
  EXPECT_FALSE(choice.tuned);

  load(R"({"format": "deltac-tuning-db", "version": 2, "records": [
    {"family": "cuda_recurrent", "variant": "gated", "key_dim": 128,
     "value_dim": 128, "in_dtype": "f32", "tile_v": 16, "warps": 4}]})");
  ASSERT_TRUE(rt::choose_config(Device::CUDA, opt, prob, &choice, &err)) << err;
  EXPECT_TRUE(choice.config == default_config(Family::CudaRecurrent, prob));
  EXPECT_FALSE(choice.tuned);
  EXPECT_NE(choice.note.find("record 0 (cuda_recurrent tile_v=16 warps=4) is "
                             "not precompiled in this runtime; the default "
                             "config (cuda_recurrent tile_v=32 warps=2) ran"),
            std::string::npos)
      << choice.note;

  load(R"({"format": "deltac-tuning-db", "version": 2, "records": [
    {"family": "cuda_recurrent", "variant": "gated", "key_dim": 128,
     "value_dim": 128, "in_dtype": "f32", "tile_v": 16, "warps": 2}]})");
  ASSERT_TRUE(rt::choose_config(Device::CUDA, opt, prob, &choice, &err)) << err;
  EXPECT_EQ(choice.config.tile_v, 16);
  EXPECT_EQ(choice.config.warps, 2);
  EXPECT_TRUE(choice.tuned);
  EXPECT_EQ(choice.note, "");
  // The CPU ignores CUDA records.
  ASSERT_TRUE(rt::choose_config(Device::CPU, opt, prob, &choice, &err)) << err;
  EXPECT_FALSE(choice.tuned);
}

// cuda_chunked records with any split and fuse are taken (run-time values
// of the shipped instance); records without them (older databases) run
// split 0 (the kernel's rule) and fuse 0.
TEST_F(TuningDbRun, CudaChunkedRecordsCarrySplitAndFuse) {
  deltac::Problem prob;
  prob.variant = DELTAC_VARIANT_GATED;
  prob.K = prob.V = 128;
  prob.in_dtype = prob.out_dtype = DELTAC_BF16;
  prob.HV = 32;
  prob.max_seqlen = 8192;
  prob.sm_count = 132;
  const deltac_options opt = deltac_default_options();
  rt::Choice choice;
  std::string err;
  const std::string head = R"({"format": "deltac-tuning-db", "version": 2, "records": [
    {"family": "cuda_chunked", "variant": "gated", "key_dim": 128,
     "value_dim": 128, "in_dtype": "bf16", "chunk": 64, "tile_v": 64,
     "warps": 8, "stages": 2)";
  load(head + R"(, "split": 4, "fuse": 1}]})");
  ASSERT_TRUE(rt::choose_config(Device::CUDA, opt, prob, &choice, &err)) << err;
  EXPECT_EQ(choice.config.family, Family::CudaChunked);
  EXPECT_EQ(choice.config.split, 4);
  EXPECT_EQ(choice.config.fuse, 1);
  EXPECT_TRUE(choice.tuned);
  EXPECT_EQ(choice.note, "");
  load(head + "}]}");
  ASSERT_TRUE(rt::choose_config(Device::CUDA, opt, prob, &choice, &err)) << err;
  EXPECT_EQ(choice.config.split, 0);
  EXPECT_EQ(choice.config.fuse, 0);
  EXPECT_TRUE(choice.tuned);
}

// --- through deltac run ---------------------------------------------------

void writeInputs(const test::Problem &pr, const std::string &dir) {
  std::string err;
  auto w = [&](const char *name, const std::vector<int64_t> &shape,
               const std::vector<float> &x) {
    ASSERT_TRUE(npy::write_file(dir + "/" + name, npy::DType::F32, shape,
                                x.data(), &err))
        << err;
  };
  w("q.npy", pr.qShape(), pr.q);
  w("k.npy", pr.qShape(), pr.k);
  w("v.npy", pr.vShape(), pr.v);
  w("beta.npy", pr.betaShape(), pr.beta);
  if (!pr.g.empty())
    w("g.npy", pr.gShape(), pr.g);
}

// Runs the deltac-run binary with an environment prefix; returns the exit
// code, stdout and stderr.
int runBinary(const std::string &env, const std::string &args, std::string *out,
              std::string *err) {
  test::TempDir tmp;
  const char *bin = std::getenv("DELTAC_RUN_BIN");
  std::string cmd = env + " " + (bin ? bin : DELTAC_RUN_BIN) + " " + args +
                    " >" + tmp.file("out") + " 2>" + tmp.file("err");
  int status = std::system(cmd.c_str());
  std::ifstream fo(tmp.file("out")), fe(tmp.file("err"));
  out->assign(std::istreambuf_iterator<char>(fo), {});
  err->assign(std::istreambuf_iterator<char>(fe), {});
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST(TuningDbEnv, DeltacRunReadsTheEnvironmentAndWarnsOnce) {
  test::TempDir dir;
  writeInputs(problem(DELTAC_VARIANT_GATED, 64, 64, 20), dir.path());
  const std::string args = "--variant=gated --inputs=" + dir.path() +
                           " --outputs=" + dir.file("out") +
                           " --device=cpu --stats";
  const std::string good = writeText(
      dir, "good.json",
      oneRecord("cpu_recurrent", DELTAC_VARIANT_GATED, 64, 64, R"("tile_v": 16)"));
  const std::string bad = writeText(dir, "bad.json", "{ not json");
  std::string out, err;
  ASSERT_EQ(runBinary("DELTAC_TUNING_DB=" + good, args, &out, &err), 0) << err;
  EXPECT_NE(out.find("family=cpu_recurrent tile_v=16 (tuning db)"),
            std::string::npos)
      << out;
  EXPECT_EQ(err, "");
  // A corrupt database: the default rule runs, one warning says why.
  ASSERT_EQ(runBinary("DELTAC_TUNING_DB=" + bad, args, &out, &err), 0) << err;
  EXPECT_NE(out.find("family=cpu_recurrent tile_v=32 B="), std::string::npos)
      << out;
  EXPECT_EQ(err, "deltac run: warning: DELTAC_TUNING_DB: tuning db '" + bad +
                     "': not valid JSON; the default rule ran\n");
  // --tuning-db wins over the environment; a bad one is an error.
  ASSERT_EQ(runBinary("DELTAC_TUNING_DB=" + bad, args + " --tuning-db=" + good,
                      &out, &err),
            0)
      << err;
  EXPECT_NE(out.find("tile_v=16 (tuning db)"), std::string::npos) << out;
  EXPECT_EQ(runBinary("", args + " --tuning-db=" + bad, &out, &err), 1);
  EXPECT_NE(err.find("--tuning-db: tuning db '" + bad + "': not valid JSON"),
            std::string::npos)
      << err;
}

} // namespace
} // namespace deltac

// `deltac run` end to end: .npy inputs in a temp dir, run_command (and the
// deltac-run binary), outputs compared with the float64 reference; every bad
// input gives exit code 1, a one-line error naming the file, no outputs.
#include "deltac/cli.h"
#include "deltac/convert.h"
#include "deltac/npy.h"
#include "deltac/runtime.h"

#include "test_util.h"

#include <cstdio>
#include <fstream>
#include <functional>
#include <random>
#include <iterator>
#include <sys/wait.h>

namespace deltac {
namespace {

using npy::Array;
using npy::DType;

struct CliResult {
  int rc;
  std::string out, err;
};

CliResult runCli(const std::vector<std::string> &args) {
  std::vector<std::string> all = {"run"};
  all.insert(all.end(), args.begin(), args.end());
  std::vector<char *> argv;
  for (std::string &a : all)
    argv.push_back(&a[0]);
  argv.push_back(nullptr);
  ::testing::internal::CaptureStdout();
  ::testing::internal::CaptureStderr();
  int rc = run_command(int(all.size()), argv.data());
  CliResult r;
  r.err = ::testing::internal::GetCapturedStderr();
  r.out = ::testing::internal::GetCapturedStdout();
  r.rc = rc;
  return r;
}

void writeF32(const std::string &path, const std::vector<int64_t> &shape,
              const std::vector<float> &x) {
  std::string err;
  ASSERT_TRUE(npy::write_file(path, DType::F32, shape, x.data(), &err)) << err;
}

// Writes the problem's inputs as the CLI expects them.
void writeInputs(const test::Problem &pr, const std::string &dir,
                 bool cuAsInt32 = false) {
  writeF32(dir + "/q.npy", pr.qShape(), pr.q);
  writeF32(dir + "/k.npy", pr.qShape(), pr.k);
  writeF32(dir + "/v.npy", pr.vShape(), pr.v);
  writeF32(dir + "/beta.npy", pr.betaShape(), pr.beta);
  if (!pr.g.empty())
    writeF32(dir + "/g.npy", pr.gShape(), pr.g);
  if (pr.withH0)
    writeF32(dir + "/h0.npy", pr.stateShape(), pr.h0);
  if (!pr.cu.empty()) {
    std::string err;
    int64_t n = int64_t(pr.cu.size());
    if (cuAsInt32) {
      std::vector<int32_t> c(pr.cu.begin(), pr.cu.end());
      ASSERT_TRUE(npy::write_file(dir + "/cu_seqlens.npy", DType::I32, {n},
                                  c.data(), &err));
    } else {
      ASSERT_TRUE(npy::write_file(dir + "/cu_seqlens.npy", DType::I64, {n},
                                  pr.cu.data(), &err));
    }
  }
}

Array readArray(const std::string &path) {
  Array a;
  std::string err;
  EXPECT_TRUE(npy::read_file(path, &a, &err)) << path << ": " << err;
  return a;
}

const char *variantName(int v) {
  return v == 0 ? "delta" : v == 1 ? "gated" : "kda";
}

// Compares outdir/o.npy and outdir/ht.npy with the reference of pr.
void expectOutputsMatch(const test::Problem &pr, const std::string &outDir,
                        double tol, bool bf16 = false, bool l2norm = false,
                        float scale = 0.f) {
  std::vector<uint16_t> q16, k16, v16;
  std::vector<float> dummyO;
  deltac_fwd_params p = pr.params(nullptr, nullptr);
  if (bf16) {
    q16 = test::toBf16(pr.q);
    k16 = test::toBf16(pr.k);
    v16 = test::toBf16(pr.v);
    p.in_dtype = DELTAC_BF16;
    p.q = q16.data();
    p.k = k16.data();
    p.v = v16.data();
  }
  p.qk_l2norm = l2norm;
  if (scale != 0.f)
    p.scale = scale;
  std::vector<double> oRef, htRef;
  ref::forward(p, &oRef, &htRef);
  Array o = readArray(outDir + "/o.npy");
  Array ht = readArray(outDir + "/ht.npy");
  ASSERT_EQ(o.dtype, DType::F32);
  ASSERT_EQ(ht.dtype, DType::F32);
  ASSERT_EQ(o.shape, pr.vShape());
  ASSERT_EQ(ht.shape, pr.stateShape());
  EXPECT_LE(ref::rel_rms(o.as<float>(), oRef), tol) << "o.npy";
  EXPECT_LE(ref::rel_rms(ht.as<float>(), htRef), tol) << "ht.npy";
}

test::Problem smallProblem(int variant, uint64_t seed, bool varlen = false) {
  test::Problem pr;
  pr.variant = variant;
  pr.B = varlen ? 1 : 2;
  pr.T = 45;
  pr.H = 1;
  pr.HV = 2;
  pr.K = 32;
  pr.V = 64;
  if (varlen)
    pr.cu = {0, 10, 10, 30, 45};
  pr.fill(seed);
  return pr;
}

// --- success -----------------------------------------------------------------

class CliRun
    : public ::testing::TestWithParam<std::tuple<int, std::string, bool>> {};

TEST_P(CliRun, MatchesReference) {
  auto [variant, mode, varlen] = GetParam();
  uint64_t seed = test::freshSeed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  test::TempDir dir;
  test::Problem pr = smallProblem(variant, seed, varlen);
  writeInputs(pr, dir.path(), /*cuAsInt32=*/seed % 2);
  std::string out = dir.file("out");
  CliResult r = runCli({"--variant=" + std::string(variantName(variant)),
                        "--inputs=" + dir.path(), "--outputs=" + out,
                        "--device=cpu", "--mode=" + mode});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(r.err, "");
  expectOutputsMatch(pr, out, 1e-5);
  EXPECT_EQ(test::listDir(out), std::vector<std::string>({"ht.npy", "o.npy"}));
}

INSTANTIATE_TEST_SUITE_P(
    Cli, CliRun,
    ::testing::Combine(::testing::Values(0, 1, 2),
                       ::testing::Values("auto", "chunked", "recurrent"),
                       ::testing::Bool()),
    [](const auto &info) {
      return std::string(variantName(std::get<0>(info.param))) + "_" +
             std::get<1>(info.param) +
             (std::get<2>(info.param) ? "_varlen" : "_batch");
    });

class CliBf16 : public ::testing::TestWithParam<int> {};

TEST_P(CliBf16, MatchesReference) {
  uint64_t seed = test::freshSeed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  test::TempDir dir;
  test::Problem pr = smallProblem(GetParam(), seed);
  writeInputs(pr, dir.path());
  CliResult r = runCli({std::string("--variant=") + variantName(GetParam()),
                        "--inputs", dir.path(), "--outputs", dir.path(),
                        "--dtype=bf16", "--device=cpu"});
  ASSERT_EQ(r.rc, 0) << r.err;
  // bf16 rounds the inputs only: f32 arithmetic and an f32 o, so o matches
  // the reference on the rounded inputs at the f32 tolerance (a bf16 o
  // would be ~2e-3 off).
  expectOutputsMatch(pr, dir.path(), 1e-5, /*bf16=*/true);
  Array o = readArray(dir.file("o.npy"));
  size_t exact = 0;
  for (int64_t i = 0; i < o.count(); ++i)
    exact += bf16_to_f32(f32_to_bf16(o.as<float>()[i])) == o.as<float>()[i];
  EXPECT_LT(exact, size_t(o.count()) / 2) << "o.npy looks rounded to bf16";
}

INSTANTIATE_TEST_SUITE_P(Cli, CliBf16, ::testing::Values(0, 1, 2),
                         [](const auto &info) {
                           return std::string(variantName(info.param));
                         });

TEST(Cli, ChunkSizes) {
  for (const char *chunk : {"16", "32", "64"}) {
    uint64_t seed = test::freshSeed();
    SCOPED_TRACE(std::string("chunk ") + chunk + " seed " +
                 std::to_string(seed));
    test::TempDir dir;
    test::Problem pr = smallProblem(2, seed, true);
    writeInputs(pr, dir.path());
    CliResult r = runCli({"--variant=kda", "--inputs=" + dir.path(),
                          "--outputs=" + dir.path(), "--mode=chunked",
                          std::string("--chunk=") + chunk, "--threads=1"});
    ASSERT_EQ(r.rc, 0) << r.err;
    expectOutputsMatch(pr, dir.path(), 1e-5);
  }
}

// --chunk-states writes chunk_states.npy [chunks, HV, K, V] beside o and ht
// (varlen with an empty sequence: 1 + 0 + 2 + 1 chunks of 16 tokens), the
// reference's state after each chunk; without --chunk it is an error and
// nothing is written.
TEST(Cli, ChunkStates) {
  uint64_t seed = test::freshSeed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  test::TempDir dir;
  test::Problem pr = smallProblem(1, seed, true);
  writeInputs(pr, dir.path());
  const std::string out = dir.file("out");
  CliResult bad = runCli({"--variant=gated", "--inputs=" + dir.path(), "--outputs=" + out,
                          "--chunk-states", "--device=cpu"});
  EXPECT_EQ(bad.rc, 1);
  EXPECT_NE(bad.err.find("--chunk-states: needs --chunk"), std::string::npos) << bad.err;
  EXPECT_FALSE(test::fileExists(out));
  CliResult r = runCli({"--variant=gated", "--inputs=" + dir.path(), "--outputs=" + out,
                        "--chunk=16", "--chunk-states", "--device=cpu"});
  ASSERT_EQ(r.rc, 0) << r.err;
  expectOutputsMatch(pr, out, 1e-5);
  deltac_fwd_params p = pr.params(nullptr, nullptr);
  std::vector<double> oRef, htRef;
  const std::vector<double> want = test::expectedChunkStates(p, 16, &oRef, &htRef);
  Array cs = readArray(out + "/chunk_states.npy");
  ASSERT_EQ(cs.dtype, DType::F32);
  ASSERT_EQ(cs.shape, (std::vector<int64_t>{4, pr.HV, pr.K, pr.V}));
  EXPECT_LE(ref::rel_rms(cs.as<float>(), want), 1e-5) << "chunk_states.npy";
}

// --deterministic (batch-invariant mode) runs and matches the reference.
TEST(Cli, Deterministic) {
  uint64_t seed = test::freshSeed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  test::TempDir dir;
  test::Problem pr = smallProblem(1, seed, true);
  writeInputs(pr, dir.path());
  CliResult r = runCli({"--variant=gated", "--inputs=" + dir.path(),
                        "--outputs=" + dir.path(), "--deterministic", "--device=cpu"});
  ASSERT_EQ(r.rc, 0) << r.err;
  expectOutputsMatch(pr, dir.path(), 1e-5);
}

TEST(Cli, L2NormScaleAndNegativeEigenvalues) {
  uint64_t seed = test::freshSeed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  test::TempDir dir;
  test::Problem pr = smallProblem(1, seed);
  for (float &x : pr.q)
    x *= 4.f;
  for (float &x : pr.k)
    x *= 2.f;
  for (size_t i = 0; i < pr.beta.size(); ++i)
    pr.beta[i] *= 2.f; // [0, 2]
  writeInputs(pr, dir.path());
  CliResult bad = runCli({"--variant=gated", "--inputs=" + dir.path(),
                          "--outputs=" + dir.file("out"), "--qk-l2norm"});
  EXPECT_EQ(bad.rc, 1);
  EXPECT_NE(bad.err.find("beta.npy"), std::string::npos) << bad.err;
  EXPECT_NE(bad.err.find("--allow-neg-eigval"), std::string::npos) << bad.err;
  CliResult r = runCli({"--variant=gated", "--inputs=" + dir.path(),
                        "--outputs=" + dir.file("out"), "--qk-l2norm",
                        "--allow-neg-eigval", "--scale=0.25", "--device=cpu"});
  ASSERT_EQ(r.rc, 0) << r.err;
  expectOutputsMatch(pr, dir.file("out"), 1e-5, false, /*l2norm=*/true, 0.25f);
}

// --beta-sigmoid and --gate-in-kernel: the CLI computes beta and g from
// logits; the expectation is computed independently here in double.
TEST(Cli, BetaSigmoidAndGateInKernel) {
  for (int variant : {1, 2}) {
    for (bool negEig : {false, true}) {
      uint64_t seed = test::freshSeed();
      SCOPED_TRACE("seed " + std::to_string(seed));
      std::mt19937_64 rng(seed);
      std::normal_distribution<float> n01(0.f, 1.f);
      std::uniform_real_distribution<float> u(-2.f, 0.5f);
      test::TempDir dir;
      test::Problem pr = smallProblem(variant, seed, variant == 2);
      const int width = variant == 2 ? pr.K : 1;
      std::vector<float> logits(pr.beta.size()), a(pr.g.size()), aLog(pr.HV),
          dtBias(size_t(pr.HV) * width);
      for (float &x : logits)
        x = 2.f * n01(rng);
      for (float &x : a)
        x = n01(rng);
      for (float &x : aLog)
        x = u(rng);
      for (float &x : dtBias)
        x = 0.5f * n01(rng);
      writeInputs(pr, dir.path());
      writeF32(dir.file("beta.npy"), pr.betaShape(), logits);
      writeF32(dir.file("g.npy"), pr.gShape(), a);
      writeF32(dir.file("A_log.npy"), {pr.HV}, aLog);
      if (variant == 2)
        writeF32(dir.file("dt_bias.npy"), {pr.HV, pr.K}, dtBias);
      else
        writeF32(dir.file("dt_bias.npy"), {pr.HV}, dtBias);
      std::vector<std::string> args = {
          std::string("--variant=") + variantName(variant),
          "--inputs=" + dir.path(), "--outputs=" + dir.file("out"),
          "--beta-sigmoid", "--gate-in-kernel", "--device=cpu"};
      if (negEig)
        args.push_back("--allow-neg-eigval");
      CliResult r = runCli(args);
      ASSERT_EQ(r.rc, 0) << r.err;
      for (size_t i = 0; i < logits.size(); ++i)
        pr.beta[i] = float((negEig ? 2.0 : 1.0) / (1.0 + std::exp(-double(logits[i]))));
      for (size_t i = 0; i < a.size(); ++i) {
        size_t h = (i / width) % pr.HV, c = i % width;
        double x = double(a[i]) + dtBias[h * width + c];
        pr.g[i] = float(-std::exp(double(aLog[h])) * std::log1p(std::exp(x)));
      }
      expectOutputsMatch(pr, dir.file("out"), 1e-5);
    }
  }
}

TEST(Cli, NoInitialStateAndNestedOutputDir) {
  uint64_t seed = test::freshSeed();
  test::TempDir dir;
  test::Problem pr = smallProblem(0, seed);
  pr.withH0 = false;
  pr.h0.clear();
  writeInputs(pr, dir.path());
  std::string out = dir.file("a/b/c");
  CliResult r = runCli({"--variant=delta", "--inputs=" + dir.path(),
                        "--outputs=" + out + "/", "--device=cpu"});
  ASSERT_EQ(r.rc, 0) << r.err;
  expectOutputsMatch(pr, out, 1e-5);
}

TEST(Cli, StatsAndHelp) {
  test::TempDir dir;
  test::Problem pr = smallProblem(1, test::freshSeed());
  writeInputs(pr, dir.path());
  CliResult r = runCli({"--variant=gated", "--inputs=" + dir.path(),
                        "--outputs=" + dir.path(), "--stats", "--device=cpu"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("tokens/s="), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("device=cpu"), std::string::npos) << r.out;
  // No --mode: auto, the catalogue's rule: the recurrence for short calls.
  EXPECT_NE(r.out.find("mode=recurrent"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("family=cpu_recurrent tile_v=32"), std::string::npos)
      << r.out;

  CliResult h = runCli({"--help"});
  EXPECT_EQ(h.rc, 0);
  for (const char *m : {"--variant=delta|gated|kda", "--allow-neg-eigval",
                        "--beta-sigmoid", "--gate-in-kernel", "A_log.npy",
                        "dt_bias.npy", "without --gate-in-kernel is an"})
    EXPECT_NE(h.out.find(m), std::string::npos) << m;
  EXPECT_EQ(h.err, "");
}

TEST(Cli, DecodeAutoIsRecurrent) {
  test::TempDir dir;
  test::Problem pr = smallProblem(2, test::freshSeed());
  pr.T = 1;
  pr.fill(test::freshSeed());
  writeInputs(pr, dir.path());
  CliResult r = runCli({"--variant=kda", "--inputs=" + dir.path(),
                        "--outputs=" + dir.path(), "--stats"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("mode=recurrent"), std::string::npos) << r.out;
  expectOutputsMatch(pr, dir.path(), 1e-5);
}

// --- the executable ------------------------------------------------------------

int runBinary(const std::string &args, std::string *errOut) {
  test::TempDir tmp;
  // DELTAC_RUN_BIN in the environment overrides the build path (for a
  // binary run elsewhere, as on the GPU machine).
  const char *bin = std::getenv("DELTAC_RUN_BIN");
  std::string cmd = std::string(bin ? bin : DELTAC_RUN_BIN) + " " + args + " >" +
                    tmp.file("out") + " 2>" + tmp.file("err");
  int status = std::system(cmd.c_str());
  std::ifstream f(tmp.file("err"));
  errOut->assign(std::istreambuf_iterator<char>(f), {});
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST(CliBinary, RunsAndFails) {
  test::TempDir dir;
  test::Problem pr = smallProblem(1, test::freshSeed(), true);
  writeInputs(pr, dir.path());
  std::string err;
  EXPECT_EQ(runBinary("--variant=gated --inputs=" + dir.path() +
                          " --outputs=" + dir.file("o") + " --device=cpu",
                      &err),
            0)
      << err;
  expectOutputsMatch(pr, dir.file("o"), 1e-5);
  // `deltac-run run ...` is accepted too.
  EXPECT_EQ(runBinary("run --variant=gated --inputs=" + dir.path() +
                          " --outputs=" + dir.file("o2") + " --device=cpu",
                      &err),
            0)
      << err;
  EXPECT_EQ(runBinary("--variant=gated --inputs=" + dir.path() +
                          " --outputs=" + dir.file("o3") + " --bogus",
                      &err),
            1);
  EXPECT_NE(err.find("unknown flag '--bogus'"), std::string::npos) << err;
  EXPECT_FALSE(test::fileExists(dir.file("o3")));
  EXPECT_EQ(runBinary("--help", &err), 0);
}

// --- bad inputs ------------------------------------------------------------------

struct BadCase {
  const char *name;
  int variant;
  bool varlen;
  // Breaks the inputs in dir (after the valid ones were written).
  std::function<void(const std::string &dir, test::Problem &pr)> breakIt;
  std::vector<std::string> extraArgs;
  std::vector<std::string> mention; // all must appear in the error
};

void writeRaw(const std::string &path, const std::string &bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), std::streamsize(bytes.size()));
}

std::string readRaw(const std::string &path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

template <class T>
void writeTyped(const std::string &path, DType t,
                const std::vector<int64_t> &shape, const std::vector<T> &x) {
  std::string err;
  ASSERT_TRUE(npy::write_file(path, t, shape, x.data(), &err)) << err;
}

std::vector<float> filled(size_t n, float v) { return std::vector<float>(n, v); }

using P = test::Problem;
const std::vector<BadCase> &badCases() {
  static const std::vector<BadCase> cases = {
      {"missing_q", 1, false,
       [](auto &d, P &) { std::remove((d + "/q.npy").c_str()); }, {},
       {"q.npy", "file not found"}},
      {"missing_k", 1, false,
       [](auto &d, P &) { std::remove((d + "/k.npy").c_str()); }, {},
       {"k.npy", "not found"}},
      {"missing_v", 1, false,
       [](auto &d, P &) { std::remove((d + "/v.npy").c_str()); }, {},
       {"v.npy", "not found"}},
      {"missing_beta", 1, false,
       [](auto &d, P &) { std::remove((d + "/beta.npy").c_str()); }, {},
       {"beta.npy", "not found"}},
      {"missing_g_gated", 1, false,
       [](auto &d, P &) { std::remove((d + "/g.npy").c_str()); }, {},
       {"g.npy", "not found", "gated"}},
      {"g_for_delta", 0, false,
       [](auto &d, P &pr) {
         writeF32(d + "/g.npy", {pr.B, pr.T, pr.HV},
                  filled(size_t(pr.B * pr.T * pr.HV), -0.1f));
       },
       {}, {"g.npy", "delta"}},
      {"q_rank3", 1, false,
       [](auto &d, P &pr) {
         writeF32(d + "/q.npy", {pr.B, pr.T, pr.H * pr.K}, pr.q);
       },
       {}, {"q.npy", "rank 4"}},
      {"q_float64", 1, false,
       [](auto &d, P &pr) {
         std::vector<double> x(pr.q.begin(), pr.q.end());
         writeTyped(d + "/q.npy", DType::F64, pr.qShape(), x);
       },
       {}, {"q.npy", "float64", "expected float32"}},
      {"v_int32", 1, false,
       [](auto &d, P &pr) {
         std::vector<int32_t> x(pr.v.size(), 1);
         writeTyped(d + "/v.npy", DType::I32, pr.vShape(), x);
       },
       {}, {"v.npy", "int32", "float32"}},
      {"q_truncated", 1, false,
       [](auto &d, P &) {
         std::string s = readRaw(d + "/q.npy");
         writeRaw(d + "/q.npy", s.substr(0, s.size() - 5));
       },
       {}, {"q.npy", "truncated"}},
      {"k_bad_magic", 1, false,
       [](auto &d, P &) { writeRaw(d + "/k.npy", "hello, not numpy at all"); },
       {}, {"k.npy", "bad magic"}},
      {"beta_corrupt_header", 1, false,
       [](auto &d, P &) {
         std::string s = readRaw(d + "/beta.npy");
         s[20] = '#';
         writeRaw(d + "/beta.npy", s);
       },
       {}, {"beta.npy", "header"}},
      {"v_fortran", 1, false,
       [](auto &d, P &) {
         std::string s = readRaw(d + "/v.npy");
         size_t at = s.find("False");
         s.replace(at, 5, "True ");
         writeRaw(d + "/v.npy", s);
       },
       {}, {"v.npy", "fortran_order"}},
      {"h0_big_endian", 1, false,
       [](auto &d, P &) {
         std::string s = readRaw(d + "/h0.npy");
         s[s.find("<f4")] = '>';
         writeRaw(d + "/h0.npy", s);
       },
       {}, {"h0.npy", "big-endian"}},
      {"k_shape_mismatch", 1, false,
       [](auto &d, P &pr) {
         std::vector<float> x(size_t(pr.B) * pr.T * pr.H * 16, 0.1f);
         writeF32(d + "/k.npy", {pr.B, pr.T, pr.H, 16}, x);
       },
       {}, {"k.npy", "(as ", "/q.npy)"}},
      {"v_batch_mismatch", 1, false,
       [](auto &d, P &pr) {
         writeF32(d + "/v.npy", {1, pr.T * pr.B, pr.HV, pr.V}, pr.v);
       },
       {}, {"v.npy", "B = 2"}},
      {"hv_not_multiple", 1, false,
       [](auto &d, P &pr) {
         // H = 2 query heads, HV = 3 value heads.
         std::vector<float> q(size_t(pr.B) * pr.T * 2 * pr.K, 0.1f);
         writeF32(d + "/q.npy", {pr.B, pr.T, 2, pr.K}, q);
         writeF32(d + "/k.npy", {pr.B, pr.T, 2, pr.K}, q);
         std::vector<float> v(size_t(pr.B) * pr.T * 3 * pr.V, 0.1f);
         writeF32(d + "/v.npy", {pr.B, pr.T, 3, pr.V}, v);
       },
       {}, {"v.npy", "HV = 3", "multiple of H = 2"}},
      {"k_dim_24", 1, false,
       [](auto &d, P &pr) {
         std::vector<float> q(size_t(pr.B) * pr.T * pr.H * 24, 0.1f);
         writeF32(d + "/q.npy", {pr.B, pr.T, pr.H, 24}, q);
         writeF32(d + "/k.npy", {pr.B, pr.T, pr.H, 24}, q);
       },
       {}, {"q.npy", "K = 24", "multiple of 16"}},
      {"v_dim_272", 1, false,
       [](auto &d, P &pr) {
         std::vector<float> v(size_t(pr.B) * pr.T * pr.HV * 272, 0.1f);
         writeF32(d + "/v.npy", {pr.B, pr.T, pr.HV, 272}, v);
       },
       {}, {"v.npy", "V = 272"}},
      {"zero_tokens", 1, false,
       [](auto &d, P &pr) {
         writeF32(d + "/q.npy", {pr.B, 0, pr.H, pr.K}, {});
       },
       {}, {"q.npy", "> 0"}},
      {"beta_shape", 1, false,
       [](auto &d, P &pr) {
         writeF32(d + "/beta.npy", {pr.B, pr.T, pr.HV, 1}, pr.beta);
       },
       {}, {"beta.npy", "[B, T, HV]"}},
      {"beta_above_one", 1, false,
       [](auto &d, P &pr) {
         pr.beta[7] = 1.5f;
         writeF32(d + "/beta.npy", pr.betaShape(), pr.beta);
       },
       {}, {"beta.npy", "element 7", "[0, 1]"}},
      {"beta_above_two", 1, false,
       [](auto &d, P &pr) {
         pr.beta[3] = 2.5f;
         writeF32(d + "/beta.npy", pr.betaShape(), pr.beta);
       },
       {"--allow-neg-eigval"}, {"beta.npy", "[0, 2]"}},
      {"beta_negative", 1, false,
       [](auto &d, P &pr) {
         pr.beta[0] = -0.01f;
         writeF32(d + "/beta.npy", pr.betaShape(), pr.beta);
       },
       {}, {"beta.npy", "element 0"}},
      {"beta_nan", 1, false,
       [](auto &d, P &pr) {
         pr.beta[5] = std::nanf("");
         writeF32(d + "/beta.npy", pr.betaShape(), pr.beta);
       },
       {}, {"beta.npy", "nan"}},
      {"g_positive", 1, false,
       [](auto &d, P &pr) {
         pr.g[11] = 0.5f;
         writeF32(d + "/g.npy", pr.gShape(), pr.g);
       },
       {}, {"g.npy", "element 11", "<= 0"}},
      {"g_plus_inf", 2, false,
       [](auto &d, P &pr) {
         pr.g[2] = INFINITY;
         writeF32(d + "/g.npy", pr.gShape(), pr.g);
       },
       {}, {"g.npy", "element 2", "inf", "<= 0"}},
      {"g_nan", 1, false,
       [](auto &d, P &pr) {
         pr.g[0] = std::nanf("");
         writeF32(d + "/g.npy", pr.gShape(), pr.g);
       },
       {}, {"g.npy", "element 0", "nan", "<= 0"}},
      {"h0_nan", 1, false,
       [](auto &d, P &pr) {
         pr.h0[9] = std::nanf("");
         writeF32(d + "/h0.npy", pr.stateShape(), pr.h0);
       },
       {}, {"h0.npy", "element 9", "finite"}},
      {"v_inf_bf16", 1, false,
       [](auto &d, P &pr) {
         pr.v[6] = -INFINITY;
         writeF32(d + "/v.npy", pr.vShape(), pr.v);
       },
       {"--dtype=bf16"}, {"v.npy", "element 6", "-inf", "finite"}},
      {"kda_g_gated_shape", 2, false,
       [](auto &d, P &pr) {
         writeF32(d + "/g.npy", {pr.B, pr.T, pr.HV},
                  filled(size_t(pr.B * pr.T * pr.HV), -0.1f));
       },
       {}, {"g.npy", "[B, T, HV, K]", "kda"}},
      {"q_inf", 1, false,
       [](auto &d, P &pr) {
         pr.q[4] = INFINITY;
         writeF32(d + "/q.npy", pr.qShape(), pr.q);
       },
       {}, {"q.npy", "element 4", "finite"}},
      {"h0_wrong_n", 1, false,
       [](auto &d, P &pr) {
         std::vector<float> h(size_t(3) * pr.HV * pr.K * pr.V, 0.f);
         writeF32(d + "/h0.npy", {3, pr.HV, pr.K, pr.V}, h);
       },
       {}, {"h0.npy", "N = B"}},
      {"h0_wrong_n_varlen", 1, true,
       [](auto &d, P &pr) {
         std::vector<float> h(size_t(1) * pr.HV * pr.K * pr.V, 0.f);
         writeF32(d + "/h0.npy", {1, pr.HV, pr.K, pr.V}, h);
       },
       {}, {"h0.npy", "cu_seqlens.npy"}},
      {"cu_not_zero_start", 1, true,
       [](auto &d, P &pr) {
         writeTyped<int64_t>(d + "/cu_seqlens.npy", DType::I64, {3},
                             {1, 20, pr.T});
       },
       {}, {"cu_seqlens.npy", "cu_seqlens[0] = 1"}},
      {"cu_decreasing", 1, true,
       [](auto &d, P &pr) {
         writeTyped<int32_t>(d + "/cu_seqlens.npy", DType::I32, {4},
                             {0, 20, 10, pr.T});
       },
       {}, {"cu_seqlens.npy", "non-decreasing"}},
      {"cu_wrong_end", 1, true,
       [](auto &d, P &pr) {
         writeTyped<int64_t>(d + "/cu_seqlens.npy", DType::I64, {3},
                             {0, 20, pr.T - 1});
       },
       {}, {"cu_seqlens.npy", "expected T = 45"}},
      {"cu_with_batch", 1, false,
       [](auto &d, P &pr) {
         writeTyped<int64_t>(d + "/cu_seqlens.npy", DType::I64, {2}, {0, pr.T});
       },
       {}, {"cu_seqlens.npy", "B = 1", "B = 2"}},
      {"cu_float", 1, true,
       [](auto &d, P &) {
         writeF32(d + "/cu_seqlens.npy", {3}, {0.f, 20.f, 45.f});
       },
       {}, {"cu_seqlens.npy", "int32 or int64"}},
      {"cu_rank2", 1, true,
       [](auto &d, P &) {
         writeTyped<int64_t>(d + "/cu_seqlens.npy", DType::I64, {1, 2}, {0, 45});
       },
       {}, {"cu_seqlens.npy", "rank 1"}},
      {"cu_single_entry", 1, true,
       [](auto &d, P &) {
         writeTyped<int64_t>(d + "/cu_seqlens.npy", DType::I64, {1}, {0});
       },
       {}, {"cu_seqlens.npy", "N >= 1"}},
      {"beta_logits_nan", 1, false,
       [](auto &d, P &pr) {
         pr.beta[1] = std::nanf("");
         writeF32(d + "/beta.npy", pr.betaShape(), pr.beta);
       },
       {"--beta-sigmoid"}, {"beta.npy", "element 1", "finite"}},
      {"gate_missing_a_log", 1, false, [](auto &, P &) {}, {"--gate-in-kernel"},
       {"A_log.npy", "file not found"}},
      {"gate_a_log_without_flag", 1, false,
       [](auto &d, P &pr) {
         writeF32(d + "/A_log.npy", {pr.HV}, filled(size_t(pr.HV), 0.f));
       },
       {}, {"A_log.npy", "--gate-in-kernel is not set"}},
      {"gate_dt_bias_shape_kda", 2, false,
       [](auto &d, P &pr) {
         writeF32(d + "/A_log.npy", {pr.HV}, filled(size_t(pr.HV), 0.f));
         writeF32(d + "/dt_bias.npy", {pr.HV}, filled(size_t(pr.HV), 0.f));
       },
       {"--gate-in-kernel"}, {"dt_bias.npy", "[HV, K]"}},
      {"gate_a_log_wrong_heads", 1, false,
       [](auto &d, P &pr) {
         writeF32(d + "/A_log.npy", {pr.HV + 1}, filled(size_t(pr.HV + 1), 0.f));
         writeF32(d + "/dt_bias.npy", {pr.HV}, filled(size_t(pr.HV), 0.f));
       },
       {"--gate-in-kernel"}, {"A_log.npy", "[HV]"}},
      {"gate_overflow", 1, false,
       [](auto &d, P &pr) {
         writeF32(d + "/A_log.npy", {pr.HV}, filled(size_t(pr.HV), 100.f));
         writeF32(d + "/dt_bias.npy", {pr.HV}, filled(size_t(pr.HV), 0.f));
       },
       {"--gate-in-kernel"}, {"A_log.npy", "overflows"}},
      {"gate_input_inf", 1, false,
       [](auto &d, P &pr) {
         writeF32(d + "/A_log.npy", {pr.HV}, filled(size_t(pr.HV), 0.f));
         writeF32(d + "/dt_bias.npy", {pr.HV}, filled(size_t(pr.HV), 0.f));
         pr.g[3] = INFINITY;
         writeF32(d + "/g.npy", pr.gShape(), pr.g);
       },
       {"--gate-in-kernel"}, {"g.npy", "element 3"}},
      {"q_is_directory", 1, false,
       [](auto &d, P &) {
         std::remove((d + "/q.npy").c_str());
         ::mkdir((d + "/q.npy").c_str(), 0755);
       },
       {}, {"q.npy", "not a regular file"}},
  };
  return cases;
}

class CliBadInput : public ::testing::TestWithParam<size_t> {};

TEST_P(CliBadInput, OneLineErrorNoOutputs) {
  const BadCase &c = badCases()[GetParam()];
  test::TempDir dir;
  test::Problem pr = smallProblem(c.variant, test::freshSeed(), c.varlen);
  writeInputs(pr, dir.path());
  c.breakIt(dir.path(), pr);
  std::string out = dir.file("out");
  std::vector<std::string> args = {
      std::string("--variant=") + variantName(c.variant),
      "--inputs=" + dir.path(), "--outputs=" + out, "--device=cpu"};
  args.insert(args.end(), c.extraArgs.begin(), c.extraArgs.end());
  CliResult r = runCli(args);
  EXPECT_EQ(r.rc, 1);
  ASSERT_FALSE(r.err.empty());
  EXPECT_EQ(r.err.rfind("deltac run: error: ", 0), 0u) << r.err;
  EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << "one line: " << r.err;
  for (const std::string &m : c.mention)
    EXPECT_NE(r.err.find(m), std::string::npos)
        << "error '" << r.err << "' lacks '" << m << "'";
  EXPECT_FALSE(test::fileExists(out)) << "outputs dir was created";
  EXPECT_EQ(r.out, "");
}

INSTANTIATE_TEST_SUITE_P(Cli, CliBadInput,
                         ::testing::Range(size_t(0), badCases().size()),
                         [](const auto &info) {
                           return std::string(badCases()[info.param].name);
                         });

// Flag errors: exit 1, one line naming the flag, nothing written.
struct BadFlags {
  const char *name;
  std::vector<std::string> args; // DIR is replaced by the inputs dir
  std::string mention;
};

class CliBadFlags : public ::testing::TestWithParam<BadFlags> {};

TEST_P(CliBadFlags, Rejected) {
  test::TempDir dir;
  test::Problem pr = smallProblem(1, test::freshSeed());
  writeInputs(pr, dir.path());
  std::vector<std::string> args;
  for (std::string a : GetParam().args) {
    size_t at = a.find("DIR");
    if (at != std::string::npos)
      a.replace(at, 3, dir.path());
    args.push_back(a);
  }
  // A stale output from an earlier run must survive a failed run untouched.
  ::mkdir(dir.file("out").c_str(), 0755);
  writeRaw(dir.file("out/o.npy"), "old");
  CliResult r = runCli(args);
  EXPECT_EQ(r.rc, 1);
  EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << r.err;
  EXPECT_NE(r.err.find(GetParam().mention), std::string::npos)
      << "'" << r.err << "' lacks '" << GetParam().mention << "'";
  EXPECT_EQ(test::listDir(dir.file("out")), std::vector<std::string>({"o.npy"}));
  EXPECT_EQ(readRaw(dir.file("out/o.npy")), "old");
}

const std::string kIn = "--inputs=DIR", kOut = "--outputs=DIR/out";
INSTANTIATE_TEST_SUITE_P(
    Cli, CliBadFlags,
    ::testing::Values(
        BadFlags{"unknown_flag", {"--variant=gated", kIn, kOut, "--fast"},
                 "unknown flag '--fast'"},
        BadFlags{"bad_variant", {"--variant=mamba", kIn, kOut}, "--variant=mamba"},
        BadFlags{"missing_variant", {kIn, kOut}, "missing --variant"},
        BadFlags{"missing_inputs", {"--variant=gated", kOut}, "--inputs"},
        BadFlags{"missing_outputs", {"--variant=gated", kIn}, "--outputs"},
        BadFlags{"bad_chunk", {"--variant=gated", kIn, kOut, "--chunk=48"},
                 "--chunk=48"},
        BadFlags{"chunk_recurrent",
                 {"--variant=gated", kIn, kOut, "--chunk=32", "--mode=recurrent"},
                 "recurrent"},
        BadFlags{"bad_mode", {"--variant=gated", kIn, kOut, "--mode=fast"},
                 "--mode=fast"},
        BadFlags{"bad_device", {"--variant=gated", kIn, kOut, "--device=tpu"},
                 "--device=tpu"},
        BadFlags{"bad_dtype", {"--variant=gated", kIn, kOut, "--dtype=f16"},
                 "--dtype=f16"},
        BadFlags{"negative_scale", {"--variant=gated", kIn, kOut, "--scale=-1"},
                 "--scale=-1"},
        BadFlags{"text_scale", {"--variant=gated", kIn, kOut, "--scale=abc"},
                 "--scale=abc"},
        BadFlags{"inf_scale", {"--variant=gated", kIn, kOut, "--scale=1e300"},
                 "--scale=1e300"},
        BadFlags{"negative_threads", {"--variant=gated", kIn, kOut, "--threads=-2"},
                 "--threads=-2"},
        BadFlags{"value_on_switch", {"--variant=gated", kIn, kOut, "--stats=1"},
                 "--stats takes no value"},
        BadFlags{"positional", {"--variant=gated", kIn, kOut, "extra"},
                 "unexpected argument 'extra'"},
        BadFlags{"repeated", {"--variant=gated", "--variant=kda", kIn, kOut},
                 "given twice"},
        BadFlags{"missing_value", {"--variant=gated", kIn, kOut, "--chunk"},
                 "--chunk: missing value"},
        BadFlags{"gate_in_kernel_delta",
                 {"--variant=delta", kIn, kOut, "--gate-in-kernel"},
                 "--gate-in-kernel"},
        BadFlags{"inputs_missing_dir",
                 {"--variant=gated", "--inputs=DIR/nope", kOut},
                 "input directory not found"},
        BadFlags{"outputs_is_file",
                 {"--variant=gated", kIn, "--outputs=DIR/q.npy"},
                 "not a directory"}),
    [](const auto &info) { return std::string(info.param.name); });

// A FIFO input is refused at once instead of waiting for a writer.
TEST(Cli, FifoInputFailsFast) {
  test::TempDir dir;
  test::Problem pr = smallProblem(1, test::freshSeed());
  writeInputs(pr, dir.path());
  std::string g = dir.file("g.npy");
  ASSERT_EQ(std::remove(g.c_str()), 0);
  ASSERT_EQ(::mkfifo(g.c_str(), 0600), 0);
  CliResult r{};
  EXPECT_TRUE(test::finishesDespiteFifo(g, [&] {
    r = runCli({"--variant=gated", "--inputs=" + dir.path(),
                "--outputs=" + dir.file("out"), "--device=cpu"});
  })) << "deltac run blocked on a FIFO input";
  EXPECT_EQ(r.rc, 1);
  EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << r.err;
  EXPECT_NE(r.err.find("g.npy: not a regular file"), std::string::npos)
      << r.err;
  EXPECT_FALSE(test::fileExists(dir.file("out")));
}

// A directory where o.npy or ht.npy goes fails the run before anything is
// written, so the two renames cannot half-succeed.
TEST(Cli, OutputPathIsDirectory) {
  for (const char *blocked : {"o.npy", "ht.npy"}) {
    SCOPED_TRACE(blocked);
    test::TempDir dir;
    test::Problem pr = smallProblem(1, test::freshSeed());
    writeInputs(pr, dir.path());
    std::string out = dir.file("out");
    ASSERT_EQ(::mkdir(out.c_str(), 0755), 0);
    ASSERT_EQ(::mkdir((out + "/" + blocked).c_str(), 0755), 0);
    writeRaw(out + "/keep", "x");
    CliResult r = runCli({"--variant=gated", "--inputs=" + dir.path(),
                          "--outputs=" + out, "--device=cpu"});
    EXPECT_EQ(r.rc, 1);
    EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << r.err;
    EXPECT_NE(r.err.find(std::string(blocked) + ": exists and is not a "
                                                "regular file"),
              std::string::npos)
        << r.err;
    std::vector<std::string> want = {blocked, "keep"};
    std::sort(want.begin(), want.end());
    EXPECT_EQ(test::listDir(out), want) << "something was written";
    EXPECT_TRUE(test::listDir(out + "/" + blocked).empty());
  }
}

TEST(Cli, CudaForcedWithoutGpu) {
  if (deltac_cuda_available())
    GTEST_SKIP() << "a GPU is present";
  test::TempDir dir;
  test::Problem pr = smallProblem(1, test::freshSeed());
  writeInputs(pr, dir.path());
  CliResult r = runCli({"--variant=gated", "--inputs=" + dir.path(),
                        "--outputs=" + dir.file("out"), "--device=cuda"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("cuda"), std::string::npos) << r.err;
  EXPECT_FALSE(test::fileExists(dir.file("out")));
}

} // namespace
} // namespace deltac

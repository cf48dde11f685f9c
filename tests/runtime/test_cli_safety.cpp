// `deltac run` safety: sizes are bounded before anything is allocated from
// them, outputs appear together or not at all (npy::write_files), and a
// -inf gate (a reset) is accepted.
#include "deltac/check.h"
#include "deltac/cli.h"
#include "deltac/npy.h"

#include "test_util.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>

namespace deltac {
namespace {

struct CliResult {
  int rc;
  std::string out, err;
};

CliResult runCli(std::vector<std::string> args) {
  args.insert(args.begin(), "run");
  std::vector<char *> argv;
  for (std::string &a : args)
    argv.push_back(&a[0]);
  ::testing::internal::CaptureStdout();
  ::testing::internal::CaptureStderr();
  CliResult r;
  r.rc = run_command(int(argv.size()), argv.data());
  r.err = ::testing::internal::GetCapturedStderr();
  r.out = ::testing::internal::GetCapturedStdout();
  return r;
}

void writeF32(const std::string &path, const std::vector<int64_t> &shape,
              const std::vector<float> &x) {
  std::string err;
  ASSERT_TRUE(npy::write_file(path, npy::DType::F32, shape, x.data(), &err))
      << err;
}

test::Problem smallProblem(int variant, int T) {
  test::Problem pr;
  pr.variant = variant;
  pr.B = 1;
  pr.T = T;
  pr.H = 1;
  pr.HV = 1;
  pr.K = 16;
  pr.V = 16;
  pr.withH0 = false;
  pr.fill(test::freshSeed());
  return pr;
}

void writeInputs(const test::Problem &pr, const std::string &dir) {
  writeF32(dir + "/q.npy", pr.qShape(), pr.q);
  writeF32(dir + "/k.npy", pr.qShape(), pr.k);
  writeF32(dir + "/v.npy", pr.vShape(), pr.v);
  writeF32(dir + "/beta.npy", pr.betaShape(), pr.beta);
  if (!pr.g.empty())
    writeF32(dir + "/g.npy", pr.gShape(), pr.g);
}

// A cu_seqlens with more sequences than deltac::kMaxSequences: before, ht
// ([N, HV, K, V]) was allocated before N was bounded ("out of memory", or
// the allocation itself); now the error names the file and the bound, and
// nothing N-sized is allocated. (int32 entries: a 64 MiB file.)
TEST(CliSafety, HugeCuSeqlensIsBoundedBeforeAllocating) {
  test::TempDir dir;
  test::Problem pr = smallProblem(1, 4);
  writeInputs(pr, dir.path());
  std::vector<int32_t> cu(size_t(kMaxSequences) + 2, 0);
  cu.back() = pr.T;
  std::string err;
  ASSERT_TRUE(npy::write_file(dir.file("cu_seqlens.npy"), npy::DType::I32,
                              {int64_t(cu.size())}, cu.data(), &err))
      << err;
  cu = {};
  CliResult r = runCli({"--variant=gated", "--inputs=" + dir.path(),
                        "--outputs=" + dir.file("out"), "--device=cpu"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("cu_seqlens.npy: N = 16777217 sequences: expected at "
                       "most 16777216"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(r.err.find("out of memory"), std::string::npos) << r.err;
  EXPECT_FALSE(test::fileExists(dir.file("out")));
}

TEST(CliSafety, MinusInfinityGateIsAReset) {
  for (int variant : {1, 2})
  for (const char *mode : {"recurrent", "chunked"}) {
    SCOPED_TRACE(std::to_string(variant) + " " + mode);
    test::TempDir dir;
    test::Problem pr = smallProblem(variant, 40);
    pr.g[pr.g.size() / 2] = -INFINITY;
    writeInputs(pr, dir.path());
    CliResult r = runCli({std::string("--variant=") +
                              (variant == 1 ? "gated" : "kda"),
                          "--inputs=" + dir.path(), "--outputs=" + dir.path(),
                          "--device=cpu", std::string("--mode=") + mode});
    ASSERT_EQ(r.rc, 0) << r.err;
    std::vector<double> oRef, htRef;
    ref::forward(pr.params(nullptr, nullptr), &oRef, &htRef);
    npy::Array o, ht;
    std::string err;
    ASSERT_TRUE(npy::read_file(dir.file("o.npy"), &o, &err)) << err;
    ASSERT_TRUE(npy::read_file(dir.file("ht.npy"), &ht, &err)) << err;
    EXPECT_LE(ref::rel_rms(o.as<float>(), oRef), 1e-5);
    EXPECT_LE(ref::rel_rms(ht.as<float>(), htRef), 1e-5);
  }
}

std::string readAll(const std::string &path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

// Fails the rename whose target ends in "ht.npy".
int failHtRename(const char *from, const char *to) {
  const size_t n = std::strlen(to);
  if (n >= 6 && std::strcmp(to + n - 6, "ht.npy") == 0) {
    errno = EIO;
    return -1;
  }
  return std::rename(from, to);
}

// Before: o.npy was renamed into place, then ht.npy; a failure between left
// a new o.npy next to the old ht.npy. Now the first rename is undone.
TEST(WriteFiles, FailedSecondRenameRestoresTheFirst) {
  for (bool hadOld : {true, false}) {
    SCOPED_TRACE(hadOld ? "old outputs present" : "no old outputs");
    test::TempDir dir;
    const std::string o = dir.file("o.npy"), ht = dir.file("ht.npy");
    if (hadOld) {
      std::ofstream(o) << "old o";
      std::ofstream(ht) << "old ht";
    }
    const std::vector<float> x = {1, 2, 3}, y = {4, 5};
    std::string err;
    EXPECT_FALSE(npy::write_files({{o, npy::DType::F32, {3}, x.data()},
                                   {ht, npy::DType::F32, {2}, y.data()}},
                                  &err, failHtRename));
    EXPECT_NE(err.find("ht.npy: cannot write"), std::string::npos) << err;
    EXPECT_NE(err.find("no output was changed"), std::string::npos) << err;
    if (hadOld) {
      EXPECT_EQ(readAll(o), "old o");
      EXPECT_EQ(readAll(ht), "old ht");
      EXPECT_EQ(test::listDir(dir.path()),
                std::vector<std::string>({"ht.npy", "o.npy"}));
    } else {
      EXPECT_TRUE(test::listDir(dir.path()).empty()) << "left behind";
    }
    // Without the failure both appear.
    ASSERT_TRUE(npy::write_files({{o, npy::DType::F32, {3}, x.data()},
                                  {ht, npy::DType::F32, {2}, y.data()}},
                                 &err))
        << err;
    npy::Array a;
    ASSERT_TRUE(npy::read_file(o, &a, &err)) << err;
    EXPECT_EQ(a.shape, std::vector<int64_t>({3}));
    ASSERT_TRUE(npy::read_file(ht, &a, &err)) << err;
    EXPECT_EQ(a.shape, std::vector<int64_t>({2}));
    EXPECT_EQ(test::listDir(dir.path()),
              std::vector<std::string>({"ht.npy", "o.npy"}));
  }
}

} // namespace
} // namespace deltac

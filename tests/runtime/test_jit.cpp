// The runtime's JIT (runtime/src/jit*.cpp, docs/jit.md): NVRTC compiles
// through the embedded headers and shims, the disk cache hits, rejects
// damaged files and runs without a usable directory, and a missing NVRTC is
// a clear error. These need NVRTC, not a GPU (they skip without NVRTC);
// JitGpu.LoadAndLaunch needs a GPU and skips without one.
#include "jit.h"
#include "jit_internal.h"

#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>
#include <vector>

namespace deltac::rt::jit {
namespace {

// Sets (or, with nullptr, unsets) an environment variable for a scope.
class EnvVar {
public:
  EnvVar(const char *name, const char *value) : name_(name) {
    const char *old = std::getenv(name);
    had_ = old != nullptr;
    if (had_)
      old_ = old;
    if (value)
      ::setenv(name, value, 1);
    else
      ::unsetenv(name);
  }
  ~EnvVar() {
    if (had_)
      ::setenv(name_.c_str(), old_.c_str(), 1);
    else
      ::unsetenv(name_.c_str());
  }

private:
  std::string name_, old_;
  bool had_ = false;
};

// A fresh directory, removed at the end; DELTAC_JIT_CACHE points into it.
class TempCache {
public:
  TempCache() {
    char tmpl[] = "/tmp/deltac_jit_XXXXXX";
    const char *d = ::mkdtemp(tmpl);
    EXPECT_NE(d, nullptr);
    root_ = d ? d : "/tmp/deltac_jit_failed";
    env_ = std::make_unique<EnvVar>("DELTAC_JIT_CACHE", dir().c_str());
  }
  ~TempCache() {
    env_.reset();
    std::string cmd = "rm -rf '" + root_ + "'";
    if (std::system(cmd.c_str()) != 0)
      ADD_FAILURE() << "cannot remove " << root_;
  }
  std::string root() const { return root_; }
  std::string dir() const { return root_ + "/cache"; } // created by the JIT

private:
  std::string root_;
  std::unique_ptr<EnvVar> env_;
};

#define SKIP_WITHOUT_NVRTC()                                                   \
  do {                                                                         \
    std::string why_;                                                          \
    if (!available(&why_))                                                     \
      GTEST_SKIP() << "no NVRTC: " << why_;                                    \
  } while (0)

// A tiny templated kernel; the bf16 conversion checks that the toolkit's
// cuda_bf16.h is found.
Program tiny(const std::string &tag = "") {
  Program p;
  p.name = "jit_test_tiny" + tag;
  p.source = R"(
#include <cuda_bf16.h>
#include <cstdint>
template <int N, class T> __global__ void fill(T *out, int32_t n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n)
    out[i] = T(__bfloat162float(__float2bfloat16(float(i))) * N);
}
// )" + tag + "\n";
  p.kernels = {"&fill<3, float>", "&fill<5, int>"};
  return p;
}

std::string read_all(const std::string &path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

void write_all(const std::string &path, const std::string &bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << bytes;
}

bool exists(const std::string &path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

TEST(Jit, CompilesTemplatedKernel) {
  SKIP_WITHOUT_NVRTC();
  std::string cubin, err;
  std::vector<std::string> lowered;
  ASSERT_TRUE(compile(tiny(), 90, &cubin, &lowered, &err)) << err;
  ASSERT_GE(cubin.size(), 4u);
  EXPECT_EQ(cubin.substr(0, 4), std::string("\x7f" "ELF"));
  ASSERT_EQ(lowered.size(), 2u);
  for (const std::string &l : lowered)
    EXPECT_EQ(l.rfind("_Z", 0), 0u) << l;
  EXPECT_NE(lowered[0], lowered[1]);
}

TEST(Jit, CompilesForOtherArchs) {
  SKIP_WITHOUT_NVRTC();
  for (int cc : {80, 120}) {
    std::string cubin, err;
    std::vector<std::string> lowered;
    EXPECT_TRUE(compile(tiny(), cc, &cubin, &lowered, &err)) << cc << ": " << err;
    EXPECT_EQ(cubin.substr(0, 4), std::string("\x7f" "ELF")) << cc;
  }
  std::string err;
  EXPECT_FALSE(compile(tiny(), 5, nullptr, nullptr, &err));
  EXPECT_NE(err.find("compute capability 5"), std::string::npos) << err;
}

TEST(Jit, CompileErrorCarriesTheLog) {
  SKIP_WITHOUT_NVRTC();
  Program p = tiny();
  p.source += "__global__ void broken(float *o) { o[0] = deltac_no_such_name; }\n";
  std::string err;
  EXPECT_FALSE(compile(p, 90, nullptr, nullptr, &err));
  EXPECT_NE(err.find("deltac_no_such_name"), std::string::npos) << err;
  EXPECT_NE(err.find("jit_test_tiny for sm_90a"), std::string::npos) << err;
}

TEST(Jit, UnknownKernelNameIsAnError) {
  SKIP_WITHOUT_NVRTC();
  Program p = tiny();
  p.kernels.push_back("&fill<3, double, 7>");
  std::string err;
  EXPECT_FALSE(compile(p, 90, nullptr, nullptr, &err));
  EXPECT_FALSE(err.empty());
}

// The shims (runtime/src/jit_include) stand in for the standard headers.
TEST(Jit, ShimsCompile) {
  SKIP_WITHOUT_NVRTC();
  Program p;
  p.name = "jit_test_shims";
  p.source = R"(
#include <algorithm>
#include <cfloat>
#include <climits>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <utility>
static_assert(std::is_same_v<std::int64_t, long> && sizeof(std::uintptr_t) == 8, "ints");
static_assert(std::is_same_v<std::conditional_t<true, int, float>, int>, "conditional");
static_assert(std::is_integral_v<const unsigned char> && !std::is_integral_v<float>, "integral");
static_assert(std::is_floating_point_v<double> && std::is_signed_v<int>, "float");
static_assert(std::numeric_limits<int>::max() == INT_MAX && INT32_MAX == 2147483647, "int max");
static_assert(std::numeric_limits<int>::min() == INT_MIN, "int min");
static_assert(std::numeric_limits<unsigned>::max() == UINT_MAX, "uint max");
static_assert(std::numeric_limits<int64_t>::max() == INT64_MAX, "int64 max");
static_assert(std::numeric_limits<float>::infinity() > FLT_MAX, "inf");
static_assert(std::numeric_limits<float>::max() == FLT_MAX, "flt max");
static_assert(std::numeric_limits<float>::epsilon() == FLT_EPSILON, "eps");
static_assert(std::numeric_limits<double>::max() == DBL_MAX, "dbl max");
static_assert(std::numeric_limits<float>::lowest() == -FLT_MAX, "lowest");
static_assert(std::is_same_v<std::make_index_sequence<5>, std::index_sequence<0, 1, 2, 3, 4>>,
              "index_sequence");
static_assert(std::make_index_sequence<37>::size() == 37, "size");
static_assert(std::min(3, 4) == 3 && std::max(3, 4) == 4, "min max");
template <class T, std::enable_if_t<std::is_same_v<T, float>, int> = 0>
__device__ T twice(T x) { return x + x; }
template <size_t... I> __device__ float sum(float *a, std::index_sequence<I...>) {
  return (a[I] + ... + 0.f);
}
__global__ void k(float *o) {
  float q = std::numeric_limits<float>::quiet_NaN();
  std::memcpy(o, &q, sizeof q);
  o[1] = std::sqrt(twice(o[2])) + std::isnan(o[0]) + std::fabs(o[3]) + INFINITY +
         sum(o, std::make_index_sequence<4>{});
}
)";
  p.kernels = {"&k"};
  std::string cubin, err;
  EXPECT_TRUE(compile(p, 90, &cubin, nullptr, &err)) << err;
}

// A real project header through the embedded headers.
TEST(Jit, CompilesWithProjectHeader) {
  SKIP_WITHOUT_NVRTC();
  Program p;
  p.name = "jit_test_params";
  p.source = R"(
#include "deltac/params.h"
__global__ void shape(const deltac_fwd_params p, int *out) {
  out[0] = p.B * p.T * p.H * p.HV * p.K * p.V + (p.variant == DELTAC_VARIANT_KDA);
}
)";
  p.kernels = {"&shape"};
  std::string cubin, err;
  std::vector<std::string> lowered;
  ASSERT_TRUE(compile(p, 90, &cubin, &lowered, &err)) << err;
  ASSERT_EQ(lowered.size(), 1u);
  EXPECT_FALSE(lowered[0].empty());
}

TEST(Jit, EmbedsTheProjectHeaders) {
  const detail::Headers &h = detail::headers();
  auto has = [&](const std::string &n) {
    for (const std::string &x : h.names)
      if (x == n)
        return true;
    return false;
  };
  for (const char *n : {"deltac/params.h", "deltac/catalogue.h", "deltac/cuda/recurrent.cuh",
                        "cstdint", "type_traits", "limits"})
    EXPECT_TRUE(has(n)) << n;
  EXPECT_EQ(h.digest.size(), 32u);
  // The pieces put back together are the files.
  int checked = 0;
  for (size_t i = 0; i < h.names.size(); ++i)
    for (const char *root : {"templates/cuda/include/", "templates/include/",
                             "catalogue/include/", "runtime/src/jit_include/"}) {
      const std::string path = std::string(DELTAC_TEST_SOURCE_DIR "/") + root + h.names[i];
      if (exists(path)) {
        EXPECT_EQ(h.texts[i], read_all(path)) << path;
        ++checked;
      }
    }
  EXPECT_EQ(checked, int(h.names.size()));
}

TEST(Jit, Sha256KnownAnswers) {
  detail::Sha256 a;
  EXPECT_EQ(detail::hex(a.digest()),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  detail::Sha256 b;
  b.add("abc", 3);
  EXPECT_EQ(detail::hex(b.digest()),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  detail::Sha256 c; // 1,000,000 x 'a' in uneven pieces
  std::string piece(997, 'a');
  size_t left = 1000000;
  while (left > 0) {
    size_t n = std::min(left, piece.size());
    c.add(piece.data(), n);
    left -= n;
  }
  EXPECT_EQ(detail::hex(c.digest()),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(JitCache, DirectoryFromEnvironment) {
  {
    EnvVar c("DELTAC_JIT_CACHE", "/some/where");
    EXPECT_EQ(cache_dir(), "/some/where");
  }
  {
    EnvVar c("DELTAC_JIT_CACHE", "off");
    EXPECT_EQ(cache_dir(), "");
  }
  {
    EnvVar c("DELTAC_JIT_CACHE", nullptr), x("XDG_CACHE_HOME", "/xdg");
    EXPECT_EQ(cache_dir(), "/xdg/deltac/jit");
  }
  {
    EnvVar c("DELTAC_JIT_CACHE", nullptr), x("XDG_CACHE_HOME", nullptr), h("HOME", "/home/u");
    EXPECT_EQ(cache_dir(), "/home/u/.cache/deltac/jit");
  }
}

TEST(JitCache, SecondCallIsADiskHit) {
  SKIP_WITHOUT_NVRTC();
  TempCache tc;
  Program p = tiny();
  std::string c1, c2, err;
  std::vector<std::string> l1, l2;
  Stats s0 = stats();
  ASSERT_TRUE(cubin_for(p, 90, &c1, &l1, &err)) << err;
  Stats s1 = stats();
  EXPECT_EQ(s1.compiles - s0.compiles, 1);
  EXPECT_EQ(s1.disk_hits - s0.disk_hits, 0);
  const std::string file = cache_file(p, 90, tc.dir());
  EXPECT_TRUE(exists(file)) << file;
  ASSERT_TRUE(cubin_for(p, 90, &c2, &l2, &err)) << err;
  Stats s2 = stats();
  EXPECT_EQ(s2.compiles - s1.compiles, 0);
  EXPECT_EQ(s2.disk_hits - s1.disk_hits, 1);
  EXPECT_EQ(s2.disk_rejects - s1.disk_rejects, 0);
  EXPECT_EQ(c1, c2);
  EXPECT_EQ(l1, l2);
}

TEST(JitCache, KeyFollowsSourceArchAndKernels) {
  SKIP_WITHOUT_NVRTC();
  TempCache tc;
  Program a = tiny(), b = tiny(), c = tiny();
  b.source += "// another source\n";
  c.kernels.pop_back();
  const std::string fa = cache_file(a, 90, tc.dir());
  EXPECT_EQ(fa, cache_file(tiny(), 90, tc.dir()));
  EXPECT_NE(fa, cache_file(b, 90, tc.dir()));
  EXPECT_NE(fa, cache_file(c, 90, tc.dir()));
  EXPECT_NE(fa, cache_file(a, 80, tc.dir()));
  EXPECT_NE(fa.find("jit_test_tiny.sm_90a."), std::string::npos) << fa;
}

// Writes the cache file of tiny(), damages it with `damage`, and checks
// that the next call rejects it, recompiles, and rewrites a good file.
void expect_rejected(const std::function<void(std::string *)> &damage) {
  TempCache tc;
  Program p = tiny();
  std::string good, err;
  ASSERT_TRUE(cubin_for(p, 90, &good, nullptr, &err)) << err;
  const std::string file = cache_file(p, 90, tc.dir());
  std::string bytes = read_all(file);
  ASSERT_FALSE(bytes.empty());
  damage(&bytes);
  write_all(file, bytes);
  Stats s0 = stats();
  std::string again;
  std::vector<std::string> lowered;
  ASSERT_TRUE(cubin_for(p, 90, &again, &lowered, &err)) << err;
  Stats s1 = stats();
  EXPECT_EQ(s1.disk_rejects - s0.disk_rejects, 1);
  EXPECT_EQ(s1.compiles - s0.compiles, 1);
  EXPECT_EQ(s1.disk_hits - s0.disk_hits, 0);
  EXPECT_EQ(again, good);
  EXPECT_EQ(lowered.size(), 2u);
  ASSERT_TRUE(cubin_for(p, 90, &again, nullptr, &err)) << err; // rewritten
  EXPECT_EQ(stats().disk_hits - s1.disk_hits, 1);
}

// The file's checksum recomputed after an edit: only the header checks can
// reject it.
void reseal(std::string *b) {
  detail::Sha256 s;
  s.add(b->data(), b->size() - 32);
  b->replace(b->size() - 32, 32, s.digest());
}

TEST(JitCache, FlippedByteIsRejected) {
  SKIP_WITHOUT_NVRTC();
  expect_rejected([](std::string *b) { (*b)[b->size() / 2] ^= 0x20; });
}

TEST(JitCache, TruncatedFileIsRejected) {
  SKIP_WITHOUT_NVRTC();
  expect_rejected([](std::string *b) { b->resize(b->size() / 2); });
  expect_rejected([](std::string *b) { b->resize(b->size() - 1); });
  expect_rejected([](std::string *b) { b->clear(); });
}

TEST(JitCache, WrongMagicIsRejected) {
  SKIP_WITHOUT_NVRTC();
  expect_rejected([](std::string *b) { (*b)[0] = 'X'; });
  expect_rejected([](std::string *b) {
    (*b)[0] = 'X';
    reseal(b);
  });
}

TEST(JitCache, OtherFormatOrKeyIsRejected) {
  SKIP_WITHOUT_NVRTC();
  expect_rejected([](std::string *b) { // format version (after the magic)
    (*b)[8] = 2;
    reseal(b);
  });
  expect_rejected([](std::string *b) { // the key
    (*b)[12] ^= 1;
    reseal(b);
  });
  expect_rejected([](std::string *b) { // more kernels than the program has
    const size_t at = 8 + 4 + 32 + 4 + std::string("jit_test_tiny").size();
    (*b)[at] = 3;
    reseal(b);
  });
}

TEST(JitCache, OffCompilesEveryTime) {
  SKIP_WITHOUT_NVRTC();
  TempCache tc;
  EnvVar off("DELTAC_JIT_CACHE", "off");
  std::string err;
  Stats s0 = stats();
  ASSERT_TRUE(cubin_for(tiny(), 90, nullptr, nullptr, &err)) << err;
  ASSERT_TRUE(cubin_for(tiny(), 90, nullptr, nullptr, &err)) << err;
  Stats s1 = stats();
  EXPECT_EQ(s1.compiles - s0.compiles, 2);
  EXPECT_EQ(s1.disk_hits - s0.disk_hits, 0);
  EXPECT_FALSE(exists(tc.dir()));
}

TEST(JitCache, UnwritableDirectoryStillCompiles) {
  SKIP_WITHOUT_NVRTC();
  TempCache tc;
  // A directory below a regular file cannot be created, even by root.
  write_all(tc.root() + "/file", "x");
  EnvVar bad("DELTAC_JIT_CACHE", (tc.root() + "/file/jit").c_str());
  std::string cubin, err;
  Stats s0 = stats();
  ASSERT_TRUE(cubin_for(tiny(), 90, &cubin, nullptr, &err)) << err;
  ASSERT_TRUE(cubin_for(tiny(), 90, &cubin, nullptr, &err)) << err;
  EXPECT_EQ(stats().compiles - s0.compiles, 2);
  EXPECT_EQ(cubin.substr(0, 4), std::string("\x7f" "ELF"));
}

TEST(JitCache, ConcurrentWritersOfOneKey) {
  SKIP_WITHOUT_NVRTC();
  TempCache tc;
  Program p = tiny("_concurrent");
  std::vector<std::string> out(4);
  std::vector<int> ok(4);
  std::vector<std::thread> ts;
  for (int i = 0; i < 4; ++i)
    ts.emplace_back([&, i] {
      std::string err;
      ok[i] = cubin_for(p, 90, &out[i], nullptr, &err);
    });
  for (auto &t : ts)
    t.join();
  for (int i = 0; i < 4; ++i) {
    EXPECT_TRUE(ok[i]) << i;
    EXPECT_EQ(out[i], out[0]) << i;
  }
  Stats s0 = stats();
  ASSERT_TRUE(cubin_for(p, 90, nullptr, nullptr, nullptr));
  EXPECT_EQ(stats().disk_hits - s0.disk_hits, 1);
}

TEST(Jit, MissingNvrtcIsAClearError) {
  EnvVar nv("DELTAC_NVRTC", "/nonexistent/libnvrtc.so");
  TempCache tc;
  std::string why, err;
  EXPECT_FALSE(available(&why));
  EXPECT_NE(why.find("DELTAC_NVRTC=/nonexistent/libnvrtc.so"), std::string::npos) << why;
  EXPECT_FALSE(compile(tiny(), 90, nullptr, nullptr, &err));
  EXPECT_NE(err.find("NVRTC could not be loaded"), std::string::npos) << err;
  err.clear();
  EXPECT_FALSE(cubin_for(tiny(), 90, nullptr, nullptr, &err));
  EXPECT_NE(err.find("/nonexistent/libnvrtc.so"), std::string::npos) << err;
  err.clear();
  EXPECT_EQ(load(tiny(), &err), nullptr);
  EXPECT_FALSE(err.empty());
}

TEST(Jit, LoadWithoutDeviceIsAClearError) {
  int n = 0;
  if (cudaGetDeviceCount(&n) == cudaSuccess && n > 0)
    GTEST_SKIP() << "a CUDA device is present";
  cudaGetLastError();
  std::string err;
  EXPECT_EQ(load(tiny(), &err), nullptr);
  EXPECT_NE(err.find("no usable CUDA device for jit_test_tiny"), std::string::npos) << err;
}

// On a GPU: load() (compiled, then from this process's modules) and a
// launch through the kernel handle.
TEST(JitGpu, LoadAndLaunch) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
    cudaGetLastError();
    GTEST_SKIP() << "no CUDA device";
  }
  SKIP_WITHOUT_NVRTC();
  TempCache tc;
  std::string err;
  Program p = tiny("_gpu");
  const Module *m = load(p, &err);
  ASSERT_NE(m, nullptr) << err;
  ASSERT_EQ(m->kernels.size(), 2u);
  Stats s0 = stats();
  EXPECT_EQ(load(p, &err), m);
  EXPECT_EQ(stats().memory_hits - s0.memory_hits, 1);

  const int32_t count = 1000;
  float *df = nullptr;
  int *di = nullptr;
  ASSERT_EQ(cudaMalloc(&df, count * sizeof(float)), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&di, count * sizeof(int)), cudaSuccess);
  int32_t cnt = count;
  void *fargs[] = {&df, &cnt};
  void *iargs[] = {&di, &cnt};
  EXPECT_EQ(cudaLaunchKernel(m->kernels[0], dim3(8), dim3(128), fargs, 0, nullptr), cudaSuccess);
  EXPECT_EQ(cudaLaunchKernel(m->kernels[1], dim3(8), dim3(128), iargs, 0, nullptr), cudaSuccess);
  std::vector<float> hf(count);
  std::vector<int> hi(count);
  EXPECT_EQ(cudaMemcpy(hf.data(), df, count * sizeof(float), cudaMemcpyDeviceToHost),
            cudaSuccess);
  EXPECT_EQ(cudaMemcpy(hi.data(), di, count * sizeof(int), cudaMemcpyDeviceToHost), cudaSuccess);
  cudaFree(df);
  cudaFree(di);
  int bad = 0;
  for (int i = 0; i < count; ++i) {
    // i through bf16: exact up to 256, then rounded to 8 significant bits.
    const float r = __bfloat162float(__float2bfloat16(float(i)));
    bad += hf[i] != r * 3 || hi[i] != int(r * 5);
  }
  EXPECT_EQ(bad, 0);
}

} // namespace
} // namespace deltac::rt::jit

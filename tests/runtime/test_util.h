// Shared helpers of the runtime tests: random problems, temp directories.
#ifndef DELTAC_TESTS_RUNTIME_TEST_UTIL_H
#define DELTAC_TESTS_RUNTIME_TEST_UTIL_H

#include "deltac/bind.h"
#include "deltac/npy.h"
#include "deltac/params.h"
#include "deltac/reference.h"
#include "deltac/test_seed.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <dirent.h>
#include <fcntl.h>
#include <future>
#include <random>
#include <string>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

namespace deltac {
namespace test {

// A fresh seed per call, or DELTAC_TEST_SEED when set (deltac/test_seed.h);
// the tests print it through SCOPED_TRACE("seed " + n): replay a failure
// with DELTAC_TEST_SEED=<n>.
inline uint64_t freshSeed() { return test_seed(); }

// DELTAC_JIT for one scope: "0" keeps CUDA calls off the NVRTC path
// (runtime/src/cuda_jit.cu), null leaves the default.
struct JitEnv {
  explicit JitEnv(const char *value) {
    const char *old = std::getenv("DELTAC_JIT");
    had_ = old != nullptr;
    if (had_)
      old_ = old;
    if (value)
      setenv("DELTAC_JIT", value, 1);
    else
      unsetenv("DELTAC_JIT");
  }
  ~JitEnv() {
    if (had_)
      setenv("DELTAC_JIT", old_.c_str(), 1);
    else
      unsetenv("DELTAC_JIT");
  }
  JitEnv(const JitEnv &) = delete;
  JitEnv &operator=(const JitEnv &) = delete;

private:
  bool had_ = false;
  std::string old_;
};

// mkdtemp directory removed (recursively) on destruction.
class TempDir {
public:
  TempDir() {
    char tmpl[] = "/tmp/deltac_rt_XXXXXX";
    char *d = ::mkdtemp(tmpl);
    EXPECT_NE(d, nullptr);
    path_ = d ? d : "/tmp";
  }
  ~TempDir() {
    std::string cmd = "rm -rf '" + path_ + "'";
    if (std::system(cmd.c_str()) != 0)
      ADD_FAILURE() << "cannot remove " << path_;
  }
  const std::string &path() const { return path_; }
  std::string file(const std::string &name) const { return path_ + "/" + name; }

private:
  std::string path_;
};

inline bool fileExists(const std::string &path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

// Names in a directory, without . and .. (empty when it does not exist).
inline std::vector<std::string> listDir(const std::string &dir) {
  std::vector<std::string> names;
  if (DIR *d = ::opendir(dir.c_str())) {
    while (dirent *e = ::readdir(d)) {
      std::string n = e->d_name;
      if (n != "." && n != "..")
        names.push_back(n);
    }
    ::closedir(d);
  }
  std::sort(names.begin(), names.end());
  return names;
}

// Runs fn, which may open the FIFO at fifo for reading, and returns whether
// it finished within 10 s. If it did not, the FIFO is opened for writing and
// closed, which unblocks a reader stuck in open() (it then sees EOF), so the
// test reports a failure instead of hanging.
template <class Fn> bool finishesDespiteFifo(const std::string &fifo, Fn fn) {
  auto done = std::async(std::launch::async, fn);
  if (done.wait_for(std::chrono::seconds(10)) == std::future_status::ready)
    return true;
  int fd = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK);
  if (fd >= 0)
    ::close(fd);
  done.wait();
  return false;
}

// One forward problem with host tensors, shaped as in deltac_fwd_params.
struct Problem {
  int variant = DELTAC_VARIANT_GATED;
  int B = 1, T = 1, H = 1, HV = 1, K = 16, V = 16;
  std::vector<int64_t> cu; // empty: no cu_seqlens
  bool withH0 = true;
  std::vector<float> q, k, v, g, beta, h0;

  int N() const { return cu.empty() ? B : int(cu.size()) - 1; }
  std::vector<int64_t> qShape() const { return {B, T, H, K}; }
  std::vector<int64_t> vShape() const { return {B, T, HV, V}; }
  std::vector<int64_t> betaShape() const { return {B, T, HV}; }
  std::vector<int64_t> gShape() const {
    if (variant == DELTAC_VARIANT_KDA)
      return {B, T, HV, K};
    return {B, T, HV};
  }
  std::vector<int64_t> stateShape() const { return {N(), HV, K, V}; }

  // Random contents: q and k rows of unit norm (stable recurrence with or
  // without qk_l2norm), v ~ N(0, 1), beta ~ U(0, 1), g in [-0.2, 0].
  void fill(uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::normal_distribution<float> n01(0.f, 1.f);
    std::uniform_real_distribution<float> u01(0.f, 1.f);
    auto unitRows = [&](std::vector<float> &x) {
      x.resize(size_t(B) * T * H * K);
      for (size_t r = 0; r < x.size() / K; ++r) {
        double s = 0;
        for (int i = 0; i < K; ++i) {
          float z = n01(rng);
          x[r * K + i] = z;
          s += double(z) * z;
        }
        for (int i = 0; i < K; ++i)
          x[r * K + i] = float(x[r * K + i] / std::sqrt(s));
      }
    };
    unitRows(q);
    unitRows(k);
    v.resize(size_t(B) * T * HV * V);
    for (float &x : v)
      x = n01(rng);
    beta.resize(size_t(B) * T * HV);
    for (float &x : beta)
      x = u01(rng);
    g.clear();
    if (variant != DELTAC_VARIANT_DELTA) {
      g.resize(variant == DELTAC_VARIANT_KDA ? size_t(B) * T * HV * K
                                             : size_t(B) * T * HV);
      for (float &x : g)
        x = -0.2f * u01(rng);
    }
    h0.clear();
    if (withH0) {
      h0.resize(size_t(N()) * HV * K * V);
      for (float &x : h0)
        x = 0.3f * n01(rng);
    }
  }

  // The named tensors of this problem (f32 host memory) with o and ht
  // (f32, may be null: absent), as a binding would pass them.
  ForwardTensors tensors(void *o, void *ht) const {
    auto arg = [](const void *data, std::vector<int64_t> shape,
                  ElemType t = ElemType::F32) {
      TensorArg a;
      a.data = data;
      a.dtype = t;
      a.shape = data ? std::move(shape) : std::vector<int64_t>{};
      return a;
    };
    ForwardTensors t;
    t.variant = variant;
    t.q = arg(q.data(), qShape());
    t.k = arg(k.data(), qShape());
    t.v = arg(v.data(), vShape());
    t.beta = arg(beta.data(), betaShape());
    t.g = arg(g.empty() ? nullptr : g.data(), gShape());
    t.h0 = arg(withH0 ? h0.data() : nullptr, stateShape());
    t.cu_seqlens =
        arg(cu.empty() ? nullptr : cu.data(), {int64_t(cu.size())}, ElemType::I64);
    t.o = arg(o, vShape());
    t.ht = arg(ht, stateShape());
    t.scale = float(1.0 / std::sqrt(double(K)));
    return t;
  }

  // Params over this problem's tensors, through the binder (deltac/bind.h).
  // o may be null (for the reference only): then only the inputs are bound.
  deltac_fwd_params params(void *o, void *ht) const {
    deltac_fwd_params p{};
    std::string err;
    const ForwardTensors t = tensors(o, ht);
    const bool ok = o ? bind_params(t, &p, &err) : bind_inputs(t, &p, &err);
    EXPECT_TRUE(ok) << err;
    return p;
  }

  size_t oCount() const { return size_t(B) * T * HV * V; }
  size_t stateCount() const { return size_t(N()) * HV * K * V; }
};

// Random cu_seqlens over T tokens with n sequences (some may be empty).
inline std::vector<int64_t> randomCuSeqlens(int T, int n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> d(0, T);
  std::vector<int64_t> cu(size_t(n) + 1);
  cu[0] = 0;
  cu[size_t(n)] = T;
  for (int i = 1; i < n; ++i)
    cu[size_t(i)] = d(rng);
  std::sort(cu.begin(), cu.end());
  return cu;
}

inline std::vector<uint16_t> toBf16(const std::vector<float> &x) {
  std::vector<uint16_t> out(x.size());
  for (size_t i = 0; i < x.size(); ++i)
    out[i] = ref::float_to_bf16(x[i]);
  return out;
}

// The float64 reference's state after each chunk's last token (chunk
// tokens a chunk), in the order deltac_options.chunk_states holds them;
// o and ht get the reference's outputs.
inline std::vector<double> expectedChunkStates(const deltac_fwd_params &p, int chunk,
                                               std::vector<double> *o,
                                               std::vector<double> *ht) {
  std::vector<double> steps;
  ref::forward(p, o, ht, &steps);
  const size_t hs = size_t(p.HV) * p.K * p.V;
  std::vector<double> out;
  for (int n = 0; n < p.N; ++n) {
    const int64_t s0 = p.cu_seqlens ? p.cu_seqlens[n] : int64_t(n) * p.T;
    const int64_t len = p.cu_seqlens ? p.cu_seqlens[n + 1] - s0 : p.T;
    for (int64_t t0 = 0; t0 < len; t0 += chunk) {
      const int64_t last = s0 + std::min<int64_t>(t0 + chunk, len) - 1;
      out.insert(out.end(), steps.begin() + last * hs, steps.begin() + (last + 1) * hs);
    }
  }
  return out;
}

} // namespace test
} // namespace deltac

#endif // DELTAC_TESTS_RUNTIME_TEST_UTIL_H

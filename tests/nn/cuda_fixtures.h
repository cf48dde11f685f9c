// Device buffers and comparisons for the deltac::nn CUDA tests
// (test_cuda_layers.cpp, test_cuda_kda.cpp).
#ifndef DELTAC_TESTS_NN_CUDA_FIXTURES_H
#define DELTAC_TESTS_NN_CUDA_FIXTURES_H

#include "deltac/nn_cuda.h"
#include "deltac/runtime.h"
#include "layer_fixtures.h"

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

namespace deltac::nn::testing {

using deltac::ElemType;

inline bool have_gpu() { return deltac_cuda_available() != 0; }

#define SKIP_WITHOUT_GPU()                                                                         \
  if (!have_gpu()) GTEST_SKIP() << "no usable CUDA device"

// Joins per-call outputs [B, t_i, C] along T.
inline Tensor join_t(const std::vector<Tensor> &parts) {
  const int64_t B = parts[0].shape[0], C = parts[0].shape[2];
  int64_t T = 0;
  for (const Tensor &p : parts) T += p.shape[1];
  Tensor out{{B, T, C}, {}};
  for (int64_t b = 0; b < B; ++b)
    for (const Tensor &p : parts)
      out.data.insert(out.data.end(), p.data.begin() + b * p.shape[1] * C,
                      p.data.begin() + (b + 1) * p.shape[1] * C);
  return out;
}

inline double rel_rms(const std::vector<float> &a, const std::vector<float> &b) {
  EXPECT_EQ(a.size(), b.size());
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    const double d = double(a[i]) - b[i];
    num += d * d;
    den += double(b[i]) * b[i];
  }
  return std::sqrt(num / (den > 0 ? den : 1));
}

// Device memory of a test, freed at scope exit.
struct DevBuf {
  void *p = nullptr;
  explicit DevBuf(size_t bytes) { EXPECT_EQ(cudaMalloc(&p, bytes), cudaSuccess); }
  ~DevBuf() { cudaFree(p); }
  DevBuf(const DevBuf &) = delete;
};

inline size_t numel(const std::vector<int64_t> &s) {
  size_t n = 1;
  for (int64_t d : s) n *= size_t(d);
  return n;
}

// A host tensor on the device as f32 or bf16 (values rounded).
struct DevTensor {
  DevBuf buf;
  DeviceTensor t;
  DevTensor(const std::vector<int64_t> &shape, ElemType dt)
      : buf(numel(shape) * (dt == ElemType::BF16 ? 2 : 4)) {
    t.data = buf.p;
    t.dtype = dt;
    t.shape = shape;
  }
  DevTensor(const Tensor &x, ElemType dt) : DevTensor(x.shape, dt) {
    if (dt == ElemType::F32) {
      EXPECT_EQ(cudaMemcpy(buf.p, x.data.data(), x.data.size() * 4, cudaMemcpyHostToDevice),
                cudaSuccess);
      return;
    }
    std::vector<uint16_t> h(x.data.size());
    for (size_t i = 0; i < h.size(); ++i) {
      uint32_t u;
      const float r = bf16_round(x.data[i]);
      std::memcpy(&u, &r, 4);
      h[i] = uint16_t(u >> 16);
    }
    EXPECT_EQ(cudaMemcpy(buf.p, h.data(), h.size() * 2, cudaMemcpyHostToDevice), cudaSuccess);
  }
  Tensor host() const {
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    Tensor x{t.shape, std::vector<float>(numel(t.shape))};
    if (t.dtype == ElemType::F32) {
      EXPECT_EQ(cudaMemcpy(x.data.data(), buf.p, x.data.size() * 4, cudaMemcpyDeviceToHost),
                cudaSuccess);
      return x;
    }
    std::vector<uint16_t> h(x.data.size());
    EXPECT_EQ(cudaMemcpy(h.data(), buf.p, h.size() * 2, cudaMemcpyDeviceToHost), cudaSuccess);
    for (size_t i = 0; i < h.size(); ++i) {
      const uint32_t u = uint32_t(h[i]) << 16;
      std::memcpy(&x.data[i], &u, 4);
    }
    return x;
  }
};

inline std::vector<float> device_floats(const float *p, size_t n) {
  std::vector<float> h(n);
  EXPECT_NE(p, nullptr);
  if (p) EXPECT_EQ(cudaMemcpy(h.data(), p, n * 4, cudaMemcpyDeviceToHost), cudaSuccess);
  return h;
}

inline CudaOptions options(ElemType dt, bool f32_rule = false) {
  CudaOptions o;
  o.dtype = dt;
  o.f32_rule = f32_rule;
  return o;
}

// fwd(x, y) on device copies (dtype dt) of x and an output; y on the host.
template <typename F> Tensor on_device(const Tensor &x, ElemType dt, F &&fwd) {
  DevTensor dx(x, dt), dy(x.shape, dt);
  fwd(dx.t, dy.t);
  return dy.host();
}

// fwd(x, x) (y may be x) on a device copy of x; the result on the host.
template <typename F> Tensor in_place(const Tensor &x, ElemType dt, F &&fwd) {
  DevTensor dx(x, dt);
  fwd(dx.t, dx.t);
  return dx.host();
}

// fwd(x, y) against the CPU layer's output `want` (relative RMS <= tol,
// printed); with also_in_place fwd(x, x) too (y may be x).
template <typename F>
void expect_near_cpu(const Tensor &x, const Tensor &want, ElemType dt, double tol, F &&fwd,
                     bool also_in_place) {
  const double err = rel_rms(on_device(x, dt, fwd).data, want.data);
  std::printf("  rel RMS vs CPU: %.3g\n", err);
  EXPECT_LE(err, tol);
  if (also_in_place) EXPECT_LE(rel_rms(in_place(x, dt, fwd).data, want.data), tol);
}

// The token ranges `calls` of x through fwd one call after the other (a
// prompt, then decode steps through the layer's state), outputs joined.
template <typename F>
Tensor in_calls(const Tensor &x, const std::vector<std::pair<int64_t, int64_t>> &calls,
                ElemType dt, F &&fwd) {
  std::vector<Tensor> parts;
  for (auto [t0, t1] : calls) parts.push_back(on_device(slice_t(x, t0, t1), dt, fwd));
  return join_t(parts);
}

// The given first calls, then one token at a time up to T.
inline std::vector<std::pair<int64_t, int64_t>>
then_single_tokens(std::vector<std::pair<int64_t, int64_t>> calls, int64_t T) {
  for (int64_t t = calls.back().second; t < T; ++t) calls.push_back({t, t + 1});
  return calls;
}

// The device cache against the CPU layer's: conv <= 1e-5, recurrent <= 1e-4.
inline void expect_cache_near(const CudaGatedDeltaNetCache &cache, const GatedDeltaNetCache &cpu) {
  const double cerr = rel_rms(device_floats(cache.conv(), cpu.conv.size()), cpu.conv);
  const double rerr = rel_rms(device_floats(cache.recurrent(), cpu.recurrent.size()), cpu.recurrent);
  std::printf("  cache vs CPU: conv %.3g, recurrent %.3g\n", cerr, rerr);
  EXPECT_LE(cerr, 1e-5);
  EXPECT_LE(rerr, 1e-4);
}

// A layer with a decode cache (fwd(x, y, cache)), f32, against the CPU
// layer's whole-sequence output `want` and its cache: the whole sequence
// without a cache, then tokens 0-1 (shorter than the conv window), 2-36
// (chunked), 37-41 (recurrent) and one at a time through `cache`; the steps
// == the whole sequence (<= 1e-4) and the device cache == the CPU cache.
template <typename F>
void expect_decode_matches(const Tensor &x, const Tensor &want, const GatedDeltaNetCache &cpu_cache,
                           CudaGatedDeltaNetCache &cache, F &&fwd) {
  const Tensor whole = on_device(x, ElemType::F32, [&](const DeviceTensor &in,
                                                       const DeviceTensor &out) {
    fwd(in, out, nullptr);
  });
  EXPECT_LE(rel_rms(whole.data, want.data), 1e-4);
  const Tensor steps = in_calls(x, then_single_tokens({{0, 2}, {2, 37}, {37, 42}}, x.shape[1]),
                                ElemType::F32,
                                [&](const DeviceTensor &in, const DeviceTensor &out) {
                                  fwd(in, out, &cache);
                                });
  EXPECT_EQ(cache.batch(), x.shape[0]);
  const double err = rel_rms(steps.data, whole.data);
  std::printf("  prompt + steps vs whole: %.3g\n", err);
  EXPECT_LE(err, 1e-4);
  expect_cache_near(cache, cpu_cache);
}

template <typename F> inline std::string error_of(F &&f) {
  try {
    f();
  } catch (const Error &e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace deltac::nn::testing

#endif  // DELTAC_TESTS_NN_CUDA_FIXTURES_H

// The CUDA backend of the tuner (bench.h): candidates are the tuner's own
// instances (deltac/tune_cuda.h) on device buffers, checked against the
// float64 reference and timed with CUDA events over input sets that
// together exceed the L2 cache, so no call finds its inputs cached.
#include "bench.h"

#include "deltac/reference.h"
#include "deltac/tune_cuda.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace deltac::tune {
namespace {

std::string cudaWhy(cudaError_t e) { return std::string(cudaGetErrorString(e)); }

// Device copies of one Tensors set, and params over them.
struct DeviceSet {
  deltac_fwd_params p{};
  std::vector<void *> bufs;
  size_t o_bytes = 0, ht_bytes = 0;

  template <class T>
  void *up(const std::vector<T> &x, std::string *err) {
    if (x.empty())
      return nullptr;
    void *d = nullptr;
    cudaError_t e = cudaMalloc(&d, x.size() * sizeof(T));
    if (e == cudaSuccess)
      e = cudaMemcpy(d, x.data(), x.size() * sizeof(T), cudaMemcpyHostToDevice);
    if (e != cudaSuccess && err->empty())
      *err = "device buffer: " + cudaWhy(e);
    bufs.push_back(d);
    return d;
  }
  DeviceSet(const Spec &sp, Tensors &t, std::string *err) {
    p = params_of(sp, t); // host pointers, replaced below
    const bool bf = sp.in_dtype == DELTAC_BF16;
    p.q = bf ? up(t.qb, err) : up(t.q, err);
    p.k = bf ? up(t.kb, err) : up(t.k, err);
    p.v = bf ? up(t.vb, err) : up(t.v, err);
    p.g = static_cast<const float *>(up(t.g, err));
    p.beta = static_cast<const float *>(up(t.beta, err));
    p.h0 = up(t.h0, err);
    p.o = t.ob.empty() ? up(t.o, err) : up(t.ob, err);
    p.ht = up(t.ht, err);
    o_bytes = t.ob.empty() ? t.o.size() * 4 : t.ob.size() * 2;
    ht_bytes = t.ht.size() * 4;
  }
  ~DeviceSet() {
    for (void *d : bufs)
      cudaFree(d);
  }
  DeviceSet(const DeviceSet &) = delete;
  DeviceSet &operator=(const DeviceSet &) = delete;
};

// Runs instances with a workspace that grows to the largest need.
struct Runner {
  const Spec &sp;
  void *ws = nullptr;
  size_t ws_bytes = 0;
  cudaStream_t stream = nullptr;

  explicit Runner(const Spec &s) : sp(s) { cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking); }
  ~Runner() {
    cudaFree(ws);
    cudaStreamDestroy(stream);
  }
  const cuda::Instance *instance(const Candidate &c, std::string *err) const {
    const cuda::Instance *in = cuda::find(sp.variant, sp.K, sp.V, sp.in_dtype, c.config);
    if (!in)
      *err = "no compiled instance of " + candidate_string(c);
    return in;
  }
  // Enqueues one call (no sync); "" or the launch error.
  // c: the candidate's config (run-time knobs: cuda_chunked's split, fuse).
  std::string enqueue(const cuda::Instance &in, const KernelConfig &c,
                      const deltac_fwd_params &p) {
    const size_t need = in.workspace(&p, &c);
    if (need > ws_bytes) {
      cudaStreamSynchronize(stream);
      cudaFree(ws);
      ws = nullptr, ws_bytes = 0;
      cudaError_t e = cudaMalloc(&ws, need);
      if (e != cudaSuccess)
        return "workspace of " + std::to_string(need) + " bytes: " + cudaWhy(e);
      ws_bytes = need;
    }
    const int e = in.run(&p, &c, ws, ws_bytes, stream);
    return e == 0 ? "" : cudaWhy(cudaError_t(e));
  }
};

class CudaBench : public Bench {
public:
  CudaBench(const Spec &sp, const Settings &s, int32_t B, int32_t T) : s_(s), run_(sp) {
    Tensors t = make_tensors(sp, B, T, s.seed);
    int dev = 0, l2 = 0;
    cudaGetDevice(&dev);
    cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, dev);
    const size_t one = std::max<size_t>(t.bytes(), 1);
    const size_t want = std::clamp<size_t>((2 * size_t(l2) + one - 1) / one, 2, 8);
    for (size_t i = 0; i < want && err_.empty(); ++i)
      sets_.push_back(std::make_unique<DeviceSet>(sp, t, &err_));
    cudaEventCreate(&a_);
    cudaEventCreate(&b_);
  }
  ~CudaBench() override {
    cudaEventDestroy(a_);
    cudaEventDestroy(b_);
  }
  std::string warm(const Candidate &c, int32_t *calls, double *us) override {
    if (!err_.empty())
      return err_;
    std::string err;
    const cuda::Instance *in = run_.instance(c, &err);
    if (!in)
      return err;
    // two calls: the first pays one-time costs (attributes, workspace)
    for (int i = 0; i < 2; ++i)
      if (!(err = run_.enqueue(*in, c.config, next().p)).empty())
        return err;
    const double t = time(*in, c.config, 1);
    if (!(t < INFINITY))
      return "a call failed: " + cudaWhy(cudaGetLastError());
    if (us)
      *us = t;
    *calls = std::max(1, std::min(1000, int(std::ceil(s_.min_sample_s * 1e6 / std::max(t, 0.1)))));
    return "";
  }
  double sample(const Candidate &c, int32_t calls) override {
    std::string err;
    const cuda::Instance *in = run_.instance(c, &err);
    return in && err_.empty() ? time(*in, c.config, calls) : INFINITY;
  }

private:
  // Microseconds per call over `calls` calls (CUDA events), infinite when
  // a call failed.
  double time(const cuda::Instance &in, const KernelConfig &c, int32_t calls) {
    bool failed = false;
    cudaEventRecord(a_, run_.stream);
    for (int i = 0; i < calls; ++i)
      failed |= !run_.enqueue(in, c, next().p).empty();
    cudaEventRecord(b_, run_.stream);
    if (cudaEventSynchronize(b_) != cudaSuccess || failed)
      return INFINITY;
    float ms = 0;
    cudaEventElapsedTime(&ms, a_, b_);
    return double(ms) * 1e3 / calls;
  }
  DeviceSet &next() {
    DeviceSet &d = *sets_[cursor_];
    cursor_ = (cursor_ + 1) % sets_.size();
    return d;
  }
  const Settings &s_;
  Runner run_;
  std::vector<std::unique_ptr<DeviceSet>> sets_;
  size_t cursor_ = 0;
  std::string err_;
  cudaEvent_t a_ = nullptr, b_ = nullptr;
};

class CudaChecker : public Checker {
public:
  CudaChecker(const Spec &sp, const Settings &s, int64_t tokens) : sp_(sp), s_(s), run_(sp) {
    const int32_t B = tokens == 1 ? 4 : 2;
    const int32_t T = int32_t(std::min<int64_t>(tokens, 80));
    t_ = make_tensors(sp, B, T, s.seed + 7);
    deltac_fwd_params p = params_of(sp, t_);
    ref::forward(p, &o_, &ht_);
    dev_ = std::make_unique<DeviceSet>(sp, t_, &err_);
  }
  std::string check(const Candidate &c, double *eo, double *eh) override {
    if (!err_.empty())
      return "does not run: " + err_;
    std::string err;
    const cuda::Instance *in = run_.instance(c, &err);
    if (!in)
      return "does not run: " + err;
    DeviceSet &d = *dev_;
    cudaMemset(d.p.o, 0, d.o_bytes);
    cudaMemset(d.p.ht, 0, d.ht_bytes);
    if (!(err = run_.enqueue(*in, c.config, d.p)).empty())
      return "does not run: " + err;
    cudaError_t e = cudaStreamSynchronize(run_.stream);
    if (e == cudaSuccess)
      e = cudaMemcpy(t_.ob.empty() ? (void *)t_.o.data() : (void *)t_.ob.data(), d.p.o,
                     d.o_bytes, cudaMemcpyDeviceToHost);
    if (e == cudaSuccess)
      e = cudaMemcpy(t_.ht.data(), d.p.ht, d.ht_bytes, cudaMemcpyDeviceToHost);
    if (e != cudaSuccess)
      return "does not run: " + cudaWhy(e);
    return judge(sp_, s_, c, &t_, o_, ht_, eo, eh);
  }
  bool resources(const Candidate &c, int *regs, int *spill) override {
    std::string err;
    const cuda::Instance *in = run_.instance(c, &err);
    if (!in || !in->kernels)
      return false;
    const void *h[32];
    const int n = in->kernels(h, 32);
    *regs = *spill = 0;
    for (int i = 0; i < n; ++i) {
      cudaFuncAttributes a{};
      if (cudaFuncGetAttributes(&a, h[i]) != cudaSuccess) {
        cudaGetLastError();
        return false;
      }
      *regs = std::max(*regs, a.numRegs);
      *spill = std::max(*spill, int(a.localSizeBytes));
    }
    return n > 0;
  }

private:
  const Spec &sp_;
  const Settings &s_;
  Runner run_;
  Tensors t_;
  std::vector<double> o_, ht_;
  std::unique_ptr<DeviceSet> dev_;
  std::string err_;
};

} // namespace

std::string cuda::usable(int32_t *sm_count) {
  *sm_count = 0;
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess || n == 0)
    return "no usable CUDA device (" + std::string(e != cudaSuccess ? cudaWhy(e) : "none found") +
           ")";
  int dev = 0;
  cudaGetDevice(&dev);
  cudaDeviceGetAttribute(sm_count, cudaDevAttrMultiProcessorCount, dev);
  return "";
}

int cuda::device_count() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess ? n : 0;
}

std::unique_ptr<Bench> cuda_bench(const Spec &sp, const Settings &s, int32_t B, int32_t T) {
  return std::make_unique<CudaBench>(sp, s, B, T);
}

std::unique_ptr<Checker> cuda_checker(const Spec &sp, const Settings &s, int64_t tokens) {
  return std::make_unique<CudaChecker>(sp, s, tokens);
}

} // namespace deltac::tune

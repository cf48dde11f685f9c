// The tuner's backward backend (bench.h): forward + backward of one problem
// through the runtime's C API on device buffers, with the chunk states kept
// (options.saved_states, then deltac_bwd_params.saved_states) or recomputed,
// checked against the float64 reference backward and timed with CUDA events
// over input sets that together exceed the L2 cache.
#include "bench.h"

#include "deltac/convert.h"
#include "deltac/reference.h"
#include "deltac/reference_backward.h"
#include "deltac/runtime.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <random>

namespace deltac::tune {
namespace {

// Bound of the chunked backward's bf16 gradients (issue 11; the kernel
// tests' chunked_tol in tests/cuda/backward_test.cpp).
constexpr double kGradTol = 1e-2;

// Host inputs: the forward's (make_tensors, bf16 q/k/v) and dO (bf16), dht.
struct BwdHost {
  Tensors t;
  std::vector<uint16_t> dout;
  std::vector<float> dht;
};

BwdHost make_host(const Spec &sp, int32_t B, int32_t T, uint64_t seed) {
  BwdHost h;
  h.t = make_tensors(sp, B, T, seed);
  std::mt19937_64 rng(seed * 31 + 5);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  h.dout.resize(size_t(B) * T * sp.HV * sp.V);
  for (uint16_t &x : h.dout)
    x = f32_to_bf16(u(rng));
  h.dht.resize(h.t.h0.size());
  for (float &x : h.dht)
    x = 0.5f * u(rng);
  return h;
}

// Device copies of one problem: the forward's and the backward's params over
// them, and a saved-states buffer.
struct BwdSet {
  deltac_fwd_params f{};
  deltac_bwd_params b{};
  void *saved = nullptr;
  size_t saved_bytes = 0;
  std::vector<void *> bufs;
  std::string err;

  void *up(const void *src, size_t bytes) {
    if (!bytes)
      return nullptr;
    void *d = nullptr;
    cudaError_t e = cudaMalloc(&d, bytes);
    if (e == cudaSuccess)
      e = src ? cudaMemcpy(d, src, bytes, cudaMemcpyHostToDevice) : cudaMemset(d, 0, bytes);
    if (e != cudaSuccess && err.empty())
      err = "device buffer of " + std::to_string(bytes) + " bytes: " + cudaGetErrorString(e);
    bufs.push_back(d);
    return d;
  }
  BwdSet(const Spec &sp, BwdHost &h, size_t savedBytes) {
    Tensors &t = h.t;
    f = params_of(sp, t); // host pointers, replaced below
    const size_t nqk = t.qb.size() * 2, nv = t.vb.size() * 2;
    f.q = up(t.qb.data(), nqk);
    f.k = up(t.kb.data(), nqk);
    f.v = up(t.vb.data(), nv);
    f.g = static_cast<const float *>(up(t.g.data(), t.g.size() * 4));
    f.beta = static_cast<const float *>(up(t.beta.data(), t.beta.size() * 4));
    f.h0 = up(t.h0.data(), t.h0.size() * 4);
    f.o = up(nullptr, nv);
    f.ht = up(nullptr, t.ht.size() * 4);
    b.variant = f.variant;
    b.B = f.B, b.T = f.T, b.H = f.H, b.HV = f.HV, b.K = f.K, b.V = f.V, b.N = f.N;
    b.in_dtype = b.out_dtype = sp.in_dtype;
    b.state_layout = f.state_layout;
    b.q = f.q, b.k = f.k, b.v = f.v, b.g = f.g, b.beta = f.beta, b.h0 = f.h0;
    b.dout = up(h.dout.data(), h.dout.size() * 2);
    b.dht = up(h.dht.data(), h.dht.size() * 4);
    b.dq = up(nullptr, nqk);
    b.dk = up(nullptr, nqk);
    b.dv = up(nullptr, nv);
    b.dg = up(nullptr, t.g.size() * 4);
    b.dbeta = up(nullptr, t.beta.size() * 4);
    b.dh0 = up(nullptr, t.h0.size() * 4);
    b.qk_l2norm = f.qk_l2norm;
    saved = up(nullptr, savedBytes); // cudaMalloc: 256-byte aligned
    saved_bytes = savedBytes;
  }
  ~BwdSet() {
    for (void *d : bufs)
      cudaFree(d);
  }
  BwdSet(const BwdSet &) = delete;
  BwdSet &operator=(const BwdSet &) = delete;
};

// Workspaces (the forward's and the backward's, grown to the largest need)
// and the stream the calls run on.
struct BwdRunner {
  cudaStream_t stream = nullptr;
  void *fws = nullptr, *bws = nullptr;
  size_t fws_bytes = 0, bws_bytes = 0;

  BwdRunner() { cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking); }
  ~BwdRunner() {
    cudaFree(fws);
    cudaFree(bws);
    cudaStreamDestroy(stream);
  }
  deltac_options options(const BwdSet &d, bool keep, bool backward) const {
    deltac_options o = deltac_default_options();
    o.device = DELTAC_DEVICE_CUDA;
    o.device_pointers = 1;
    o.cuda_stream = stream;
    o.workspace = backward ? bws : fws;
    o.workspace_bytes = backward ? bws_bytes : fws_bytes;
    if (keep && !backward)
      o.saved_states = d.saved, o.saved_states_bytes = d.saved_bytes;
    return o;
  }
  deltac_bwd_params bwd(const BwdSet &d, bool keep) const {
    deltac_bwd_params b = d.b;
    if (keep)
      b.saved_states = d.saved, b.saved_states_bytes = d.saved_bytes;
    return b;
  }
  // Sizes both workspaces for d either way; "" or why not.
  std::string size(const BwdSet &d, size_t *bwd_keep = nullptr, size_t *bwd_plain = nullptr) {
    size_t need[2][2] = {};
    for (int keep = 0; keep < 2; ++keep) {
      deltac_options o = options(d, keep, false);
      if (deltac_workspace_size(&d.f, &o, &need[keep][0]) != 0)
        return std::string("deltac_workspace_size: ") + deltac_last_error();
      deltac_bwd_params b = bwd(d, keep);
      o = options(d, keep, true);
      if (deltac_backward_workspace_size(&b, &o, &need[keep][1]) != 0)
        return std::string("deltac_backward_workspace_size: ") + deltac_last_error();
    }
    if (bwd_keep)
      *bwd_keep = need[1][1], *bwd_plain = need[0][1];
    for (int w = 0; w < 2; ++w) {
      const size_t n = std::max(need[0][w], need[1][w]);
      void *&buf = w ? bws : fws;
      size_t &have = w ? bws_bytes : fws_bytes;
      if (n <= have)
        continue;
      cudaStreamSynchronize(stream);
      cudaFree(buf);
      buf = nullptr, have = 0;
      if (cudaError_t e = cudaMalloc(&buf, n); e != cudaSuccess)
        return "workspace of " + std::to_string(n) + " bytes: " + cudaGetErrorString(e);
      have = n;
    }
    return "";
  }
  // Enqueues one forward + backward (no sync); "" or the refusal.
  std::string call(const BwdSet &d, bool keep) {
    deltac_options o = options(d, keep, false);
    if (deltac_forward(&d.f, &o) != 0)
      return std::string("deltac_forward: ") + deltac_last_error();
    deltac_bwd_params b = bwd(d, keep);
    o = options(d, keep, true);
    if (deltac_backward(&b, &o) != 0)
      return std::string("deltac_backward: ") + deltac_last_error();
    return "";
  }
};

const char *choice_name(bool keep) { return keep ? "saved_states=keep" : "saved_states=recompute"; }

class CudaBackwardBench : public BackwardBench {
public:
  CudaBackwardBench(const Spec &sp, const Settings &s, int32_t B, int32_t T, std::string *why)
      : s_(s) {
    BwdHost h = make_host(sp, B, T, s.seed);
    saved_ = deltac_saved_states_size(sp.variant, int64_t(B) * T, B, sp.HV, sp.K, sp.V,
                                      sp.in_dtype);
    int dev = 0, l2 = 0;
    cudaGetDevice(&dev);
    cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, dev);
    const size_t one = std::max<size_t>(h.t.bytes() + 2 * h.dout.size() + saved_, 1);
    const size_t want = std::clamp<size_t>((2 * size_t(l2) + one - 1) / one, 2, 8);
    for (size_t i = 0; i < want && why->empty(); ++i) {
      sets_.push_back(std::make_unique<BwdSet>(sp, h, saved_));
      *why = sets_.back()->err;
    }
    if (why->empty())
      *why = run_.size(*sets_[0], &ws_keep_, &ws_plain_);
    cudaEventCreate(&a_);
    cudaEventCreate(&b_);
  }
  ~CudaBackwardBench() override {
    cudaEventDestroy(a_);
    cudaEventDestroy(b_);
  }
  std::string warm(bool keep, int32_t *calls, double *us) override {
    for (int i = 0; i < 2; ++i)
      if (std::string e = run_.call(next(), keep); !e.empty())
        return e;
    const double t = time(keep, 1);
    if (!(t < INFINITY))
      return std::string("a call failed: ") + cudaGetErrorString(cudaGetLastError());
    *us = t;
    *calls = std::max(1, std::min(1000, int(std::ceil(s_.min_sample_s * 1e6 / std::max(t, 0.1)))));
    return "";
  }
  double sample(bool keep, int32_t calls) override { return time(keep, calls); }
  uint64_t saved_bytes() const override { return saved_; }
  uint64_t workspace_bytes(bool keep) const override { return keep ? ws_keep_ : ws_plain_; }

private:
  double time(bool keep, int32_t calls) {
    bool failed = false;
    cudaEventRecord(a_, run_.stream);
    for (int i = 0; i < calls; ++i)
      failed |= !run_.call(next(), keep).empty();
    cudaEventRecord(b_, run_.stream);
    if (cudaEventSynchronize(b_) != cudaSuccess || failed)
      return INFINITY;
    float ms = 0;
    cudaEventElapsedTime(&ms, a_, b_);
    return double(ms) * 1e3 / calls;
  }
  const BwdSet &next() {
    const BwdSet &d = *sets_[cursor_];
    cursor_ = (cursor_ + 1) % sets_.size();
    return d;
  }
  const Settings &s_;
  BwdRunner run_;
  std::vector<std::unique_ptr<BwdSet>> sets_;
  size_t cursor_ = 0, saved_ = 0, ws_keep_ = 0, ws_plain_ = 0;
  cudaEvent_t a_ = nullptr, b_ = nullptr;
};

} // namespace

std::unique_ptr<BackwardBench> cuda_backward_bench(const Spec &sp, const Settings &s,
                                                   int32_t B, int32_t T, std::string *why) {
  why->clear();
  auto b = std::make_unique<CudaBackwardBench>(sp, s, B, T, why);
  if (!why->empty())
    return nullptr;
  return b;
}

std::string cuda_backward_check(const Spec &sp, const Settings &s, int32_t B, int32_t T,
                                bool keep, double *err) {
  *err = 0;
  BwdHost h = make_host(sp, B, T, s.seed + 11);
  const size_t saved = deltac_saved_states_size(sp.variant, int64_t(B) * T, B, sp.HV, sp.K,
                                                sp.V, sp.in_dtype);
  BwdSet d(sp, h, saved);
  if (!d.err.empty())
    return "does not run: " + d.err;
  BwdRunner run;
  std::string why = run.size(d);
  if (why.empty())
    why = run.call(d, keep);
  if (!why.empty())
    return "does not run: " + why;
  if (cudaError_t e = cudaStreamSynchronize(run.stream); e != cudaSuccess)
    return std::string("does not run: ") + cudaGetErrorString(e);
  // The host reference over the same (bf16-rounded) inputs.
  deltac_bwd_params hb = d.b;
  Tensors &t = h.t;
  hb.q = t.qb.data(), hb.k = t.kb.data(), hb.v = t.vb.data();
  hb.g = t.g.empty() ? nullptr : t.g.data();
  hb.beta = t.beta.data(), hb.h0 = t.h0.data();
  hb.dout = h.dout.data(), hb.dht = h.dht.data();
  const ref::Grads want = ref::backward(hb);
  auto fetch = [&](const void *src, size_t n, auto *out) {
    out->resize(n);
    if (n)
      cudaMemcpy(out->data(), src, n * sizeof((*out)[0]), cudaMemcpyDeviceToHost);
  };
  std::vector<uint16_t> dq, dk, dv; // bf16
  std::vector<float> dbeta, dg, dh0;
  fetch(d.b.dq, want.dq.size(), &dq);
  fetch(d.b.dk, want.dk.size(), &dk);
  fetch(d.b.dv, want.dv.size(), &dv);
  fetch(d.b.dbeta, want.dbeta.size(), &dbeta);
  fetch(d.b.dg, want.dg.size(), &dg);
  fetch(d.b.dh0, want.dh0.size(), &dh0);
  if (!s.corrupt.empty() && s.corrupt == choice_name(keep))
    for (uint16_t &x : dv)
      x = f32_to_bf16(bf16_to_f32(x) + 1.0f);
  const std::pair<const char *, double> errs[] = {
      {"dq", ref::rel_rms(dq.data(), want.dq)},
      {"dk", ref::rel_rms(dk.data(), want.dk)},
      {"dv", ref::rel_rms(dv.data(), want.dv)},
      {"dbeta", ref::rel_rms(dbeta.data(), want.dbeta)},
      {"dg", ref::rel_rms(dg.data(), want.dg)},
      {"dh0", ref::rel_rms(dh0.data(), want.dh0)}};
  std::string worst;
  for (auto [name, e] : errs) {
    if (!(e == e)) // a NaN counts as the worst
      e = INFINITY;
    if (e > *err || worst.empty())
      *err = e, worst = name;
  }
  if (!(*err <= kGradTol)) {
    char b[160];
    std::snprintf(b, sizeof b, "wrong answer: %s relative RMS %.3g against float64 (limit %.0e)",
                  worst.c_str(), *err, kGradTol);
    return b;
  }
  return "";
}

} // namespace deltac::tune

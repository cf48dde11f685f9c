// Inputs, outputs and options of the main job.
#ifndef DELTAC_EXAMPLES_DEMO_H
#define DELTAC_EXAMPLES_DEMO_H

#include "deltac/convert.h"
#include "deltac/flops.h"
#include "deltac/reference.h"
#include "deltac/params.h"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <random>
#include <string>
#include <vector>

namespace demo {

using deltac::f32_to_bf16;

// 64-byte aligned storage for states, as an inference engine's state pool
// has: the CPU decode kernel streams large aligned states (docs/performance.md).
template <class T> struct Aligned64 {
  using value_type = T;
  Aligned64() = default;
  template <class U> Aligned64(const Aligned64<U> &) {}
  T *allocate(size_t n) {
    return static_cast<T *>(::operator new(n * sizeof(T), std::align_val_t(64)));
  }
  void deallocate(T *p, size_t) { ::operator delete(p, std::align_val_t(64)); }
  template <class U> bool operator==(const Aligned64<U> &) const { return true; }
  template <class U> bool operator!=(const Aligned64<U> &) const { return false; }
};
using StateVec = std::vector<float, Aligned64<float>>;

// One forward call's inputs: q, k, v in bf16, gates and betas in f32.
struct Problem {
  int B, T, H, HV, D;
  std::vector<uint16_t> q, k, v;
  std::vector<float> g, beta;
  StateVec h0;

  Problem(std::mt19937_64 &rng, int B, int T, int H, int HV, int D, bool with_h0)
      : B(B), T(T), H(H), HV(HV), D(D) {
    std::normal_distribution<float> n01(0.f, 1.f);
    std::uniform_real_distribution<float> u(-5.f, 0.5f);
    size_t tok = size_t(B) * T;
    auto fill_bf16 = [&](std::vector<uint16_t> &x, size_t n) {
      x.resize(n);
      for (auto &e : x) e = f32_to_bf16(n01(rng));
    };
    fill_bf16(q, tok * H * D);
    fill_bf16(k, tok * H * D);
    fill_bf16(v, tok * HV * D);
    g.resize(tok * HV);
    beta.resize(tok * HV);
    for (auto &e : g) e = -std::exp(u(rng)); // decays from ~1 down to ~0.2
    for (auto &e : beta) e = 1.f / (1.f + std::exp(-n01(rng)));
    if (with_h0) {
      h0.resize(size_t(B) * HV * D * D);
      for (auto &e : h0) e = 0.1f * n01(rng);
    }
  }

  // Host (or device) pointers of the outputs go in o and ht.
  deltac_fwd_params params(void *o, float *ht) const {
    deltac_fwd_params p{};
    p.variant = DELTAC_VARIANT_GATED;
    p.B = B, p.T = T, p.H = H, p.HV = HV, p.K = D, p.V = D, p.N = B;
    p.in_dtype = DELTAC_BF16, p.out_dtype = DELTAC_BF16;
    p.state_dtype = DELTAC_F32, p.state_layout = DELTAC_STATE_KV;
    p.q = q.data(), p.k = k.data(), p.v = v.data();
    p.g = g.data(), p.beta = beta.data();
    p.h0 = h0.empty() ? nullptr : h0.data();
    p.o = o, p.ht = ht;
    p.scale = 1.f / std::sqrt(float(D));
    p.qk_l2norm = 1;
    return p;
  }
};

struct Outputs {
  std::vector<uint16_t> o;
  StateVec ht;
  explicit Outputs(const Problem &pb)
      : o(size_t(pb.B) * pb.T * pb.HV * pb.D),
        ht(size_t(pb.B) * pb.HV * pb.D * pb.D) {}
};

// FLOPs of the form that ran: the chunked scan with chunk `chunk`, or the
// recurrence when chunk is 0.
inline double flops(const Problem &pb, int chunk) {
  double per = chunk ? deltac::chunked_flops_per_token(pb.D, pb.D, chunk)
                     : deltac::recurrent_flops_per_token(pb.D, pb.D);
  return per * pb.B * pb.T * pb.HV;
}

struct Options {
  int tokens = 4096, batch = 8, threads = 0, reps = 3;
  unsigned long seed = 2026;
  bool cpu = true, gpu = true;
};

inline Options parse(int argc, char **argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto val = [&](const char *name, int *dst) {
      std::string pre = std::string("--") + name + "=";
      if (a.rfind(pre, 0) != 0) return false;
      char *end = nullptr;
      long x = std::strtol(a.c_str() + pre.size(), &end, 10);
      if (*end || x < 0 || x > (1 << 24)) {
        std::fprintf(stderr, "deltac demo: %s expects a non-negative integer\n", name);
        std::exit(1);
      }
      *dst = int(x);
      return true;
    };
    if (val("tokens", &o.tokens) || val("batch", &o.batch) ||
        val("threads", &o.threads) || val("reps", &o.reps))
      continue;
    if (a == "--device=cpu") o.gpu = false;
    else if (a == "--device=cuda") o.cpu = false;
    else if (a == "--device=auto") {}
    else {
      std::fprintf(stderr,
                   "deltac demo: unknown option '%s'; expected --tokens=N "
                   "--batch=N --threads=N --reps=N --device=auto|cpu|cuda\n",
                   a.c_str());
      std::exit(1);
    }
  }
  if (o.tokens < 1 || o.batch < 1 || o.reps < 1) {
    std::fprintf(stderr, "deltac demo: --tokens, --batch and --reps must be >= 1\n");
    std::exit(1);
  }
  return o;
}

#ifdef DELTAC_DEMO_CUDA
bool cuda_present();
// Copies the problem to the GPU, runs the generated CUDA entry `reps` times,
// copies the outputs back into *out; returns the median seconds of one call.
double time_cuda(const Problem &pb, Outputs *out, int reps);
#endif

} // namespace demo

#endif // DELTAC_EXAMPLES_DEMO_H

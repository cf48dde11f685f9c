// GPU tests of the CUDA backward (deltac/cuda/backward.cuh, and the chunked
// deltac/cuda/backward_chunked.cuh where deltac/backward_rules.h picks it or
// DELTAC_CUDA_BWD forces it) through deltac_backward with device pointers:
// every gradient against the float64 reference (deltac/reference_backward.h)
// on the same rounded inputs, and CUDA == CPU (deltac_backward with host
// pointers) or chunked == recurrent. Each case draws its own
// seed (printed; DELTAC_TEST_SEED=<n> replays it). Cases skip without a GPU.
#include "deltac/backward_rules.h"
#include "deltac/reference_backward.h"
#include "deltac/runtime.h"
#include "deltac/test_seed.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <unistd.h>

namespace {

bool have_gpu() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

struct Case {
  std::string name;
  deltac_variant var = DELTAC_VARIANT_GATED;
  int dtype = DELTAC_F32;  // in and out dtype
  int B = 1, T = 16, H = 2, HV = 4, K = 64, V = 64;
  std::vector<int64_t> cu;  // empty: B sequences of T tokens
  bool h0 = true, dht = true;
  int l2norm = 1, layout = DELTAC_STATE_KV;
  float scale = 0.f;
  float beta_lo = 0.f, beta_hi = 1.f, g_lo = -1.f, g_hi = 0.f;
  bool workspace = true;  // pass a workspace (else the stream-ordered allocator)
  double tol = 0;         // 0: by dtype
  bool reset = false;     // gated: a -inf gate (a full reset) at token 5 of every head
  int wbv = 0;            // the chunked path's warp scans (bf16): V tile forced (0: the rule)
  int g16_blocks = 0;     // grad16's grid capped (0: a block a multiprocessor)
  bool dv_unaligned = false;  // dv one element past a 16-byte boundary (the bf16 path's guard,
                              // bwdc::aligned: the sweep runs)
  bool dq_unaligned = false;  // dq, dk one element past a 16-byte boundary (grad16 writes them
                              // 8 bytes at a time; bwdc::aligned: the sweep runs)
  bool v_unaligned = false;   // v and dO 8 bytes past a 16-byte boundary (the chunked kernels
                              // copy 16-byte rows; bwdc::aligned: the sweep runs)
};

// Saved states (deltac_options.saved_states, deltac_bwd_params.saved_states):
// none; a buffer the forward wrote (deltac_forward with the transposed TMA
// scan forced: options.config scan 4); a buffer with its flag 0 (the
// backward fills it).
enum class Saved { none, forward, fill };

// What a run with saved states saw: the header flag after the forward, and
// the forward's o (bf16 bits) with and without the saved states.
struct SavedRun {
  int32_t flag = -1;
  std::vector<uint16_t> o_saved, o_plain;
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

// Host data of one problem: inputs as the call's dtype (raw bits) and as the
// doubles they round to.
struct Data {
  int N = 0;
  int64_t tokens = 0;
  std::vector<double> q, k, v, g, beta, h0, dout, dht;  // the rounded values
  std::vector<uint16_t> q16, k16, v16, dout16;           // bf16 / f16 bits
  std::vector<float> q32, k32, v32, dout32, g32, beta32, h032, dht32;
};

size_t gsize(const Case& c, int64_t tokens) {
  return c.var == DELTAC_VARIANT_KDA ? size_t(tokens) * c.HV * c.K
         : c.var == DELTAC_VARIANT_GATED ? size_t(tokens) * c.HV : 0;
}

// Rounds x to the dtype; 16-bit dtypes give their bits in *bits.
double round_to(int dt, float x, uint16_t* bits) {
  if (dt == DELTAC_BF16) {
    const __nv_bfloat16 h = __float2bfloat16(x);
    std::memcpy(bits, &h, 2);
    return double(__bfloat162float(h));
  }
  if (dt == DELTAC_F16) {
    const __half h = __float2half(x);
    std::memcpy(bits, &h, 2);
    return double(__half2float(h));
  }
  return double(x);
}

Data make(const Case& c, uint64_t seed) {
  Data d;
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> nd(0.f, 1.f);
  std::uniform_real_distribution<float> ub(c.beta_lo, c.beta_hi), ug(c.g_lo, c.g_hi);
  d.N = c.cu.empty() ? c.B : int(c.cu.size()) - 1;
  d.tokens = int64_t(c.B) * c.T;
  const float kq = c.l2norm ? 1.f : 1.f / std::sqrt(float(c.K));
  auto fill = [&](size_t n, float sd, std::vector<double>& x, std::vector<uint16_t>& b16,
                  std::vector<float>& b32) {
    x.resize(n);
    b16.resize(n);
    b32.resize(n);
    for (size_t i = 0; i < n; ++i) {
      x[i] = round_to(c.dtype, sd * nd(rng), &b16[i]);
      b32[i] = float(x[i]);
    }
  };
  const size_t nqk = size_t(d.tokens) * c.H * c.K, nv = size_t(d.tokens) * c.HV * c.V;
  fill(nqk, kq, d.q, d.q16, d.q32);
  fill(nqk, kq, d.k, d.k16, d.k32);
  fill(nv, 1.f, d.v, d.v16, d.v32);
  fill(nv, 1.f, d.dout, d.dout16, d.dout32);
  auto fill32 = [&](size_t n, auto&& gen, std::vector<double>& x, std::vector<float>& b32) {
    x.resize(n);
    b32.resize(n);
    for (size_t i = 0; i < n; ++i) x[i] = b32[i] = gen();
  };
  fill32(gsize(c, d.tokens), [&] { return ug(rng); }, d.g, d.g32);
  if (c.reset && c.var == DELTAC_VARIANT_GATED && d.tokens > 5)
    for (int j = 0; j < c.HV; ++j) d.g[5 * c.HV + j] = d.g32[5 * c.HV + j] = -INFINITY;
  fill32(size_t(d.tokens) * c.HV, [&] { return ub(rng); }, d.beta, d.beta32);
  const size_t ns = size_t(d.N) * c.HV * c.K * c.V;
  fill32(c.h0 ? ns : 0, [&] { return 0.3f * nd(rng); }, d.h0, d.h032);
  fill32(c.dht ? ns : 0, [&] { return 0.3f * nd(rng); }, d.dht, d.dht32);
  return d;
}

deltac_bwd_params base(const Case& c, const Data& d) {
  deltac_bwd_params p{};
  p.variant = c.var;
  p.B = c.B, p.T = c.T, p.H = c.H, p.HV = c.HV, p.K = c.K, p.V = c.V, p.N = d.N;
  p.state_layout = c.layout;
  p.scale = c.scale;
  p.qk_l2norm = c.l2norm;
  return p;
}

struct Grads {
  std::vector<double> dq, dk, dv, dg, dbeta, dh0;
};

Grads reference(const Case& c, const Data& d) {
  deltac_bwd_params p = base(c, d);
  p.in_dtype = p.out_dtype = DELTAC_BWD_F64;
  p.q = d.q.data(), p.k = d.k.data(), p.v = d.v.data(), p.dout = d.dout.data();
  p.g = d.g.empty() ? nullptr : d.g.data();
  p.beta = d.beta.data();
  p.h0 = d.h0.empty() ? nullptr : d.h0.data();
  p.dht = d.dht.empty() ? nullptr : d.dht.data();
  p.cu_seqlens = c.cu.empty() ? nullptr : c.cu.data();
  deltac::ref::Grads r = deltac::ref::backward(p);
  Grads g{r.dq, r.dk, r.dv, r.dg, r.dbeta, c.h0 ? r.dh0 : std::vector<double>{}};
  return g;
}

size_t esize(int dt) { return dt == DELTAC_F32 ? 4 : 2; }

double elem(const std::vector<char>& raw, int dt, size_t i) {
  if (dt == DELTAC_F32) return reinterpret_cast<const float*>(raw.data())[i];
  const uint16_t b = reinterpret_cast<const uint16_t*>(raw.data())[i];
  if (dt == DELTAC_BF16) {
    __nv_bfloat16 h;
    std::memcpy(&h, &b, 2);
    return __bfloat162float(h);
  }
  __half h;
  std::memcpy(&h, &b, 2);
  return __half2float(h);
}

const void* in_ptr(const Case& c, const std::vector<uint16_t>& b16, const std::vector<float>& b32) {
  return c.dtype == DELTAC_F32 ? static_cast<const void*>(b32.data()) : b16.data();
}

// The forward of p's inputs (device pointers, bf16 o) on s with the
// transposed TMA scan (cuda_chunked's default knobs, scan 4), into o, writing
// saved (null: none). "" or the failure.
std::string forward_tmat(const Case& c, const deltac_bwd_params& b, void* o, void* saved,
                         size_t saved_bytes, cudaStream_t s) {
  deltac_fwd_params f{};
  f.variant = b.variant;
  f.B = b.B, f.T = b.T, f.H = b.H, f.HV = b.HV, f.K = b.K, f.V = b.V, f.N = b.N;
  f.in_dtype = f.out_dtype = c.dtype;
  f.state_dtype = DELTAC_F32;
  f.state_layout = b.state_layout;
  f.q = b.q, f.k = b.k, f.v = b.v;
  f.g = static_cast<const float*>(b.g), f.beta = static_cast<const float*>(b.beta);
  f.h0 = b.h0, f.o = o, f.cu_seqlens = b.cu_seqlens;
  f.scale = b.scale, f.qk_l2norm = b.qk_l2norm;
  deltac_options opt = deltac_default_options();
  opt.device = DELTAC_DEVICE_CUDA;
  opt.device_pointers = 1;
  opt.cuda_stream = s;
  opt.chunk = 64;
  deltac_run_info info{};
  if (deltac_forward_info(&f, &opt, &info) != 0) return deltac_last_error();
  opt.chunk = 0;
  opt.config.family = "cuda_chunked";
  opt.config.chunk = info.chunk, opt.config.tile_v = info.tile_v, opt.config.warps = info.warps;
  opt.config.stages = info.stages, opt.config.scan = 4;
  opt.saved_states = saved, opt.saved_states_bytes = saved_bytes;
  if (deltac_forward(&f, &opt) != 0) return deltac_last_error();
  return "";
}

// The gradients from deltac_backward: on the GPU (device pointers) or, with
// cpu, host pointers. "" or the failure in *err. sv: saved states (GPU
// only; what the run saw in *sr).
Grads run(const Case& c, const Data& d, bool cpu, std::string* err, Saved sv = Saved::none,
          SavedRun* sr = nullptr) {
  deltac_bwd_params p = base(c, d);
  p.in_dtype = p.out_dtype = c.dtype;
  const size_t nqk = d.q.size(), nv = d.v.size(), ng = d.g.size(), nb = d.beta.size();
  const size_t ns = d.h0.size(), in = esize(c.dtype);
  std::vector<char> dq(nqk * in), dk(nqk * in), dv(nv * in);
  std::vector<float> dg(ng), dbeta(nb), dh0(ns);
  Grads out;
  deltac_options opt = deltac_default_options();
  std::vector<void*> bufs;
  auto dev = [&](const void* src, size_t bytes) -> void* {
    if (!src || !bytes) return nullptr;
    if (cpu) return const_cast<void*>(src);
    void* x = nullptr;
    if (cudaMalloc(&x, bytes) != cudaSuccess) return nullptr;
    bufs.push_back(x);
    cudaMemcpy(x, src, bytes, cudaMemcpyHostToDevice);
    return x;
  };
  auto out_buf = [&](void* host, size_t bytes) -> void* {
    if (!bytes) return nullptr;
    if (cpu) return host;
    void* x = nullptr;
    if (cudaMalloc(&x, bytes) != cudaSuccess) return nullptr;
    bufs.push_back(x);
    cudaMemset(x, 0xff, bytes);  // NaN: every element must be written
    return x;
  };
  p.q = dev(in_ptr(c, d.q16, d.q32), nqk * in);
  p.k = dev(in_ptr(c, d.k16, d.k32), nqk * in);
  // src at 8 bytes past a 16-byte boundary of a fresh buffer
  auto dev8 = [&](const void* src, size_t bytes) -> const void* {
    if (cpu) return src;
    char* x = nullptr;
    if (cudaMalloc(reinterpret_cast<void**>(&x), bytes + 16) != cudaSuccess) return nullptr;
    bufs.push_back(x);
    cudaMemcpy(x + 8, src, bytes, cudaMemcpyHostToDevice);
    return x + 8;
  };
  if (c.v_unaligned) {
    p.v = dev8(in_ptr(c, d.v16, d.v32), nv * in);
    p.dout = dev8(in_ptr(c, d.dout16, d.dout32), nv * in);
  } else {
    p.v = dev(in_ptr(c, d.v16, d.v32), nv * in);
    p.dout = dev(in_ptr(c, d.dout16, d.dout32), nv * in);
  }
  p.g = dev(d.g32.data(), ng * 4);
  p.beta = dev(d.beta32.data(), nb * 4);
  p.h0 = dev(d.h032.data(), ns * 4);
  p.dht = dev(d.dht32.data(), d.dht32.size() * 4);
  p.cu_seqlens = static_cast<const int64_t*>(dev(c.cu.data(), c.cu.size() * 8));
  p.dq = out_buf(dq.data(), dq.size() + (c.dq_unaligned ? 16 : 0));
  p.dk = out_buf(dk.data(), dk.size() + (c.dq_unaligned ? 16 : 0));
  if (c.dq_unaligned && !cpu) {
    p.dq = static_cast<char*>(p.dq) + in;
    p.dk = static_cast<char*>(p.dk) + in;
  }
  p.dv = out_buf(dv.data(), dv.size() + (c.dv_unaligned ? 16 : 0));
  if (c.dv_unaligned && !cpu) p.dv = static_cast<char*>(p.dv) + in;
  p.dg = out_buf(dg.data(), ng * 4);
  p.dbeta = out_buf(dbeta.data(), nb * 4);
  p.dh0 = out_buf(dh0.data(), ns * 4);
  cudaStream_t s = nullptr;
  void* ws = nullptr;
  if (!cpu) {
    cudaStreamCreate(&s);
    opt.device_pointers = 1;
    opt.cuda_stream = s;
  }
  if (!cpu && sv != Saved::none && err->empty()) {
    const size_t sb = deltac::bwd_saved_layout(d.tokens, d.N, c.HV, c.K, c.V).total;
    void* saved = nullptr;
    if (cudaMalloc(&saved, sb) != cudaSuccess) *err = "cudaMalloc of the saved states";
    bufs.push_back(saved);
    cudaMemset(saved, 0xff, sb);  // the flag too: the forward must zero it
    if (sv == Saved::fill) cudaMemset(saved, 0, 4);
    p.saved_states = saved, p.saved_states_bytes = sb;
    if (sv == Saved::forward && err->empty()) {
      const size_t ob = nv * in;
      void *o1 = out_buf(nullptr, ob), *o2 = out_buf(nullptr, ob);
      std::string e1 = forward_tmat(c, p, o1, saved, sb, s);
      std::string e2 = e1.empty() ? forward_tmat(c, p, o2, nullptr, 0, s) : "";
      *err = e1.empty() ? e2 : e1;
      cudaStreamSynchronize(s);
      if (sr) {
        cudaMemcpy(&sr->flag, saved, 4, cudaMemcpyDeviceToHost);
        sr->o_saved.resize(nv), sr->o_plain.resize(nv);
        cudaMemcpy(sr->o_saved.data(), o1, ob, cudaMemcpyDeviceToHost);
        cudaMemcpy(sr->o_plain.data(), o2, ob, cudaMemcpyDeviceToHost);
      }
    }
  }
  if (!cpu) {
    size_t bytes = 0;
    if (deltac_backward_workspace_size(&p, &opt, &bytes) != 0) {
      *err = deltac_last_error();
    } else if (c.workspace) {
      cudaMalloc(&ws, bytes ? bytes : 256);
      opt.workspace = ws;
      opt.workspace_bytes = bytes;
    }
  }
  if (err->empty() && deltac_backward(&p, &opt) != 0) *err = deltac_last_error();
  if (!cpu) {
    const cudaError_t e = cudaStreamSynchronize(s);
    if (err->empty() && e != cudaSuccess) *err = cudaGetErrorString(e);
    auto back = [&](void* host, const void* devp, size_t bytes) {
      if (bytes) cudaMemcpy(host, devp, bytes, cudaMemcpyDeviceToHost);
    };
    back(dq.data(), p.dq, dq.size());
    back(dk.data(), p.dk, dk.size());
    back(dv.data(), p.dv, dv.size());
    back(dg.data(), p.dg, ng * 4);
    back(dbeta.data(), p.dbeta, nb * 4);
    back(dh0.data(), p.dh0, ns * 4);
    for (void* x : bufs) cudaFree(x);
    if (ws) cudaFree(ws);
    cudaStreamDestroy(s);
  }
  auto conv = [&](const std::vector<char>& raw, size_t n) {
    std::vector<double> x(n);
    for (size_t i = 0; i < n; ++i) x[i] = elem(raw, c.dtype, i);
    return x;
  };
  out.dq = conv(dq, nqk);
  out.dk = conv(dk, nqk);
  out.dv = conv(dv, nv);
  out.dg.assign(dg.begin(), dg.end());
  out.dbeta.assign(dbeta.begin(), dbeta.end());
  out.dh0.assign(dh0.begin(), dh0.end());
  return out;
}

// ||a - b|| / ||b|| (0 when both are 0; inf when a holds a non-finite value).
double rel(const std::vector<double>& a, const std::vector<double>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < b.size(); ++i) {
    if (!std::isfinite(a[i])) return INFINITY;
    num += (a[i] - b[i]) * (a[i] - b[i]);
    den += b[i] * b[i];
  }
  if (den == 0) return num == 0 ? 0 : INFINITY;
  return std::sqrt(num / den);
}

void expect_close(const Grads& got, const Grads& want, double tol, const char* what) {
  const struct {
    const char* name;
    const std::vector<double>& a;
    const std::vector<double>& b;
  } gs[] = {{"dq", got.dq, want.dq},       {"dk", got.dk, want.dk},
            {"dv", got.dv, want.dv},       {"dg", got.dg, want.dg},
            {"dbeta", got.dbeta, want.dbeta}, {"dh0", got.dh0, want.dh0}};
  for (const auto& g : gs) {
    ASSERT_EQ(g.a.size(), g.b.size()) << g.name;
    const double e = rel(g.a, g.b);
    std::printf("  %s %-5s rel RMS %.3g\n", what, g.name, e);
    EXPECT_LE(e, tol) << what << " " << g.name;
  }
}

double tol_of(const Case& c) {
  if (c.tol > 0) return c.tol;
  return c.dtype == DELTAC_BF16 ? 5e-3 : c.dtype == DELTAC_F16 ? 2e-3 : 1e-5;
}
// Where the bf16 gradient kernel runs (bf16, aligned), its operands (the
// states, u, dr, the C x C terms) are rounded to bf16, as fla's states:
// issue 11's bound for bf16 gradients, 1e-2 (measured worst 4.4e-3).
double chunked_tol(const Case& c) {
  const bool grad16 =
      c.dtype == DELTAC_BF16 && !c.dv_unaligned && !c.v_unaligned && !c.dq_unaligned;
  return c.tol > 0 || !grad16 ? tol_of(c) : 1e-2;
}

class Backward : public ::testing::TestWithParam<Case> {};

TEST_P(Backward, MatchesFloat64Reference) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  const Case& c = GetParam();
  const uint64_t seed = deltac::test_seed();
  SCOPED_TRACE(deltac::test_seed_note(seed));
  std::printf("%s: %s\n", c.name.c_str(), deltac::test_seed_note(seed).c_str());
  const Data d = make(c, seed);
  std::string err;
  const Grads got = run(c, d, false, &err);
  ASSERT_EQ(err, "");
  expect_close(got, reference(c, d), tol_of(c), "cuda vs f64");
  if (c.dtype != DELTAC_F16) {  // the CPU backward takes f32 and bf16
    std::string cerr;
    const Grads cpu = run(c, d, true, &cerr);
    ASSERT_EQ(cerr, "");
    expect_close(got, cpu, tol_of(c), "cuda vs cpu");
  }
}

// The chunked backward (deltac/cuda/backward_chunked.cuh), forced by
// DELTAC_CUDA_BWD=chunked whatever the length rule says: against float64,
// and against the recurrent sweep (DELTAC_CUDA_BWD=recurrent) on the same
// inputs.
struct ForcePath {
  explicit ForcePath(const char* path) { setenv("DELTAC_CUDA_BWD", path, 1); }
  ~ForcePath() { unsetenv("DELTAC_CUDA_BWD"); }
};

// The warp scans' V tile (backward_chunked.cuh, tests only).
struct ForceTile {
  explicit ForceTile(int bv) {
    if (bv) setenv("DELTAC_CUDA_BWD_WBV", std::to_string(bv).c_str(), 1);
  }
  ~ForceTile() { unsetenv("DELTAC_CUDA_BWD_WBV"); }
};

// grad16's grid capped at n blocks (backward_chunked.cuh, tests only), so
// each block takes several items and runs their prefetches.
struct ForceG16Blocks {
  explicit ForceG16Blocks(int n) : on(n > 0) {
    if (on) setenv("DELTAC_CUDA_BWD_G16_BLOCKS", std::to_string(n).c_str(), 1);
  }
  ~ForceG16Blocks() {
    if (on) unsetenv("DELTAC_CUDA_BWD_G16_BLOCKS");
  }
  bool on;
};

class BackwardChunked : public ::testing::TestWithParam<Case> {};

TEST_P(BackwardChunked, MatchesFloat64AndRecurrent) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  const Case& c = GetParam();
  const uint64_t seed = deltac::test_seed();
  SCOPED_TRACE(deltac::test_seed_note(seed));
  std::printf("%s: %s\n", c.name.c_str(), deltac::test_seed_note(seed).c_str());
  const Data d = make(c, seed);
  std::string err;
  Grads got, rec;
  {
    ForcePath f("chunked");
    ForceTile b(c.wbv);
    ForceG16Blocks g(c.g16_blocks);
    got = run(c, d, false, &err);
  }
  ASSERT_EQ(err, "");
  expect_close(got, reference(c, d), chunked_tol(c), "chunked vs f64");
  {
    ForcePath f("recurrent");
    rec = run(c, d, false, &err);
  }
  ASSERT_EQ(err, "");
  expect_close(got, rec, chunked_tol(c), "chunked vs recurrent");
}

const char* vname(deltac_variant v) {
  return v == DELTAC_VARIANT_DELTA ? "delta" : v == DELTAC_VARIANT_GATED ? "gated" : "kda";
}

// The edge cases both suites end with (mk names a case of the variant):
// beta near 0 and 2, gates near 0 and -30 (gates) and a -inf reset (reset),
// no workspace, bf16 and f16 at T = t16 with K = V = 128, bf16 T = 4096 GVA 2.
template <class Mk>
void push_edge_cases(std::vector<Case>& cs, Mk&& mk, bool gates, bool reset, int t16) {
  Case c = mk("T130_beta_near0");
  c.T = 130, c.beta_lo = 0.f, c.beta_hi = 0.02f;
  cs.push_back(c);
  c = mk("T130_beta_near2");
  c.T = 130, c.beta_lo = 1.9f, c.beta_hi = 2.f;
  cs.push_back(c);
  if (gates) {
    c = mk("T130_gate_near0");
    c.T = 130, c.g_lo = -1e-3f, c.g_hi = 0.f;
    cs.push_back(c);
    c = mk("T130_gate_near_m30");
    c.T = 130, c.g_lo = -31.f, c.g_hi = -29.f;
    cs.push_back(c);
  }
  if (reset) {
    c = mk("T130_reset");
    c.T = 130, c.reset = true;
    cs.push_back(c);
  }
  c = mk("T100_no_workspace");
  c.T = 100, c.workspace = false;
  cs.push_back(c);
  const std::string t = "_T" + std::to_string(t16) + "_K128";
  c = mk("bf16" + t);
  c.dtype = DELTAC_BF16, c.T = t16, c.K = c.V = 128;
  cs.push_back(c);
  c = mk("f16" + t);
  c.dtype = DELTAC_F16, c.T = t16, c.K = c.V = 128;
  cs.push_back(c);
  c = mk("bf16_T4096_K128_gva2");
  c.dtype = DELTAC_BF16, c.T = 4096, c.K = c.V = 128, c.H = 1, c.HV = 2, c.tol = 1e-2;
  cs.push_back(c);
}

std::vector<Case> cases() {
  std::vector<Case> cs;
  for (deltac_variant var : {DELTAC_VARIANT_DELTA, DELTAC_VARIANT_GATED, DELTAC_VARIANT_KDA}) {
    auto mk = [&](const std::string& what) {
      Case c;
      c.var = var;
      c.name = std::string(vname(var)) + "_" + what;
      return c;
    };
    Case c = mk("T1_gva2_b2");
    c.B = 2, c.T = 1;
    cs.push_back(c);
    c = mk("T37_K128_gva1_nonorm");
    c.T = 37, c.K = c.V = 128, c.H = c.HV = 2, c.l2norm = 0, c.scale = 0.3f;
    cs.push_back(c);
    c = mk("T200_K128_gva4_vk");
    c.T = 200, c.K = c.V = 128, c.H = 1, c.HV = 4, c.layout = DELTAC_STATE_VK;
    cs.push_back(c);
    c = mk("varlen_tail1_gva8");
    c.T = 202, c.H = 1, c.HV = 8, c.cu = {0, 65, 130, 201, 202};
    cs.push_back(c);
    c = mk("varlen_empty_nodht");
    c.T = 90, c.cu = {0, 0, 64, 90}, c.dht = false;
    cs.push_back(c);
    c = mk("T70_K128_V64_noh0");
    c.T = 70, c.K = 128, c.V = 64, c.h0 = false, c.dht = false;
    cs.push_back(c);
    c = mk("T50_K64_V48_masked");
    c.T = 50, c.V = 48;
    cs.push_back(c);
    c = mk("T40_K256_V128");
    c.T = 40, c.K = 256, c.V = 128, c.H = 1, c.HV = 2;
    cs.push_back(c);
    push_edge_cases(cs, mk, var != DELTAC_VARIANT_DELTA, false, 100);
  }
  return cs;
}

INSTANTIATE_TEST_SUITE_P(Cuda, Backward, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<Case>& i) { return i.param.name; });

std::vector<Case> chunked_cases() {
  std::vector<Case> cs;
  for (deltac_variant var : {DELTAC_VARIANT_DELTA, DELTAC_VARIANT_GATED}) {
    auto mk = [&](const std::string& what) {
      Case c;
      c.var = var;
      c.name = std::string(vname(var)) + "_" + what;
      return c;
    };
    Case c = mk("T1_gva2_b2");
    c.B = 2, c.T = 1;
    cs.push_back(c);
    c = mk("T37_K128_gva1_nonorm");
    c.T = 37, c.K = c.V = 128, c.H = c.HV = 2, c.l2norm = 0, c.scale = 0.3f;
    cs.push_back(c);
    c = mk("T200_K128_gva4_vk");
    c.T = 200, c.K = c.V = 128, c.H = 1, c.HV = 4, c.layout = DELTAC_STATE_VK;
    cs.push_back(c);
    c = mk("T256_b2_gva1");
    c.B = 2, c.T = 256, c.H = c.HV = 2;
    cs.push_back(c);
    c = mk("varlen_tail1_gva8");
    c.T = 202, c.H = 1, c.HV = 8, c.cu = {0, 65, 130, 201, 202};
    cs.push_back(c);
    c = mk("varlen_empty_nodht");
    c.T = 190, c.cu = {0, 0, 64, 190}, c.dht = false;
    cs.push_back(c);
    c = mk("T150_K128_V64_noh0");
    c.T = 150, c.K = 128, c.V = 64, c.h0 = false, c.dht = false;
    cs.push_back(c);
    c = mk("T130_K128_V256");
    c.T = 130, c.K = 128, c.V = 256, c.H = 1, c.HV = 2;
    cs.push_back(c);
    const bool gated = var == DELTAC_VARIANT_GATED;
    push_edge_cases(cs, mk, gated, gated, 300);
  }
  for (deltac_variant var : {DELTAC_VARIANT_DELTA, DELTAC_VARIANT_GATED}) {
    Case c;  // the sweep runs where dv, v, dO (16 bytes) or dq, dk are not aligned
    c.var = var;
    c.name = std::string(vname(var)) + "_bf16_T130_dv_unaligned";
    c.dtype = DELTAC_BF16, c.T = 130, c.dv_unaligned = true;
    cs.push_back(c);
    c.name = std::string(vname(var)) + "_bf16_T130_v_unaligned";
    c.dv_unaligned = false, c.v_unaligned = true;
    cs.push_back(c);
    c.name = std::string(vname(var)) + "_bf16_T130_dq_unaligned";
    c.v_unaligned = false, c.dq_unaligned = true;
    cs.push_back(c);
  }
  // bf16 copies of the f32 cases: the warp scans (backward_scan_warp.cuh)
  // under the rule (on these small grids both scans in one launch where V
  // is a multiple of 64, else two at V tile 32) and as two launches with V
  // tiles of 32 and of 64 forced; and with grad16 on 2 blocks (each takes
  // several chunk items in turn).
  const size_t n = cs.size();
  for (size_t i = 0; i < n; ++i) {
    if (cs[i].dtype != DELTAC_F32) continue;
    for (int bv : {0, 32, 64, -1}) {
      Case c = cs[i];
      c.dtype = DELTAC_BF16;
      c.wbv = bv > 0 ? bv : 0;
      c.g16_blocks = bv < 0 ? 2 : 0;
      const std::string tag = bv < 0 ? "_bf16g2" : bv ? "_bf16w" + std::to_string(bv) : "_bf16w";
      const size_t u = c.name.find('_');
      c.name = c.name.substr(0, u) + tag + c.name.substr(u);
      cs.push_back(c);
    }
  }
  return cs;
}

INSTANTIATE_TEST_SUITE_P(Cuda, BackwardChunked, ::testing::ValuesIn(chunked_cases()),
                         [](const ::testing::TestParamInfo<Case>& i) { return i.param.name; });

// Saved states (deltac/backward_rules.h): the forward, its transposed TMA
// scan forced, writes them (its flag set on sm_90 where its dims have a
// precompiled instance; o bitwise the same as without), and the chunked
// backward reading them agrees with float64 and with its own recomputation;
// a buffer whose flag is 0 the backward fills, the same as without (up to
// the order of dg's and dbeta's atomic sums: 1e-6).
class BackwardSaved : public ::testing::TestWithParam<Case> {};

bool sm90() {
  int dev = 0, major = 0;
  return cudaGetDevice(&dev) == cudaSuccess &&
         cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) == cudaSuccess &&
         major == 9;
}


TEST_P(BackwardSaved, MatchesRecomputedAndFloat64) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  const Case& c = GetParam();
  const uint64_t seed = deltac::test_seed();
  SCOPED_TRACE(deltac::test_seed_note(seed));
  std::printf("%s: %s\n", c.name.c_str(), deltac::test_seed_note(seed).c_str());
  const Data d = make(c, seed);
  std::string err;
  SavedRun sr;
  Grads plain, saved, fill;
  {
    ForcePath f("chunked");
    plain = run(c, d, false, &err);
    ASSERT_EQ(err, "");
    saved = run(c, d, false, &err, Saved::forward, &sr);
    ASSERT_EQ(err, "");
    fill = run(c, d, false, &err, Saved::fill);
    ASSERT_EQ(err, "");
  }
  const bool precompiled = c.K == c.V || (c.K == 128 && c.V == 256);
  std::printf("saved states flag after the forward: %d\n", sr.flag);
  if (sm90() && precompiled)
    EXPECT_NE(sr.flag, 0) << "the forward wrote no saved states";
  EXPECT_TRUE(sr.o_saved == sr.o_plain) << "o differs with saved states";
  expect_close(saved, reference(c, d), chunked_tol(c), "saved vs f64");
  expect_close(saved, plain, chunked_tol(c), "saved vs recomputed");
  expect_close(fill, plain, 1e-6, "filled by the backward vs recomputed");
}

std::vector<Case> saved_cases() {
  std::vector<Case> cs;
  for (deltac_variant var : {DELTAC_VARIANT_DELTA, DELTAC_VARIANT_GATED}) {
    auto mk = [&](const std::string& what) {
      Case c;
      c.var = var;
      c.dtype = DELTAC_BF16;
      c.name = std::string(vname(var)) + "_" + what;
      return c;
    };
    Case c = mk("T256_b2_gva1");
    c.B = 2, c.T = 256, c.H = c.HV = 2;
    cs.push_back(c);
    c = mk("T300_K128_gva4_vk");
    c.T = 300, c.K = c.V = 128, c.H = 1, c.HV = 4, c.layout = DELTAC_STATE_VK;
    cs.push_back(c);
    c = mk("varlen_tail1_gva8");
    c.T = 202, c.H = 1, c.HV = 8, c.cu = {0, 65, 130, 201, 202};
    cs.push_back(c);
    c = mk("varlen_empty_nodht_noh0");
    c.T = 190, c.cu = {0, 0, 64, 190}, c.dht = false, c.h0 = false;
    cs.push_back(c);
    c = mk("T130_K128_V256_b3");
    c.B = 3, c.T = 130, c.K = 128, c.V = 256, c.H = 1, c.HV = 2;
    cs.push_back(c);
    c = mk("T150_K128_V64_padded");  // no precompiled forward: the backward fills them
    c.T = 150, c.K = 128, c.V = 64;
    cs.push_back(c);
    c = mk("T4096_gva2");
    c.T = 4096, c.H = 1, c.HV = 2;
    cs.push_back(c);
  }
  return cs;
}

INSTANTIATE_TEST_SUITE_P(Cuda, BackwardSaved, ::testing::ValuesIn(saved_cases()),
                         [](const ::testing::TestParamInfo<Case>& i) { return i.param.name; });

// Refusals name the field; nothing runs.
// The rule's workspace bound (backward_rules.h): the chunked path only where
// its workspace is under the cap or within the ratio of the sweep's.
TEST(BackwardRule, ChunkedWorkspaceBound) {
  constexpr uint64_t GB = uint64_t(1) << 30;
  EXPECT_TRUE(deltac::bwd_chunked_workspace_ok(4 * GB, 1 * GB));    // under the cap
  EXPECT_TRUE(deltac::bwd_chunked_workspace_ok(20 * GB, 15 * GB));  // within the ratio
  EXPECT_FALSE(deltac::bwd_chunked_workspace_ok(112 * GB, 32 * GB));
  EXPECT_FALSE(deltac::bwd_chunked_workspace_ok(9 * GB, 4 * GB));
  // The cap grows with the device: a quarter of its memory, at least 8 GiB.
  EXPECT_EQ(deltac::bwd_chunked_cap(0), 8 * GB);
  EXPECT_EQ(deltac::bwd_chunked_cap(16 * GB), 8 * GB);
  EXPECT_EQ(deltac::bwd_chunked_cap(140 * GB), 35 * GB);
  EXPECT_TRUE(deltac::bwd_chunked_workspace_ok(17 * GB, 6 * GB, deltac::bwd_chunked_cap(140 * GB)));
  EXPECT_FALSE(deltac::bwd_chunked_workspace_ok(138 * GB, 52 * GB, deltac::bwd_chunked_cap(140 * GB)));
}

// deltac_backward_workspace_size follows the bound: GDN 16/32 heads K = V =
// 128 at 32768 tokens asks for the chunked path's ~4.3 GB; at 1M tokens
// (chunked ~138 GB, the sweep ~52 GB) only for the sweep's.
TEST(BackwardRule, WorkspaceSizeFollowsTheBound) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  deltac_bwd_params p{};
  p.variant = DELTAC_VARIANT_GATED;
  p.B = 1, p.N = 1, p.H = 16, p.HV = 32, p.K = p.V = 128, p.qk_l2norm = 1;
  p.in_dtype = p.out_dtype = DELTAC_F32;  // f32 states in the workspace
  void* x = reinterpret_cast<void*>(uintptr_t(1) << 20);  // never read by the query
  p.q = p.k = p.v = p.dout = p.g = p.beta = x;
  p.dq = p.dk = p.dv = p.dg = p.dbeta = x;
  deltac_options opt = deltac_default_options();
  opt.device_pointers = 1;
  size_t small = 0, huge = 0, small16 = 0;
  p.T = 32768;
  ASSERT_EQ(deltac_backward_workspace_size(&p, &opt, &small), 0) << deltac_last_error();
  p.T = 1 << 20;
  ASSERT_EQ(deltac_backward_workspace_size(&p, &opt, &huge), 0) << deltac_last_error();
  // bf16 inputs: the warp scans' bf16 states (h, dh, u, dr half the bytes;
  // the whole workspace 0.63x here)
  p.T = 32768;
  p.in_dtype = p.out_dtype = DELTAC_BF16;
  ASSERT_EQ(deltac_backward_workspace_size(&p, &opt, &small16), 0) << deltac_last_error();
  std::printf("workspace: %.2f GB at T = 32768 (bf16: %.2f GB), %.2f GB at T = 2^20\n",
              small / 1e9, small16 / 1e9, huge / 1e9);
  EXPECT_GT(small, size_t(4.0e9));
  EXPECT_LT(huge, size_t(60e9));
  EXPECT_LT(small16, small * 65 / 100);
}

// Saved states take hs and u out of the bf16 chunked path's workspace: the
// query asks for that much less (bwd_saved_layout's two regions, 256-aligned).
TEST(BackwardRule, SavedStatesShrinkTheWorkspace) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  deltac_bwd_params p{};
  p.variant = DELTAC_VARIANT_GATED;
  p.B = 1, p.N = 1, p.T = 32768, p.H = 16, p.HV = 32, p.K = p.V = 128, p.qk_l2norm = 1;
  p.in_dtype = p.out_dtype = DELTAC_BF16;
  void* x = reinterpret_cast<void*>(uintptr_t(1) << 20);  // never read by the query
  p.q = p.k = p.v = p.dout = p.g = p.beta = x;
  p.dq = p.dk = p.dv = p.dg = p.dbeta = x;
  deltac_options opt = deltac_default_options();
  opt.device_pointers = 1;
  size_t plain = 0, with = 0;
  ASSERT_EQ(deltac_backward_workspace_size(&p, &opt, &plain), 0) << deltac_last_error();
  const deltac::BwdSavedLayout sl = deltac::bwd_saved_layout(p.T, 1, p.HV, p.K, p.V);
  p.saved_states = x, p.saved_states_bytes = sl.total;
  ASSERT_EQ(deltac_backward_workspace_size(&p, &opt, &with), 0) << deltac_last_error();
  std::printf("workspace %.3f GB, with saved states %.3f GB (the buffer %.3f GB)\n",
              plain / 1e9, with / 1e9, sl.total / 1e9);
  EXPECT_EQ(plain - with, sl.total - deltac::kBwdSavedHeader);
}

// deltac_saved_states_pay is 1 exactly where a forward under the rule (no
// forced config) writes the saved states itself (their flag): the runtime's
// rule and the forward's plan agree. Delta, K = V = 64, bf16, 2 x 256 tokens,
// on a grid far short of the SMs (2 value heads) and on one that fills them.
TEST(BackwardRule, SavedStatesPayWhereTheForwardWritesThem) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  int dev = 0, sms = 0;
  ASSERT_EQ(cudaGetDevice(&dev), cudaSuccess);
  ASSERT_EQ(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev), cudaSuccess);
  for (int HV : {2, sms}) {
    deltac_fwd_params f{};
    f.variant = DELTAC_VARIANT_DELTA;
    f.B = f.N = 2, f.T = 256, f.H = 1, f.HV = HV, f.K = f.V = 64;
    f.in_dtype = f.out_dtype = DELTAC_BF16;
    f.state_dtype = DELTAC_F32;
    const size_t tok = size_t(f.B) * f.T;
    std::vector<void*> bufs;
    auto dmem = [&](size_t bytes) {
      void* x = nullptr;
      EXPECT_EQ(cudaMalloc(&x, bytes), cudaSuccess);
      if (x) cudaMemset(x, 0, bytes);
      bufs.push_back(x);
      return x;
    };
    f.q = dmem(tok * 64 * 2), f.k = dmem(tok * 64 * 2), f.v = dmem(tok * HV * 64 * 2);
    f.beta = static_cast<const float*>(dmem(tok * HV * 4));
    f.o = dmem(tok * HV * 64 * 2);
    const size_t sb = deltac_saved_states_size(f.variant, int64_t(tok), f.N, HV, 64, 64,
                                               DELTAC_BF16);
    ASSERT_GT(sb, 0u);
    void* saved = dmem(sb);
    cudaMemset(saved, 0xff, 4);  // the forward zeroes the flag, its kernel sets it
    deltac_options opt = deltac_default_options();
    opt.device = DELTAC_DEVICE_CUDA;
    opt.device_pointers = 1;
    opt.saved_states = saved, opt.saved_states_bytes = sb;
    EXPECT_EQ(deltac_forward(&f, &opt), 0) << deltac_last_error();
    int32_t flag = -1;
    EXPECT_EQ(cudaMemcpy(&flag, saved, 4, cudaMemcpyDeviceToHost), cudaSuccess);
    const int pay = deltac_saved_states_pay(f.variant, int64_t(tok), f.N, HV, 64, 64,
                                            DELTAC_BF16);
    std::printf("%d value heads on %d SMs: pay %d, the forward's flag %d\n", HV, sms, pay,
                flag);
    EXPECT_EQ(pay, flag != 0 ? 1 : 0);
    if (sm90()) EXPECT_EQ(pay, HV == sms ? 1 : 0);
    for (void* x : bufs) cudaFree(x);
  }
}

// A tuning database's backward records (deltac-tune --backward) decide
// deltac_saved_states_pay where they hold (dims, value heads, tokens per
// sequence, this machine's env); elsewhere, and once unloaded, the rule.
TEST(BackwardRule, TuningRecordsDecideSavedStates) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  auto pay = [](int32_t HV, int64_t seqlen) {
    return deltac_saved_states_pay(DELTAC_VARIANT_DELTA, 2 * seqlen, 2, HV, 64, 64, DELTAC_BF16);
  };
  const int rule2 = pay(2, 256), rule4 = pay(4, 256), rule2long = pay(2, 8192);
  const int ruleGated =
      deltac_saved_states_pay(DELTAC_VARIANT_GATED, 512, 2, 2, 64, 64, DELTAC_BF16);
  EXPECT_EQ(rule2, 0) << "2 value heads leave most SMs idle: the rule recomputes";
  char path[] = "/tmp/deltac_bwd_db_XXXXXX";
  const int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  const std::string db = R"({"format": "deltac-tuning-db", "version": 2, "records": [],
    "backward": [
      {"variant": "delta", "key_dim": 64, "value_dim": 64, "in_dtype": "bf16",
       "v_heads": 2, "max_tokens": 1024, "saved_states": "keep"},
      {"variant": "delta", "key_dim": 64, "value_dim": 64, "in_dtype": "bf16",
       "v_heads": 4, "max_tokens": 0, "saved_states": "keep",
       "env": {"deltac": "0.0.0-elsewhere"}}]})";
  ASSERT_EQ(write(fd, db.data(), db.size()), ssize_t(db.size()));
  close(fd);
  ASSERT_EQ(deltac_load_tuning_db(path), 0) << deltac_last_error();
  EXPECT_EQ(pay(2, 256), 1) << "the record for 2 value heads up to 1024 tokens keeps them";
  EXPECT_EQ(pay(2, 1024), 1);
  EXPECT_EQ(pay(2, 8192), rule2long) << "past the record's bucket: the rule";
  EXPECT_EQ(pay(4, 256), rule4) << "a record from another build is never used";
  EXPECT_EQ(deltac_saved_states_pay(DELTAC_VARIANT_GATED, 512, 2, 2, 64, 64, DELTAC_BF16),
            ruleGated) << "no record for gated: the rule";
  ASSERT_EQ(deltac_load_tuning_db(nullptr), 0);
  EXPECT_EQ(pay(2, 256), rule2) << "unloaded: the rule again";
  std::remove(path);
}

TEST(BackwardErrors, NamesTheField) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  Case c;
  const Data d = make(c, 1);
  deltac_bwd_params p = base(c, d);
  p.in_dtype = p.out_dtype = DELTAC_F32;
  // Host pointers passed as device pointers.
  p.q = d.q32.data(), p.k = d.k32.data(), p.v = d.v32.data(), p.dout = d.dout32.data();
  p.g = d.g32.data(), p.beta = d.beta32.data();
  std::vector<float> out(d.q32.size() + d.v32.size() * 2);
  p.dq = out.data(), p.dk = out.data(), p.dv = out.data(), p.dg = out.data(), p.dbeta = out.data();
  deltac_options opt = deltac_default_options();
  opt.device_pointers = 1;
  EXPECT_NE(deltac_backward(&p, &opt), 0);
  EXPECT_NE(std::string(deltac_last_error()).find("params.q"), std::string::npos)
      << deltac_last_error();
  deltac_bwd_params bad = p;
  bad.K = 32;
  EXPECT_NE(deltac_backward(&bad, &opt), 0);
  EXPECT_NE(std::string(deltac_last_error()).find("params.K"), std::string::npos)
      << deltac_last_error();
  bad = p;
  bad.in_dtype = bad.out_dtype = DELTAC_BWD_F64;
  EXPECT_NE(deltac_backward(&bad, &opt), 0);
  EXPECT_NE(std::string(deltac_last_error()).find("params.in_dtype"), std::string::npos)
      << deltac_last_error();
  opt.device = DELTAC_DEVICE_CUDA;
  opt.device_pointers = 0;
  EXPECT_NE(deltac_backward(&p, &opt), 0);
  EXPECT_NE(std::string(deltac_last_error()).find("device_pointers"), std::string::npos)
      << deltac_last_error();
}

}  // namespace

// The CUDA C++ layers (deltac/nn_cuda.h) at Qwen3-Next sizes: hidden 2048,
// GatedDeltaNet 16 key / 32 value heads, K = V = 128, conv 4; DeltaNet 16
// heads of 128. Random weights (normal, 1/sqrt(fan-in)). Per case: warm-up
// calls, then CUDA events around each forward on one stream, the median (and
// min) of the timed calls; a prompt (B x T from zero states) and one decode
// step (B x 1 through the cache / decoder state), the step also replayed
// as a CUDA graph (launch cost gone).
// dtype bf16: bf16 activations and weights, the bf16 delta rule; bf16r: the
// same with the f32 rule (CudaOptions::f32_rule); f32: all f32, no TF32;
// tf32: f32 with TF32 projections (CudaOptions::tf32). --bitnet: DeltaNet
// with use_bitnet (BitLinear projections: int8 GEMMs), beside the plain one.
//   deltac_nn_cuda_bench [--layer=gated|deltanet|all] [--dtype=bf16|bf16r|f32|tf32|all]
//                        [--batch=1] [--tokens=8192] [--iters=20] [--warmup=3] [--bitnet]
#include "deltac/nn_cuda.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

namespace {

using namespace deltac::nn;
using deltac::ElemType;

void check(cudaError_t e, const char *what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "nn_layer_bench: %s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}

struct Options {
  std::string layer = "all", dtype = "bf16";
  bool bitnet = false;
  int batch = 1, tokens = 8192, iters = 20, warmup = 3;
};

deltac::SafeTensors random_weights(const std::vector<std::pair<std::string, std::vector<int64_t>>> &list) {
  std::mt19937_64 rng(1);
  std::map<std::string, deltac::SafeTensorF32> t;
  for (const auto &[name, shape] : list) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    const bool vec = shape.size() == 1;
    std::normal_distribution<float> nd(vec ? 1.0f : 0.0f,
                                       vec ? 0.1f : 1.0f / std::sqrt(float(shape.back())));
    deltac::SafeTensorF32 v{shape, std::vector<float>(size_t(n))};
    for (float &e : v.data) e = nd(rng);
    t[name] = std::move(v);
  }
  auto bytes = deltac::safetensors_bytes(t);
  deltac::SafeTensors st;
  std::string err;
  if (!st.parse(bytes.data(), bytes.size(), "random", &err)) {
    std::fprintf(stderr, "nn_layer_bench: %s\n", err.c_str());
    std::exit(1);
  }
  return st;
}

struct DevTensor {
  DeviceTensor t;
  DevTensor(int64_t B, int64_t T, int64_t C, ElemType dt) {
    const size_t n = size_t(B * T * C), e = dt == ElemType::BF16 ? 2 : 4;
    check(cudaMalloc(&t.data, n * e), "cudaMalloc");
    t.dtype = dt;
    t.shape = {B, T, C};
    // Small random-ish values: bf16 / f32 of a hash, in [-1, 1).
    std::vector<uint16_t> h16(dt == ElemType::BF16 ? n : 0);
    std::vector<float> h32(dt == ElemType::F32 ? n : 0);
    std::mt19937 rng(7);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    for (size_t i = 0; i < n; ++i) {
      const float f = u(rng);
      if (dt == ElemType::F32) {
        h32[i] = f;
      } else {
        uint32_t bits;
        std::memcpy(&bits, &f, 4);
        h16[i] = uint16_t(bits >> 16);
      }
    }
    check(cudaMemcpy(t.data, dt == ElemType::F32 ? (void *)h32.data() : (void *)h16.data(), n * e,
                     cudaMemcpyHostToDevice),
          "upload");
  }
  ~DevTensor() { cudaFree(t.data); }
};

struct Stats {
  double median, min;
};

// Times f (enqueues on s) with events: warm-up calls, then iters timed ones.
template <typename F> Stats time_calls(F &&f, cudaStream_t s, const Options &o) {
  for (int i = 0; i < o.warmup; ++i) f();
  check(cudaStreamSynchronize(s), "warm-up");
  cudaEvent_t a, b;
  check(cudaEventCreate(&a), "event");
  check(cudaEventCreate(&b), "event");
  std::vector<double> ms;
  for (int i = 0; i < o.iters; ++i) {
    check(cudaEventRecord(a, s), "record");
    f();
    check(cudaEventRecord(b, s), "record");
    check(cudaEventSynchronize(b), "sync");
    float t = 0;
    check(cudaEventElapsedTime(&t, a, b), "elapsed");
    ms.push_back(t);
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  std::sort(ms.begin(), ms.end());
  return {ms[ms.size() / 2], ms[0]};
}

// A graph of one call of f, replayed; false (and a line why) when the
// capture fails.
template <typename F> bool time_graph(F &&f, cudaStream_t s, const Options &o, Stats *out) {
  cudaGraph_t g = nullptr;
  check(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), "begin capture");
  std::string why;
  try {
    f();
  } catch (const Error &e) {
    why = e.what();
  }
  const cudaError_t end = cudaStreamEndCapture(s, &g);
  cudaGraphExec_t exec = nullptr;
  if (why.empty() && end != cudaSuccess) why = cudaGetErrorString(end);
  if (why.empty()) {
    const cudaError_t e = cudaGraphInstantiate(&exec, g, 0);
    if (e != cudaSuccess) why = cudaGetErrorString(e);
  }
  if (!why.empty()) {
    cudaGetLastError();
    if (g) cudaGraphDestroy(g);
    std::printf("  graph capture failed: %s\n", why.c_str());
    return false;
  }
  *out = time_calls([&] { check(cudaGraphLaunch(exec, s), "graph launch"); }, s, o);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(g);
  return true;
}

void report(const char *layer, const char *dtype, const char *what, int B, int T, Stats st,
            double flops) {
  std::printf("%-9s %-5s %-13s B=%-3d T=%-6d median %9.3f ms  min %9.3f ms  %8.1f Mtok/s",
              layer, dtype, what, B, T, st.median, st.min, B * T / st.median / 1e3);
  if (flops > 0) std::printf("  GEMM %6.1f TFLOP/s eq.", flops / st.median / 1e9);
  std::printf("\n");
}

struct Variant {
  const char *name;
  ElemType dt;
  bool f32_rule, tf32;
};

void bench_gated(const Variant &var, const Options &o, cudaStream_t s) {
  const int64_t hs = 2048, H = 16, HV = 32, K = 128, V = 128, kd = H * K, vd = HV * V;
  const auto st = random_weights({{"in_proj_qkvz.weight", {2 * kd + 2 * vd, hs}},
                                  {"in_proj_ba.weight", {2 * HV, hs}},
                                  {"conv1d.weight", {2 * kd + vd, 1, 4}},
                                  {"dt_bias", {HV}},
                                  {"A_log", {HV}},
                                  {"norm.weight", {V}},
                                  {"out_proj.weight", {hs, vd}}});
  GatedDeltaNetConfig c; // Qwen3-Next defaults
  const ElemType dt = var.dt;
  CudaOptions opt;
  opt.dtype = dt;
  opt.f32_rule = var.f32_rule;
  opt.tf32 = var.tf32;
  CudaGatedDeltaNet layer(c, st, "", opt);
  const char *dn = var.name;
  const int B = o.batch, T = o.tokens;
  const double gemm = 2.0 * hs * (2 * kd + 2 * vd + 2 * HV + vd); // per token
  {
    DevTensor x(B, T, hs, dt), y(B, T, hs, dt);
    const Stats p = time_calls([&] { layer.forward(x.t, y.t, nullptr, s); }, s, o);
    report("gated", dn, "prompt", B, T, p, gemm * B * T);
  }
  CudaGatedDeltaNetCache cache;
  DevTensor p(B, 16, hs, dt), x(B, 1, hs, dt), y(B, 1, hs, dt), py(B, 16, hs, dt);
  layer.forward(p.t, py.t, &cache, s);
  report("gated", dn, "decode step", B, 1,
         time_calls([&] { layer.forward(x.t, y.t, &cache, s); }, s, o), 0);
  Stats g;
  if (time_graph([&] { layer.forward(x.t, y.t, &cache, s); }, s, o, &g))
    report("gated", dn, "decode graph", B, 1, g, 0);
}

void bench_deltanet(const Variant &var, const Options &o, cudaStream_t s, bool bitnet) {
  const int64_t hs = 2048, H = 16, D = hs / H;
  const auto st = random_weights({{"q_proj.weight", {hs, hs}},
                                  {"k_proj.weight", {hs, hs}},
                                  {"v_proj.weight", {hs, hs}},
                                  {"g_proj.weight", {hs, hs}},
                                  {"beta_proj.weight", {H, hs}},
                                  {"out_proj.weight", {hs, hs}},
                                  {"norm.weight", {D}},
                                  {"norm.bias", {D}}});
  DeltaNetConfig c;
  c.hidden_size = hs;
  c.num_heads = H;
  c.mode = "decoder";
  c.use_bitnet = bitnet;
  const ElemType dt = var.dt;
  CudaOptions opt;
  opt.dtype = dt;
  opt.f32_rule = var.f32_rule;
  opt.tf32 = var.tf32;
  CudaDeltaNetAttention layer(c, st, "", opt);
  const std::string dname = std::string(var.name) + (bitnet ? "+bitnet" : "");
  const char *dn = dname.c_str();
  const int B = o.batch, T = o.tokens;
  const double gemm = 2.0 * hs * (5 * hs + H);
  {
    DevTensor x(B, T, hs, dt), y(B, T, hs, dt);
    const Stats p = time_calls(
        [&] {
          layer.reset_state();
          layer.forward(x.t, y.t, s);
        },
        s, o);
    report("deltanet", dn, "prompt", B, T, p, gemm * B * T);
  }
  layer.reset_state();
  DevTensor p(B, 16, hs, dt), x(B, 1, hs, dt), y(B, 1, hs, dt), py(B, 16, hs, dt);
  layer.forward(p.t, py.t, s);
  report("deltanet", dn, "decode step", B, 1,
         time_calls([&] { layer.forward(x.t, y.t, s); }, s, o), 0);
  Stats g;
  if (time_graph([&] { layer.forward(x.t, y.t, s); }, s, o, &g))
    report("deltanet", dn, "decode graph", B, 1, g, 0);
}

} // namespace

int main(int argc, char **argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto val = [&](const char *k) { return a.rfind(k, 0) == 0 ? a.substr(std::strlen(k)) : ""; };
    if (!val("--layer=").empty()) o.layer = val("--layer=");
    else if (!val("--dtype=").empty()) o.dtype = val("--dtype=");
    else if (!val("--batch=").empty()) o.batch = std::atoi(val("--batch=").c_str());
    else if (!val("--tokens=").empty()) o.tokens = std::atoi(val("--tokens=").c_str());
    else if (!val("--iters=").empty()) o.iters = std::atoi(val("--iters=").c_str());
    else if (!val("--warmup=").empty()) o.warmup = std::atoi(val("--warmup=").c_str());
    else if (a == "--bitnet") o.bitnet = true;
    else {
      std::fprintf(stderr, "usage: deltac_nn_cuda_bench [--layer=gated|deltanet|all] "
                           "[--dtype=bf16|bf16r|f32|tf32|all] [--batch=1] [--tokens=8192] [--iters=20] "
                           "[--warmup=3] [--bitnet]\n");
      return 2;
    }
  }
  if (o.batch < 1 || o.tokens < 1 || o.iters < 1 || o.warmup < 0) {
    std::fprintf(stderr, "nn_layer_bench: --batch, --tokens, --iters must be >= 1\n");
    return 2;
  }
  cudaDeviceProp prop;
  check(cudaGetDeviceProperties(&prop, 0), "device");
  std::printf("%s, %d warm-up + %d timed calls per case (CUDA events, median)\n", prop.name,
              o.warmup, o.iters);
  cudaStream_t s;
  check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "stream");
  try {
    for (const Variant &v : {Variant{"bf16", ElemType::BF16, false, false},
                             Variant{"bf16r", ElemType::BF16, true, false},
                             Variant{"f32", ElemType::F32, false, false},
                             Variant{"tf32", ElemType::F32, false, true}}) {
      if (o.dtype != "all" && o.dtype != v.name) continue;
      if (o.layer == "all" || o.layer == "gated") bench_gated(v, o, s);
      if (o.layer == "all" || o.layer == "deltanet") {
        bench_deltanet(v, o, s, false);
        if (o.bitnet) bench_deltanet(v, o, s, true);
      }
    }
  } catch (const Error &e) {
    std::fprintf(stderr, "nn_layer_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}

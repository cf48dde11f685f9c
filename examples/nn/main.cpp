// deltac-nn: runs a deltac::nn layer (DeltaNetAttention, GatedDeltaNet or
// KimiDeltaAttention) on a safetensors file and prints statistics of its
// output.
//
//   deltac-nn --weights=layer.safetensors [--input=x.safetensors] [--x=x]
//             [--layer=deltanet|gated_deltanet|kda] [--prefix=P] [--expect=y]
//             [--tol=1e-5] [--decode-split=P] [--repeat=N] [--random=B,T]
//             [--threads=N]
//
// The weights file holds the module's state_dict (names under --prefix) and,
// in its __metadata__, the config (the Python configs' keys: "layer",
// hidden_size, num_heads, mode, use_bitnet; linear_num_key_heads, ...,
// layout; kda: num_heads, head_dim, short_conv_kernel_size, rms_norm_eps). The input x [B, T, hidden] is the tensor --x of --input (default:
// the weights file), or random normal values with --random=B,T. With
// --expect=NAME (a tensor of the input file) it prints the relative error
// max|y - expect| / max|expect| and exits 1 above --tol. --decode-split=P
// also runs the first P tokens as a prompt and the rest one token at a time
// through the state cache and compares with the whole sequence. --repeat=N
// times N forward calls (after one warm-up) and prints ms per call.
#include "deltac/nn.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>

using deltac::SafeTensors;
using namespace deltac::nn;

namespace {

double rel_err(const std::vector<float> &a, const std::vector<float> &b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    num = std::max(num, std::fabs(double(a[i]) - double(b[i])));
    den = std::max(den, std::fabs(double(b[i])));
  }
  if (a.size() != b.size()) return INFINITY;
  return den > 0 ? num / den : num;
}

// The layer behind one interface: forward with or without the decode cache.
struct Layer {
  std::unique_ptr<DeltaNetAttention> dn;
  std::unique_ptr<GatedDeltaNet> gdn;
  std::unique_ptr<KimiDeltaAttention> kda;
  GatedDeltaNetCache cache;
  Tensor run(const Tensor &x, bool cached) {
    if (dn) return dn->forward(x);
    if (kda) return kda->forward(x, cached ? &cache : nullptr);
    return gdn->forward(x, cached ? &cache : nullptr);
  }
  void reset() {
    if (dn) dn->reset_state();
    cache.reset();
  }
};

Tensor slice_t(const Tensor &x, int64_t t0, int64_t t1) {
  const int64_t B = x.shape[0], T = x.shape[1], C = x.shape[2];
  Tensor s;
  s.shape = {B, t1 - t0, C};
  for (int64_t b = 0; b < B; ++b)
    s.data.insert(s.data.end(), x.data.begin() + (b * T + t0) * C,
                  x.data.begin() + (b * T + t1) * C);
  return s;
}

int run(int argc, char **argv) {
  std::string weights, input, xname = "x", layer, prefix, expect, random;
  double tol = 1e-5;
  int64_t split = -1, repeat = 0;
  int threads = 0;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto val = [&](const char *key, std::string *out) {
      const std::string k = std::string("--") + key + "=";
      if (a.compare(0, k.size(), k) != 0) return false;
      *out = a.substr(k.size());
      return true;
    };
    std::string v;
    if (val("weights", &weights) || val("input", &input) || val("x", &xname) ||
        val("layer", &layer) || val("prefix", &prefix) || val("expect", &expect) ||
        val("random", &random)) {
    } else if (val("tol", &v)) {
      tol = std::atof(v.c_str());
    } else if (val("decode-split", &v)) {
      split = std::atoll(v.c_str());
    } else if (val("repeat", &v)) {
      repeat = std::atoll(v.c_str());
    } else if (val("threads", &v)) {
      threads = std::atoi(v.c_str());
    } else {
      std::fprintf(stderr, "deltac-nn: unknown argument '%s' (see examples/nn/main.cpp)\n", argv[i]);
      return 2;
    }
  }
  if (weights.empty()) {
    std::fprintf(stderr, "deltac-nn: --weights=FILE is required\n");
    return 2;
  }
  SafeTensors w, in;
  std::string err;
  if (!w.load(weights, &err)) throw Error(err);
  const SafeTensors *src = &w;
  if (!input.empty()) {
    if (!in.load(input, &err)) throw Error(err);
    src = &in;
  }
  if (layer.empty()) {
    auto it = w.metadata().find("layer");
    layer = it == w.metadata().end() ? "deltanet" : it->second;
  }
  Layer L;
  int64_t hidden;
  if (layer == "deltanet") {
    DeltaNetConfig c = deltanet_config(w.metadata());
    c.threads = threads;
    if (split >= 0) c.mode = "decoder";
    L.dn.reset(new DeltaNetAttention(c, w, prefix));
    hidden = c.hidden_size;
  } else if (layer == "gated_deltanet") {
    GatedDeltaNetConfig c = gated_deltanet_config(w.metadata());
    c.threads = threads;
    L.gdn.reset(new GatedDeltaNet(c, w, prefix));
    hidden = c.hidden_size;
  } else if (layer == "kda") {
    KimiDeltaAttentionConfig c = kda_config(w.metadata());
    c.threads = threads;
    L.kda.reset(new KimiDeltaAttention(c, w, prefix));
    hidden = c.hidden_size;
  } else {
    throw Error("--layer=" + layer + ": expected deltanet, gated_deltanet or kda");
  }

  Tensor x;
  if (!random.empty()) {
    long long B = 0, T = 0;
    if (std::sscanf(random.c_str(), "%lld,%lld", &B, &T) != 2 || B <= 0 || T <= 0)
      throw Error("--random=" + random + ": expected B,T");
    x.shape = {B, T, hidden};
    std::mt19937 rng(1234);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    x.data.resize(size_t(B * T * hidden));
    for (float &e : x.data) e = nd(rng);
  } else if (!src->get_f32_any(xname, &x.data, &x.shape, &err)) {
    throw Error(err);
  }

  const auto t0 = std::chrono::steady_clock::now();
  Tensor y = L.run(x, false);
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  double sum = 0, sq = 0, mn = INFINITY, mx = -INFINITY;
  for (float e : y.data) {
    sum += e;
    sq += double(e) * e;
    mn = std::min(mn, double(e));
    mx = std::max(mx, double(e));
  }
  const double n = double(y.data.size());
  std::printf("deltac-nn: %s %s -> %s: mean %.6g std %.6g min %.6g max %.6g (%.2f ms)\n",
              layer.c_str(), deltac::shape_string(x.shape).c_str(),
              deltac::shape_string(y.shape).c_str(), sum / n,
              std::sqrt(std::max(0.0, sq / n - (sum / n) * (sum / n))), mn, mx, ms);
  int rc = 0;
  if (!expect.empty()) {
    std::vector<float> e;
    if (!src->get_f32(expect, y.shape, &e, &err)) throw Error(err);
    const double r = rel_err(y.data, e);
    std::printf("deltac-nn: relative error vs %s: %.3g (tol %.3g)\n", expect.c_str(), r, tol);
    if (!(r <= tol)) rc = 1;
  }
  if (split >= 0) {
    const int64_t T = x.shape[1];
    if (split < 1 || split > T) throw Error("--decode-split: expected 1..T");
    L.reset();
    Tensor whole = y;
    Tensor first = L.run(slice_t(x, 0, split), true);
    std::vector<float> steps(whole.data.size());
    const int64_t B = x.shape[0];
    auto put = [&](const Tensor &part, int64_t t0_) {
      const int64_t tn = part.shape[1];
      for (int64_t b = 0; b < B; ++b)
        std::copy(part.data.begin() + b * tn * hidden, part.data.begin() + (b + 1) * tn * hidden,
                  steps.begin() + (b * T + t0_) * hidden);
    };
    put(first, 0);
    for (int64_t t = split; t < T; ++t) put(L.run(slice_t(x, t, t + 1), true), t);
    const double r = rel_err(steps, whole.data);
    std::printf("deltac-nn: prompt %lld + %lld decode steps vs whole sequence: %.3g (tol %.3g)\n",
                (long long)split, (long long)(T - split), r, tol);
    if (!(r <= tol)) rc = 1;
    L.reset();
  }
  if (repeat > 0) {
    L.run(x, false);
    const auto a = std::chrono::steady_clock::now();
    for (int64_t i = 0; i < repeat; ++i) L.run(x, false);
    const double per = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - a).count() / double(repeat);
    std::printf("deltac-nn: %.3f ms per forward (%lld calls)\n", per, (long long)repeat);
  }
  return rc;
}

} // namespace

int main(int argc, char **argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception &e) {
    std::fprintf(stderr, "deltac-nn: %s\n", e.what());
    return 1;
  }
}

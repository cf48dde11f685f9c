// A consumer of the installed deltac package: one gated delta-rule forward
// call through the C API on random inputs, checked against deltac's float64
// reference (deltac/reference.h, installed with the templates).
//
//   find_package(deltac CONFIG REQUIRED) + deltac::runtime  (CMakeLists.txt)
//   g++ -std=c++17 -O2 main.cpp $(pkg-config --cflags --libs deltac)
#include <deltac/reference.h>
#include <deltac/runtime.h>

#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

int main() {
  const int B = 2, T = 33, H = 2, HV = 4, K = 64, V = 64;
  std::mt19937 rng(42);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  auto random = [&](size_t n, float scale, float shift) {
    std::vector<float> x(n);
    for (float &e : x)
      e = scale * u(rng) + shift;
    return x;
  };
  const float r = 1.f / std::sqrt(float(K));
  std::vector<float> q = random(size_t(B) * T * H * K, r, 0),
                     k = random(q.size(), r, 0),
                     v = random(size_t(B) * T * HV * V, 1, 0),
                     g = random(size_t(B) * T * HV, 0.1f, -0.1f), // log decay <= 0
                     beta = random(g.size(), 0.5f, 0.5f),          // in [0, 1]
                     h0 = random(size_t(B) * HV * K * V, 0.3f, 0),
                     o(v.size()), ht(h0.size());

  deltac_fwd_params p = {};
  p.variant = DELTAC_VARIANT_GATED;
  p.B = B, p.T = T, p.H = H, p.HV = HV, p.K = K, p.V = V, p.N = B;
  p.in_dtype = p.out_dtype = p.state_dtype = DELTAC_F32;
  p.state_layout = DELTAC_STATE_KV;
  p.q = q.data(), p.k = k.data(), p.v = v.data(), p.g = g.data();
  p.beta = beta.data(), p.h0 = h0.data(), p.o = o.data(), p.ht = ht.data();

  deltac_run_info info;
  if (deltac_forward_info(&p, nullptr, &info) != 0) {
    std::fprintf(stderr, "embed: deltac_forward failed: %s\n", deltac_last_error());
    return 1;
  }
  std::vector<double> oRef, htRef;
  deltac::ref::forward(p, &oRef, &htRef);
  const double eo = deltac::ref::rel_rms(o.data(), oRef);
  const double eh = deltac::ref::rel_rms(ht.data(), htRef);
  std::printf("embed: %s ran, relative RMS error o %.2g, ht %.2g\n", info.family,
              eo, eh);
  return eo <= 1e-5 && eh <= 1e-5 ? 0 : 1;
}

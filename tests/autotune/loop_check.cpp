// The tune -> load -> run loop (ctest autotune_loop_*): deltac-tune wrote
// the database named by DELTAC_TUNING_DB; the runtime loads it from there on
// its own (first call), and every record's bucket runs the tuned config:
// deltac_run_info names its family and knobs (and threads) with tuned = 1,
// and the output matches the float64 reference.
//   deltac_tune_loop_check VARIANT H HV K V
#include "deltac/catalogue.h"
#include "deltac/reference.h"
#include "deltac/runtime.h"
#include "deltac/tuning_db.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

int main(int argc, char **argv) {
  using namespace deltac;
  const char *path = std::getenv("DELTAC_TUNING_DB");
  if (argc != 6 || !path) {
    std::fprintf(stderr, "usage: DELTAC_TUNING_DB=db.json %s VARIANT H HV K V\n",
                 argv[0]);
    return 2;
  }
  const int variant = std::atoi(argv[1]), H = std::atoi(argv[2]),
            HV = std::atoi(argv[3]), K = std::atoi(argv[4]), V = std::atoi(argv[5]);
  TuningDB db;
  std::string err;
  if (!load_tuning_db(path, &db, &err)) {
    std::fprintf(stderr, "%s\n", err.c_str());
    return 1;
  }
  if (db.records.empty()) {
    std::fprintf(stderr, "%s: no records\n", path);
    return 1;
  }
  int failures = 0;
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  for (const TuningRecord &r : db.records) {
    // A problem in r's bucket: its longest sequence is the bucket's length
    // (2 x 48 tokens for the open-ended last one).
    const int T = r.max_tokens ? int(r.max_tokens) : 48;
    const int B = 2;
    std::vector<float> q(size_t(B) * T * H * K), k(q.size()),
        v(size_t(B) * T * HV * V), g(size_t(B) * T * HV * (variant == 2 ? K : 1)),
        beta(size_t(B) * T * HV), h0(size_t(B) * HV * K * V), o(v.size()),
        ht(h0.size());
    for (float &x : q) x = u(rng) / std::sqrt(float(K));
    for (float &x : k) x = u(rng) / std::sqrt(float(K));
    for (float &x : v) x = u(rng);
    for (float &x : g) x = -0.1f * (u(rng) + 1.f);
    for (float &x : beta) x = 0.5f * (u(rng) + 1.f);
    for (float &x : h0) x = 0.3f * u(rng);
    deltac_fwd_params p{};
    p.variant = variant, p.B = B, p.T = T, p.H = H, p.HV = HV, p.K = K, p.V = V;
    p.N = B;
    p.in_dtype = p.out_dtype = p.state_dtype = DELTAC_F32;
    p.q = q.data(), p.k = k.data(), p.v = v.data();
    p.g = variant == 0 ? nullptr : g.data();
    p.beta = beta.data(), p.h0 = h0.data(), p.o = o.data(), p.ht = ht.data();
    deltac_run_info info{};
    if (deltac_forward_info(&p, nullptr, &info) != 0) {
      std::fprintf(stderr, "T=%d: %s\n", T, deltac_last_error());
      return 1;
    }
    std::vector<double> oRef, htRef;
    ref::forward(p, &oRef, &htRef);
    const double eo = ref::rel_rms(o.data(), oRef), eh = ref::rel_rms(ht.data(), htRef);
    const bool same = info.tuned == 1 &&
                      std::string(info.family) == family_info(r.config.family).name &&
                      info.chunk == r.config.chunk && info.tile_v == r.config.tile_v &&
                      info.threads == r.threads;
    std::printf("bucket max_tokens=%lld T=%d: ran %s chunk=%d tile_v=%d threads=%d "
                "tuned=%d (record: %s chunk=%d tile_v=%d threads=%d) err o %.2g ht %.2g%s%s\n",
                (long long)r.max_tokens, T, info.family, info.chunk, info.tile_v,
                info.threads, info.tuned, family_info(r.config.family).name,
                r.config.chunk, r.config.tile_v, r.threads, eo, eh,
                *info.note ? " note: " : "", info.note);
    if (!same || !(eo <= 1e-5) || !(eh <= 1e-5)) {
      std::printf("  FAILED\n");
      ++failures;
    }
  }
  return failures ? 1 : 0;
}

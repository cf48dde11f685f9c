/* Uses the runtime from C: proves deltac/runtime.h is valid C and links. */
#include "deltac/runtime.h"

#include <stdlib.h>
#include <string.h>

/* Runs one gated call (B=1, T=3, H=HV=1, K=V=16) with q = k = e0, v = 1,
 * beta = 1, g = 0 and a zero state: every output row is 0.25 (scale 1/4).
 * Returns 0 when o matches, 1 on a mismatch, 2 when deltac_forward fails. */
int deltac_c_smoke(float *o_out) {
  enum { T = 3, K = 16, V = 16 };
  float q[T * K], k[T * K], v[T * V], beta[T], g[T], ht[K * V];
  int t, i;
  deltac_fwd_params p;
  deltac_run_info info;
  deltac_options opt = deltac_default_options();
  memset(q, 0, sizeof q);
  memset(k, 0, sizeof k);
  for (t = 0; t < T; ++t) {
    q[t * K] = 1.0f;
    k[t * K] = 1.0f;
    beta[t] = 1.0f;
    g[t] = 0.0f;
    for (i = 0; i < V; ++i)
      v[t * V + i] = 1.0f;
  }
  memset(&p, 0, sizeof p);
  p.variant = DELTAC_VARIANT_GATED;
  p.B = 1;
  p.T = T;
  p.H = 1;
  p.HV = 1;
  p.K = K;
  p.V = V;
  p.N = 1;
  p.q = q;
  p.k = k;
  p.v = v;
  p.g = g;
  p.beta = beta;
  p.o = o_out;
  p.ht = ht;
  p.scale = 0.0f; /* default 1/sqrt(K) = 0.25 */
  opt.device = DELTAC_DEVICE_CPU;
  opt.check_values = 1; /* the checking mode, from C */
  if (deltac_load_tuning_db(NULL) != 0)
    return 2;
  if (deltac_forward_info(&p, &opt, &info) != 0)
    return 2;
  if (!info.family || strcmp(info.family, "cpu_recurrent") != 0 ||
      info.tile_v != 16 || !info.note || info.note[0] != 0)
    return 1;
  for (i = 0; i < T * V; ++i)
    if (o_out[i] < 0.2499f || o_out[i] > 0.2501f)
      return 1;
  return 0;
}

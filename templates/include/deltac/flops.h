// FLOP counts used by every benchmark and report, so that rates compare.
// An FMA counts 2; masks, exps, decays and loads are not counted.
#ifndef DELTAC_FLOPS_H
#define DELTAC_FLOPS_H

namespace deltac {

// Recurrent step, per value head and token: h^T k, the rank-1 update and
// h^T q, K V multiply-adds each.
inline double recurrent_flops_per_token(int K, int V) {
  return 2.0 * 3.0 * K * V;
}

// Chunked (UT) form, per value head and token, chunk C: [K;Q] S and K^T U
// (3 K V multiply-adds), plus the lower triangles of K K^T and Q K^T (C K / 2
// each) and of the solve (I + A)^-1 R and of P U (C V / 2 each). About 131
// kFLOP at K = V = 128, C = 64 (a form that builds W = A (beta K) and full
// C x C products, as GPU kernels do, counts about 182 kFLOP).
inline double chunked_flops_per_token(int K, int V, int C) {
  return 2.0 * (3.0 * K * V + double(C) * (K + V));
}

} // namespace deltac

#endif // DELTAC_FLOPS_H

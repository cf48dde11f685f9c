// FLOP counts used by every benchmark and report, so that rates compare.
#ifndef DELTAC_FLOPS_H
#define DELTAC_FLOPS_H

namespace deltac {

// Useful FLOPs of the chunked (WY/UT) form per value head and token, chunk C:
// per chunk K K^T, W = A (beta K), U = A (beta V), Q K^T and its product with
// V' cost C^2 (6K + 4V); W S, Q S and the state update K^T V' cost 6 C K V;
// the triangular inverse C^3 / 3. About 182 kFLOP at K = V = 128, C = 64.
inline double chunked_flops_per_token(int K, int V, int C) {
  double k = K, v = V, c = C;
  return 6.0 * k * v + c * (6.0 * k + 4.0 * v) + c * c / 3.0;
}

// FLOPs of one recurrent step per value head: h^T k, the rank-1 update and
// h^T q (2 K V each), plus the decay (K V).
inline double recurrent_flops_per_token(int K, int V) {
  return 7.0 * K * V;
}

} // namespace deltac

#endif // DELTAC_FLOPS_H

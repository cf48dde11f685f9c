"""fla's chunked delta rule against float64 at beta near 2 (nothing decays), on a GPU.

The case deltac's tests call delta_*_tmat_beta2_T1000 (tests/cuda/chunked_test.cpp):
K = V = 128, one sequence, bf16 q / k / v, q and k L2-normalised, beta uniform in
[beta_lo, 2], f32 h0 = 0.1 N(0, 1), its final state out. Prints fla's relative RMS
of o and the final state per T, to set deltac's bound beside the peer's
(bench/cuda/bf16_state_error.py models ours on the CPU).

Usage: PYTHONPATH=<dir holding fla/> python3 bench/cuda/fla_beta2_error.py [seed] [beta_lo]
"""
import sys

import torch
from fla.ops.delta_rule import chunk_delta_rule

seed = int(sys.argv[1]) if len(sys.argv) > 1 else 0
lo = float(sys.argv[2]) if len(sys.argv) > 2 else 1.99
H, K, V = 2, 128, 128
torch.manual_seed(seed)
print(f"fla chunk_delta_rule, bf16, K=V={K}, {H} heads, beta in [{lo}, 2], seed {seed}",
      flush=True)


def reference(q, k, v, beta, h0, scale):
    """float64 on the GPU, S [H][K][V]: S += beta k (v - S^T k)^T; o = scale S^T q."""
    q, k, v, beta, S = (x.double() for x in (q[0], k[0], v[0], beta[0], h0[0]))
    o = torch.empty_like(v)
    for t in range(q.shape[0]):
        u = beta[t][:, None] * (v[t] - torch.einsum("hkv,hk->hv", S, k[t]))
        S = S + torch.einsum("hk,hv->hkv", k[t], u)
        o[t] = scale * torch.einsum("hkv,hk->hv", S, q[t])
    return o, S


def rel(a, b):
    return ((a.double() - b).norm() / b.norm()).item()


for T in (100, 1000, 4000):
    norm = torch.nn.functional.normalize
    q = norm(torch.randn(1, T, H, K, device="cuda"), dim=-1).bfloat16()
    k = norm(torch.randn(1, T, H, K, device="cuda"), dim=-1).bfloat16()
    v = torch.randn(1, T, H, V, device="cuda").bfloat16()
    beta = (lo + (2 - lo) * torch.rand(1, T, H, device="cuda")).bfloat16()
    h0 = 0.1 * torch.randn(1, H, K, V, device="cuda")
    scale = K ** -0.5
    o, ht = chunk_delta_rule(q, k, v, beta, scale=scale, initial_state=h0,
                             output_final_state=True)
    oe, he = reference(q, k, v, beta, h0, scale)
    print(f"T={T:5d}  o {rel(o[0], oe):.2e}  ht {rel(ht[0], he):.2e}", flush=True)

"""Error of the chunked form's bf16 products at beta near 2 (no decay), on the CPU.

Delta rule, K = V = 128, chunk 64, T tokens, inputs rounded to bf16: float64
sequential reference against a float64 chunked (WY/UT) form in which chosen
operands are rounded to bf16 as the tensor-core products round them; the master
state stays f32. Modes: 0 nothing rounded; 1 the state S and v' rounded (what a
bf16 register operand does); 2 S split hi + lo (two bf16 terms); 3 v' split in
the state update; 4 both split. Prints relative RMS of o and ht per mode.

Usage: python3 bench/cuda/bf16_state_error.py [seed] [beta_lo] [T]
(beta uniform in [beta_lo, 2]; docs/performance.md, session 36).
"""
import sys

import torch

seed = int(sys.argv[1]) if len(sys.argv) > 1 else 0
lo = float(sys.argv[2]) if len(sys.argv) > 2 else 1.99
T = int(sys.argv[3]) if len(sys.argv) > 3 else 1000
K = V = 128
C = 64
torch.manual_seed(seed)
f64 = torch.float64


def bf(x):
    return x.to(torch.bfloat16).to(f64)


def split(x):
    return bf(x) + bf(x - bf(x))


q = bf(torch.nn.functional.normalize(torch.randn(T, K, dtype=f64), dim=-1))
k = bf(torch.nn.functional.normalize(torch.randn(T, K, dtype=f64), dim=-1))
v = bf(torch.randn(T, V, dtype=f64))
beta = lo + (2 - lo) * torch.rand(T, dtype=f64)
h0 = 0.1 * torch.randn(V, K, dtype=f64)  # S as [V][K]
scale = K ** -0.5


def sequential():
    S, o = h0.clone(), torch.empty(T, V, dtype=f64)
    for t in range(T):
        S = S - beta[t] * torch.outer(S @ k[t] - v[t], k[t])
        o[t] = scale * S @ q[t]
    return o, S


def chunked(mode):
    S, o = h0.float().to(f64), torch.empty(T, V, dtype=f64)
    for c0 in range(0, T, C):
        Kc, Qc, Vc, b = k[c0:c0 + C], q[c0:c0 + C], v[c0:c0 + C], beta[c0:c0 + C]
        n = Kc.shape[0]
        A = torch.tril(b[:, None] * (Kc @ Kc.T), -1)
        Tm = torch.linalg.inv(torch.eye(n, dtype=f64) + A)
        Sb = S if mode == 0 else split(S) if mode in (2, 4) else bf(S)
        U = Tm @ (b[:, None] * (Vc - Kc @ Sb.T))
        Ub = U if mode == 0 else bf(U)
        o[c0:c0 + n] = scale * (Qc @ Sb.T + torch.tril(Qc @ Kc.T) @ Ub)
        Uu = split(U) if mode in (3, 4) else Ub
        S = (S + Uu.T @ Kc).float().to(f64)  # the f32 master state
    return o, S


def rel(a, b):
    return ((a - b).norm() / b.norm()).item()


oe, Se = sequential()
print(f"delta K=V={K} T={T} chunk {C} beta in [{lo}, 2] seed {seed}")
for mode in range(5):
    oc, Sc = chunked(mode)
    print(f"mode {mode}: o {rel(oc, oe):.2e}  ht {rel(Sc, Se):.2e}")

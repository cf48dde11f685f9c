"""Error of the chunked form's 16-bit products at beta near 2 (no decay), on the CPU.

Delta rule, K = V = 128, chunk 64, T tokens, inputs rounded to bf16: a float64
sequential reference against a float64 chunked (WY/UT) form whose operands are
rounded as a scan's tensor-core products round them; the master state stays f32.
Per chunk (the scans' names: chunked_scan_tmat.cuh, chunked_scan_warp.cuh):
  x = K S_x,  r = beta (V - x) (rounded: r),  v' = T r (T rounded: T),
  o = scale (Q S_o + Aqk v'_o),  S += v'_u^T K.
Each operand is rounded one way: f (exact), b (bf16), s (bf16 hi + lo, two
products), h (f16). 'scans' is what every 16-bit scan does today (S split for
K S only); the others are candidate fixes, with the products they add per
chunk at K = 128 (today 40 warpgroup k-steps: K S 16, Q S 8, T r 4, S update 8,
Aqk v' 4). Prints relative RMS of o and ht per configuration and seed.

Usage: python3 bench/cuda/bf16_state_error.py [T] [beta_lo] [seeds]
(beta uniform in [beta_lo, 2]; docs/performance.md, sessions 36-37).
"""
import sys

import torch

T = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
lo = float(sys.argv[2]) if len(sys.argv) > 2 else 1.99
seeds = int(sys.argv[3]) if len(sys.argv) > 3 else 2
K = V = 128
C = 64
f64 = torch.float64


def bf(x):
    return x.to(torch.bfloat16).to(f64)


def hf(x):
    return x.to(torch.float16).to(f64)


ROUND = {"f": lambda x: x, "b": bf, "s": lambda x: bf(x) + bf(x - bf(x)), "h": hf}

SCANS = dict(Sx="s", So="b", r="b", T="b", Vo="b", Vu="b")
CONFIGS = [
    ("scans (today)", SCANS, "+0"),
    ("v' split in S update", dict(SCANS, Vu="s"), "+8"),
    ("+ r split", dict(SCANS, Vu="s", r="s"), "+12"),
    ("+ T split", dict(SCANS, Vu="s", T="s"), "+12, T lo in the workspace"),
    ("+ r and T split", dict(SCANS, Vu="s", r="s", T="s"), "+16, T lo in the workspace"),
    ("+ r, T in f16", dict(SCANS, Vu="s", r="h", T="h"), "+8, T stored as f16"),
    ("everything split", {k: "s" for k in SCANS}, "+28, T lo in the workspace"),
]


def inputs(seed):
    g = torch.Generator().manual_seed(seed)
    q = bf(torch.nn.functional.normalize(torch.randn(T, K, dtype=f64, generator=g), dim=-1))
    k = bf(torch.nn.functional.normalize(torch.randn(T, K, dtype=f64, generator=g), dim=-1))
    v = bf(torch.randn(T, V, dtype=f64, generator=g))
    beta = lo + (2 - lo) * torch.rand(T, dtype=f64, generator=g)
    h0 = 0.1 * torch.randn(V, K, dtype=f64, generator=g)  # S as [V][K]
    return q, k, v, beta, h0


def sequential(q, k, v, beta, h0):
    S, o = h0.clone(), torch.empty(T, V, dtype=f64)
    for t in range(T):
        S = S - beta[t] * torch.outer(S @ k[t] - v[t], k[t])
        o[t] = K ** -0.5 * S @ q[t]
    return o, S


def chunked(q, k, v, beta, h0, cfg):
    r = {name: ROUND[how] for name, how in cfg.items()}
    S, o = h0.float().to(f64), torch.empty(T, V, dtype=f64)
    for c0 in range(0, T, C):
        Kc, Qc, Vc, b = k[c0:c0 + C], q[c0:c0 + C], v[c0:c0 + C], beta[c0:c0 + C]
        n = Kc.shape[0]
        A = torch.tril(b[:, None] * (Kc @ Kc.T), -1)
        Tm = r["T"](torch.linalg.inv(torch.eye(n, dtype=f64) + A))
        res = r["r"](b[:, None] * (Vc - Kc @ r["Sx"](S).T))
        U = Tm @ res
        Aqk = bf(torch.tril(Qc @ Kc.T))
        o[c0:c0 + n] = K ** -0.5 * (Qc @ r["So"](S).T + Aqk @ r["Vo"](U))
        S = (S + r["Vu"](U).T @ Kc).float().to(f64)  # the f32 master state
    return o, S


def rel(a, b):
    return ((a - b).norm() / b.norm()).item()


print(f"delta K=V={K} T={T} chunk {C} beta in [{lo}, 2], {seeds} seeds (o / ht per seed)")
data = [inputs(s) for s in range(seeds)]
refs = [sequential(*d) for d in data]
for name, cfg, cost in CONFIGS:
    errs = []
    for d, (oe, Se) in zip(data, refs):
        oc, Sc = chunked(*d, cfg)
        errs.append(f"{rel(oc, oe):.2e} / {rel(Sc, Se):.2e}")
    print(f"{name:22s} {'   '.join(errs)}   k-steps {cost}")

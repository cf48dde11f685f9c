"""Plain float64 PyTorch references for the tests (no deltac code).

``delta_rule``: per sequence and value head j, tokens in order,
h <- a_t (.) h; u = beta_t (v_t - h^T k_t); h <- h + k_t u^T; o_t = scale h^T q_t,
value head j reading q/k head j // (HV / H).
"""

import math

import torch
import torch.nn.functional as F


def l2norm(x):
    return x / torch.sqrt((x * x).sum(-1, keepdim=True) + 1e-6)


def delta_rule(q, k, v, beta, g=None, scale=None, h0=None, cu_seqlens=None,
               l2=False, state_v_first=False):
    """Returns (o [B,T,HV,V], ht [N,HV,K,V] (or [N,HV,V,K])) in float64.
    g: None (delta), [B,T,HV] (gated) or [B,T,HV,K] (kda), the log decay."""
    q, k, v, beta = (t.detach().cpu().double() for t in (q, k, v, beta))
    g = None if g is None else g.detach().cpu().double()
    B, T, H, K = q.shape
    HV, V = v.shape[2], v.shape[3]
    if l2:
        q, k = l2norm(q), l2norm(k)
    scale = 1.0 / math.sqrt(K) if scale is None else scale
    r = HV // H
    q = q.repeat_interleave(r, dim=2)
    k = k.repeat_interleave(r, dim=2)
    if cu_seqlens is not None:
        cu = [int(x) for x in cu_seqlens.tolist()]
        seqs = [(0, cu[n], cu[n + 1]) for n in range(len(cu) - 1)]
    else:
        seqs = [(b, 0, T) for b in range(B)]
    o = torch.zeros(B, T, HV, V, dtype=torch.float64)
    hts = []
    for n, (b, s, e) in enumerate(seqs):
        if h0 is not None:
            h = h0[n].detach().cpu().double().clone()
            if state_v_first:
                h = h.transpose(-1, -2)
        else:
            h = torch.zeros(HV, K, V, dtype=torch.float64)
        for t in range(s, e):
            if g is not None:
                if g.dim() == 3:
                    h = h * torch.exp(g[b, t])[:, None, None]
                else:
                    h = h * torch.exp(g[b, t])[:, :, None]
            kt = k[b, t]                                   # [HV, K]
            u = beta[b, t][:, None] * (v[b, t] - torch.einsum("hkv,hk->hv", h, kt))
            h = h + kt[:, :, None] * u[:, None, :]
            o[b, t] = scale * torch.einsum("hkv,hk->hv", h, q[b, t])
        hts.append(h.transpose(-1, -2) if state_v_first else h)
    return o, torch.stack(hts)


def rel_err(got, want):
    got = got.detach().cpu().double()
    want = want.detach().cpu().double()
    den = want.norm().item()
    return (got - want).norm().item() / (den if den > 0 else 1.0)

"""Training smoke test: a tiny model of deltac.nn.DeltaNetAttention layers learns
multi-query associative recall (MQAR) on the CPU through deltac's backward, and its
loss curve matches the same model trained with a float64 PyTorch reference of the
delta rule (autograd backward), from the same initialisation and the same batches.

Task: each sequence shows PAIRS key-value pairs (key k_i, then its value v_i; keys
distinct, drawn from KEYS tokens, values from VALUES tokens), then the PAIRS keys
again in a random order; at each of those query positions the model must predict the
key's value. Recall = accuracy at the query positions.

Model: token embedding plus a projected copy of the previous token's embedding (a
width-2 causal convolution, the short convolution DeltaNet models put before their
q/k/v), then LAYERS blocks of x + DeltaNetAttention(LayerNorm(x)) and x + MLP, a
final LayerNorm and a linear head.

Criterion for "the loss curves match within noise": the steps are cut into windows
of WINDOW steps; in every window the mean training loss of the two runs differs by
at most 3 standard errors of the difference of the means (from the per-step
spread within the window) plus 0.02, and the final recall differs by at most 0.05.
Recall >= 0.9 where the float64 run reaches it (a few seeds stay on the plateau
for STEPS steps with either side), else >= 0.5 (chance: 1 / VALUES).
"""

import math
import time

import torch
import torch.nn.functional as F
from torch import nn

import deltac.nn.deltanet as deltanet_mod
from deltac.nn import DeltaNetAttention, DeltaNetConfig

PAIRS, KEYS, VALUES = 8, 32, 32
HIDDEN, HEADS, LAYERS = 64, 2, 2
# 400 steps: at 300, about one seed in 20 was still on the plateau (seed
# 5187491361756361041: recall 0.856, and 0.857 with the float64 reference);
# at 400 it reaches 0.975, and 24 other seeds 0.975-1.0.
STEPS, BATCH, LR = 400, 64, 3e-3
WINDOW = 50


def batch(gen):
    """(tokens [B, 3 PAIRS], targets [B, 3 PAIRS] with -100 outside queries)."""
    keys = torch.stack([torch.randperm(KEYS, generator=gen)[:PAIRS] for _ in range(BATCH)])
    vals = torch.randint(0, VALUES, (BATCH, PAIRS), generator=gen) + KEYS
    order = torch.stack([torch.randperm(PAIRS, generator=gen) for _ in range(BATCH)])
    qkeys = torch.gather(keys, 1, order)
    qvals = torch.gather(vals, 1, order)
    ctx = torch.stack([keys, vals], -1).reshape(BATCH, 2 * PAIRS)
    tokens = torch.cat([ctx, qkeys], 1)
    targets = torch.cat([torch.full((BATCH, 2 * PAIRS), -100), qvals], 1)
    return tokens, targets


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(KEYS + VALUES, HIDDEN)
        self.prev = nn.Linear(HIDDEN, HIDDEN, bias=False)
        cfg = DeltaNetConfig(hidden_size=HIDDEN, num_heads=HEADS)
        self.attn = nn.ModuleList(DeltaNetAttention(cfg) for _ in range(LAYERS))
        self.n1 = nn.ModuleList(nn.LayerNorm(HIDDEN) for _ in range(LAYERS))
        self.n2 = nn.ModuleList(nn.LayerNorm(HIDDEN) for _ in range(LAYERS))
        self.mlp = nn.ModuleList(
            nn.Sequential(nn.Linear(HIDDEN, 2 * HIDDEN), nn.GELU(), nn.Linear(2 * HIDDEN, HIDDEN))
            for _ in range(LAYERS))
        self.norm = nn.LayerNorm(HIDDEN)
        self.head = nn.Linear(HIDDEN, KEYS + VALUES)

    def forward(self, tokens):
        e = self.emb(tokens)
        x = e + self.prev(F.pad(e, (0, 0, 1, 0))[:, :-1])
        for a, n1, n2, m in zip(self.attn, self.n1, self.n2, self.mlp):
            x = x + a(n1(x))
            x = x + m(n2(x))
        return self.head(self.norm(x))


def ref_chunk_delta_rule(q, k, v, beta, initial_state=None, output_final_state=False,
                         use_qk_l2norm_in_kernel=False, **kw):
    """What DeltaNetAttention calls, in float64 PyTorch with autograd as the backward,
    from a zero state (the encoder mode): the recurrence u_t = beta_t (v_t - sum_{i<t}
    (k_i . k_t) u_i), o_t = scale sum_{i<=t} (q_t . k_i) u_i solved as one triangular
    system per sequence and head (the same math as params.h, checked against the
    token-by-token recurrence in test_closed_form_reference_is_the_recurrence)."""
    assert initial_state is None and not output_final_state
    dtype = v.dtype
    q, k, v, beta = (t.double() for t in (q, k, v, beta))
    if use_qk_l2norm_in_kernel:
        q = q / torch.sqrt((q * q).sum(-1, keepdim=True) + 1e-6)
        k = k / torch.sqrt((k * k).sum(-1, keepdim=True) + 1e-6)
    T, K = q.shape[1], q.shape[-1]
    q, k, v = (t.transpose(1, 2) for t in (q, k, v))  # [B, H, T, D]
    b = beta.transpose(1, 2)[..., None]  # [B, H, T, 1]
    A = torch.tril(b * (k @ k.transpose(-1, -2)), -1)
    eye = torch.eye(T, dtype=torch.float64)
    u = torch.linalg.solve_triangular(eye + A, b * v, upper=False, unitriangular=True)
    o = torch.tril(q @ k.transpose(-1, -2)) @ u / math.sqrt(K)
    return o.transpose(1, 2).to(dtype), None


def test_closed_form_reference_is_the_recurrence(seed):
    from test_autograd import ref_forward
    q, k, v = (torch.randn(3, 24, 2, 32, dtype=torch.float64) for _ in range(3))
    beta = torch.rand(3, 24, 2, dtype=torch.float64)
    got, _ = ref_chunk_delta_rule(q, k, v, beta, use_qk_l2norm_in_kernel=True)
    want, _ = ref_forward(q, k, v, None, beta, l2=True)
    assert (got - want).abs().max() <= 1e-10 * want.abs().max()


def train(seed, reference):
    # One thread: the tensors are tiny, and a 2-thread region on a busy 2-core
    # machine waits for the scheduler (10x slower measured under load 8).
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return _train(seed, reference)
    finally:
        torch.set_num_threads(threads)


def _train(seed, reference):
    torch.manual_seed(seed)
    model = Model()
    opt = torch.optim.Adam(model.parameters(), lr=LR)
    gen = torch.Generator().manual_seed(seed + 1)
    saved = deltanet_mod.ops.chunk_delta_rule
    if reference:
        deltanet_mod.ops = _Patched(deltanet_mod.ops)
    losses = []
    try:
        for _ in range(STEPS):
            tokens, targets = batch(gen)
            logits = model(tokens)
            loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
        with torch.no_grad():
            hits = total = 0
            for _ in range(4):
                tokens, targets = batch(gen)
                pred = model(tokens).argmax(-1)
                m = targets >= 0
                hits += (pred[m] == targets[m]).sum().item()
                total += m.sum().item()
    finally:
        if reference:
            deltanet_mod.ops = deltanet_mod.ops.inner
        assert deltanet_mod.ops.chunk_delta_rule is saved
    return losses, hits / total


class _Patched:
    """deltac.ops with chunk_delta_rule replaced by the float64 reference."""

    def __init__(self, inner):
        self.inner = inner

    def __getattr__(self, name):
        if name == "chunk_delta_rule":
            return ref_chunk_delta_rule
        return getattr(self.inner, name)


def windows_match(a, b):
    """The criterion of the module doc; returns (ok, per-window rows)."""
    rows, ok = [], True
    for s in range(0, len(a), WINDOW):
        x = torch.tensor(a[s:s + WINDOW], dtype=torch.float64)
        y = torch.tensor(b[s:s + WINDOW], dtype=torch.float64)
        d = (x.mean() - y.mean()).abs().item()
        se = math.sqrt((x.var() + y.var()).item() / len(x))
        lim = 3 * se + 0.02
        rows.append((s, x.mean().item(), y.mean().item(), d, lim))
        ok &= d <= lim
    return ok, rows


def test_mqar_trains_and_matches_the_float64_reference(seed):
    seed = seed % (1 << 31)
    t0 = time.time()
    losses, recall = train(seed, reference=False)
    t1 = time.time()
    ref_losses, ref_recall = train(seed, reference=True)
    t2 = time.time()
    ok, rows = windows_match(losses, ref_losses)
    print(f"deltac: {t1 - t0:.1f} s, recall {recall:.3f}, final loss {losses[-1]:.4f}")
    print(f"float64 reference: {t2 - t1:.1f} s, recall {ref_recall:.3f}, "
          f"final loss {ref_losses[-1]:.4f}")
    print(f"largest per-step loss difference: "
          f"{max(abs(a - b) for a, b in zip(losses, ref_losses)):.2e}")
    for s, x, y, d, lim in rows:
        print(f"steps {s}-{s + WINDOW - 1}: loss {x:.4f} vs {y:.4f}, |diff| {d:.4f} <= {lim:.4f}")
    assert ok, rows
    assert abs(recall - ref_recall) <= 0.05, (recall, ref_recall)
    # Whether STEPS steps leave the plateau is the seed's, not the kernel's: the
    # float64 run decides. Where it reaches 0.9, deltac must too; where it stays
    # on the plateau (at 300 steps CI met seed 5187491361756361041: 0.856 with
    # deltac, 0.857 float64), deltac must still be far above chance (1 / VALUES).
    assert recall >= (0.9 if ref_recall >= 0.9 else 0.5), (recall, ref_recall)

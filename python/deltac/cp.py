"""Context parallelism: one long sequence split over the ranks of a torch.distributed group.

Each rank holds a contiguous span of the tokens. The delta rule over a span is
affine in the state entering it: ``h_out = P h_in + C`` (h ``[K, V]`` per value
head, P ``[K, K]``: the product of the span's ``(I - b k kᵀ) diag(a)``), and the
span's outputs are ``o_t = o_t(h_in = 0) + h_inᵀ (scale P_{<=t}ᵀ q_t)``. A rank
whose span continues a sequence runs its span ONCE with V + K value columns: the
K extra columns start from the identity with zero values, so the final state
holds ``[C | P]`` and the extra output columns hold ``scale P_{<=t}ᵀ q_t``. One
all-gather of every rank's (P, C) (a few MB) gives each rank its entering state
(a fold over the ranks before it), and one product per token finishes the
outputs. No rank waits for another's compute; the cost is the K extra columns
(2x the work at K = V; docs/parallel.md).

Everything is PyTorch ops over deltac's kernels and two differentiable
collectives, so autograd gives the gradients through the kernels' backward (CPU
today): the total loss is the sum of the ranks' losses, as in data-parallel
training.

    ctx = deltac.cp.context(group, cu_seqlens=cu)        # once per batch, every rank
    o, ht = deltac.cp.chunk_gated_delta_rule(q, k, v, g, beta, cp_context=ctx,
                                             initial_state=h0, output_final_state=True)

Two layouts:
* batch (no cu_seqlens): q ``[B, T_r, H, K]`` on rank r; every one of the B
  sequences is the concatenation of the ranks' spans in rank order (T_r may
  differ between ranks).
* varlen: B = 1, ``cu_seqlens`` the GLOBAL offsets (the same tensor on every rank);
  rank r holds the tokens ``[spans[r], spans[r + 1])`` of the flat token stream
  (default: equal spans of ceil(total / ranks) tokens, the last ones shorter).

initial_state ``[N, HV, K, V]`` is read by the rank where each sequence starts;
final_state, when asked for, is the whole ``[N, HV, K, V]`` on every rank (one
all-reduce). Heads split over ranks (tensor parallelism) need none of this:
each rank calls deltac.ops on its heads.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional, Sequence, Tuple

import torch
import torch.distributed as dist
from torch import Tensor

from . import ops
from ._lib import DeltacError

__all__ = ["CPContext", "context", "conv_state", "chunk_delta_rule", "chunk_gated_delta_rule",
           "chunk_kda"]


@dataclass(frozen=True)
class CPContext:
    """Where this rank's tokens sit in the global batch (see context())."""

    group: object
    rank: int
    world: int
    varlen: bool
    # varlen only: the global sequence count and this rank's pieces
    # (sequence n, global start, global end), in token order; empty sequences
    # owned by this rank appear as zero-length pieces.
    num_seqs: int = 0
    pieces: Tuple[Tuple[int, int, int], ...] = ()
    span: Tuple[int, int] = (0, 0)
    first_continues: bool = False  # the first piece's sequence started on an earlier rank
    last_continues: bool = False   # the last piece's sequence goes on to a later rank


def _fail(msg: str, exc=ValueError):
    raise exc(f"deltac.cp: {msg}")


def context(group=None, cu_seqlens: Optional[Tensor] = None,
            spans: Optional[Sequence[int]] = None) -> CPContext:
    """The context of one batch. group: a torch.distributed process group (None:
    the default group). cu_seqlens: the global ``[N + 1]`` offsets (varlen) or None
    (batch layout). spans: ``ranks + 1`` token offsets of the ranks' spans (varlen;
    default equal spans). No collective is called."""
    if not dist.is_available() or not dist.is_initialized():
        _fail("torch.distributed is not initialised (call init_process_group first)",
              RuntimeError)
    rank, world = dist.get_rank(group), dist.get_world_size(group)
    if cu_seqlens is None:
        if spans is not None:
            _fail("spans is for the varlen layout (pass cu_seqlens too)")
        return CPContext(group, rank, world, False)
    cu = [int(x) for x in torch.as_tensor(cu_seqlens).reshape(-1).tolist()]
    if len(cu) < 2 or cu[0] != 0 or any(b < a for a, b in zip(cu, cu[1:])):
        _fail(f"cu_seqlens must start at 0 and never decrease, with at least 2 entries; "
              f"got {cu[:8]}{'...' if len(cu) > 8 else ''}")
    total = cu[-1]
    if spans is None:
        step = -(-total // world) if total else 0
        spans = [min(r * step, total) for r in range(world)] + [total]
    spans = [int(x) for x in spans]
    if (len(spans) != world + 1 or spans[0] != 0 or spans[-1] != total
            or any(b < a for a, b in zip(spans, spans[1:]))):
        _fail(f"spans must be {world + 1} non-decreasing offsets from 0 to {total}; got {spans}")
    a, b = spans[rank], spans[rank + 1]
    pieces = []
    for n in range(len(cu) - 1):
        s, e = cu[n], cu[n + 1]
        if s == e:
            # an empty sequence belongs to the rank whose span holds its position
            # (the last rank at the very end); ranks with empty spans take none
            owner = next((r for r in range(world) if spans[r] <= s < spans[r + 1]), world - 1)
            if owner == rank:
                pieces.append((n, s, s))
        elif s < b and e > a:
            pieces.append((n, max(s, a), min(e, b)))
    first_cont = bool(pieces) and cu[pieces[0][0]] < pieces[0][1]
    last_cont = bool(pieces) and cu[pieces[-1][0] + 1] > pieces[-1][2]
    return CPContext(group, rank, world, True, len(cu) - 1, tuple(pieces), (a, b),
                     first_cont, last_cont)


class _AllGather(torch.autograd.Function):
    """Stack of every rank's x; the gradient of x is the sum over ranks of the
    gradients of its slot."""

    @staticmethod
    def forward(ctx, x, group):
        ctx.group = group
        out = [torch.empty_like(x) for _ in range(dist.get_world_size(group))]
        dist.all_gather(out, x.contiguous(), group=group)
        return torch.stack(out)

    @staticmethod
    def backward(ctx, grad):
        grad = grad.contiguous().clone()
        dist.all_reduce(grad, group=ctx.group)
        return grad[dist.get_rank(ctx.group)], None


class _AllReduce(torch.autograd.Function):
    """Sum over ranks. `after` (no gradient) only orders the backward: this
    collective's backward runs before the entering-state gather's on every rank,
    so all ranks call the collectives in the same order."""

    @staticmethod
    def forward(ctx, x, group, after):
        ctx.group = group
        y = x.contiguous().clone()
        dist.all_reduce(y, group=group)
        return y

    @staticmethod
    def backward(ctx, grad):
        grad = grad.contiguous().clone()
        dist.all_reduce(grad, group=ctx.group)
        return grad, None, None


class _After(torch.autograd.Function):
    """y unchanged; in backward x gets a zero gradient. Makes an output y depend
    on a collective's output x on every rank, also where x is not used, so that
    every rank runs that collective's backward (a rank that skipped it would
    leave the others' all-reduce paired with the wrong call)."""

    @staticmethod
    def forward(ctx, y, x):
        ctx.shape, ctx.dtype, ctx.device = x.shape, x.dtype, x.device
        return y.view_as(y)

    @staticmethod
    def backward(ctx, grad):
        return grad, torch.zeros(ctx.shape, dtype=ctx.dtype, device=ctx.device)


def _tracked(x: Tensor, grad: bool) -> Tensor:
    """x, made to require grad when the call needs gradients: every rank must run
    the same collectives in backward, also a rank whose export is a constant."""
    return x.detach().requires_grad_() if grad and not x.requires_grad else x


# kernel(q, k, v, g, beta, h0, cu_seqlens) -> (o, ht): one deltac.ops call.
Kernel = Callable[..., Tuple[Tensor, Tensor]]


def _extended(kernel: Kernel, q, k, v, g, beta, cu, nseq):
    """One run of the span with K identity columns appended: returns
    (o_local, o_extra, C, P) for `nseq` sequences starting from h_in = 0."""
    K, V = q.shape[-1], v.shape[-1]
    HV = v.shape[2]
    eye = torch.eye(K, dtype=torch.float32, device=q.device)
    if V + K <= 256:
        zv = torch.zeros(*v.shape[:3], K, dtype=v.dtype, device=v.device)
        h0 = torch.zeros(nseq, HV, K, V + K, dtype=torch.float32, device=q.device)
        h0[..., V:] = eye
        try:
            o, ht = kernel(q, k, torch.cat([v, zv], -1), g, beta, h0, cu)
            return o[..., :V], o[..., V:], ht[..., :V], ht[..., V:]
        except DeltacError as e:  # CUDA: (K, V + K) not precompiled
            if "not precompiled" not in str(e):
                raise
    # wider than one kernel takes, or not built for the device: two calls
    o, C = kernel(q, k, v, g, beta, None, cu)
    zv = torch.zeros(*v.shape[:3], K, dtype=v.dtype, device=v.device)
    oe, P = kernel(q, k, zv, g, beta, eye.expand(nseq, HV, K, K).contiguous(), cu)
    return o, oe, C, P


def _finish(o_loc, o_extra, C, P, h_in, dtype):
    """Outputs and final states of spans entering with h_in [S, HV, K, V]."""
    st = C.dtype  # the state's dtype: float32 (float64 for a float64 test kernel)
    if o_loc.dim() == 4:  # [S, T, HV, *]
        corr = torch.einsum("sthk,shkv->sthv", o_extra.to(st), h_in)
    else:                 # [T, HV, *], one sequence
        corr = torch.einsum("thk,hkv->thv", o_extra.to(st), h_in[0])
    o = (o_loc.to(st) + corr).to(dtype)
    return o, C + torch.einsum("shkl,shlv->shkv", P, h_in)


def _entering(ctx: CPContext, P: Tensor, C: Tensor, grad: bool) -> Tuple[Tensor, Tensor]:
    """This rank's entering states from every rank's exported (P, C): one
    all-gather, then a fold over the ranks before this one. Also returns the
    gathered tensor (the final state's all-reduce orders itself after it)."""
    x = _tracked(torch.cat([P.reshape(-1), C.reshape(-1)]), grad)
    xs = _AllGather.apply(x, ctx.group)
    Ps = xs[:, :P.numel()].reshape(-1, *P.shape)
    Cs = xs[:, P.numel():].reshape(-1, *C.shape)
    h = torch.zeros_like(C)
    for j in range(ctx.rank):
        h = torch.einsum("shkl,shlv->shkv", Ps[j], h) + Cs[j]
    return h, xs


def _reduced(ctx: CPContext, mine: Tensor, gathered: Tensor, grad: bool) -> Tensor:
    return _AllReduce.apply(_tracked(mine, grad), ctx.group, gathered)


def _run_batch(ctx, kernel, q, k, v, g, beta, h0, want_ht, grad):
    B, _, HV, V = v.shape
    K = q.shape[-1]
    if ctx.rank == 0:
        o, ht = kernel(q, k, v, g, beta, h0, None)
        P = ht.new_zeros(B, HV, K, K)
        C = ht
    else:
        o_loc, o_ex, C, P = _extended(kernel, q, k, v, g, beta, None, B)
    h_in, xs = _entering(ctx, P, C, grad)
    if ctx.rank > 0:
        o, ht = _finish(o_loc, o_ex, C, P, h_in, v.dtype)
    if grad:  # rank 0 uses no entering state: o still waits for the gather
        o = _After.apply(o, xs)
    if not want_ht:
        return o, None
    mine = ht if ctx.rank == ctx.world - 1 else torch.zeros_like(ht)
    return o, _reduced(ctx, mine, xs, grad)


def _run_varlen(ctx, kernel, q, k, v, g, beta, h0, want_ht, grad):
    _, T, HV, V = v.shape
    K = q.shape[-1]
    a, b = ctx.span
    dev = q.device
    if T != b - a:
        _fail(f"q has {T} tokens on rank {ctx.rank}: its span is [{a}, {b}) ({b - a} tokens)")
    pieces = list(ctx.pieces)
    cont = pieces.pop(0) if ctx.first_continues else None
    outs, ht_rows = [], {}
    if cont is not None:
        n, s, e = cont
        sl = slice(s - a, e - a)
        cu1 = torch.tensor([0, e - s], dtype=torch.int64, device=dev)
        gg = None if g is None else g[:, sl]
        o_loc, o_ex, C1, P1 = _extended(kernel, q[:, sl], k[:, sl], v[:, sl], gg, beta[:, sl],
                                        cu1, 1)
    if pieces:
        s0 = pieces[0][1]
        cu = torch.tensor([0] + [p[2] - s0 for p in pieces], dtype=torch.int64, device=dev)
        sl = slice(s0 - a, pieces[-1][2] - a)
        hh = None
        if h0 is not None:
            hh = h0[torch.tensor([p[0] for p in pieces], device=h0.device)].contiguous()
        gg = None if g is None else g[:, sl]
        o_rest, ht_rest = kernel(q[:, sl], k[:, sl], v[:, sl], gg, beta[:, sl], hh, cu)
    # export: the state the next rank's first sequence enters with
    sdt = (C1 if cont is not None else ht_rest if pieces else
           torch.empty(0, dtype=torch.float32)).dtype
    zeros_h = torch.zeros(1, HV, K, V, dtype=sdt, device=dev)
    P = torch.zeros(1, HV, K, K, dtype=sdt, device=dev)
    if ctx.last_continues and cont is not None and not pieces:
        P, C = P1, C1
    elif ctx.last_continues:
        C = ht_rest[-1:]
    else:
        C = zeros_h
    h_in, xs = _entering(ctx, P, C, grad)
    if cont is not None:
        o_c, ht_c = _finish(o_loc[0], o_ex[0], C1, P1, h_in, v.dtype)
        outs.append(o_c.unsqueeze(0))
        if not (ctx.last_continues and not pieces):  # its sequence ends here
            ht_rows[cont[0]] = ht_c[0]
    if pieces:
        outs.append(o_rest)
        last_open = ctx.last_continues
        for i, p in enumerate(pieces):
            if last_open and i == len(pieces) - 1:
                continue
            ht_rows[p[0]] = ht_rest[i]
    o = torch.cat(outs, 1) if len(outs) > 1 else (outs[0] if outs else v.new_zeros(v.shape))
    if grad:  # a rank without a continued sequence: o still waits for the gather
        o = _After.apply(o, xs)
    if not want_ht:
        return o, None
    rows = [ht_rows.get(n) for n in range(ctx.num_seqs)]
    mine = torch.stack([r if r is not None else zeros_h[0] for r in rows]) if rows else \
        torch.zeros(0, HV, K, V, dtype=torch.float32, device=dev)
    return o, _reduced(ctx, mine, xs, grad)


def _check_ctx(ctx):
    if not isinstance(ctx, CPContext):
        _fail(f"cp_context must be a deltac.cp.CPContext (from deltac.cp.context()); "
              f"got {type(ctx).__name__}", TypeError)


def conv_state(x: Tensor, width: int, cp_context: CPContext) -> Tensor:
    """The state a causal convolution of kernel ``width`` continues from on this rank
    (batch layout): ``[B, C, width]``, the last ``width`` inputs of each sequence
    before this rank's span, gathered from the ranks before it (several when their
    spans are shorter than ``width``; zeros where fewer tokens precede). ``x``
    ``[B, T_r, C]`` is this rank's convolution input. One all-gather of every rank's
    last ``width`` rows (and one of the span lengths); differentiable: the gradient
    of a halo row reaches the rank that owns it. Every rank must call it (the same
    number of times, in the same order)."""
    ctx = cp_context
    _check_ctx(ctx)
    if ctx.varlen:
        _fail("conv_state takes the batch layout (a context without cu_seqlens)")
    if x.dim() != 3:
        _fail(f"x has shape {tuple(x.shape)}: expected [batch, tokens, channels]")
    if width < 1:
        _fail(f"width is {width}: expected >= 1")
    B, T, C = x.shape
    n = min(T, width)
    tail = x[:, T - n:]
    if n < width:
        tail = torch.cat((x.new_zeros(B, width - n, C), tail), 1)
    lens = [torch.zeros(1, dtype=torch.int64, device=x.device) for _ in range(ctx.world)]
    dist.all_gather(lens, torch.full((1,), T, dtype=torch.int64, device=x.device),
                    group=ctx.group)
    lens = [int(t.item()) for t in lens]
    grad = torch.is_grad_enabled() and x.requires_grad
    stack = _AllGather.apply(_tracked(tail, grad), ctx.group)  # [ranks, B, width, C]
    parts, need = [], width
    for r in range(ctx.rank - 1, -1, -1):
        take = min(lens[r], width, need)
        if take:
            parts.insert(0, stack[r][:, width - take:])
            need -= take
        if not need:
            break
    if need:
        parts.insert(0, x.new_zeros(B, need, C))
    halo = torch.cat(parts, 1).transpose(1, 2).contiguous()
    # every rank's result depends on the gather, so every rank runs its backward
    return _After.apply(halo, stack) if stack.requires_grad else halo


def _cp(ctx, kernel, q, k, v, g, beta, initial_state, output_final_state, state_v_first):
    _check_ctx(ctx)
    if initial_state is not None and state_v_first:
        initial_state = initial_state.transpose(-1, -2).contiguous()
    if ctx.varlen and q.shape[0] != 1:
        _fail(f"q has batch {q.shape[0]}: the varlen layout needs B = 1")
    run = _run_varlen if ctx.varlen else _run_batch
    # all ranks must agree on whether gradients are needed (they run the same model)
    grad = torch.is_grad_enabled() and any(
        t is not None and t.requires_grad for t in (q, k, v, g, beta, initial_state))
    o, ht = run(ctx, kernel, q, k, v, g, beta, initial_state, bool(output_final_state), grad)
    if ht is not None and state_v_first:
        ht = ht.transpose(-1, -2).contiguous()
    return o, ht


def _kernel_of(fn, kwargs) -> Kernel:
    def kernel(q, k, v, g, beta, h0, cu):
        args = (q, k, v, beta) if g is None else (q, k, v, g, beta)
        return fn(*args, initial_state=h0, output_final_state=True, cu_seqlens=cu, **kwargs)
    return kernel


def chunk_delta_rule(q, k, v, beta, cp_context: CPContext, initial_state=None,
                     output_final_state=False, **kwargs):
    """deltac.ops.chunk_delta_rule over the ranks of cp_context (module doc)."""
    kernel = kwargs.pop("_kernel", None) or _kernel_of(ops.chunk_delta_rule, kwargs)
    return _cp(cp_context, kernel, q, k, v, None, beta, initial_state, output_final_state, False)


def chunk_gated_delta_rule(q, k, v, g, beta, cp_context: CPContext, initial_state=None,
                           output_final_state=False, state_v_first=False, **kwargs):
    """deltac.ops.chunk_gated_delta_rule over the ranks of cp_context (module doc)."""
    kernel = kwargs.pop("_kernel", None) or _kernel_of(ops.chunk_gated_delta_rule, kwargs)
    return _cp(cp_context, kernel, q, k, v, g, beta, initial_state, output_final_state,
               state_v_first)


def chunk_kda(q, k, v, g, beta, cp_context: CPContext, initial_state=None,
              output_final_state=False, state_v_first=False, **kwargs):
    """deltac.ops.chunk_kda over the ranks of cp_context (module doc)."""
    kernel = kwargs.pop("_kernel", None) or _kernel_of(ops.chunk_kda, kwargs)
    return _cp(cp_context, kernel, q, k, v, g, beta, initial_state, output_final_state,
               state_v_first)

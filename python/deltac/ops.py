"""deltac's delta-rule kernels as PyTorch custom ops, with flash-linear-attention's signatures.

Drop-in for ``fla.ops``: the functions below take and return what fla's functions of
the same names do, so code that calls fla switches by one import::

    from deltac.ops import chunk_gated_delta_rule      # was: from fla.ops.gated_delta_rule import ...
    o, final_state = chunk_gated_delta_rule(q, k, v, g, beta, initial_state=h0,
                                            output_final_state=True, use_qk_l2norm_in_kernel=True)

Shapes (fla's): q, k ``[B, T, H, K]``; v ``[B, T, HV, V]`` (HV a multiple of H: GVA,
value head j reads q/k head j // (HV // H)); beta ``[B, T, HV]``; g ``[B, T, HV]``
(gated) or ``[B, T, HV, K]`` (kda), the log of the decay; initial_state and the
returned final_state ``[N, HV, K, V]`` float32 (``[N, HV, V, K]`` with
``state_v_first=True``); o ``[B, T, HV, V]`` in v's dtype. With ``cu_seqlens``
(``[N + 1]``, int64 or int32) B must be 1 and the N sequences are token ranges.

What deltac adds to / differs from fla:

* dtypes: q, k, v float32 or bfloat16, or float16 on CUDA (one dtype for the
  three; each kernel family takes what it has: the runtime names a refusal); beta, g and
  initial_state of any floating dtype are converted to float32 (the kernels'
  contract), which costs a copy when they are not float32 already.
* every tensor must be contiguous and on q's device; cu_seqlens too (on the GPU the
  kernel reads it from device memory).
* K and V: multiples of 16 in [16, 256] on the CPU; on CUDA the (K, V) pairs the
  runtime has precompiled (recurrent: (64,64), (128,128), (256,256), (128,256),
  (256,128); chunked: the first four).
* ``chunk_*`` runs deltac's schedule for the device (``mode=auto``: on the CPU the
  recurrent kernel at every length, measured fastest; on CUDA the recurrence up to
  16 tokens and the chunked kernel beyond); ``chunk_size=16|32|64`` forces the
  chunked kernel with that chunk.
  ``fused_recurrent_*`` always runs the recurrent kernel.
* the fused pre-processing options (``use_beta_sigmoid_in_kernel``,
  ``allow_neg_eigval``, ``use_gate_in_kernel`` with ``A_log`` / ``dt_bias``,
  fla's ``gk`` for ``fused_recurrent_gated_delta_rule``) are computed with PyTorch
  before the kernel, with fla's formulas.
* ``inplace_final_state=True`` (the ``fused_recurrent_*`` functions, vLLM's name):
  ``initial_state`` (float32, required) is read and overwritten with the final state
  in place, and returned as final_state (the same tensor) when
  ``output_final_state``: no state allocation per decode step, a static buffer for
  CUDA graphs (op ``torch.ops.deltac.fwd_inplace``, which declares the mutation).
* backward (CPU and CUDA): every function is differentiable
  (``torch.library.register_autograd`` on ``deltac.fwd``): ``loss.backward()`` gives the
  gradients of q, k, v, g, beta and initial_state (through the fused L2 norm, GVA,
  varlen) from deltac's backward kernels (``torch.ops.deltac.bwd``, runtime
  ``deltac_backward``; on CUDA K = 64, 128 or 256, enqueued on the current stream with
  a workspace from PyTorch's allocator); the pre-processing options (sigmoid beta,
  gate formulas) are PyTorch ops and differentiate as such.
  ``inplace_final_state=True`` has no backward.
* float64 (CPU only), for gradient checks: the forward is a plain PyTorch float64
  recurrence (slow) and the backward deltac's CPU kernel computed in double.

The kernels are one custom op, ``torch.ops.deltac.fwd``, with CPU and CUDA
implementations and a fake (meta) implementation, so the functions trace under
``torch.compile`` (no graph break) and, on CUDA, enqueue on
``torch.cuda.current_stream()`` without synchronising (CUDA-graph capturable, except
with cu_seqlens, which the runtime copies to the host to validate).
"""

from __future__ import annotations

import math
import os
from typing import Optional, Tuple

import torch
from torch import Tensor

from . import _lib
from ._lib import (
    DEVICE_CPU,
    DEVICE_CUDA,
    DTYPE_BF16,
    DTYPE_F16,
    DTYPE_F32,
    MODE_AUTO,
    MODE_CHUNKED,
    MODE_RECURRENT,
    VARIANT_DELTA,
    VARIANT_GATED,
    VARIANT_KDA,
)

__all__ = [
    "chunk_delta_rule",
    "fused_recurrent_delta_rule",
    "chunk_gated_delta_rule",
    "fused_recurrent_gated_delta_rule",
    "chunk_kda",
    "fused_recurrent_kda",
    "delta_rule_fwd",
]

_IN_DTYPES = {torch.float32: DTYPE_F32, torch.bfloat16: DTYPE_BF16, torch.float16: DTYPE_F16}
_VARIANT_NAMES = {VARIANT_DELTA: "delta", VARIANT_GATED: "gated", VARIANT_KDA: "kda"}

# The eager path's constants (module globals: one dict lookup each).
_F32, _BF16, _F16 = torch.float32, torch.bfloat16, torch.float16
_CPU_CODES = {_F32: DTYPE_F32, _BF16: DTYPE_BF16}
_CUDA_CODES = {_F32: DTYPE_F32, _BF16: DTYPE_BF16, _F16: DTYPE_F16}
_INF = math.inf
_CALL = _lib.CALL_STRUCT.pack
_call_forward = _lib.call_forward
_is_compiling = torch.compiler.is_compiling
_dispatch_stack = torch._C._len_torch_dispatch_stack
_function_mode = torch._C._is_torch_function_mode_enabled
_functorch = torch._C._are_functorch_transforms_active
_profiling = torch.autograd._profiler_enabled
_grad_enabled = torch.is_grad_enabled
_num_threads = torch.get_num_threads
# the raw cudaStream_t of torch.cuda.current_stream(index); the current device
_raw_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None)
_current_device = getattr(torch._C, "_cuda_getDevice", None)


# --------------------------------------------------------------------------
# The custom op: validated, contiguous tensors in, (o, final_state) out.
# --------------------------------------------------------------------------


def _empty_state(q: Tensor, N: int, HV: int, K: int, V: int, state_v_first: bool) -> Tensor:
    shape = (N, HV, V, K) if state_v_first else (N, HV, K, V)
    return torch.empty(shape, dtype=torch.float32, device=q.device)


def _flags(device_pointers, beta_two):
    """deltac_py_call's flags (python/abi.cpp): bit 0 device pointers, bit 1
    allow_neg_eigval (beta may exceed 1: 16-bit delta / GDN chunked calls on CUDA
    then run scan 5, two-term products)."""
    return (1 if device_pointers else 0) | (2 if beta_two else 0)


def _run(q, k, v, g, beta, initial_state, cu_seqlens, variant, scale, qk_l2norm,
         output_final_state, state_v_first, mode, chunk, beta_two=False, inplace=False,
         saved=None):
    """The forward; saved (CUDA): a uint8 buffer for the backward's saved states
    (runtime options.saved_states, ``_saved_bytes``)."""
    B, T, H, K = q.shape
    HV, V = v.shape[2], v.shape[3]
    N = cu_seqlens.shape[0] - 1 if cu_seqlens is not None else B
    o = torch.empty_like(v)
    if inplace:  # the kernel reads h0 and writes ht in the same buffer
        ht = initial_state
    elif output_final_state:
        ht = _empty_state(q, N, HV, K, V, state_v_first)
    else:
        ht = q.new_empty((0,), dtype=torch.float32)
    if T == 0 or B == 0:  # nothing to run: the state passes through
        if output_final_state and not inplace:
            if initial_state is not None:
                ht.copy_(initial_state)
            else:
                ht.zero_()
        return o, ht

    if q.dtype == torch.float64:  # the gradient-check path (module doc)
        return _forward_f64(q, k, v, g, beta, initial_state, cu_seqlens, variant, scale,
                            qk_l2norm, output_final_state, state_v_first)
    dev = q.device
    cuda = dev.type == "cuda"
    threads = 0 if cuda else torch.get_num_threads()
    dt = _IN_DTYPES[q.dtype]

    def call(device, stream):  # deltac_py_call (python/abi.cpp) as bytes
        return _CALL(
            variant, B, T, H, HV, K, V, N, dt, dt, DTYPE_F32, 1 if state_v_first else 0,
            q.data_ptr(), k.data_ptr(), v.data_ptr(),
            g.data_ptr() if g is not None else 0,
            beta.data_ptr(),
            initial_state.data_ptr() if initial_state is not None else 0,
            o.data_ptr(),
            ht.data_ptr() if output_final_state else 0,
            cu_seqlens.data_ptr() if cu_seqlens is not None else 0,
            scale, 1 if qk_l2norm else 0, threads, 0, 0, 0, 0, 0, 0,
            device, mode, chunk, _flags(cuda, beta_two), stream)

    if not cuda:
        rc = _call_forward(call(DEVICE_CPU, 0))
    else:
        if not _lib.cuda_available():
            raise _lib.DeltacError(
                f"deltac: the tensors are on {dev} but this deltac library ({_lib.library_path}) "
                "has no usable CUDA: it was built without nvcc, or sees no GPU")
        index = dev.index if dev.index is not None else _current_device()
        # the raw cudaStream_t of torch.cuda.current_stream(dev), without building a Stream object
        p = call(DEVICE_CUDA, _raw_stream(index))
        fwd = _call_forward if saved is None else (
            lambda b: _lib.call_forward_saved(b, saved.data_ptr(), saved.numel()))
        if index != _current_device():
            with torch.cuda.device(index):
                rc = fwd(p)
        else:
            rc = fwd(p)
    if rc:
        raise _lib.DeltacError("deltac runtime: " + _lib.last_error())
    return o, ht


@torch.library.custom_op("deltac::fwd", mutates_args=(), device_types=("cpu", "cuda"))
def delta_rule_fwd(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    g: Optional[Tensor],
    beta: Tensor,
    initial_state: Optional[Tensor],
    cu_seqlens: Optional[Tensor],
    variant: int,
    scale: float,
    qk_l2norm: bool,
    output_final_state: bool,
    state_v_first: bool,
    mode: int,
    chunk: int,
    beta_two: bool = False,
) -> Tuple[Tensor, Tensor]:
    """The raw op (``torch.ops.deltac.fwd``): inputs already validated (see ``_prepare``).
    beta_two: beta may exceed 1 (the runtime's allow_neg_eigval).

    Returns ``(o, final_state)``; final_state is an empty tensor when
    ``output_final_state`` is False (custom ops cannot return None).
    """
    return _run(q, k, v, g, beta, initial_state, cu_seqlens, variant, scale, qk_l2norm,
                output_final_state, state_v_first, mode, chunk, beta_two)


@delta_rule_fwd.register_fake
def _fwd_fake(q, k, v, g, beta, initial_state, cu_seqlens, variant, scale, qk_l2norm,
              output_final_state, state_v_first, mode, chunk, beta_two=False):
    B, T, H, K = q.shape
    HV, V = v.shape[2], v.shape[3]
    N = cu_seqlens.shape[0] - 1 if cu_seqlens is not None else B
    o = torch.empty_like(v)
    if output_final_state:
        ht = _empty_state(q, N, HV, K, V, state_v_first)
    else:
        ht = q.new_empty((0,), dtype=torch.float32)
    return o, ht


def _seqs(B, T, cu_seqlens):
    """(batch row, start, end) of every sequence."""
    if cu_seqlens is None:
        return [(b, 0, T) for b in range(B)]
    cu = [int(x) for x in cu_seqlens.tolist()]
    return [(0, cu[n], cu[n + 1]) for n in range(len(cu) - 1)]


def _l2(x):
    return x / torch.sqrt((x * x).sum(-1, keepdim=True) + 1e-6)


def _forward_f64(q, k, v, g, beta, initial_state, cu_seqlens, variant, scale, qk_l2norm,
                 output_final_state, state_v_first):
    """The float64 forward: the plain recurrence of params.h in PyTorch (slow)."""
    B, T, H, K = q.shape
    HV, V = v.shape[2], v.shape[3]
    if qk_l2norm:
        q, k = _l2(q), _l2(k)
    scale = scale if scale else 1.0 / math.sqrt(K)
    q = q.repeat_interleave(HV // H, dim=2)
    k = k.repeat_interleave(HV // H, dim=2)
    o = torch.zeros_like(v)
    hts = []
    for n, (b, s, e) in enumerate(_seqs(B, T, cu_seqlens)):
        if initial_state is not None:
            h = initial_state[n].transpose(-1, -2) if state_v_first else initial_state[n]
        else:
            h = v.new_zeros(HV, K, V)
        for t in range(s, e):
            if variant == VARIANT_GATED:
                h = h * torch.exp(g[b, t])[:, None, None]
            elif variant == VARIANT_KDA:
                h = h * torch.exp(g[b, t])[:, :, None]
            u = beta[b, t][:, None] * (v[b, t] - torch.einsum("hkv,hk->hv", h, k[b, t]))
            h = h + k[b, t][:, :, None] * u[:, None, :]
            o[b, t] = scale * torch.einsum("hkv,hk->hv", h, q[b, t])
        hts.append(h.transpose(-1, -2) if state_v_first else h)
    ht = torch.stack(hts).contiguous() if output_final_state else q.new_empty((0,))
    return o, ht


# --------------------------------------------------------------------------
# The backward: torch.ops.deltac.bwd and its registration as fwd's autograd.
# --------------------------------------------------------------------------


@torch.library.custom_op("deltac::bwd", mutates_args=(), device_types=("cpu", "cuda"))
def delta_rule_bwd(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    g: Optional[Tensor],
    beta: Tensor,
    initial_state: Optional[Tensor],
    cu_seqlens: Optional[Tensor],
    do: Tensor,
    dht: Optional[Tensor],
    variant: int,
    scale: float,
    qk_l2norm: bool,
    state_v_first: bool,
    saved: Optional[Tensor] = None,
) -> Tuple[Tensor, Tensor, Tensor, Tensor, Tensor, Tensor]:
    """``torch.ops.deltac.bwd``: the gradients (dq, dk, dv, dg, dbeta, dh0) of ``fwd``'s
    inputs given do (o's gradient) and dht (final_state's, or None). dg is empty for
    the delta rule, dh0 empty without initial_state (custom ops cannot return None).
    saved: ``fwd_saved``'s saved states (CUDA), read instead of recomputed."""
    dq, dk, dv, dg, dbeta, dh0 = _bwd_empty(q, k, v, g, beta, initial_state)
    B, T, H, K = q.shape
    HV, V = v.shape[2], v.shape[3]
    N = cu_seqlens.shape[0] - 1 if cu_seqlens is not None else B
    f64 = q.dtype == torch.float64
    fdt = torch.float64 if f64 else torch.float32
    if dht is not None:
        dht = dht.to(fdt).contiguous()
    if T == 0 or B == 0:
        for t in (dq, dk, dv, dg, dbeta):
            t.zero_()
        if initial_state is not None:
            dh0.copy_(dht if dht is not None else torch.zeros_like(dh0))
        return dq, dk, dv, dg, dbeta, dh0
    do = do.to(v.dtype).contiguous()
    dt = _lib.DTYPE_BWD_F64 if f64 else _IN_DTYPES[q.dtype]
    ptr = lambda t: t.data_ptr() if t is not None else None  # noqa: E731
    p = _lib.BwdParams(
        variant, B, T, H, HV, K, V, N, dt, dt, 1 if state_v_first else 0,
        ptr(q), ptr(k), ptr(v), ptr(g), ptr(beta), ptr(initial_state), ptr(do), ptr(dht),
        ptr(dq), ptr(dk), ptr(dv), ptr(dg) if g is not None else None, ptr(dbeta),
        ptr(dh0) if initial_state is not None else None, ptr(cu_seqlens),
        scale, 1 if qk_l2norm else 0, 0 if q.is_cuda else torch.get_num_threads(), 0,
        ptr(saved) if q.is_cuda else None, saved.numel() if saved is not None else 0)
    if not q.is_cuda:
        _lib.backward(p)
        return dq, dk, dv, dg, dbeta, dh0
    # CUDA: enqueued on the current stream, the workspace from PyTorch's allocator.
    index = q.device.index if q.device.index is not None else torch.cuda.current_device()
    with torch.cuda.device(index):
        need = _lib.backward_workspace(p)
        ws = torch.empty(max(need, 1), dtype=torch.uint8, device=q.device)
        _lib.backward(p, 1, torch._C._cuda_getCurrentRawStream(index), ws.data_ptr(), need)
    return dq, dk, dv, dg, dbeta, dh0


def _bwd_empty(q, k, v, g, beta, initial_state):
    fdt = torch.float64 if q.dtype == torch.float64 else torch.float32
    dg = torch.empty_like(g) if g is not None else q.new_empty((0,), dtype=fdt)
    dh0 = (torch.empty_like(initial_state) if initial_state is not None
           else q.new_empty((0,), dtype=fdt))
    return (torch.empty_like(q), torch.empty_like(k), torch.empty_like(v), dg,
            torch.empty_like(beta), dh0)


@delta_rule_bwd.register_fake
def _(q, k, v, g, beta, initial_state, cu_seqlens, do, dht, variant, scale, qk_l2norm,
      state_v_first, saved=None):
    return _bwd_empty(q, k, v, g, beta, initial_state)


def _fwd_setup_context(ctx, inputs, output):
    (q, k, v, g, beta, initial_state, cu_seqlens, variant, scale, qk_l2norm,
     output_final_state, state_v_first, mode, chunk) = inputs[:14]
    saved = output[2] if len(output) > 2 else None  # fwd_saved's
    ctx.save_for_backward(q, k, v, g, beta, initial_state, cu_seqlens, saved)
    ctx.bwd_args = (variant, scale, qk_l2norm, output_final_state, state_v_first)


def _fwd_backward(ctx, do, dht, *_):
    q, k, v, g, beta, initial_state, cu_seqlens, saved = ctx.saved_tensors
    variant, scale, qk_l2norm, output_final_state, state_v_first = ctx.bwd_args
    if not output_final_state or dht is None or dht.numel() == 0:
        dht = None
    if do is None:
        do = torch.zeros_like(v)
    dq, dk, dv, dg, dbeta, dh0 = delta_rule_bwd(
        q, k, v, g, beta, initial_state, cu_seqlens, do.contiguous(), dht, variant, scale,
        qk_l2norm, state_v_first, saved)
    return (dq, dk, dv, dg if g is not None else None, dbeta,
            dh0 if initial_state is not None else None) + (None,) * (len(ctx.needs_input_grad) - 6)


delta_rule_fwd.register_autograd(_fwd_backward, setup_context=_fwd_setup_context)


# --------------------------------------------------------------------------
# fwd_saved: the forward that keeps what the CUDA backward would recompute.
# --------------------------------------------------------------------------

# Whether autograd calls keep the backward's chunk states from the forward
# (fwd_saved) instead of the backward recomputing them: memory held between
# forward and backward for a shorter backward. DELTAC_SAVE_STATES=1 always
# where offered, =0 never; unset: where the runtime says it pays on this GPU
# (deltac_saved_states_pay: a loaded tuning database's backward record, from
# deltac-tune --backward; else K = 64 where the forward's own kernel writes
# them; docs/performance.md, "Backward (CUDA)", versions 17 and 18).
_SAVE_STATES = {"1": True, "0": False}.get(os.environ.get("DELTAC_SAVE_STATES", ""))


def _saved_args(variant, q, v, cu_seqlens):
    B, T, H, K = q.shape
    HV, V = v.shape[2], v.shape[3]
    N = cu_seqlens.shape[0] - 1 if cu_seqlens is not None else B
    return (variant, int(B * T), int(N), int(HV), int(K), int(V), _IN_DTYPES.get(q.dtype, -1))


def _saved_bytes(variant, q, v, cu_seqlens):
    """Bytes of the backward's saved states for this call (deltac_saved_states_size:
    0 where none are offered or the backward would not read them)."""
    return _lib.saved_states_size(*_saved_args(variant, q, v, cu_seqlens))


def _saves_states(variant, q, v, cu_seqlens, beta_two):
    """Whether an autograd call runs ``fwd_saved``: CUDA, bf16, beta within (0, 1)
    (with beta up to 2 the forward runs a scan that writes none), states offered
    for its dims, and DELTAC_SAVE_STATES=1 or, unset, the runtime's
    deltac_saved_states_pay."""
    if _SAVE_STATES is False or not q.is_cuda or beta_two or q.dtype is not _BF16:
        return False
    args = _saved_args(variant, q, v, cu_seqlens)
    if _SAVE_STATES:
        return _lib.saved_states_size(*args) > 0
    return _lib.saved_states_pay(*args) == 1


@torch.library.custom_op("deltac::fwd_saved", mutates_args=(), device_types=("cuda",))
def delta_rule_fwd_saved(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    g: Optional[Tensor],
    beta: Tensor,
    initial_state: Optional[Tensor],
    cu_seqlens: Optional[Tensor],
    variant: int,
    scale: float,
    qk_l2norm: bool,
    output_final_state: bool,
    state_v_first: bool,
    mode: int,
    chunk: int,
    beta_two: bool = False,
) -> Tuple[Tensor, Tensor, Tensor]:
    """``torch.ops.deltac.fwd_saved``: ``fwd`` that also returns the backward's saved
    states (uint8, ``_saved_bytes``; runtime options.saved_states), which its autograd
    backward reads instead of recomputing the chunk states. Autograd calls run it
    where ``_saves_states`` holds."""
    saved = torch.empty(max(_saved_bytes(variant, q, v, cu_seqlens), 256), dtype=torch.uint8,
                        device=q.device)
    saved[:4].zero_()  # the header's flag: the forward's kernel sets it where it writes
    o, ht = _run(q, k, v, g, beta, initial_state, cu_seqlens, variant, scale, qk_l2norm,
                 output_final_state, state_v_first, mode, chunk, beta_two, saved=saved)
    return o, ht, saved


@delta_rule_fwd_saved.register_fake
def _(q, k, v, g, beta, initial_state, cu_seqlens, variant, scale, qk_l2norm,
      output_final_state, state_v_first, mode, chunk, beta_two=False):
    o, ht = _fwd_fake(q, k, v, g, beta, initial_state, cu_seqlens, variant, scale, qk_l2norm,
                      output_final_state, state_v_first, mode, chunk, beta_two)
    n = max(_saved_bytes(variant, q, v, cu_seqlens), 256)
    return o, ht, q.new_empty((n,), dtype=torch.uint8)


delta_rule_fwd_saved.register_autograd(_fwd_backward, setup_context=_fwd_setup_context)


@torch.library.custom_op("deltac::fwd_inplace", mutates_args=("state",),
                         device_types=("cpu", "cuda"))
def delta_rule_fwd_inplace(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    g: Optional[Tensor],
    beta: Tensor,
    state: Tensor,
    cu_seqlens: Optional[Tensor],
    variant: int,
    scale: float,
    qk_l2norm: bool,
    state_v_first: bool,
) -> Tensor:
    """``torch.ops.deltac.fwd_inplace``: the recurrent kernel with ``state`` as both the
    initial and the final state (updated in place, no allocation); returns o."""
    o, _ = _run(q, k, v, g, beta, state, cu_seqlens, variant, scale, qk_l2norm, True,
                state_v_first, MODE_RECURRENT, 0, inplace=True)
    return o


@delta_rule_fwd_inplace.register_fake
def _(q, k, v, g, beta, state, cu_seqlens, variant, scale, qk_l2norm, state_v_first):
    return torch.empty_like(v)


# --------------------------------------------------------------------------
# Validation with fla's argument names.
# --------------------------------------------------------------------------


def _fail(fn: str, msg: str, exc=ValueError):
    raise exc(f"deltac.ops.{fn}: {msg}")


def _same_device(fn, name, t, dev):
    if t.device != dev:
        _fail(fn, f"{name} is on {t.device} but q is on {dev}: every tensor must be on q's device")


def _contig(fn, name, t):
    if not t.is_contiguous():
        _fail(fn, f"{name} is not contiguous (shape {tuple(t.shape)}, strides {t.stride()}): "
                  f"pass {name}.contiguous()")


def _float32(fn, name, t, dtype=torch.float32):
    """Floating tensors are converted to float32 (the kernels' contract; float64 in a
    float64 call)."""
    if not t.is_floating_point():
        _fail(fn, f"{name} has dtype {t.dtype}: expected a floating dtype (used as float32)", TypeError)
    return t if t.dtype == dtype else t.to(dtype)


def _shape(fn, name, t, want, what):
    if tuple(t.shape) != tuple(want):
        _fail(fn, f"{name} has shape {tuple(t.shape)}: expected {tuple(want)} ({what})")


def _prepare(fn, variant, q, k, v, g, beta, scale, initial_state, cu_seqlens, state_v_first,
             inplace=False):
    """Checks every argument (naming it on failure) and returns what the op takes."""
    if not isinstance(q, Tensor):
        _fail(fn, f"q must be a torch.Tensor, got {type(q).__name__}", TypeError)
    for name, t in (("k", k), ("v", v), ("beta", beta)):
        if not isinstance(t, Tensor):
            _fail(fn, f"{name} must be a torch.Tensor, got {type(t).__name__}", TypeError)
    if q.dim() != 4:
        _fail(fn, f"q has shape {tuple(q.shape)}: expected 4 dims [B, T, H, K]")
    B, T, H, K = q.shape
    dev = q.device
    if dev.type not in ("cpu", "cuda", "meta"):
        _fail(fn, f"q is on {dev}: deltac runs on cpu and cuda devices")
    if q.dtype not in _IN_DTYPES and q.dtype != torch.float64:
        _fail(fn, f"q has dtype {q.dtype}: expected torch.float32 or torch.bfloat16 "
                  "(or torch.float16 on CUDA, torch.float64 on the CPU)", TypeError)
    if q.dtype == torch.float64 and dev.type != "cpu":
        _fail(fn, f"q has dtype torch.float64 on {dev}: float64 (the gradient-check path) "
                  "runs on the CPU only", TypeError)
    if q.dtype == torch.float16 and dev.type == "cpu":
        _fail(fn, "q has dtype torch.float16: the CPU kernels take torch.float32 or "
                  "torch.bfloat16 (float16 runs on CUDA)", TypeError)
    _same_device(fn, "k", k, dev)
    _same_device(fn, "v", v, dev)
    if k.dtype != q.dtype:
        _fail(fn, f"k has dtype {k.dtype} but q has {q.dtype}: q, k and v must share one dtype", TypeError)
    if v.dtype != q.dtype:
        _fail(fn, f"v has dtype {v.dtype} but q has {q.dtype}: q, k and v must share one dtype", TypeError)
    _shape(fn, "k", k, q.shape, "the shape of q, [B, T, H, K]")
    if v.dim() != 4 or v.shape[0] != B or v.shape[1] != T:
        _fail(fn, f"v has shape {tuple(v.shape)}: expected [B={B}, T={T}, HV, V]")
    HV, V = v.shape[2], v.shape[3]
    if H == 0 or HV % H != 0:
        _fail(fn, f"v has {HV} heads and q has {H}: the value heads HV must be a multiple of H (GVA)")
    for name, d in (("K (q.shape[-1])", K), ("V (v.shape[-1])", V)):
        if d < 16 or d > 256 or d % 16:
            _fail(fn, f"head dimension {name} = {d}: deltac's kernels need a multiple of 16 in [16, 256]")
    for name, t in (("q", q), ("k", k), ("v", v)):
        _contig(fn, name, t)

    _same_device(fn, "beta", beta, dev)
    _shape(fn, "beta", beta, (B, T, HV), "[B, T, HV]")
    _contig(fn, "beta", beta)
    fdt = torch.float64 if q.dtype == torch.float64 else torch.float32
    beta = _float32(fn, "beta", beta, fdt)

    if variant != VARIANT_DELTA:
        if g is None:
            _fail(fn, "g is None: the gated and kda rules need the log decay g")
        if not isinstance(g, Tensor):
            _fail(fn, f"g must be a torch.Tensor, got {type(g).__name__}", TypeError)
        _same_device(fn, "g", g, dev)
        if variant == VARIANT_GATED:
            _shape(fn, "g", g, (B, T, HV), "[B, T, HV]")
        else:
            _shape(fn, "g", g, (B, T, HV, K), "[B, T, HV, K]")
        _contig(fn, "g", g)
        g = _float32(fn, "g", g, fdt)
    else:
        g = None

    if cu_seqlens is not None:
        if not isinstance(cu_seqlens, Tensor):
            _fail(fn, f"cu_seqlens must be a torch.Tensor, got {type(cu_seqlens).__name__}", TypeError)
        _same_device(fn, "cu_seqlens", cu_seqlens, dev)
        if cu_seqlens.dim() != 1 or cu_seqlens.shape[0] < 2:
            _fail(fn, f"cu_seqlens has shape {tuple(cu_seqlens.shape)}: expected [N + 1] with N >= 1")
        if cu_seqlens.dtype not in (torch.int64, torch.int32):
            _fail(fn, f"cu_seqlens has dtype {cu_seqlens.dtype}: expected torch.int64 or torch.int32", TypeError)
        if B != 1:
            _fail(fn, f"q has batch size {B}: expected 1 with cu_seqlens (flatten the sequences into one row)")
        _contig(fn, "cu_seqlens", cu_seqlens)
        if cu_seqlens.dtype != torch.int64:
            cu_seqlens = cu_seqlens.long()
        N = cu_seqlens.shape[0] - 1
    else:
        N = B

    if inplace and initial_state is None:
        _fail(fn, "inplace_final_state=True needs initial_state (the state updated in place)")
    if inplace and isinstance(initial_state, Tensor) and initial_state.dtype != torch.float32:
        _fail(fn, f"initial_state has dtype {initial_state.dtype}: inplace_final_state=True needs "
                  "torch.float32 (the state is updated in place, not converted)", TypeError)
    if initial_state is not None:
        if not isinstance(initial_state, Tensor):
            _fail(fn, f"initial_state must be a torch.Tensor, got {type(initial_state).__name__}", TypeError)
        _same_device(fn, "initial_state", initial_state, dev)
        want = (N, HV, V, K) if state_v_first else (N, HV, K, V)
        _shape(fn, "initial_state", initial_state, want,
               "[N, HV, V, K]" if state_v_first else "[N, HV, K, V]")
        _contig(fn, "initial_state", initial_state)
        initial_state = _float32(fn, "initial_state", initial_state, fdt)

    if scale is None:
        scale = 0.0  # the runtime's 1/sqrt(K)
    else:
        scale = float(scale)
        if not math.isfinite(scale) or scale <= 0.0:
            _fail(fn, f"scale = {scale}: expected a finite value > 0 (or None for 1/sqrt(K))")

    if inplace and _needs_grad(q, k, v, g, beta, initial_state):
        _fail(fn, "inplace_final_state=True has no backward, but an input requires grad: run "
                  "under torch.no_grad() or detach the inputs", NotImplementedError)
    return g, beta, scale, initial_state, cu_seqlens


def _needs_grad(*ts):
    return torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in ts)


def _beta_pre(fn, beta, use_beta_sigmoid_in_kernel, allow_neg_eigval):
    if allow_neg_eigval and not use_beta_sigmoid_in_kernel:
        _fail(fn, "allow_neg_eigval=True requires use_beta_sigmoid_in_kernel=True (as in fla)")
    if use_beta_sigmoid_in_kernel:
        beta = torch.sigmoid(beta.float())
        if allow_neg_eigval:
            beta = beta * 2.0
    return beta


def _no_extra(fn, kwargs, ignored=("chunk_indices", "cu_seqlens_cpu", "cp_context")):
    for key in list(kwargs):
        if key in ignored:
            kwargs.pop(key)
    if kwargs:
        _fail(fn, f"unexpected argument(s) {sorted(kwargs)}", TypeError)


def _chunk_mode(fn, chunk_size, dev):
    if chunk_size is None:
        return MODE_AUTO, 0
    if chunk_size not in (16, 32, 64):
        _fail(fn, f"chunk_size = {chunk_size}: expected 16, 32 or 64")
    return MODE_CHUNKED, chunk_size


_DIMS = frozenset(range(16, 257, 16))
_FORCE_DISPATCH = os.environ.get("DELTAC_OPS_DISPATCH", "") not in ("", "0")


def _direct_ok(q):
    """Eager mode with nothing watching: call the op's implementation directly,
    skipping PyTorch's dispatcher (its Python custom-op path costs more than the
    rest of a call). Under torch.compile / export / FakeTensor / vmap / a dispatch
    or function mode / the profiler, and for meta tensors, the call goes through
    torch.ops.deltac.fwd (whose fake implementation serves the meta device).
    DELTAC_OPS_DISPATCH=1 always takes the dispatcher."""
    return (not _FORCE_DISPATCH and type(q) is Tensor and (q.is_cpu or q.is_cuda)
            and not torch.compiler.is_compiling()
            and not torch._C._len_torch_dispatch_stack()
            and not torch._C._is_torch_function_mode_enabled()
            and not torch._C._are_functorch_transforms_active()
            and not torch.autograd._profiler_enabled())


def _call(fn, variant, mode, chunk, q, k, v, g, beta, scale, initial_state, output_final_state,
          use_qk_l2norm_in_kernel, state_v_first, cu_seqlens, inplace=False, beta_two=False):
    if cu_seqlens is None and type(q) is Tensor:
        r = _eager(variant, mode, chunk, q, k, v, g, beta, scale, initial_state,
                   output_final_state, use_qk_l2norm_in_kernel, state_v_first, inplace,
                   beta_two)
        if r is not None:
            return r
    g, beta, scale, initial_state, cu_seqlens = _prepare(
        fn, variant, q, k, v, g, beta, scale, initial_state, cu_seqlens, state_v_first, inplace)
    return _dispatch(variant, mode, chunk, q, k, v, g, beta, scale, initial_state,
                     output_final_state, use_qk_l2norm_in_kernel, state_v_first, cu_seqlens,
                     inplace, beta_two)


def _dispatch(variant, mode, chunk, q, k, v, g, beta, scale, initial_state, output_final_state,
              use_qk_l2norm_in_kernel, state_v_first, cu_seqlens, inplace, beta_two=False):
    """Checked arguments (scale a float) to the op: its implementation when
    _direct_ok, else torch.ops.deltac.fwd / fwd_inplace (compile, autograd)."""
    if inplace:
        args = (q, k, v, g, beta, initial_state, cu_seqlens, variant, scale,
                bool(use_qk_l2norm_in_kernel), bool(state_v_first))
        if _direct_ok(q):
            o, _ = _run(*args[:9], args[9], True, args[10], MODE_RECURRENT, 0, inplace=True)
        else:
            o = delta_rule_fwd_inplace(*args)
        return o, (initial_state if output_final_state else None)
    output_final_state = bool(output_final_state)
    args = (q, k, v, g, beta, initial_state, cu_seqlens, variant, scale,
            bool(use_qk_l2norm_in_kernel), output_final_state, bool(state_v_first), mode, chunk,
            bool(beta_two))
    if _direct_ok(q) and not _needs_grad(q, k, v, g, beta, initial_state):
        o, ht = _run(*args)
    elif (_needs_grad(q, k, v, g, beta, initial_state)
          and _saves_states(variant, q, v, cu_seqlens, beta_two)):
        o, ht, _ = delta_rule_fwd_saved(*args)  # autograd keeps the backward's states
    else:  # the dispatcher: torch.compile, and autograd (register_autograd)
        o, ht = delta_rule_fwd(*args)
    return o, (ht if output_final_state else None)


def _eager(variant, mode, chunk, q, k, v, g, beta, scale, h0, output_final_state, l2, svf,
           inplace, beta_two=False):
    """The common call (no cu_seqlens, no dtype conversion), checked and run in one
    pass with each tensor's metadata read once; the host overhead of a decode step
    (docs/python.md, "Host overhead per call"). Returns (o, final_state), or None
    when a check fails or the case is not covered: then ``_prepare`` checks again
    and converts, or raises naming the argument. A strict subset of what
    ``_prepare`` accepts. Valid inputs that need the dispatcher (autograd, compile,
    a mode, the profiler) go to ``_dispatch``."""
    try:  # a non-tensor argument: AttributeError, then _prepare names it
        qs = q.shape
        vs = v.shape
        if len(qs) != 4 or len(vs) != 4:
            return None
        B, T, H, K = qs
        B2, T2, HV, V = vs
        dt = q.dtype
        if q.is_cuda:
            dev = q.get_device()
            code = _CUDA_CODES.get(dt)
            if not (k.is_cuda and v.is_cuda and beta.is_cuda and k.get_device() == dev
                    and v.get_device() == dev and beta.get_device() == dev):
                return None
            if g is not None and not (g.is_cuda and g.get_device() == dev):
                return None
            if h0 is not None and not (h0.is_cuda and h0.get_device() == dev):
                return None
        elif q.is_cpu:
            dev = -1
            code = _CPU_CODES.get(dt)
            if not (k.is_cpu and v.is_cpu and beta.is_cpu and (g is None or g.is_cpu)
                    and (h0 is None or h0.is_cpu)):
                return None
        else:
            return None
        if code is None or k.dtype is not dt or v.dtype is not dt or beta.dtype is not _F32:
            return None
        if (B2 != B or T2 != T or k.shape != qs or beta.shape != (B, T, HV) or B == 0 or T == 0
                or K not in _DIMS or V not in _DIMS or H == 0 or HV % H):
            return None
        if not (q.is_contiguous() and k.is_contiguous() and v.is_contiguous()
                and beta.is_contiguous()):
            return None
        if g is not None:
            if (variant == VARIANT_DELTA or g.dtype is not _F32 or not g.is_contiguous()
                    or g.shape != ((B, T, HV) if variant == VARIANT_GATED else (B, T, HV, K))):
                return None
        elif variant != VARIANT_DELTA:
            return None
        if h0 is not None:
            if (h0.dtype is not _F32 or not h0.is_contiguous()
                    or h0.shape != ((B, HV, V, K) if svf else (B, HV, K, V))):
                return None
        elif inplace:
            return None
        if scale is None:
            scale = 0.0
        elif type(scale) is not float or not 0.0 < scale < _INF:
            return None
    except (AttributeError, TypeError):
        return None
    if _grad_enabled() and (q.requires_grad or k.requires_grad or v.requires_grad
                            or beta.requires_grad or (g is not None and g.requires_grad)
                            or (h0 is not None and h0.requires_grad)):
        if inplace:
            return None  # _prepare raises: no backward in place
        return _dispatch(variant, mode, chunk, q, k, v, g, beta, scale, h0, output_final_state,
                         l2, svf, None, inplace, beta_two)
    if (_FORCE_DISPATCH or _is_compiling() or _dispatch_stack() or _function_mode()
            or _functorch() or _profiling()):
        return _dispatch(variant, mode, chunk, q, k, v, g, beta, scale, h0, output_final_state,
                         l2, svf, None, inplace, beta_two)

    o = torch.empty_like(v)
    if inplace:
        ht = h0
    elif output_final_state:
        # h0 has the state's shape, dtype and device and is contiguous (checked above);
        # beta is float32 on q's device: no keyword arguments, the cheapest allocations
        ht = (torch.empty_like(h0) if h0 is not None
              else beta.new_empty((B, HV, V, K) if svf else (B, HV, K, V)))
    else:
        ht = None
    h0p = h0.data_ptr() if h0 is not None else 0
    if dev < 0:
        rc = _call_forward(_CALL(
            variant, B, T, H, HV, K, V, B, code, code, DTYPE_F32, 1 if svf else 0,
            q.data_ptr(), k.data_ptr(), v.data_ptr(), g.data_ptr() if g is not None else 0,
            beta.data_ptr(), h0p, o.data_ptr(), ht.data_ptr() if ht is not None else 0, 0,
            scale, 1 if l2 else 0, _num_threads(), 0, 0, 0, 0, 0, 0,
            DEVICE_CPU, mode, chunk, 2 if beta_two else 0, 0))
    else:
        if not _lib.cuda_available():
            raise _lib.DeltacError(
                f"deltac: the tensors are on {q.device} but this deltac library "
                f"({_lib.library_path}) has no usable CUDA: it was built without nvcc, or sees "
                "no GPU")
        call = _CALL(
            variant, B, T, H, HV, K, V, B, code, code, DTYPE_F32, 1 if svf else 0,
            q.data_ptr(), k.data_ptr(), v.data_ptr(), g.data_ptr() if g is not None else 0,
            beta.data_ptr(), h0p, o.data_ptr(), ht.data_ptr() if ht is not None else 0, 0,
            scale, 1 if l2 else 0, 0, 0, 0, 0, 0, 0, 0,
            DEVICE_CUDA, mode, chunk, 3 if beta_two else 1, _raw_stream(dev))
        if dev == _current_device():
            rc = _call_forward(call)
        else:
            with torch.cuda.device(dev):
                rc = _call_forward(call)
    if rc:
        raise _lib.DeltacError("deltac runtime: " + _lib.last_error())
    return o, (ht if output_final_state else None)


# --------------------------------------------------------------------------
# fla's functions.
# --------------------------------------------------------------------------


def _context_parallel(fn, cp_context, cu_seqlens, args, kwargs):
    """The chunk_* function `fn` over the ranks of cp_context (deltac.cp)."""
    from . import cp

    if not isinstance(cp_context, cp.CPContext):
        _fail(fn, f"cp_context must be a deltac.cp.CPContext (deltac.cp.context()), got "
                  f"{type(cp_context).__name__}", TypeError)
    if cu_seqlens is not None:
        _fail(fn, "with cp_context, pass the global cu_seqlens to deltac.cp.context(), "
                  "not to the call")
    for key in ("chunk_indices", "cu_seqlens_cpu"):
        kwargs.pop(key, None)
    return getattr(cp, fn)(*args, cp_context=cp_context, **kwargs)


def chunk_delta_rule(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    beta: Tensor,
    scale: Optional[float] = None,
    initial_state: Optional[Tensor] = None,
    output_final_state: bool = False,
    use_qk_l2norm_in_kernel: bool = False,
    cu_seqlens: Optional[Tensor] = None,
    cu_seqlens_cpu: Optional[Tensor] = None,
    **kwargs,
) -> Tuple[Tensor, Optional[Tensor]]:
    """DeltaNet (a_t = 1). fla.ops.delta_rule.chunk_delta_rule's signature; returns (o, final_state).
    ``cp_context`` (keyword): a deltac.cp.CPContext runs the call over its ranks.
    ``allow_neg_eigval`` or ``beta_two`` (keywords, deltac's): beta may lie in (0, 2); on
    CUDA with 16-bit inputs the chunked kernel then runs its two-term products (scan 5),
    which keep bf16's error where the default scans' (and fla's) grows with the length."""
    fn = "chunk_delta_rule"
    if kwargs.get("cp_context") is not None:
        ctx = kwargs.pop("cp_context")
        return _context_parallel(fn, ctx, cu_seqlens, (q, k, v, beta), dict(
            kwargs, scale=scale, initial_state=initial_state,
            output_final_state=output_final_state,
            use_qk_l2norm_in_kernel=use_qk_l2norm_in_kernel))
    mode, chunk = _chunk_mode(fn, kwargs.pop("chunk_size", None), getattr(q, "device", None))
    beta_two = bool(kwargs.pop("allow_neg_eigval", False)) | bool(kwargs.pop("beta_two", False))
    _no_extra(fn, kwargs)
    return _call(fn, VARIANT_DELTA, mode, chunk, q, k, v, None, beta, scale, initial_state,
                 output_final_state, use_qk_l2norm_in_kernel, False, cu_seqlens,
                 beta_two=beta_two)


def fused_recurrent_delta_rule(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    beta: Optional[Tensor] = None,
    scale: Optional[float] = None,
    initial_state: Optional[Tensor] = None,
    output_final_state: bool = False,
    use_qk_l2norm_in_kernel: bool = False,
    cu_seqlens: Optional[Tensor] = None,
    inplace_final_state: bool = False,
) -> Tuple[Tensor, Optional[Tensor]]:
    """DeltaNet, recurrent kernel. fla's signature; beta None means beta = 1.
    ``inplace_final_state=True``: see the module doc (the state is updated in place)."""
    fn = "fused_recurrent_delta_rule"
    if beta is None:
        beta = torch.ones(v.shape[:3], dtype=torch.float32, device=v.device)
    return _call(fn, VARIANT_DELTA, MODE_RECURRENT, 0, q, k, v, None, beta, scale, initial_state,
                 output_final_state, use_qk_l2norm_in_kernel, False, cu_seqlens,
                 bool(inplace_final_state))


def _gdn_gate(fn, g, A_log, dt_bias):
    if A_log is None:
        _fail(fn, "use_gate_in_kernel=True needs A_log")
    x = g.float()
    if dt_bias is not None:
        x = x + dt_bias.float()
    return -A_log.float().exp() * torch.nn.functional.softplus(x)


def chunk_gated_delta_rule(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    g: Tensor,
    beta: Tensor,
    scale: Optional[float] = None,
    initial_state: Optional[Tensor] = None,
    output_final_state: bool = False,
    use_qk_l2norm_in_kernel: bool = False,
    use_beta_sigmoid_in_kernel: bool = False,
    allow_neg_eigval: bool = False,
    state_v_first: bool = False,
    cu_seqlens: Optional[Tensor] = None,
    cu_seqlens_cpu: Optional[Tensor] = None,
    chunk_indices: Optional[Tensor] = None,
    cp_context=None,
    **kwargs,
) -> Tuple[Tensor, Optional[Tensor]]:
    """Gated DeltaNet (a_t = exp(g_t) per value head). fla's signature; returns (o, final_state).

    ``use_gate_in_kernel=True`` (keyword, as in fla) reads g as the gate input and
    computes ``g = -exp(A_log) * softplus(g + dt_bias)`` (``A_log``, ``dt_bias``: [HV]).
    ``cp_context``: a deltac.cp.CPContext runs the call over its ranks (docs/parallel.md).
    ``beta_two`` (keyword, deltac's): beta, as given, may lie in (0, 2) (what
    ``allow_neg_eigval`` declares for the in-kernel sigmoid's 2 sigmoid(beta)); on CUDA
    with 16-bit inputs the chunked kernel then runs its two-term products (scan 5).
    """
    fn = "chunk_gated_delta_rule"
    if cp_context is not None:
        return _context_parallel(fn, cp_context, cu_seqlens, (q, k, v, g, beta), dict(
            kwargs, scale=scale, initial_state=initial_state,
            output_final_state=output_final_state,
            use_qk_l2norm_in_kernel=use_qk_l2norm_in_kernel,
            use_beta_sigmoid_in_kernel=use_beta_sigmoid_in_kernel,
            allow_neg_eigval=allow_neg_eigval, state_v_first=state_v_first))
    mode, chunk = _chunk_mode(fn, kwargs.pop("chunk_size", None), getattr(q, "device", None))
    use_gate = kwargs.pop("use_gate_in_kernel", False)
    A_log, dt_bias = kwargs.pop("A_log", None), kwargs.pop("dt_bias", None)
    beta_two = bool(kwargs.pop("beta_two", False))
    _no_extra(fn, dict(kwargs, cp_context=cp_context))
    if use_gate:
        g = _gdn_gate(fn, g, A_log, dt_bias)
    beta = _beta_pre(fn, beta, use_beta_sigmoid_in_kernel, allow_neg_eigval)
    return _call(fn, VARIANT_GATED, mode, chunk, q, k, v, g, beta, scale, initial_state,
                 output_final_state, use_qk_l2norm_in_kernel, state_v_first, cu_seqlens,
                 beta_two=allow_neg_eigval or beta_two)


def fused_recurrent_gated_delta_rule(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    g: Optional[Tensor] = None,
    gk: Optional[Tensor] = None,
    gv: Optional[Tensor] = None,
    beta: Optional[Tensor] = None,
    scale: Optional[float] = None,
    initial_state: Optional[Tensor] = None,
    output_final_state: bool = False,
    use_qk_l2norm_in_kernel: bool = False,
    use_gate_in_kernel: bool = False,
    A_log: Optional[Tensor] = None,
    dt_bias: Optional[Tensor] = None,
    use_beta_sigmoid_in_kernel: bool = False,
    allow_neg_eigval: bool = False,
    state_v_first: bool = False,
    cu_seqlens: Optional[Tensor] = None,
    **kwargs,
) -> Tuple[Tensor, Optional[Tensor]]:
    """Gated DeltaNet, recurrent kernel. fla's signature; returns (o, final_state).

    ``g`` [B, T, HV] and/or ``gk`` [B, T, HV, K] (per-key decay: runs deltac's kda
    kernel, with g added to every key channel when both are given); ``gv`` (per-value
    decay) is not supported. beta None means beta = 1.
    """
    fn = "fused_recurrent_gated_delta_rule"
    inplace = False
    if kwargs:
        inplace = bool(kwargs.pop("inplace_final_state", False))
        _no_extra(fn, kwargs)
    if gv is not None:
        _fail(fn, "gv (a per-value decay) is not supported by deltac's kernels", NotImplementedError)
    if beta is None:
        beta = torch.ones(v.shape[:3], dtype=torch.float32, device=v.device)
    if use_gate_in_kernel:
        if g is None:
            _fail(fn, "use_gate_in_kernel=True needs g (the gate input)")
        g = _gdn_gate(fn, g, A_log, dt_bias)
    if use_beta_sigmoid_in_kernel or allow_neg_eigval:
        beta = _beta_pre(fn, beta, use_beta_sigmoid_in_kernel, allow_neg_eigval)
    if gk is not None:
        if g is not None:
            if not isinstance(g, Tensor) or g.dim() != 3:
                _fail(fn, f"g has shape {tuple(getattr(g, 'shape', ()))}: expected [B, T, HV]")
            gk = gk.float() + g.float().unsqueeze(-1)
        return _call(fn, VARIANT_KDA, MODE_RECURRENT, 0, q, k, v, gk, beta, scale, initial_state,
                     output_final_state, use_qk_l2norm_in_kernel, state_v_first, cu_seqlens, inplace)
    if g is None:
        return _call(fn, VARIANT_DELTA, MODE_RECURRENT, 0, q, k, v, None, beta, scale, initial_state,
                     output_final_state, use_qk_l2norm_in_kernel, state_v_first, cu_seqlens, inplace)
    return _call(fn, VARIANT_GATED, MODE_RECURRENT, 0, q, k, v, g, beta, scale, initial_state,
                 output_final_state, use_qk_l2norm_in_kernel, state_v_first, cu_seqlens, inplace)


def _kda_gate(fn, g, A_log, dt_bias, lower_bound):
    """fla's naive_kda_gate / naive_kda_lowerbound_gate."""
    HV, K = g.shape[-2:]
    x = g.float()
    if dt_bias is not None:
        x = x + dt_bias.float().view(HV, K)
    if lower_bound is not None:
        if A_log is not None:
            x = A_log.float().view(HV, 1).exp() * x
        return lower_bound * torch.sigmoid(x)
    if A_log is None:
        _fail(fn, "use_gate_in_kernel=True needs A_log")
    return -A_log.float().view(HV, 1).exp() * torch.nn.functional.softplus(x)


def chunk_kda(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    g: Tensor,
    beta: Tensor,
    scale: Optional[float] = None,
    initial_state: Optional[Tensor] = None,
    output_final_state: bool = False,
    use_qk_l2norm_in_kernel: bool = False,
    use_gate_in_kernel: bool = False,
    use_beta_sigmoid_in_kernel: bool = False,
    allow_neg_eigval: bool = False,
    safe_gate: bool = False,
    lower_bound: Optional[float] = None,
    disable_recompute: bool = False,
    return_intermediate_states: bool = False,
    state_v_first: bool = False,
    cu_seqlens: Optional[Tensor] = None,
    cu_seqlens_cpu: Optional[Tensor] = None,
    cp_context=None,
    **kwargs,
) -> Tuple[Tensor, Optional[Tensor]]:
    """Kimi Delta Attention (a_t = diag(exp(g_t)), g [B, T, HV, K]). fla's signature.

    ``use_gate_in_kernel=True`` reads g as the gate input: ``-exp(A_log) * softplus(g +
    dt_bias)`` (``A_log`` [HV], ``dt_bias`` [HV * K], keywords as in fla), or
    ``lower_bound * sigmoid(exp(A_log) * (g + dt_bias))`` with ``lower_bound``.
    ``safe_gate`` and ``disable_recompute`` change nothing here (no chunk-local
    cumulative sums overflow in deltac's kernels; the backward recomputes states);
    ``return_intermediate_states=True`` is not supported. ``cp_context``: a
    deltac.cp.CPContext runs the call over its ranks (docs/parallel.md).
    ``beta_two`` (keyword, deltac's): beta, as given, may lie in (0, 2).
    """
    fn = "chunk_kda"
    if cp_context is not None:
        if return_intermediate_states:
            _fail(fn, "return_intermediate_states=True is not supported", NotImplementedError)
        return _context_parallel(fn, cp_context, cu_seqlens, (q, k, v, g, beta), dict(
            kwargs, scale=scale, initial_state=initial_state,
            output_final_state=output_final_state,
            use_qk_l2norm_in_kernel=use_qk_l2norm_in_kernel,
            use_gate_in_kernel=use_gate_in_kernel,
            use_beta_sigmoid_in_kernel=use_beta_sigmoid_in_kernel,
            allow_neg_eigval=allow_neg_eigval, lower_bound=lower_bound,
            state_v_first=state_v_first))
    mode, chunk = _chunk_mode(fn, kwargs.pop("chunk_size", None), getattr(q, "device", None))
    A_log, dt_bias = kwargs.pop("A_log", None), kwargs.pop("dt_bias", None)
    if return_intermediate_states:
        _fail(fn, "return_intermediate_states=True is not supported", NotImplementedError)
    beta_two = bool(kwargs.pop("beta_two", False))
    _no_extra(fn, dict(kwargs, cp_context=cp_context))
    if use_gate_in_kernel:
        g = _kda_gate(fn, g, A_log, dt_bias, lower_bound)
    beta = _beta_pre(fn, beta, use_beta_sigmoid_in_kernel, allow_neg_eigval)
    return _call(fn, VARIANT_KDA, mode, chunk, q, k, v, g, beta, scale, initial_state,
                 output_final_state, use_qk_l2norm_in_kernel, state_v_first, cu_seqlens,
                 beta_two=allow_neg_eigval or beta_two)


def fused_recurrent_kda(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    g: Tensor,
    beta: Tensor,
    A_log: Optional[Tensor] = None,
    dt_bias: Optional[Tensor] = None,
    scale: Optional[float] = None,
    initial_state: Optional[Tensor] = None,
    output_final_state: bool = False,
    use_qk_l2norm_in_kernel: bool = False,
    use_gate_in_kernel: bool = False,
    use_beta_sigmoid_in_kernel: bool = False,
    allow_neg_eigval: bool = False,
    lower_bound: Optional[float] = None,
    state_v_first: bool = False,
    cu_seqlens: Optional[Tensor] = None,
    **kwargs,
) -> Tuple[Tensor, Optional[Tensor]]:
    """Kimi Delta Attention, recurrent kernel. fla's signature; returns (o, final_state)."""
    fn = "fused_recurrent_kda"
    inplace = False
    if kwargs:
        inplace = bool(kwargs.pop("inplace_final_state", False))
        _no_extra(fn, kwargs)
    if use_gate_in_kernel:
        g = _kda_gate(fn, g, A_log, dt_bias, lower_bound)
    if use_beta_sigmoid_in_kernel or allow_neg_eigval:
        beta = _beta_pre(fn, beta, use_beta_sigmoid_in_kernel, allow_neg_eigval)
    return _call(fn, VARIANT_KDA, MODE_RECURRENT, 0, q, k, v, g, beta, scale, initial_state,
                 output_final_state, use_qk_l2norm_in_kernel, state_v_first, cu_seqlens, inplace)


# The layers' fused elementwise CUDA kernels (custom ops deltac::conv_gates,
# gated_rmsnorm, layernorm_gate, sigmoid): deltac/ops_fused.py.
from .ops_fused import conv_gates, gated_rmsnorm, layernorm_gate, sigmoid  # noqa: E402,F401

"""The layers' fused elementwise CUDA kernels as torch custom ops (``deltac.ops``).

What deltac.nn's modules run around the delta rule on CUDA tensors when no gradient
is needed (the C API deltac/fused_ops.h; the C++ CUDA layers run the same kernels):

* ``conv_gates``: GatedDeltaNet's causal depthwise conv1d + silu over q || k || v,
  with ``beta = beta_scale * sigmoid(b)`` and ``g = -exp(A_log) * softplus(a +
  dt_bias)``, in one launch;
* ``gated_rmsnorm``: ``w * rmsnorm(o) * silu(z)`` per head;
* ``layernorm_gate``: ``LayerNorm(o) * silu(g)`` per head;
* ``sigmoid``: ``scale * sigmoid(x)`` in float32.

Each is ``torch.ops.deltac.<name>`` (``torch.library.custom_op``, CUDA only, with a
fake implementation for torch.compile), enqueued on ``torch.cuda.current_stream()``
without synchronising (CUDA-graph capturable). No backward: calling one with an input
that requires grad while grad mode is on raises RuntimeError. Activations are float32
or bfloat16, parameters float32 or bfloat16 (one dtype for all of a call's), the
arithmetic float32.
"""

from __future__ import annotations

from typing import Optional, Tuple

import torch
from torch import Tensor

from . import _lib
from . import ops as _ops

_DTYPES = {torch.float32: _lib.DTYPE_F32, torch.bfloat16: _lib.DTYPE_BF16}


def _fail(fn, msg, exc=ValueError):
    raise exc(f"deltac.ops.{fn}: {msg}")


def _check(fn, name, t, dev, dtype=None, dim=None):
    if not isinstance(t, Tensor):
        _fail(fn, f"{name} must be a tensor, got {type(t).__name__}", TypeError)
    if t.device != dev:
        _fail(fn, f"{name} is on {t.device}, expected {dev} (the device of the first input)")
    if dtype is not None and t.dtype != dtype:
        _fail(fn, f"{name} has dtype {t.dtype}, expected {dtype}")
    if t.dtype not in _DTYPES:
        _fail(fn, f"{name} has dtype {t.dtype}: expected float32 or bfloat16")
    if dim is not None and t.dim() != dim:
        _fail(fn, f"{name} has shape {tuple(t.shape)}: expected {dim} dimensions")
    if not t.is_contiguous():
        _fail(fn, f"{name} must be contiguous")


def _first(fn, t):
    if not isinstance(t, Tensor):
        _fail(fn, f"expected a tensor, got {type(t).__name__}", TypeError)
    if t.device.type != "cuda":
        _fail(fn, f"the tensors are on {t.device}: these kernels run on CUDA only")
    return t.device


def _no_grad(fn, *ts):
    if torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in ts):
        raise RuntimeError(f"deltac.ops.{fn} has no backward: call it under torch.no_grad() / "
                           "inference_mode(), or on tensors that do not require grad")


def _launch(fn, dev, cfunc, *args):
    """cfunc(*args, stream) on dev's current stream; raises DeltacError on failure."""
    if not _lib.cuda_available():
        raise _lib.DeltacError(
            f"deltac.ops.{fn}: the tensors are on {dev} but this deltac library "
            f"({_lib.library_path}) has no usable CUDA")
    index = dev.index if dev.index is not None else torch.cuda.current_device()
    stream = torch._C._cuda_getCurrentRawStream(index)
    if index != torch.cuda.current_device():
        with torch.cuda.device(index):
            rc = cfunc(*args, stream)
    else:
        rc = cfunc(*args, stream)
    if rc != 0:
        raise _lib.DeltacError("deltac runtime: " + _lib.last_error())


def _ptr(t: Optional[Tensor]) -> int:
    return 0 if t is None else t.data_ptr()


def _params(fn, dev, named):
    """The one dtype of the parameters (float32 or bfloat16)."""
    dtype = None
    for name, t in named:
        if t is None:
            continue
        _check(fn, name, t, dev, dtype)
        dtype = t.dtype
    return dtype


# --------------------------------------------------------------------------
# conv_gates
# --------------------------------------------------------------------------


def _conv_shapes(y, weight, A_log, num_k_heads, head_k_dim, head_v_dim):
    B, T = y.shape[0], y.shape[1]
    HV = A_log.shape[0]
    C, W = weight.shape[0], weight.shape[-1]
    return B, T, num_k_heads, HV, head_k_dim, head_v_dim, C, W


def _conv_gates(y, b, a, weight, bias, state, A_log, dt_bias, num_k_heads, head_k_dim,
                head_v_dim, y_group, ba_heads, ba_group, a_offset, beta_scale):
    fn = "conv_gates"
    dev = _first(fn, y)
    _check(fn, "y", y, dev, dim=3)
    dt = y.dtype
    _check(fn, "b", b, dev, dt, dim=3)
    _check(fn, "a", a, dev, dt, dim=3)
    if b.shape[:2] != y.shape[:2] or a.shape != b.shape:
        _fail(fn, f"b {tuple(b.shape)} and a {tuple(a.shape)} must be [batch, seq, n] "
                  f"alike, with y's batch and seq {tuple(y.shape[:2])}")
    pdt = _params(fn, dev, (("weight", weight), ("bias", bias), ("A_log", A_log),
                            ("dt_bias", dt_bias)))
    B, T, H, HV, K, V, C, W = _conv_shapes(y, weight, A_log, num_k_heads, head_k_dim,
                                           head_v_dim)
    if weight.dim() not in (2, 3) or (weight.dim() == 3 and weight.shape[1] != 1):
        _fail(fn, f"weight has shape {tuple(weight.shape)}: expected [C, 1, W] or [C, W]")
    if C != 2 * H * K + HV * V:
        _fail(fn, f"weight has {C} channels: expected 2 * {H} * {K} + {HV} * {V} (q, k, v)")
    if bias is not None and tuple(bias.shape) != (C,):
        _fail(fn, f"bias has shape {tuple(bias.shape)}: expected ({C},)")
    if A_log.dim() != 1 or tuple(dt_bias.shape) != (HV,):
        _fail(fn, f"A_log {tuple(A_log.shape)} and dt_bias {tuple(dt_bias.shape)} must be [HV]")
    if state is not None:
        _check(fn, "state", state, dev, dt)
        if tuple(state.shape) != (B, C, W):
            _fail(fn, f"state has shape {tuple(state.shape)}: expected ({B}, {C}, {W})")
    if ba_heads <= 0 or HV % ba_heads:
        _fail(fn, f"ba_heads = {ba_heads}: expected a divisor of HV = {HV}")
    need = a_offset + (HV // ba_heads - 1) * ba_group + ba_heads
    if a_offset < 0 or need > a.shape[2]:
        _fail(fn, f"a_offset = {a_offset}: a's value heads would reach column {need - 1}, "
                  f"a has {a.shape[2]}")
    q = y.new_empty(B, T, H, K)
    k = y.new_empty(B, T, H, K)
    v = y.new_empty(B, T, HV, V)
    beta = y.new_empty(B, T, HV, dtype=torch.float32)
    g = y.new_empty(B, T, HV, dtype=torch.float32)
    new_state = y.new_empty(B, C, W)
    if B == 0 or T == 0:
        if state is None:
            new_state.zero_()
        else:
            new_state.copy_(state)
        return q, k, v, beta, g, new_state
    _launch(fn, dev, _lib.lib.deltac_conv_gates,
            y.data_ptr(), y.shape[2], y_group, weight.data_ptr(), _ptr(bias), _ptr(state),
            new_state.data_ptr(), b.data_ptr(), a.data_ptr() + a_offset * a.element_size(),
            b.shape[2], ba_heads, ba_group, A_log.data_ptr(), dt_bias.data_ptr(), beta_scale,
            q.data_ptr(), k.data_ptr(), v.data_ptr(), beta.data_ptr(), g.data_ptr(),
            B, T, H, HV, K, V, W, _DTYPES[dt], _DTYPES[pdt])
    return q, k, v, beta, g, new_state


@torch.library.custom_op("deltac::conv_gates", mutates_args=(), device_types=("cuda",))
def conv_gates_op(y: Tensor, b: Tensor, a: Tensor, weight: Tensor, bias: Optional[Tensor],
                  state: Optional[Tensor], A_log: Tensor, dt_bias: Tensor, num_k_heads: int,
                  head_k_dim: int, head_v_dim: int, y_group: int, ba_heads: int, ba_group: int,
                  a_offset: int, beta_scale: float
                  ) -> Tuple[Tensor, Tensor, Tensor, Tensor, Tensor, Tensor]:
    return _conv_gates(y, b, a, weight, bias, state, A_log, dt_bias, num_k_heads, head_k_dim,
                       head_v_dim, y_group, ba_heads, ba_group, a_offset, beta_scale)


@conv_gates_op.register_fake
def _(y, b, a, weight, bias, state, A_log, dt_bias, num_k_heads, head_k_dim, head_v_dim,
      y_group, ba_heads, ba_group, a_offset, beta_scale):
    B, T, H, HV, K, V, C, W = _conv_shapes(y, weight, A_log, num_k_heads, head_k_dim,
                                           head_v_dim)
    f32 = torch.float32
    return (y.new_empty(B, T, H, K), y.new_empty(B, T, H, K), y.new_empty(B, T, HV, V),
            y.new_empty(B, T, HV, dtype=f32), y.new_empty(B, T, HV, dtype=f32),
            y.new_empty(B, C, W))


def conv_gates(y: Tensor, b: Tensor, a: Tensor, weight: Tensor, bias: Optional[Tensor],
               state: Optional[Tensor], A_log: Tensor, dt_bias: Tensor, num_k_heads: int,
               head_k_dim: int, head_v_dim: int, y_group: int = 0, ba_heads: Optional[int] = None,
               ba_group: int = 0, a_offset: int = 0, beta_scale: float = 1.0):
    """GatedDeltaNet's short convolution and gates in one launch (deltac_conv_gates).

    ``y`` [batch, seq, n]: the projection holding q || k || v (``y_group = 0``: at
    columns 0.., else grouped by key head as Qwen3-Next's ``in_proj_qkvz``, ``y_group``
    columns per key head); ``b``, ``a`` [batch, seq, m] in y's dtype: value head j's
    b at column ``(j // ba_heads) * ba_group + j % ba_heads``, its a at that plus
    ``a_offset`` (Qwen3-Next's ``in_proj_ba``: ``b = a = ba``, ``ba_heads = ba_group /
    2 = HV / H``, ``a_offset = HV / H``); ``weight`` [C, 1, W] (W <= 8), ``bias`` [C] or
    None, ``A_log``, ``dt_bias`` [HV]; ``state`` [batch, C, W] in y's dtype: the conv
    inputs before this call (None: zeros).

    Returns ``(q [B, T, H, K], k, v [B, T, HV, V], beta, g [B, T, HV] float32,
    new_state [B, C, W])``, new_state the last W conv inputs.
    """
    _no_grad("conv_gates", y, b, a, weight, bias, state, A_log, dt_bias)
    args = (y, b, a, weight, bias, state, A_log, dt_bias, int(num_k_heads), int(head_k_dim),
            int(head_v_dim), int(y_group),
            int(A_log.shape[0] if ba_heads is None else ba_heads), int(ba_group), int(a_offset),
            float(beta_scale))
    if _ops._direct_ok(y):
        return _conv_gates(*args)
    return conv_gates_op(*args)


# --------------------------------------------------------------------------
# gated_rmsnorm
# --------------------------------------------------------------------------


def _gated_rmsnorm(o, z, weight, eps, z_offset, z_heads, z_group):
    fn = "gated_rmsnorm"
    dev = _first(fn, o)
    _check(fn, "o", o, dev)
    _check(fn, "z", z, dev, o.dtype)
    pdt = _params(fn, dev, (("weight", weight),))
    if o.dim() < 2:
        _fail(fn, f"o has shape {tuple(o.shape)}: expected [..., heads, D]")
    heads, D = o.shape[-2], o.shape[-1]
    rows = o.numel() // max(heads * D, 1)
    if tuple(weight.shape) != (D,):
        _fail(fn, f"weight has shape {tuple(weight.shape)}: expected ({D},)")
    ldz = z.shape[-1] if z.dim() else 0
    if z.numel() != rows * ldz:
        _fail(fn, f"z has shape {tuple(z.shape)}: expected {rows} rows (o's) of any width")
    if z_heads <= 0 or heads % z_heads:
        _fail(fn, f"z_heads = {z_heads}: expected a divisor of heads = {heads}")
    need = z_offset + (heads // z_heads - 1) * z_group + z_heads * D
    if z_offset < 0 or need > ldz:
        _fail(fn, f"z_offset = {z_offset}: the heads would reach column {need - 1} of z, "
                  f"z has {ldz}")
    out = torch.empty_like(o)
    if rows == 0:
        return out
    _launch(fn, dev, _lib.lib.deltac_gated_rmsnorm,
            o.data_ptr(), z.data_ptr() + z_offset * z.element_size(), out.data_ptr(), rows,
            heads, D, ldz, z_heads, z_group, weight.data_ptr(), eps, _DTYPES[o.dtype],
            _DTYPES[pdt])
    return out


@torch.library.custom_op("deltac::gated_rmsnorm", mutates_args=(), device_types=("cuda",))
def gated_rmsnorm_op(o: Tensor, z: Tensor, weight: Tensor, eps: float, z_offset: int,
                     z_heads: int, z_group: int) -> Tensor:
    return _gated_rmsnorm(o, z, weight, eps, z_offset, z_heads, z_group)


@gated_rmsnorm_op.register_fake
def _(o, z, weight, eps, z_offset, z_heads, z_group):
    return torch.empty_like(o)


def gated_rmsnorm(o: Tensor, z: Tensor, weight: Tensor, eps: float, z_offset: int = 0,
                  z_heads: Optional[int] = None, z_group: int = 0) -> Tensor:
    """``weight * rmsnorm(o) * silu(z)`` per head (Qwen3-Next's gated norm), float32
    arithmetic, out in o's dtype (deltac_gated_rmsnorm).

    ``o`` [..., heads, D] (D <= 256); ``z`` [..., n] with o's rows and dtype: head h
    reads columns ``z_offset + (h // z_heads) * z_group + (h % z_heads) * D`` (default:
    the heads one after the other, z [..., heads * D]); ``weight`` [D].
    """
    _no_grad("gated_rmsnorm", o, z, weight)
    args = (o, z, weight, float(eps), int(z_offset),
            int(o.shape[-2] if z_heads is None else z_heads), int(z_group))
    if _ops._direct_ok(o):
        return _gated_rmsnorm(*args)
    return gated_rmsnorm_op(*args)


# --------------------------------------------------------------------------
# layernorm_gate
# --------------------------------------------------------------------------


def _layernorm_gate(o, g, weight, bias, eps):
    fn = "layernorm_gate"
    dev = _first(fn, o)
    _check(fn, "o", o, dev)
    _check(fn, "g", g, dev, o.dtype)
    pdt = _params(fn, dev, (("weight", weight), ("bias", bias)))
    if o.dim() < 2:
        _fail(fn, f"o has shape {tuple(o.shape)}: expected [..., heads, D]")
    heads, D = o.shape[-2], o.shape[-1]
    if g.numel() != o.numel() or g.shape[-1] != heads * D:
        _fail(fn, f"g has shape {tuple(g.shape)}: expected [..., {heads * D}] with o's rows")
    for name, t in (("weight", weight), ("bias", bias)):
        if tuple(t.shape) != (D,):
            _fail(fn, f"{name} has shape {tuple(t.shape)}: expected ({D},)")
    out = torch.empty_like(g)
    rows = o.numel() // max(heads * D, 1)
    if rows == 0:
        return out
    _launch(fn, dev, _lib.lib.deltac_layernorm_gate,
            o.data_ptr(), g.data_ptr(), out.data_ptr(), rows, heads, D, weight.data_ptr(),
            bias.data_ptr(), eps, _DTYPES[o.dtype], _DTYPES[pdt])
    return out


@torch.library.custom_op("deltac::layernorm_gate", mutates_args=(), device_types=("cuda",))
def layernorm_gate_op(o: Tensor, g: Tensor, weight: Tensor, bias: Tensor, eps: float) -> Tensor:
    return _layernorm_gate(o, g, weight, bias, eps)


@layernorm_gate_op.register_fake
def _(o, g, weight, bias, eps):
    return torch.empty_like(g)


def layernorm_gate(o: Tensor, g: Tensor, weight: Tensor, bias: Tensor, eps: float) -> Tensor:
    """``LayerNorm(o) * silu(g)`` per head (biased variance, ``weight``, ``bias`` [D]),
    float32 arithmetic (deltac_layernorm_gate). ``o`` [..., heads, D] (D <= 256), ``g``
    [..., heads * D] of o's dtype; returns g's shape in o's dtype."""
    _no_grad("layernorm_gate", o, g, weight, bias)
    args = (o, g, weight, bias, float(eps))
    if _ops._direct_ok(o):
        return _layernorm_gate(*args)
    return layernorm_gate_op(*args)


# --------------------------------------------------------------------------
# sigmoid
# --------------------------------------------------------------------------


def _sigmoid(x, scale):
    fn = "sigmoid"
    dev = _first(fn, x)
    _check(fn, "x", x, dev)
    out = torch.empty_like(x, dtype=torch.float32)
    if x.numel() == 0:
        return out
    _launch(fn, dev, _lib.lib.deltac_sigmoid, x.data_ptr(), out.data_ptr(), x.numel(), scale,
            _DTYPES[x.dtype])
    return out


@torch.library.custom_op("deltac::sigmoid", mutates_args=(), device_types=("cuda",))
def sigmoid_op(x: Tensor, scale: float) -> Tensor:
    return _sigmoid(x, scale)


@sigmoid_op.register_fake
def _(x, scale):
    return torch.empty_like(x, dtype=torch.float32)


def sigmoid(x: Tensor, scale: float = 1.0) -> Tensor:
    """``scale * sigmoid(x)`` in float32 (x float32 or bfloat16; deltac_sigmoid)."""
    _no_grad("sigmoid", x)
    if _ops._direct_ok(x):
        return _sigmoid(x, float(scale))
    return sigmoid_op(x, float(scale))

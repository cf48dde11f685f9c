"""DeltaNetAttention: the layer of the DeltaNet attention spec, on deltac's kernels."""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace
from typing import Optional

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .. import _lib, ops
from .bitlinear import BitLinear

_KERNEL_DTYPES = (torch.float32, torch.bfloat16)


@dataclass
class DeltaNetConfig:
    """The attributes DeltaNetAttention reads (any object with them will do)."""

    hidden_size: int = 1024
    num_heads: int = 8
    dropout: float = 0.0
    use_bitnet: bool = False
    mode: str = "encoder"


def _as_config(config):
    return SimpleNamespace(**config) if isinstance(config, dict) else config


class DeltaNetAttention(nn.Module):
    """DeltaNet attention with delta-rule state updates (Yang et al., 2024, arXiv:2406.06484).

    Per head, a matrix state ``S_t`` (``head_dim x head_dim``) follows
    ``S_t = S_{t-1} (I - beta_t k_t k_t^T) + beta_t v_t k_t^T`` and the readout is
    ``o_t = S_t q_t / sqrt(head_dim)``, with q and k L2-normalised and
    ``beta_t = sigmoid(beta_proj(x_t))`` in (0, 1), one per head. The recurrence runs
    in deltac's kernels (``deltac.ops.chunk_delta_rule`` / ``fused_recurrent_delta_rule``).

    Args:
        config: an object (or dict) with ``hidden_size``, ``num_heads`` (must divide
            ``hidden_size``), ``dropout``, ``use_bitnet`` and optionally ``mode``
            (``"encoder"``, the default, or ``"decoder"``).

    Attributes: ``hidden_size``, ``num_heads``, ``head_dim`` (``hidden_size //
    num_heads``), ``total_dim`` (``head_dim * num_heads``), ``q_proj``, ``k_proj``,
    ``v_proj``, ``g_proj``, ``out_proj`` (``nn.Linear``, or ``BitLinear`` with
    ``use_bitnet``), ``beta_proj`` (``nn.Linear``, hidden -> num_heads), ``norm``
    (``nn.LayerNorm``), ``dropout`` (``nn.Dropout``), ``mode``; in decoder mode
    ``state`` holds the cached recurrent state.

    Forward: ``forward(x, logical_layer_idx=None)`` maps ``(batch, seq, hidden_size)``
    to the same shape::

        q, k, v = q_proj(x), k_proj(x), v_proj(x)           # per head
        beta    = sigmoid(beta_proj(x))
        o       = delta_rule(l2norm(q), l2norm(k), v, beta)  # deltac kernel
        o       = norm(o)                                    # LayerNorm over head_dim
        o       = o * silu(g_proj(x))                        # output gate
        o       = dropout(o)
        return out_proj(o)

    Choices where the spec is silent, and why:

    * ``norm`` is a LayerNorm over ``head_dim``, applied to each head's readout on
      its own (weights shared across heads): each head is an independent memory whose
      readout scale depends on its own state, so normalising per head (as
      flash-linear-attention's DeltaNet does with its per-head output norm) keeps one
      head from dominating the others; a LayerNorm over ``total_dim`` would mix them.
    * ``dropout`` is applied right after the output gate and before ``out_proj``
      (the spec: "applied after the output gate"), so it drops gated channels of the
      readout, not channels of the residual stream.
    * projections have no bias (q, k, v, g, out and beta), as in fla's DeltaNet.
    * the L2 norm is the kernel's: ``x / sqrt(sum x^2 + 1e-6)``.
    * the scale is ``1 / sqrt(head_dim)``, fla's and the kernel's default.
    * both modes are causal (the recurrence reads only the past). ``"encoder"``
      processes each call's sequences from a zero state and keeps nothing;
      ``"decoder"`` starts each call from ``self.state`` (zero when None) and stores
      the final state there (a one-token step updates it in place), so a prompt
      followed by one token at a time gives the outputs of the whole sequence at
      once. ``reset_state()`` clears it; a batch of another size than the cached
      state's is an error.
    * ``head_dim`` must be a multiple of 16 in [16, 256] (deltac's kernels); other
      values raise ValueError at construction.
    * the kernels take float32 or bfloat16: other dtypes (float16) run the recurrence
      in float32 and cast back. The state is float32.
    * trainable: ``loss.backward()`` runs deltac's backward kernels (CPU and CUDA,
      ``deltac.ops``). The decoder's one-token in-place step has no backward.
    """

    def __init__(self, config):
        super().__init__()
        config = _as_config(config)
        hidden_size = int(config.hidden_size)
        num_heads = int(config.num_heads)
        if num_heads <= 0 or hidden_size <= 0 or hidden_size % num_heads != 0:
            raise ValueError(
                f"DeltaNetAttention: hidden_size ({hidden_size}) must be divisible by "
                f"num_heads ({num_heads})")
        self.hidden_size = hidden_size
        self.num_heads = num_heads
        self.head_dim = hidden_size // num_heads
        self.total_dim = self.head_dim * num_heads
        if self.head_dim % 16 or not 16 <= self.head_dim <= 256:
            raise ValueError(
                f"DeltaNetAttention: head_dim = hidden_size // num_heads = {self.head_dim}: "
                "deltac's kernels need a multiple of 16 in [16, 256]")
        mode = getattr(config, "mode", None) or "encoder"
        if mode not in ("encoder", "decoder"):
            raise ValueError(f"DeltaNetAttention: mode = {mode!r}: expected 'encoder' or 'decoder'")
        self.mode = mode
        use_bitnet = bool(getattr(config, "use_bitnet", False))
        self.use_bitnet = use_bitnet
        linear = BitLinear if use_bitnet else nn.Linear

        self.q_proj = linear(hidden_size, self.total_dim, bias=False)
        self.k_proj = linear(hidden_size, self.total_dim, bias=False)
        self.v_proj = linear(hidden_size, self.total_dim, bias=False)
        self.beta_proj = nn.Linear(hidden_size, num_heads, bias=False)
        self.g_proj = linear(hidden_size, self.total_dim, bias=False)
        self.out_proj = linear(self.total_dim, hidden_size, bias=False)
        self.norm = nn.LayerNorm(self.head_dim)
        self.dropout = nn.Dropout(float(getattr(config, "dropout", 0.0) or 0.0))
        self.state: Optional[Tensor] = None

    def reset_state(self) -> None:
        """Forgets the decoder's cached state (the next call starts from zero)."""
        self.state = None

    def forward(self, x: Tensor, logical_layer_idx: Optional[int] = None,
                cp_context=None) -> Tensor:
        """(batch, seq, hidden_size) -> (batch, seq, hidden_size); ``logical_layer_idx``
        is unused (interface compatibility with other mixers). ``cp_context``
        (``deltac.cp.context(group)``, batch layout, encoder mode): x is this rank's
        span of each sequence and the delta rule runs over the ranks."""
        if x.dim() != 3 or x.shape[-1] != self.hidden_size:
            raise ValueError(f"DeltaNetAttention: x has shape {tuple(x.shape)}: expected "
                             f"(batch, seq, {self.hidden_size})")
        if cp_context is not None and self.mode == "decoder":
            raise ValueError("DeltaNetAttention: cp_context splits a prompt over ranks; the "
                             "decoder mode's state cache runs on one rank")
        B, T, _ = x.shape
        H, D = self.num_heads, self.head_dim
        kdtype = x.dtype if x.dtype in _KERNEL_DTYPES else torch.float32
        q = self.q_proj(x).view(B, T, H, D).to(kdtype).contiguous()
        k = self.k_proj(x).view(B, T, H, D).to(kdtype).contiguous()
        v = self.v_proj(x).view(B, T, H, D).to(kdtype).contiguous()
        fused = self._fused_ok(x)
        if fused:  # deltac's fused CUDA kernels (no gradient needed)
            beta = ops.sigmoid(self.beta_proj(x).contiguous())
        else:
            beta = torch.sigmoid(self.beta_proj(x).float()).contiguous()

        decoder = self.mode == "decoder"
        h0 = None
        if decoder and self.state is not None:
            if self.state.shape[0] != B:
                raise ValueError(
                    f"DeltaNetAttention: the cached decoder state has batch {self.state.shape[0]} "
                    f"but x has batch {B}: call reset_state() to start new sequences")
            h0 = self.state
        if cp_context is not None:
            o, _ = ops.chunk_delta_rule(q, k, v, beta, use_qk_l2norm_in_kernel=True,
                                        cp_context=cp_context)
        elif decoder and h0 is not None and T == 1:  # a decode step: the state in place
            o, _ = ops.fused_recurrent_delta_rule(q, k, v, beta, initial_state=h0,
                                                  use_qk_l2norm_in_kernel=True,
                                                  inplace_final_state=True)
        else:
            kernel = ops.fused_recurrent_delta_rule if T == 1 else ops.chunk_delta_rule
            o, ht = kernel(q, k, v, beta, initial_state=h0, output_final_state=decoder,
                           use_qk_l2norm_in_kernel=True)
            if decoder:
                self.state = ht

        gate = self.g_proj(x)
        if fused and o.dtype == x.dtype and gate.dtype == x.dtype:
            o = ops.layernorm_gate(o, gate.contiguous(), self.norm.weight, self.norm.bias,
                                   self.norm.eps)
            return self.out_proj(o)
        o = self.norm(o.to(x.dtype))
        o = o.reshape(B, T, self.total_dim) * F.silu(gate)
        o = self.dropout(o)
        return self.out_proj(o)

    def _fused_ok(self, x: Tensor) -> bool:
        """Whether forward runs beta's sigmoid and the LayerNorm + silu gate as deltac's
        fused CUDA kernels (ops.sigmoid, ops.layernorm_gate): float32 / bfloat16 CUDA
        input, a LayerNorm with weight and bias of one dtype, no active dropout, no
        autocast, and no gradient needed (those ops have no backward; else PyTorch)."""
        n = self.norm
        if not (x.is_cuda and x.dtype in _KERNEL_DTYPES and x.numel() > 0
                and n.weight is not None and n.bias is not None
                and n.weight.dtype in _KERNEL_DTYPES and n.bias.dtype == n.weight.dtype
                and not (self.training and self.dropout.p > 0)
                and _lib.cuda_available() and not torch.is_autocast_enabled()):
            return False
        return not (torch.is_grad_enabled()
                    and (x.requires_grad or any(p.requires_grad for p in self.parameters())))

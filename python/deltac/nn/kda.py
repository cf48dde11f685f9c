"""KimiDeltaAttention: Kimi-Linear's KDA mixer, a GatedDeltaNet with per-channel decay."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .. import ops
from .gated_deltanet import (GatedDeltaNet, _cache_get, _cp_allowed, causal_conv_silu,
                             split_conv_state)


@dataclass
class KimiDeltaAttentionConfig:
    """The attributes KimiDeltaAttention reads, named as in Kimi-Linear's config
    (``linear_attn_config`` holds ``num_heads``, ``head_dim``,
    ``short_conv_kernel_size``). Defaults: Kimi-Linear-48B-A3B's KDA layers."""

    hidden_size: int = 2304
    rms_norm_eps: float = 1e-5
    linear_attn_config: Dict[str, Any] = field(default_factory=lambda: {
        "num_heads": 32, "head_dim": 128, "short_conv_kernel_size": 4})


class RMSNormSigmoidGated(nn.Module):
    """``weight * rmsnorm(x) * sigmoid(gate)`` over the last dimension, in float32
    (fla's FusedRMSNormGated with activation='sigmoid', as Kimi-Linear's o_norm)."""

    def __init__(self, hidden_size: int, eps: float = 1e-5):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.eps = eps

    def forward(self, x: Tensor, gate: Tensor) -> Tensor:
        dtype = x.dtype
        x32 = x.float()
        x32 = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)
        return (x32 * self.weight.float() * torch.sigmoid(gate.float())).to(dtype)


class KimiDeltaAttention(GatedDeltaNet):
    """Kimi Delta Attention (Kimi-Linear), on deltac's kda kernels.

    Parameter names and shapes follow Kimi-Linear's ``KimiDeltaAttention`` (its
    transformers modeling code), so its state dicts load: ``q_proj``, ``k_proj``,
    ``v_proj``; ``q_conv1d``, ``k_conv1d``, ``v_conv1d`` (depthwise causal, silu, no
    bias; weight ``[C, 1, W]``); ``A_log`` ``[1, 1, H, 1]``; ``f_a_proj``, ``f_b_proj``
    (the low-rank gate input) and ``dt_bias`` ``[H * D]``; ``b_proj``; ``g_a_proj``,
    ``g_b_proj`` (the low-rank output gate); ``o_norm.weight``; ``o_proj``. Per call::

        q, k, v = silu(conv(q_proj(x))), silu(conv(k_proj(x))), silu(conv(v_proj(x)))
        g    = -exp(A_log) * softplus(f_b_proj(f_a_proj(x)) + dt_bias)   # [B, T, H, D]
        beta = sigmoid(b_proj(x))
        o, state = kda(q, k, v, g, beta, L2 norm of q, k in the kernel, the cached state)
        return o_proj(rmsnorm(o) * o_norm.weight * sigmoid(g_b_proj(g_a_proj(x))))

    Same interface as GatedDeltaNet: ``forward(hidden_states, cache_params=None,
    cache_position=None, attention_mask=None)``; the cache keeps, per layer,
    ``conv_states[i] = (q_state, k_state, v_state)`` (Kimi's tuple, each
    ``[B, C, W]``) and ``recurrent_states[i]`` ``[B, H, D, D]``; the kernel hook
    (``register_kernel_hook``) reports decays ``[B, T, H, D]``. Kimi-Linear has one
    head count for q/k and v (no GVA). ``attention_mask`` (batch, seq) zeroes padded
    inputs; for left padding of a fresh prompt that equals Kimi's unpadding (zero
    inputs write nothing into a zero state, and the conv sees zeros either way).
    """

    def __init__(self, config, layer_idx: int = 0):
        nn.Module.__init__(self)
        lac = config.linear_attn_config
        self.hidden_size = int(config.hidden_size)
        self.num_heads = int(lac["num_heads"])
        self.head_dim = int(lac["head_dim"])
        self.conv_size = int(lac["short_conv_kernel_size"])
        self.layer_idx = layer_idx
        self.num_k_heads = self.num_v_heads = self.num_heads
        self.head_k_dim = self.head_v_dim = self.head_dim
        if self.head_dim % 16 or not 16 <= self.head_dim <= 256:
            raise ValueError(f"KimiDeltaAttention: head_dim = {self.head_dim}: deltac's kernels "
                             "need a multiple of 16 in [16, 256]")
        size = self.num_heads * self.head_dim
        self.q_proj = nn.Linear(self.hidden_size, size, bias=False)
        self.k_proj = nn.Linear(self.hidden_size, size, bias=False)
        self.v_proj = nn.Linear(self.hidden_size, size, bias=False)
        conv = lambda: nn.Conv1d(size, size, self.conv_size, groups=size, bias=False,  # noqa: E731
                                 padding=self.conv_size - 1)
        self.q_conv1d, self.k_conv1d, self.v_conv1d = conv(), conv(), conv()
        self.A_log = nn.Parameter(torch.log(torch.empty(self.num_heads).uniform_(1, 16))
                                  .view(1, 1, -1, 1))
        self.f_a_proj = nn.Linear(self.hidden_size, self.head_dim, bias=False)
        self.f_b_proj = nn.Linear(self.head_dim, size, bias=False)
        self.dt_bias = nn.Parameter(torch.zeros(size))
        self.b_proj = nn.Linear(self.hidden_size, self.num_heads, bias=False)
        self.g_a_proj = nn.Linear(self.hidden_size, self.head_dim, bias=False)
        self.g_b_proj = nn.Linear(self.head_dim, size, bias=False)
        self.o_norm = RMSNormSigmoidGated(self.head_dim, eps=float(getattr(config, "rms_norm_eps", 1e-5)))
        self.o_proj = nn.Linear(size, self.hidden_size, bias=False)
        self._kernel_hooks: List = []

    def forward(self, hidden_states: Tensor, cache_params=None, cache_position=None,
                attention_mask: Optional[Tensor] = None, cp_context=None) -> Tensor:
        """``cp_context``: as GatedDeltaNet.forward's (context parallelism)."""
        if hidden_states.dim() != 3 or hidden_states.shape[-1] != self.hidden_size:
            raise ValueError(f"KimiDeltaAttention: hidden_states has shape "
                             f"{tuple(hidden_states.shape)}: expected (batch, seq, {self.hidden_size})")
        _cp_allowed(type(self).__name__, cp_context, cache_params, self._kernel_hooks)
        if attention_mask is not None and attention_mask.dim() == 2 and attention_mask.shape[1] > 1:
            hidden_states = (hidden_states * attention_mask[:, -hidden_states.shape[1]:, None]
                             ).to(hidden_states.dtype)
        B, T, _ = hidden_states.shape
        H, D = self.num_heads, self.head_dim
        conv_states = recurrent_state = None
        if cache_params is not None:
            conv_states = _cache_get(cache_params.conv_states, self.layer_idx)
            recurrent_state = _cache_get(cache_params.recurrent_states, self.layer_idx)
            if conv_states is None or recurrent_state is None:
                conv_states = recurrent_state = None
            elif recurrent_state.shape[0] != B:
                raise ValueError(f"KimiDeltaAttention: the cached state has batch "
                                 f"{recurrent_state.shape[0]} but hidden_states has batch {B}")
        x = hidden_states
        new_conv = []
        outs = []
        projs = [self.q_proj(x), self.k_proj(x), self.v_proj(x)]
        if cp_context is not None:
            conv_states = split_conv_state(projs, self.q_conv1d.weight.shape[-1], cp_context)
        for i, (p, conv) in enumerate(zip(projs, (self.q_conv1d, self.k_conv1d, self.v_conv1d))):
            y, st = causal_conv_silu(p.transpose(1, 2), conv.weight, conv.bias,
                                     None if conv_states is None else conv_states[i])
            outs.append(y.transpose(1, 2))
            new_conv.append(st)
        kdtype = x.dtype if x.dtype in (torch.float32, torch.bfloat16) else torch.float32
        q, k, v = (t.reshape(B, T, H, D).to(kdtype).contiguous() for t in outs)
        a = self.f_b_proj(self.f_a_proj(x)).float().view(B, T, H, D)
        g = (-self.A_log.float().exp() * F.softplus(a + self.dt_bias.float().view(H, D))).contiguous()
        beta = torch.sigmoid(self.b_proj(x).float()).contiguous()

        if cp_context is not None:
            o, last_state = ops.chunk_kda(q, k, v, g=g, beta=beta, use_qk_l2norm_in_kernel=True,
                                          cp_context=cp_context)
        else:
            o, last_state = self._kernel(ops.fused_recurrent_kda, ops.chunk_kda, q, k, v, g, beta,
                                         recurrent_state, cache_params is not None)
        if cache_params is not None:
            cache_params.conv_states[self.layer_idx] = tuple(new_conv)
            cache_params.recurrent_states[self.layer_idx] = last_state

        gate = self.g_b_proj(self.g_a_proj(x)).view(B, T, H, D)
        o = self.o_norm(o.to(x.dtype), gate)
        return self.o_proj(o.reshape(B, T, H * D))

"""GatedDeltaNet: the gated DeltaNet mixer of Qwen3-Next (and OLMo-Hybrid), on deltac's kernels."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .. import _lib, ops

_FUSED_DTYPES = (torch.float32, torch.bfloat16)


@dataclass
class GatedDeltaNetConfig:
    """The attributes GatedDeltaNet reads, named as in transformers' Qwen3NextConfig.

    Defaults are Qwen3-Next-80B-A3B's linear-attention layer. Any object with these
    attributes (a transformers config, say) will do; ``linear_allow_neg_eigval`` is
    OLMo-Hybrid's (beta in (0, 2)).
    """

    hidden_size: int = 2048
    linear_num_key_heads: int = 16
    linear_num_value_heads: int = 32
    linear_key_head_dim: int = 128
    linear_value_head_dim: int = 128
    linear_conv_kernel_dim: int = 4
    hidden_act: str = "silu"
    rms_norm_eps: float = 1e-6
    linear_allow_neg_eigval: bool = False


class RMSNormGated(nn.Module):
    """transformers' Qwen3NextRMSNormGated: ``weight * rmsnorm(x) * silu(gate)``,
    normalised in float32 over the last dimension (head_v_dim)."""

    def __init__(self, hidden_size: int, eps: float = 1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.variance_epsilon = eps

    def forward(self, hidden_states: Tensor, gate: Tensor) -> Tensor:
        input_dtype = hidden_states.dtype
        x = hidden_states.to(torch.float32)
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.variance_epsilon)
        x = self.weight * x.to(input_dtype)
        x = x * F.silu(gate.to(torch.float32))
        return x.to(input_dtype)


class GatedDeltaNetCache:
    """Decode state of GatedDeltaNet layers, keyed by ``layer_idx``.

    ``conv_states[i]``: ``[batch, conv_dim, conv_kernel]``, the last conv inputs (a
    tuple of three, for q, k and v, with OLMo-Hybrid's layout and KDA);
    ``recurrent_states[i]``: ``[batch, HV, K, V]`` float32. The same two attributes
    as transformers' Qwen3-Next cache, so either kind can be passed as
    ``cache_params`` (lists indexed by layer or dicts).
    """

    def __init__(self):
        self.conv_states: Dict[int, Tensor] = {}
        self.recurrent_states: Dict[int, Tensor] = {}

    @property
    def has_previous_state(self) -> bool:
        return bool(self.recurrent_states)

    def reset(self) -> None:
        self.conv_states.clear()
        self.recurrent_states.clear()


def _cache_get(store, idx):
    try:
        return store[idx]
    except (KeyError, IndexError):
        return None


@dataclass
class KernelCall:
    """What the delta-rule kernel received and returned in one forward call.

    ``queries``, ``keys``: ``[batch, seq, HV, K]`` after the conv, the activation and
    the repeat to the value heads (before the kernel's L2 norm, which the kernel
    applies: ``use_qk_l2norm_in_kernel=True``); ``values``: ``[batch, seq, HV, V]``;
    ``decays``: the log decay g, ``[batch, seq, HV]``, float32, <= 0; ``betas``:
    ``[batch, seq, HV]`` in (0, 1) ((0, 2) with allow_neg_eigval); ``state_input``:
    the state the call started from (a copy; None on a fresh prompt);
    ``state_output``: the final state ``[batch, HV, K, V]`` (a copy: a decode step
    updates the cache's buffer in place); ``states``: with
    ``per_token_states=True``, the state after every token, ``[batch, seq, HV, K,
    V]``; ``path``: ``"prompt"`` or ``"decode"`` (one token continuing a cache).
    """

    queries: Tensor
    keys: Tensor
    values: Tensor
    decays: Tensor
    betas: Tensor
    state_input: Optional[Tensor]
    state_output: Tensor
    path: str
    states: Optional[Tensor] = None


class _HookHandle:
    def __init__(self, hooks: List, entry):
        self._hooks, self._entry = hooks, entry

    def remove(self) -> None:
        if self._entry in self._hooks:
            self._hooks.remove(self._entry)


class GatedDeltaNet(nn.Module):
    """The gated DeltaNet mixer of Qwen3-Next / Qwen3.5 / OLMo-Hybrid, with deltac's kernels.

    Parameters carry the names and shapes of transformers' implementation of the
    chosen ``layout``, so its state dicts load with ``load_state_dict``:

    * ``"qwen3_next"`` (``Qwen3NextGatedDeltaNet``): ``in_proj_qkvz``, ``in_proj_ba``
      (fused, grouped by key head), ``conv1d``, ``dt_bias``, ``A_log``,
      ``norm.weight``, ``out_proj``;
    * ``"qwen3_5"`` (``Qwen3_5GatedDeltaNet``): ``in_proj_qkv`` (q, k, v one after
      the other), ``in_proj_z``, ``in_proj_b``, ``in_proj_a``, and the rest as
      Qwen3-Next;
    * ``"olmo_hybrid"`` (``OlmoHybridGatedDeltaNet``): ``q_proj``, ``k_proj``,
      ``v_proj``, ``a_proj``, ``b_proj``, ``g_proj`` (the output gate), one
      depthwise conv per input (``q_conv1d``, ``k_conv1d``, ``v_conv1d``),
      ``dt_bias``, ``A_log``, ``o_norm.weight`` (eps 1e-5), ``o_proj``.

    ``layout=None`` picks from ``config.model_type`` (``qwen3_5*``, ``olmo*``, else
    Qwen3-Next). Per call::

        q, k, v, z, b, a = the projections (z: the output gate)
        q, k, v = silu(causal_conv1d(q, k, v))                      # kernel conv_kernel, depthwise
        beta = sigmoid(b)            (2 * sigmoid(b) with linear_allow_neg_eigval)
        g    = -exp(A_log) * softplus(a + dt_bias)                  # float32
        o, state = gated_delta_rule(q, k, v, g, beta, L2 norm of q, k in the kernel,
                                    initial_state = the cached state)
        return out_proj(RMSNormGated(o, z))                         # weight * rmsnorm(o) * silu(z)

    Args:
        config: a ``GatedDeltaNetConfig`` or any object with its attributes.
        layer_idx: this layer's key in a cache.
        layout: ``"qwen3_next"``, ``"qwen3_5"`` or ``"olmo_hybrid"`` (see above).

    ``forward(hidden_states, cache_params=None, cache_position=None,
    attention_mask=None)``: without a cache, a prompt from a zero state. With a
    cache (``GatedDeltaNetCache`` or transformers' cache of the layout: Qwen3-Next's
    ``conv_states``/``recurrent_states``, OLMo-Hybrid's ``conv_states_q/k/v``), the call
    continues the cached conv and recurrent states when this layer has them (a
    one-token decode step, or more tokens: a chunked prefill) and stores the new
    states; the first call on an empty cache is a prompt.

    Choices the mixer's spec leaves open:

    * GVA: the kernel reads q/k head ``j // (HV / H)`` for value head j, which is
      exactly ``repeat_interleave`` to the value heads, so the repeat is not
      materialised (the hook shows the repeated tensors).
    * decode with more than one token continues the cache (transformers restarts
      from a zero state when ``seq_len > 1``; the two agree on the usual prompt then
      one-token steps).
    * ``attention_mask`` (batch, seq) zeroes padded positions of the input, as
      transformers' ``apply_mask_to_padding_states`` does.
    * activations: the kernel takes float32 or bfloat16; float16 runs it in float32.
    * trainable (deltac's backward kernels, CPU and CUDA, see ``deltac.ops``).

    Observation hook: ``register_kernel_hook(fn, per_token_states=False)`` calls
    ``fn(module, call)`` after each kernel call with a ``KernelCall`` (the values at
    the kernel call: queries, keys, values, decays, betas, state_input,
    state_output, and with ``per_token_states=True`` the state after every token,
    computed by stepping the recurrent kernel one token at a time). Returns a handle
    with ``remove()``. With no hook registered nothing is copied.
    """

    LAYOUTS = ("qwen3_next", "qwen3_5", "olmo_hybrid")
    allow_neg_eigval = False  # beta in (0, 2); set from the config (KimiDeltaAttention: never)

    def __init__(self, config, layer_idx: int = 0, layout: Optional[str] = None):
        super().__init__()
        if layout is None:
            model_type = str(getattr(config, "model_type", "") or "")
            layout = ("qwen3_5" if "qwen3_5" in model_type
                      else "olmo_hybrid" if "olmo" in model_type else "qwen3_next")
        if layout not in self.LAYOUTS:
            raise ValueError(f"GatedDeltaNet: layout = {layout!r}: expected one of {self.LAYOUTS}")
        self.layout = layout
        self.hidden_size = int(config.hidden_size)
        self.num_v_heads = int(config.linear_num_value_heads)
        self.num_k_heads = int(config.linear_num_key_heads)
        self.head_k_dim = int(config.linear_key_head_dim)
        self.head_v_dim = int(config.linear_value_head_dim)
        self.key_dim = self.head_k_dim * self.num_k_heads
        self.value_dim = self.head_v_dim * self.num_v_heads
        self.conv_kernel_size = int(config.linear_conv_kernel_dim)
        self.layer_idx = layer_idx
        self.activation = getattr(config, "hidden_act", "silu")
        if self.activation not in ("silu", "swish"):
            raise ValueError(f"GatedDeltaNet: hidden_act = {self.activation!r}: only silu is supported")
        self.layer_norm_epsilon = float(getattr(config, "rms_norm_eps", 1e-6))
        self.allow_neg_eigval = bool(getattr(config, "linear_allow_neg_eigval", False))
        if self.num_k_heads <= 0 or self.num_v_heads % self.num_k_heads:
            raise ValueError(
                f"GatedDeltaNet: linear_num_value_heads ({self.num_v_heads}) must be a multiple "
                f"of linear_num_key_heads ({self.num_k_heads})")
        for name, d in (("linear_key_head_dim", self.head_k_dim),
                        ("linear_value_head_dim", self.head_v_dim)):
            if d % 16 or not 16 <= d <= 256:
                raise ValueError(f"GatedDeltaNet: {name} = {d}: deltac's kernels need a multiple "
                                 "of 16 in [16, 256]")

        self.conv_dim = self.key_dim * 2 + self.value_dim
        W, hs = self.conv_kernel_size, self.hidden_size

        def depthwise(c):
            return nn.Conv1d(c, c, bias=False, kernel_size=W, groups=c, padding=W - 1)

        if layout == "olmo_hybrid":  # transformers' OlmoHybridGatedDeltaNet
            self.q_proj = nn.Linear(hs, self.key_dim, bias=False)
            self.k_proj = nn.Linear(hs, self.key_dim, bias=False)
            self.v_proj = nn.Linear(hs, self.value_dim, bias=False)
            self.a_proj = nn.Linear(hs, self.num_v_heads, bias=False)
            self.b_proj = nn.Linear(hs, self.num_v_heads, bias=False)
            self.g_proj = nn.Linear(hs, self.value_dim, bias=False)
            self.o_proj = nn.Linear(self.value_dim, hs, bias=False)
            self.q_conv1d = depthwise(self.key_dim)
            self.k_conv1d = depthwise(self.key_dim)
            self.v_conv1d = depthwise(self.value_dim)
        else:
            self.conv1d = depthwise(self.conv_dim)
            if layout == "qwen3_next":  # fused, grouped by key head
                self.in_proj_qkvz = nn.Linear(hs, self.key_dim * 2 + self.value_dim * 2, bias=False)
                self.in_proj_ba = nn.Linear(hs, self.num_v_heads * 2, bias=False)
            else:  # qwen3_5: q || k || v, then z, b, a apart
                self.in_proj_qkv = nn.Linear(hs, self.conv_dim, bias=False)
                self.in_proj_z = nn.Linear(hs, self.value_dim, bias=False)
                self.in_proj_b = nn.Linear(hs, self.num_v_heads, bias=False)
                self.in_proj_a = nn.Linear(hs, self.num_v_heads, bias=False)
        self.dt_bias = nn.Parameter(torch.ones(self.num_v_heads))
        A = torch.empty(self.num_v_heads).uniform_(0, 16)
        self.A_log = nn.Parameter(torch.log(A))
        if layout == "olmo_hybrid":  # its gated norm's eps is 1e-5 (fla's default)
            self.o_norm = RMSNormGated(self.head_v_dim, eps=1e-5)
        else:
            self.norm = RMSNormGated(self.head_v_dim, eps=self.layer_norm_epsilon)
            self.out_proj = nn.Linear(self.value_dim, hs, bias=False)
        self._kernel_hooks: List = []

    # -- observation -------------------------------------------------------

    def register_kernel_hook(self, hook: Callable[["GatedDeltaNet", KernelCall], Any],
                             per_token_states: bool = False) -> _HookHandle:
        """Calls ``hook(module, call)`` after every kernel call (see the class doc)."""
        entry = (hook, bool(per_token_states))
        self._kernel_hooks.append(entry)
        return _HookHandle(self._kernel_hooks, entry)

    # -- the layer ---------------------------------------------------------

    def fix_query_key_value_ordering(self, mixed_qkvz: Tensor, mixed_ba: Tensor):
        """transformers' split of the fused projections (grouped by key head)."""
        ratio = self.num_v_heads // self.num_k_heads
        qkvz = mixed_qkvz.view(*mixed_qkvz.shape[:-1], self.num_k_heads,
                               2 * self.head_k_dim + 2 * self.head_v_dim * ratio)
        ba = mixed_ba.view(*mixed_ba.shape[:-1], self.num_k_heads, 2 * ratio)
        q, k, v, z = torch.split(qkvz, [self.head_k_dim, self.head_k_dim,
                                        ratio * self.head_v_dim, ratio * self.head_v_dim], dim=3)
        b, a = torch.split(ba, [ratio, ratio], dim=3)
        v = v.reshape(v.shape[0], v.shape[1], self.num_v_heads, self.head_v_dim)
        z = z.reshape(z.shape[0], z.shape[1], self.num_v_heads, self.head_v_dim)
        b = b.reshape(b.shape[0], b.shape[1], self.num_v_heads)
        a = a.reshape(a.shape[0], a.shape[1], self.num_v_heads)
        return q, k, v, z, b, a

    def forward(self, hidden_states: Tensor, cache_params=None, cache_position=None,
                attention_mask: Optional[Tensor] = None, cp_context=None) -> Tensor:
        """``cp_context`` (``deltac.cp.context(group)``, batch layout): this rank's
        hidden_states are its span of each sequence; the short convolution continues
        from the ranks before (``deltac.cp.conv_state``) and the kernel runs over the
        ranks (docs/parallel.md). Not with a cache or kernel hooks."""
        if hidden_states.dim() != 3 or hidden_states.shape[-1] != self.hidden_size:
            raise ValueError(f"GatedDeltaNet: hidden_states has shape {tuple(hidden_states.shape)}: "
                             f"expected (batch, seq, {self.hidden_size})")
        _cp_allowed(type(self).__name__, cp_context, cache_params, self._kernel_hooks)
        if (attention_mask is not None and attention_mask.dim() == 2
                and attention_mask.shape[0] > 1 and attention_mask.shape[1] > 1):
            hidden_states = (hidden_states * attention_mask[:, :, None]).to(hidden_states.dtype)
        B, T, _ = hidden_states.shape

        olmo = self.layout == "olmo_hybrid"
        conv_state = recurrent_state = None
        if cache_params is not None:
            if olmo and hasattr(cache_params, "conv_states_q"):  # transformers' OLMo cache
                conv_state = tuple(_cache_get(getattr(cache_params, "conv_states_" + x), self.layer_idx)
                                   for x in "qkv")
                if any(c is None for c in conv_state):
                    conv_state = None
            else:
                conv_state = _cache_get(cache_params.conv_states, self.layer_idx)
            recurrent_state = _cache_get(cache_params.recurrent_states, self.layer_idx)
            if recurrent_state is None or conv_state is None:
                conv_state = recurrent_state = None
            elif recurrent_state.shape[0] != B:
                raise ValueError(
                    f"GatedDeltaNet: the cached state has batch {recurrent_state.shape[0]} but "
                    f"hidden_states has batch {B}")

        x = hidden_states
        fused = not olmo and cp_context is None and self._fused_ok(x)
        if fused:  # deltac's fused CUDA kernels (no gradient needed)
            query, key, value, beta, g, new_conv_state, zsrc = self._fused_in(x, conv_state)
        else:
            if olmo:
                projs = [self.q_proj(x), self.k_proj(x), self.v_proj(x)]
                if cp_context is not None:
                    conv_state = split_conv_state(projs, self.conv_kernel_size, cp_context)
                outs, new_conv_state = [], []
                for i, (p, conv) in enumerate(zip(projs, (self.q_conv1d, self.k_conv1d,
                                                          self.v_conv1d))):
                    y, st = causal_conv_silu(p.transpose(1, 2), conv.weight, conv.bias,
                                             None if conv_state is None else conv_state[i])
                    outs.append(y.transpose(1, 2))
                    new_conv_state.append(st)
                mixed = torch.cat(outs, dim=-1)
                new_conv_state = tuple(new_conv_state)
                z = self.g_proj(x).view(B, T, self.num_v_heads, self.head_v_dim)
                b, a = self.b_proj(x), self.a_proj(x)
            else:
                if self.layout == "qwen3_next":
                    q, k, v, z, b, a = self.fix_query_key_value_ordering(
                        self.in_proj_qkvz(x), self.in_proj_ba(x))
                    mixed = torch.cat((q.reshape(B, T, self.key_dim),
                                       k.reshape(B, T, self.key_dim),
                                       v.reshape(B, T, self.value_dim)), dim=-1)
                else:
                    mixed = self.in_proj_qkv(x)
                    z = self.in_proj_z(x).view(B, T, self.num_v_heads, self.head_v_dim)
                    b, a = self.in_proj_b(x), self.in_proj_a(x)
                if cp_context is not None:
                    conv_state = split_conv_state([mixed], self.conv_kernel_size, cp_context)[0]
                y, new_conv_state = causal_conv_silu(mixed.transpose(1, 2), self.conv1d.weight,
                                                     self.conv1d.bias, conv_state)
                mixed = y.transpose(1, 2)

            kdtype = mixed.dtype if mixed.dtype in _FUSED_DTYPES else torch.float32
            query, key, value = torch.split(mixed, [self.key_dim, self.key_dim, self.value_dim],
                                            dim=-1)
            query = query.reshape(B, T, self.num_k_heads, self.head_k_dim).to(kdtype).contiguous()
            key = key.reshape(B, T, self.num_k_heads, self.head_k_dim).to(kdtype).contiguous()
            value = value.reshape(B, T, self.num_v_heads, self.head_v_dim).to(kdtype).contiguous()

            beta = torch.sigmoid(b.float())
            if self.allow_neg_eigval:
                beta = beta * 2.0
            beta = beta.contiguous()
            g = (-self.A_log.float().exp()
                 * F.softplus(a.float() + self.dt_bias.float())).contiguous()

        if cp_context is not None:
            core, last_state = ops.chunk_gated_delta_rule(
                query, key, value, g=g, beta=beta, use_qk_l2norm_in_kernel=True,
                cp_context=cp_context, beta_two=self.allow_neg_eigval)
        else:
            core, last_state = self._kernel(
                ops.fused_recurrent_gated_delta_rule, ops.chunk_gated_delta_rule,
                query, key, value, g, beta, recurrent_state, cache_params is not None)
        if cache_params is not None:
            if olmo and hasattr(cache_params, "conv_states_q"):
                for x_, st in zip("qkv", new_conv_state):
                    getattr(cache_params, "conv_states_" + x_)[self.layer_idx] = st
            else:
                cache_params.conv_states[self.layer_idx] = new_conv_state
            cache_params.recurrent_states[self.layer_idx] = last_state

        norm, out = (self.o_norm, self.o_proj) if olmo else (self.norm, self.out_proj)
        if fused:
            zt, z_offset, z_heads, z_group = zsrc
            core = ops.gated_rmsnorm(core, zt, norm.weight, norm.variance_epsilon,
                                     z_offset=z_offset, z_heads=z_heads, z_group=z_group)
        else:
            core = norm(core.to(hidden_states.dtype).reshape(-1, self.head_v_dim),
                        z.reshape(-1, self.head_v_dim))
        return out(core.reshape(B, T, self.value_dim))

    def _fused_ok(self, x: Tensor) -> bool:
        """Whether forward runs the conv, gates and gated norm as deltac's fused CUDA
        kernels (ops.conv_gates, ops.gated_rmsnorm): float32 / bfloat16 CUDA input,
        layouts qwen3_next and qwen3_5, parameters of one dtype, no autocast, and no
        gradient needed (those ops have no backward; else the PyTorch path)."""
        if not (x.is_cuda and x.dtype in _FUSED_DTYPES and x.shape[0] > 0 and x.shape[1] > 0
                and self.conv_kernel_size <= 8 and _lib.cuda_available()
                and not torch.is_autocast_enabled()):
            return False
        ps = [p for p in (self.conv1d.weight, self.conv1d.bias, self.A_log, self.dt_bias,
                          self.norm.weight) if p is not None]
        if ps[0].dtype not in _FUSED_DTYPES or any(p.dtype != ps[0].dtype for p in ps):
            return False
        return not (torch.is_grad_enabled()
                    and (x.requires_grad or any(p.requires_grad for p in self.parameters())))

    def _fused_in(self, x: Tensor, conv_state: Optional[Tensor]):
        """The projections, then conv + silu and beta, g in one ops.conv_gates launch.
        Returns (query, key, value, beta, g, new_conv_state, (z source, z_offset,
        z_heads, z_group) for ops.gated_rmsnorm)."""
        H, HV, Dk, Dv = self.num_k_heads, self.num_v_heads, self.head_k_dim, self.head_v_dim
        r = HV // H
        if self.layout == "qwen3_next":  # grouped by key head: q, k, v, z | b, a
            y, ba = self.in_proj_qkvz(x), self.in_proj_ba(x)
            b = a = ba
            group = 2 * Dk + 2 * r * Dv
            kw = dict(y_group=group, ba_heads=r, ba_group=2 * r, a_offset=r)
            zsrc = (y, 2 * Dk + r * Dv, r, group)
        else:  # qwen3_5: q || k || v, z, b, a apart
            y, b, a = self.in_proj_qkv(x), self.in_proj_b(x), self.in_proj_a(x)
            kw = {}
            zsrc = (self.in_proj_z(x).contiguous(), 0, HV, 0)
        if conv_state is not None:
            conv_state = conv_state.to(y.dtype).contiguous()
        q, k, v, beta, g, st = ops.conv_gates(
            y.contiguous(), b.contiguous(), a.contiguous(), self.conv1d.weight, self.conv1d.bias,
            conv_state, self.A_log, self.dt_bias, H, Dk, Dv,
            beta_scale=2.0 if self.allow_neg_eigval else 1.0, **kw)
        return q, k, v, beta, g, st, zsrc

    def _kernel(self, step, chunk, query, key, value, g, beta, state, want_state):
        """The kernel call: a one-token step continuing a float32 cached state updates
        it in place (the cache keeps its buffer, as transformers' does); anything else
        runs ``chunk`` (or ``step``) out of place. Reports to the hooks."""
        hooks = self._kernel_hooks
        state_in = state.clone() if (hooks and state is not None) else state
        T = query.shape[1]
        if (state is not None and T == 1 and state.dtype == torch.float32
                and state.is_contiguous()):
            core, last = step(query, key, value, g=g, beta=beta, initial_state=state,
                              output_final_state=True, use_qk_l2norm_in_kernel=True,
                              inplace_final_state=True)
        else:
            # beta in (0, 2) declared to the chunked kernel (its two-term products on
            # CUDA); the recurrent step keeps f32 states and needs no flag
            kernel, kw = ((step, {}) if (state is not None and T == 1)
                          else (chunk, {"beta_two": True} if self.allow_neg_eigval else {}))
            core, last = kernel(query, key, value, g=g, beta=beta, initial_state=state,
                                output_final_state=want_state or bool(hooks),
                                use_qk_l2norm_in_kernel=True, **kw)
        if hooks:
            self._observe(query, key, value, g, beta, state_in, last,
                          "decode" if state is not None else "prompt")
        return core, last

    def _observe(self, query, key, value, g, beta, state_in, state_out, path):
        ratio = value.shape[2] // query.shape[2]
        rq = query.repeat_interleave(ratio, dim=2) if ratio > 1 else query
        rk = key.repeat_interleave(ratio, dim=2) if ratio > 1 else key
        states = None
        if any(per_token for _, per_token in self._kernel_hooks):
            states = self.per_token_states(query, key, value, g, beta, state_in)
        # copies: the cache may update its buffer in place on the next step
        call = KernelCall(queries=rq, keys=rk, values=value, decays=g, betas=beta,
                          state_input=state_in, state_output=state_out.clone(), path=path)
        for hook, per_token in list(self._kernel_hooks):
            hook(self, dataclasses.replace(call, states=states if per_token else None))

    @staticmethod
    def per_token_states(query, key, value, g, beta, state_in) -> Tensor:
        """The state after every token, [B, T, HV, K, V], by one recurrent step a token
        (g [B, T, HV] runs the gated kernel, [B, T, HV, K] the kda one)."""
        T = query.shape[1]
        step = ops.fused_recurrent_kda if g.dim() == 4 else ops.fused_recurrent_gated_delta_rule
        out = []
        h = state_in
        for t in range(T):
            sl = slice(t, t + 1)
            _, h = step(query[:, sl].contiguous(), key[:, sl].contiguous(),
                        value[:, sl].contiguous(), g=g[:, sl].contiguous(),
                        beta=beta[:, sl].contiguous(), initial_state=h,
                        output_final_state=True, use_qk_l2norm_in_kernel=True)
            out.append(h)
        return torch.stack(out, dim=1)


def _cp_allowed(layer: str, cp_context, cache_params, hooks) -> None:
    if cp_context is None:
        return
    if cache_params is not None:
        raise ValueError(f"{layer}: cp_context splits a prompt over ranks; it takes no "
                         "cache_params (decode runs on one rank)")
    if hooks:
        raise ValueError(f"{layer}: kernel hooks observe a whole sequence; remove them to "
                         "run with cp_context")


def split_conv_state(projs: List[Tensor], width: int, cp_context) -> List[Tensor]:
    """deltac.cp.conv_state of several convolution inputs [B, T, C_i] by one
    exchange: their states [B, C_i, width], in order."""
    from .. import cp
    x = projs[0] if len(projs) == 1 else torch.cat(projs, -1)
    state = cp.conv_state(x, width, cp_context)
    return list(torch.split(state, [p.shape[-1] for p in projs], dim=1))


def causal_conv_silu(x: Tensor, weight: Tensor, bias: Optional[Tensor], state: Optional[Tensor]):
    """Depthwise causal conv1d + silu over x [B, C, T] with weight [C, 1, W].

    ``state`` [B, C, W] holds the last W inputs before x (None: zeros). Returns the
    activations [B, C, T] and the new state (the last W inputs, zero-padded on the
    left when fewer were seen), as transformers' and fla's short convolutions keep it.
    """
    B, C, T = x.shape
    W = weight.shape[-1]
    prev = x.new_zeros(B, C, W) if state is None else state.to(x.dtype)
    ext = torch.cat((prev, x), dim=-1)
    out = F.conv1d(ext, weight, bias, groups=C)
    out = out[:, :, out.shape[-1] - T:]  # not [-T:]: T may be 0
    return F.silu(out), ext[:, :, -W:].contiguous()

"""deltac.nn layers on the CPU against plain float64 PyTorch written here (no deltac code)."""

import math
from types import SimpleNamespace

import pytest
import torch
import torch.nn.functional as F

import deltac
from deltac.nn import (BitLinear, DeltaNetAttention, DeltaNetConfig, GatedDeltaNet,
                       GatedDeltaNetCache, GatedDeltaNetConfig)

from reference import delta_rule, rel_err

F32_TOL = 1e-5
BF16_TOL = 5e-3


# ---------------------------------------------------------------------------
# float64 references
# ---------------------------------------------------------------------------


def q_weight_f32(w):
    w = w.float()
    gamma = w.abs().mean().clamp(min=1e-5)
    return (w / gamma).round().clamp(-1, 1) * gamma


def q_act_f32(x):
    x = x.float()
    s = 127.0 / x.abs().amax(-1, keepdim=True).clamp(min=1e-5)
    return (x * s).round().clamp(-128, 127) / s


def ref_linear(lin, x, bitnet):
    """x @ W^T in float64; BitNet quantisation (its rounding) done in float32 first."""
    if bitnet:
        return q_act_f32(x).double() @ q_weight_f32(lin.weight).double().T
    return x.double() @ lin.weight.detach().double().T


def ref_deltanet(m, x, h0=None, out_in=None):
    """y, ht in float64. out_in (bitnet only): the input the module's out projection
    got, quantised instead of the reference's own: an input within 1e-7 of the
    reference's can round to the other side of an 8-bit step (a 1/127 jump), so the
    test compares that input separately (rel_err(out_in, o) then holds at f32)."""
    B, T, _ = x.shape
    H, D = m.num_heads, m.head_dim
    bit = m.use_bitnet
    q = ref_linear(m.q_proj, x, bit).view(B, T, H, D)
    k = ref_linear(m.k_proj, x, bit).view(B, T, H, D)
    v = ref_linear(m.v_proj, x, bit).view(B, T, H, D)
    beta = torch.sigmoid(ref_linear(m.beta_proj, x, False))
    o, ht = delta_rule(q, k, v, beta, h0=h0, l2=True)
    o = F.layer_norm(o, (D,), m.norm.weight.detach().double(), m.norm.bias.detach().double(),
                     m.norm.eps)
    gate = ref_linear(m.g_proj, x, bit)
    o = o.reshape(B, T, H * D) * F.silu(gate)
    if bit:  # the out projection quantises its (float32) input
        if out_in is not None:
            assert rel_err(out_in, o) <= F32_TOL
            return ref_linear(m.out_proj, out_in, True), ht
        return ref_linear(m.out_proj, o.float(), True), ht
    return ref_linear(m.out_proj, o, False), ht


def ref_gdn(m, x, h0=None):
    """transformers' Qwen3NextGatedDeltaNet / Qwen3_5GatedDeltaNet / OlmoHybridGatedDeltaNet
    (torch paths) in float64, written out, from a zero conv history."""
    B, T, _ = x.shape
    x = x.double()
    P = {n: p.detach().double() for n, p in m.named_parameters()}
    nk, nv, dk, dv = m.num_k_heads, m.num_v_heads, m.head_k_dim, m.head_v_dim
    r = nv // nk
    Kc = m.conv_kernel_size

    def conv_silu(y, w):  # y [B, C, T], zero history
        ext = torch.cat([torch.zeros(B, y.shape[1], Kc, dtype=torch.float64), y], -1)
        return F.silu(F.conv1d(ext, w, groups=y.shape[1])[:, :, -T:])

    if m.layout == "qwen3_next":
        qkvz = (x @ P["in_proj_qkvz.weight"].T).view(B, T, nk, 2 * dk + 2 * r * dv)
        ba = (x @ P["in_proj_ba.weight"].T).view(B, T, nk, 2 * r)
        q, k, v, z = torch.split(qkvz, [dk, dk, r * dv, r * dv], dim=3)
        b, a = torch.split(ba, [r, r], dim=3)
        mixed = torch.cat([q.reshape(B, T, -1), k.reshape(B, T, -1), v.reshape(B, T, -1)], -1)
        mixed = conv_silu(mixed.transpose(1, 2), P["conv1d.weight"]).transpose(1, 2)
    elif m.layout == "qwen3_5":
        mixed = conv_silu((x @ P["in_proj_qkv.weight"].T).transpose(1, 2),
                          P["conv1d.weight"]).transpose(1, 2)
        z = x @ P["in_proj_z.weight"].T
        b, a = x @ P["in_proj_b.weight"].T, x @ P["in_proj_a.weight"].T
    else:  # olmo_hybrid
        mixed = torch.cat([conv_silu((x @ P[n + "_proj.weight"].T).transpose(1, 2),
                                     P[n + "_conv1d.weight"]).transpose(1, 2) for n in "qkv"], -1)
        z = x @ P["g_proj.weight"].T
        b, a = x @ P["b_proj.weight"].T, x @ P["a_proj.weight"].T
    z = z.reshape(B, T, nv, dv)
    b = b.reshape(B, T, nv)
    a = a.reshape(B, T, nv)
    q, k, v = torch.split(mixed, [m.key_dim, m.key_dim, m.value_dim], dim=-1)
    q = q.reshape(B, T, nk, dk).repeat_interleave(r, dim=2)
    k = k.reshape(B, T, nk, dk).repeat_interleave(r, dim=2)
    v = v.reshape(B, T, nv, dv)
    beta = torch.sigmoid(b) * (2.0 if m.allow_neg_eigval else 1.0)
    g = -P["A_log"].exp() * F.softplus(a + P["dt_bias"])
    o, ht = delta_rule(q, k, v, beta, g, h0=h0, l2=True)
    olmo = m.layout == "olmo_hybrid"
    eps = 1e-5 if olmo else m.layer_norm_epsilon
    o = o * torch.rsqrt(o.pow(2).mean(-1, keepdim=True) + eps)
    o = P["o_norm.weight" if olmo else "norm.weight"] * o * F.silu(z)
    out = o.reshape(B, T, -1) @ P["o_proj.weight" if olmo else "out_proj.weight"].T
    return out, ht, dict(q=q, k=k, v=v, g=g, beta=beta)


# ---------------------------------------------------------------------------
# DeltaNetAttention
# ---------------------------------------------------------------------------


def test_deltanet_interface():
    cfg = SimpleNamespace(hidden_size=128, num_heads=4, dropout=0.1, use_bitnet=False)
    m = DeltaNetAttention(cfg)
    assert (m.hidden_size, m.num_heads, m.head_dim, m.total_dim, m.mode) == (128, 4, 32, 128, "encoder")
    for name in ("q_proj", "k_proj", "v_proj", "g_proj", "out_proj"):
        assert type(getattr(m, name)) is torch.nn.Linear
    assert type(m.beta_proj) is torch.nn.Linear and m.beta_proj.out_features == 4
    assert isinstance(m.norm, torch.nn.LayerNorm) and isinstance(m.dropout, torch.nn.Dropout)
    assert m.dropout.p == 0.1
    mb = DeltaNetAttention(dict(hidden_size=128, num_heads=4, dropout=0.0, use_bitnet=True,
                                mode="decoder"))
    for name in ("q_proj", "k_proj", "v_proj", "g_proj", "out_proj"):
        assert isinstance(getattr(mb, name), BitLinear)
    assert type(mb.beta_proj) is torch.nn.Linear and mb.mode == "decoder"
    with pytest.raises(ValueError, match="divisible"):
        DeltaNetAttention(SimpleNamespace(hidden_size=100, num_heads=3, dropout=0.0, use_bitnet=False))
    with pytest.raises(ValueError, match="mode"):
        DeltaNetAttention(DeltaNetConfig(hidden_size=64, num_heads=2, mode="both"))
    with pytest.raises(ValueError, match="head_dim"):
        DeltaNetAttention(DeltaNetConfig(hidden_size=40, num_heads=5))


@pytest.mark.parametrize("bitnet", [False, True], ids=["linear", "bitnet"])
def test_deltanet_matches_reference(bitnet, seed):
    m = DeltaNetAttention(DeltaNetConfig(hidden_size=96, num_heads=3, use_bitnet=bitnet))
    with torch.no_grad():
        m.norm.weight.uniform_(0.5, 1.5)
        m.norm.bias.uniform_(-0.1, 0.1)
    x = torch.randn(2, 23, 96)
    seen = []
    hook = m.out_proj.register_forward_pre_hook(lambda mod, args: seen.append(args[0].clone()))
    with torch.no_grad():
        y = m(x, logical_layer_idx=3)
    hook.remove()
    want, _ = ref_deltanet(m, x, out_in=seen[0] if bitnet else None)
    assert y.shape == (2, 23, 96) and y.dtype == torch.float32
    assert rel_err(y, want) <= F32_TOL
    assert m.state is None  # encoder: no cache


def test_deltanet_bf16(seed):
    m = DeltaNetAttention(DeltaNetConfig(hidden_size=128, num_heads=2)).to(torch.bfloat16)
    x = torch.randn(2, 19, 128).to(torch.bfloat16)
    with torch.no_grad():
        y = m(x)
    want, _ = ref_deltanet(m, x)
    assert y.dtype == torch.bfloat16
    assert rel_err(y, want) <= 2e-2  # bf16 projections and norms around the kernel


@pytest.mark.parametrize("bitnet", [False, True], ids=["linear", "bitnet"])
def test_deltanet_decoder_steps_equal_whole_sequence(bitnet, seed):
    cfg = DeltaNetConfig(hidden_size=64, num_heads=2, use_bitnet=bitnet, mode="decoder")
    m = DeltaNetAttention(cfg)
    enc = DeltaNetAttention(DeltaNetConfig(hidden_size=64, num_heads=2, use_bitnet=bitnet))
    enc.load_state_dict(m.state_dict())
    x = torch.randn(3, 20, 64)
    with torch.no_grad():
        whole = enc(x)
        parts = [m(x[:, :7])]                         # a prompt
        parts += [m(x[:, t:t + 1]) for t in range(7, 20)]  # then one token at a time
        steps = torch.cat(parts, dim=1)
        _, ht = ref_deltanet(m, x)
        state = m.state
        m.reset_state()
        again = m(x)
    # BitLinear quantises each token's activations to 8 bits: a value that the
    # step-by-step and the whole-sequence paths compute 1e-7 apart can round
    # to neighbouring steps (seen: 5.6e-4), so the outputs get a quantisation
    # step of slack there; the kernel state before out_proj stays exact.
    assert rel_err(steps, whole) <= (1e-2 if bitnet else F32_TOL)
    assert rel_err(state, ht) <= F32_TOL
    assert rel_err(again, whole) <= F32_TOL
    with torch.no_grad(), pytest.raises(ValueError, match="reset_state"):
        m(x[:1, :1])


def test_deltanet_backward_reaches_every_parameter(seed):
    """(Gradient values: test_autograd.py, test_train_mqar.py.)"""
    m = DeltaNetAttention(DeltaNetConfig(hidden_size=64, num_heads=2))
    m(torch.randn(1, 4, 64)).square().sum().backward()
    for name, w in m.named_parameters():
        assert w.grad is not None and torch.isfinite(w.grad).all(), name
        assert w.grad.abs().sum() > 0, name


def test_deltanet_compile(seed):
    m = DeltaNetAttention(DeltaNetConfig(hidden_size=64, num_heads=2))
    x = torch.randn(2, 9, 64)
    with torch.no_grad():
        want = m(x)
        got = torch.compile(m, backend="aot_eager", fullgraph=True)(x)
    assert rel_err(got, want) <= F32_TOL


# ---------------------------------------------------------------------------
# BitLinear
# ---------------------------------------------------------------------------


def test_bitlinear(seed):
    lin = BitLinear(48, 32)
    assert lin.bias is None and set(lin.state_dict()) == {"weight"}
    x = torch.randn(5, 48, requires_grad=True)
    y = lin(x)
    wq = q_weight_f32(lin.weight.detach())
    gamma = lin.weight.detach().abs().mean()
    levels = torch.unique((wq / gamma).round())
    assert set(levels.tolist()) <= {-1.0, 0.0, 1.0}
    xq = q_act_f32(x.detach())
    scale = 127.0 / x.detach().abs().amax(-1, keepdim=True)
    ints = xq * scale
    assert torch.allclose(ints, ints.round(), atol=1e-3) and ints.abs().max() <= 128
    assert rel_err(y.detach(), xq.double() @ wq.double().T) <= F32_TOL
    # straight-through estimator: gradients as for a plain linear map of the quantised values
    y.sum().backward()
    assert torch.allclose(x.grad, wq.sum(0).expand(5, 48), atol=1e-5)
    assert torch.allclose(lin.weight.grad, xq.sum(0)[None].expand(32, 48), atol=1e-5)


# ---------------------------------------------------------------------------
# GatedDeltaNet
# ---------------------------------------------------------------------------


def small_cfg(**kw):
    base = dict(hidden_size=64, linear_num_key_heads=2, linear_num_value_heads=4,
                linear_key_head_dim=32, linear_value_head_dim=16, linear_conv_kernel_dim=4)
    base.update(kw)
    return GatedDeltaNetConfig(**base)


def randomize(m):
    with torch.no_grad():
        (m.o_norm if m.layout == "olmo_hybrid" else m.norm).weight.uniform_(0.5, 1.5)
        m.dt_bias.normal_()
    return m


LAYOUTS = ["qwen3_next", "qwen3_5", "olmo_hybrid"]


def test_gdn_parameter_names_follow_transformers():
    m = GatedDeltaNet(GatedDeltaNetConfig(), layer_idx=0)
    shapes = {k: tuple(v.shape) for k, v in m.state_dict().items()}
    assert shapes == {
        "in_proj_qkvz.weight": (2 * 2048 + 2 * 4096, 2048),
        "in_proj_ba.weight": (64, 2048),
        "conv1d.weight": (8192, 1, 4),
        "dt_bias": (32,),
        "A_log": (32,),
        "norm.weight": (128,),
        "out_proj.weight": (2048, 4096),
    }


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("neg", [False, True], ids=["beta01", "allow_neg_eigval"])
def test_gdn_matches_reference(neg, layout, seed):
    m = randomize(GatedDeltaNet(small_cfg(linear_allow_neg_eigval=neg), layout=layout))
    x = torch.randn(2, 29, 64)
    with torch.no_grad():
        y = m(x)
    want, _, _ = ref_gdn(m, x)
    assert y.shape == x.shape
    assert rel_err(y, want) <= F32_TOL


@pytest.mark.parametrize("neg", [False, True], ids=["beta01", "allow_neg_eigval"])
def test_gdn_declares_beta_range_to_the_chunked_kernel(neg, seed, monkeypatch):
    # with linear_allow_neg_eigval the chunk calls say beta may exceed 1 (beta_two:
    # the CUDA kernel's two-term products), the one-token steps (f32 states) do not
    from deltac import ops
    calls = []
    for name in ("chunk_gated_delta_rule", "fused_recurrent_gated_delta_rule"):
        real = getattr(ops, name)

        def spy(*a, _real=real, _name=name, **kw):
            calls.append((_name, kw.get("beta_two", False)))
            return _real(*a, **kw)
        monkeypatch.setattr(ops, name, spy)
    m = randomize(GatedDeltaNet(small_cfg(linear_allow_neg_eigval=neg)))
    x = torch.randn(1, 6, 64)
    cache = GatedDeltaNetCache()
    with torch.no_grad():
        m(x[:, :5], cache_params=cache)
        m(x[:, 5:], cache_params=cache)
    assert calls == [("chunk_gated_delta_rule", neg), ("fused_recurrent_gated_delta_rule", False)]


def test_gdn_no_gva_and_qwen_sizes_bf16(seed):
    cfg = small_cfg(linear_num_key_heads=2, linear_num_value_heads=2,
                    linear_key_head_dim=128, linear_value_head_dim=128)
    m = randomize(GatedDeltaNet(cfg))
    x = torch.randn(1, 11, 64)
    with torch.no_grad():
        y = m(x)
    want, _, _ = ref_gdn(m, x)
    assert rel_err(y, want) <= F32_TOL
    with torch.no_grad():
        yb = m.to(torch.bfloat16)(x.bfloat16())
    want_b, _, _ = ref_gdn(m.float(), x.bfloat16())  # the bf16-rounded weights and input
    assert yb.dtype == torch.bfloat16 and rel_err(yb, want_b) <= 3e-2


@pytest.mark.parametrize("layout", LAYOUTS)
def test_gdn_decode_with_cache_equals_whole_sequence(layout, seed):
    m = randomize(GatedDeltaNet(small_cfg(), layer_idx=5, layout=layout))
    x = torch.randn(2, 19, 64)
    cache = GatedDeltaNetCache()
    with torch.no_grad():
        whole = m(x)
        parts = [m(x[:, :2], cache_params=cache)]             # a prompt shorter than the conv
        parts += [m(x[:, t:t + 1], cache_params=cache) for t in range(2, 12)]
        parts += [m(x[:, 12:], cache_params=cache)]           # a chunk continuing the cache
        steps = torch.cat(parts, dim=1)
    _, ht, _ = ref_gdn(m, x)
    assert rel_err(steps, whole) <= F32_TOL
    assert rel_err(cache.recurrent_states[5], ht) <= F32_TOL
    conv = cache.conv_states[5]
    if layout == "olmo_hybrid":
        assert [c.shape[1] for c in conv] == [m.key_dim, m.key_dim, m.value_dim]
    else:
        assert conv.shape == (2, m.conv_dim, 4)


def test_gdn_layout_names_and_olmo_cache(seed):
    m5 = GatedDeltaNet(small_cfg(), layout="qwen3_5")
    assert {k: tuple(v.shape) for k, v in m5.state_dict().items()} == {
        "conv1d.weight": (192, 1, 4), "in_proj_qkv.weight": (192, 64),
        "in_proj_z.weight": (64, 64), "in_proj_b.weight": (4, 64), "in_proj_a.weight": (4, 64),
        "dt_bias": (4,), "A_log": (4,), "norm.weight": (16,), "out_proj.weight": (64, 64)}
    mo = randomize(GatedDeltaNet(small_cfg(), layer_idx=0, layout="olmo_hybrid"))
    assert {k: tuple(v.shape) for k, v in mo.state_dict().items()} == {
        "q_proj.weight": (64, 64), "k_proj.weight": (64, 64), "v_proj.weight": (64, 64),
        "a_proj.weight": (4, 64), "b_proj.weight": (4, 64), "g_proj.weight": (64, 64),
        "o_proj.weight": (64, 64), "q_conv1d.weight": (64, 1, 4), "k_conv1d.weight": (64, 1, 4),
        "v_conv1d.weight": (64, 1, 4), "dt_bias": (4,), "A_log": (4,), "o_norm.weight": (16,)}
    assert GatedDeltaNet(SimpleNamespace(model_type="qwen3_5_text", **vars(small_cfg()))).layout == "qwen3_5"
    assert GatedDeltaNet(SimpleNamespace(model_type="olmo_hybrid", **vars(small_cfg()))).layout == "olmo_hybrid"
    # transformers' OLMo-Hybrid cache: conv_states_q/k/v lists
    cache = SimpleNamespace(conv_states_q=[None], conv_states_k=[None], conv_states_v=[None],
                            recurrent_states=[None])
    x = torch.randn(1, 8, 64)
    with torch.no_grad():
        whole = mo(x)
        steps = torch.cat([mo(x[:, :5], cache_params=cache)] +
                          [mo(x[:, t:t + 1], cache_params=cache) for t in range(5, 8)], dim=1)
    assert rel_err(steps, whole) <= F32_TOL and cache.conv_states_v[0].shape == (1, 64, 4)
    with pytest.raises(ValueError, match="layout"):
        GatedDeltaNet(small_cfg(), layout="mamba")


def test_gdn_cache_as_transformers_lists(seed):
    # transformers' cache keeps per-layer lists: conv_states[i], recurrent_states[i]
    m = randomize(GatedDeltaNet(small_cfg(), layer_idx=1))
    cache = SimpleNamespace(conv_states=[None, None], recurrent_states=[None, None])
    x = torch.randn(1, 9, 64)
    with torch.no_grad():
        whole = m(x)
        steps = torch.cat([m(x[:, :5], cache_params=cache)] +
                          [m(x[:, t:t + 1], cache_params=cache) for t in range(5, 9)], dim=1)
    assert rel_err(steps, whole) <= F32_TOL and cache.recurrent_states[0] is None


def test_gdn_attention_mask(seed):
    m = randomize(GatedDeltaNet(small_cfg()))
    x = torch.randn(2, 10, 64)
    mask = torch.ones(2, 10)
    mask[0, :3] = 0  # left padding
    with torch.no_grad():
        y = m(x, attention_mask=mask)
    want, _, _ = ref_gdn(m, x * mask[:, :, None])
    assert rel_err(y, want) <= F32_TOL


def test_gdn_kernel_hook(seed):
    m = randomize(GatedDeltaNet(small_cfg()))
    x = torch.randn(2, 7, 64)
    seen, seen_states = [], []
    h1 = m.register_kernel_hook(lambda mod, call: seen.append(call))
    h2 = m.register_kernel_hook(lambda mod, call: seen_states.append(call.states), per_token_states=True)
    cache = GatedDeltaNetCache()
    with torch.no_grad():
        m(x[:, :6], cache_params=cache)
        m(x[:, 6:], cache_params=cache)
    _, ht, vals = ref_gdn(m, x)
    prompt, step = seen
    assert prompt.path == "prompt" and step.path == "decode"
    assert prompt.state_input is None and prompt.states is None
    assert prompt.queries.shape == (2, 6, 4, 32)  # repeated to the value heads
    for name, got in (("q", prompt.queries), ("k", prompt.keys), ("v", prompt.values),
                      ("g", prompt.decays), ("beta", prompt.betas)):
        assert rel_err(got, vals[name][:, :6]) <= F32_TOL, name
    assert prompt.decays.dtype == torch.float32 and bool((prompt.decays <= 0).all())
    assert rel_err(step.state_output, ht) <= F32_TOL
    assert torch.equal(step.state_input, prompt.state_output)
    # the state after every token: the reference run on each prefix
    states = torch.cat(seen_states, dim=1)
    assert states.shape == (2, 7, 4, 32, 16)
    for t in (0, 3, 6):
        _, ht_t, _ = ref_gdn(m, x[:, :t + 1])
        assert rel_err(states[:, t], ht_t) <= F32_TOL
    h1.remove()
    h2.remove()
    with torch.no_grad():
        m(x)
    assert len(seen) == 2


def test_gdn_config_errors():
    with pytest.raises(ValueError, match="multiple"):
        GatedDeltaNet(small_cfg(linear_num_value_heads=3))
    with pytest.raises(ValueError, match="linear_value_head_dim"):
        GatedDeltaNet(small_cfg(linear_value_head_dim=24))


# ---------------------------------------------------------------------------
# KimiDeltaAttention (KDA)
# ---------------------------------------------------------------------------

from deltac.nn import KimiDeltaAttention, KimiDeltaAttentionConfig  # noqa: E402


def kda_cfg(H=2, D=32, hidden=64, W=4):
    return KimiDeltaAttentionConfig(hidden_size=hidden, linear_attn_config=dict(
        num_heads=H, head_dim=D, short_conv_kernel_size=W))


def ref_kda(m, x):
    """Kimi-Linear's KimiDeltaAttention in float64, written out."""
    B, T, _ = x.shape
    H, D = m.num_heads, m.head_dim
    x = x.double()
    P = {n: p.detach().double() for n, p in m.named_parameters()}

    def conv_silu(name, y):
        y = y.transpose(1, 2)
        W = P[name].shape[-1]
        y = F.conv1d(F.pad(y, (W - 1, 0)), P[name], groups=y.shape[1])
        return F.silu(y).transpose(1, 2)

    q = conv_silu("q_conv1d.weight", x @ P["q_proj.weight"].T).view(B, T, H, D)
    k = conv_silu("k_conv1d.weight", x @ P["k_proj.weight"].T).view(B, T, H, D)
    v = conv_silu("v_conv1d.weight", x @ P["v_proj.weight"].T).view(B, T, H, D)
    a = (x @ P["f_a_proj.weight"].T @ P["f_b_proj.weight"].T).view(B, T, H, D)
    g = -P["A_log"].exp() * F.softplus(a + P["dt_bias"].view(H, D))
    beta = torch.sigmoid(x @ P["b_proj.weight"].T)
    o, ht = delta_rule(q, k, v, beta, g, l2=True)
    gate = (x @ P["g_a_proj.weight"].T @ P["g_b_proj.weight"].T).view(B, T, H, D)
    o = o * torch.rsqrt(o.pow(2).mean(-1, keepdim=True) + m.o_norm.eps) * P["o_norm.weight"]
    o = o * torch.sigmoid(gate)
    return o.reshape(B, T, H * D) @ P["o_proj.weight"].T, ht, g


def randomize_kda(m):
    with torch.no_grad():
        m.o_norm.weight.uniform_(0.5, 1.5)
        m.dt_bias.normal_()
    return m


def test_kda_parameter_names_follow_kimi_linear():
    m = KimiDeltaAttention(KimiDeltaAttentionConfig(), layer_idx=3)
    shapes = {k: tuple(v.shape) for k, v in m.state_dict().items()}
    assert shapes == {
        "q_proj.weight": (4096, 2304), "k_proj.weight": (4096, 2304), "v_proj.weight": (4096, 2304),
        "q_conv1d.weight": (4096, 1, 4), "k_conv1d.weight": (4096, 1, 4),
        "v_conv1d.weight": (4096, 1, 4),
        "A_log": (1, 1, 32, 1),
        "f_a_proj.weight": (128, 2304), "f_b_proj.weight": (4096, 128), "dt_bias": (4096,),
        "b_proj.weight": (32, 2304),
        "g_a_proj.weight": (128, 2304), "g_b_proj.weight": (4096, 128),
        "o_norm.weight": (128,), "o_proj.weight": (2304, 4096),
    }
    assert isinstance(m, GatedDeltaNet)


def test_kda_matches_reference(seed):
    m = randomize_kda(KimiDeltaAttention(kda_cfg()))
    x = torch.randn(2, 27, 64)
    with torch.no_grad():
        y = m(x)
    want, _, _ = ref_kda(m, x)
    assert rel_err(y, want) <= F32_TOL


def test_kda_decode_with_cache_equals_whole_sequence(seed):
    m = randomize_kda(KimiDeltaAttention(kda_cfg(), layer_idx=0))
    x = torch.randn(2, 15, 64)
    cache = GatedDeltaNetCache()
    seen, per_token = [], []
    m.register_kernel_hook(lambda mod, call: seen.append(call))
    m.register_kernel_hook(lambda mod, call: per_token.append(call.states), per_token_states=True)
    with torch.no_grad():
        parts = [m(x[:, :3], cache_params=cache)]
        parts += [m(x[:, t:t + 1], cache_params=cache) for t in range(3, 15)]
        steps = torch.cat(parts, dim=1)
    want, ht, g = ref_kda(m, x)
    assert rel_err(steps, want) <= F32_TOL
    assert rel_err(cache.recurrent_states[0], ht) <= F32_TOL
    assert len(cache.conv_states[0]) == 3 and cache.conv_states[0][0].shape == (2, 64, 4)
    assert seen[0].decays.shape == (2, 3, 2, 32) and rel_err(seen[0].decays, g[:, :3]) <= F32_TOL
    assert seen[1].path == "decode"
    states = torch.cat(per_token, dim=1)
    assert states.shape == (2, 15, 2, 32, 32) and rel_err(states[:, -1], ht) <= F32_TOL


def test_gdn_export_and_compile(seed):
    # torch.export sees torch.ops.deltac.fwd as one node; torch.compile traces without a break
    m = randomize(GatedDeltaNet(small_cfg())).eval().requires_grad_(False)
    x = torch.randn(2, 9, 64)
    ep = torch.export.export(m, (x,))
    assert any("deltac.fwd" in str(n.target) for n in ep.graph.nodes)
    with torch.no_grad():
        want = m(x)
        assert rel_err(ep.module()(x), want) <= F32_TOL
        assert rel_err(torch.compile(m, backend="aot_eager", fullgraph=True)(x), want) <= F32_TOL


@pytest.mark.parametrize("layer", ["gdn", "kda"])
def test_backward_reaches_every_parameter(layer, seed):
    """GatedDeltaNet and KimiDeltaAttention train through deltac's backward (CPU)."""
    m = GatedDeltaNet(small_cfg()) if layer == "gdn" else KimiDeltaAttention(kda_cfg())
    out = m(torch.randn(2, 9, 64))
    out = out[0] if isinstance(out, tuple) else out
    out.square().sum().backward()
    for name, w in m.named_parameters():
        assert w.grad is not None and torch.isfinite(w.grad).all(), name
        assert w.grad.abs().sum() > 0, name

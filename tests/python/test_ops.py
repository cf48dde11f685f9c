"""deltac.ops on the CPU against the float64 reference; bad inputs; custom-op machinery."""

import math

import pytest
import torch

import deltac
from deltac import ops

from reference import delta_rule, rel_err

F32_TOL = 1e-5
BF16_TOL = 5e-3

# name -> (function, variant, takes state_v_first)
FUNCS = {
    "chunk_delta_rule": (ops.chunk_delta_rule, "delta", False),
    "fused_recurrent_delta_rule": (ops.fused_recurrent_delta_rule, "delta", False),
    "chunk_gated_delta_rule": (ops.chunk_gated_delta_rule, "gated", True),
    "fused_recurrent_gated_delta_rule": (ops.fused_recurrent_gated_delta_rule, "gated", True),
    "chunk_kda": (ops.chunk_kda, "kda", True),
    "fused_recurrent_kda": (ops.fused_recurrent_kda, "kda", True),
}


def make(variant, B, T, H, HV, K, V, dtype=torch.float32, N=None, h0=False):
    """Random inputs in fla's layout; g is a log decay <= 0, k has unit rows."""
    q = torch.randn(B, T, H, K).to(dtype)
    # unit keys: with beta in [0, 1] the state stays bounded without the kernel's L2 norm
    k = torch.nn.functional.normalize(torch.randn(B, T, H, K), dim=-1).to(dtype)
    v = torch.randn(B, T, HV, V).to(dtype)
    beta = torch.rand(B, T, HV)
    g = None
    if variant == "gated":
        g = -0.2 * torch.rand(B, T, HV)
    elif variant == "kda":
        g = -0.2 * torch.rand(B, T, HV, K)
    state = 0.1 * torch.randn(N or B, HV, K, V) if h0 else None
    return q, k, v, g, beta, state


def call(name, q, k, v, g, beta, **kw):
    fn, variant, _ = FUNCS[name]
    if variant == "delta":
        return fn(q, k, v, beta, **kw)
    return fn(q, k, v, g, beta, **kw) if "fused_recurrent_gated" not in name else fn(q, k, v, g=g, beta=beta, **kw)


CASES = {
    # id: (B, T, H, HV, K, V, h0, l2, scale)
    "basic": (2, 37, 2, 2, 32, 48, False, False, None),
    "gva": (2, 21, 2, 6, 32, 16, True, True, None),
    "h0_l2_scale": (1, 40, 3, 3, 64, 64, True, True, 0.3),
    "k128": (1, 19, 1, 2, 128, 128, True, True, None),
}


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("name", list(FUNCS))
def test_matches_reference(name, case, seed):
    B, T, H, HV, K, V, h0, l2, scale = CASES[case]
    variant = FUNCS[name][1]
    q, k, v, g, beta, state = make(variant, B, T, H, HV, K, V, h0=h0)
    o, ht = call(name, q, k, v, g, beta, scale=scale, initial_state=state,
                 output_final_state=True, use_qk_l2norm_in_kernel=l2)
    ro, rht = delta_rule(q, k, v, beta, g, scale=scale, h0=state, l2=l2)
    assert o.dtype == torch.float32 and o.shape == (B, T, HV, V)
    assert ht.dtype == torch.float32 and ht.shape == (B, HV, K, V)
    assert rel_err(o, ro) <= F32_TOL
    assert rel_err(ht, rht) <= F32_TOL


@pytest.mark.parametrize("name", list(FUNCS))
def test_varlen(name, seed):
    variant = FUNCS[name][1]
    cu = torch.tensor([0, 5, 5, 30, 41], dtype=torch.int64)
    q, k, v, g, beta, state = make(variant, 1, 41, 2, 4, 32, 32, N=4, h0=True)
    o, ht = call(name, q, k, v, g, beta, initial_state=state, output_final_state=True,
                 cu_seqlens=cu, use_qk_l2norm_in_kernel=True)
    ro, rht = delta_rule(q, k, v, beta, g, h0=state, cu_seqlens=cu, l2=True)
    assert ht.shape == (4, 4, 32, 32)
    assert rel_err(o, ro) <= F32_TOL
    assert rel_err(ht, rht) <= F32_TOL
    # the empty sequence passes its state through
    assert torch.equal(ht[1], state[1])
    # int32 cu_seqlens are accepted too
    o32, _ = call(name, q, k, v, g, beta, initial_state=state, output_final_state=True,
                  cu_seqlens=cu.int(), use_qk_l2norm_in_kernel=True)
    assert torch.equal(o32, o)


@pytest.mark.parametrize("chunk", [16, 32, 64])
@pytest.mark.parametrize("name", ["chunk_delta_rule", "chunk_gated_delta_rule", "chunk_kda"])
def test_forced_chunked_mode(name, chunk, seed):
    variant = FUNCS[name][1]
    q, k, v, g, beta, state = make(variant, 2, 70, 2, 2, 32, 32, h0=True)
    o, ht = call(name, q, k, v, g, beta, initial_state=state, output_final_state=True,
                 use_qk_l2norm_in_kernel=True, chunk_size=chunk)
    ro, rht = delta_rule(q, k, v, beta, g, h0=state, l2=True)
    assert rel_err(o, ro) <= F32_TOL
    assert rel_err(ht, rht) <= F32_TOL


@pytest.mark.parametrize("name", list(FUNCS))
def test_bf16(name, seed):
    variant = FUNCS[name][1]
    q, k, v, g, beta, state = make(variant, 2, 25, 2, 4, 64, 64, dtype=torch.bfloat16, h0=True)
    o, ht = call(name, q, k, v, g, beta, initial_state=state, output_final_state=True,
                 use_qk_l2norm_in_kernel=True)
    assert o.dtype == torch.bfloat16 and ht.dtype == torch.float32
    ro, rht = delta_rule(q, k, v, beta, g, h0=state, l2=True)  # on the bf16-rounded inputs
    assert rel_err(o, ro) <= BF16_TOL
    assert rel_err(ht, rht) <= BF16_TOL


@pytest.mark.parametrize("name", [n for n in FUNCS if FUNCS[n][2]])
def test_state_v_first(name, seed):
    variant = FUNCS[name][1]
    q, k, v, g, beta, state = make(variant, 2, 17, 2, 2, 32, 48, h0=True)
    state_vk = state.transpose(-1, -2).contiguous()
    o, ht = call(name, q, k, v, g, beta, initial_state=state_vk, output_final_state=True,
                 state_v_first=True)
    ro, rht = delta_rule(q, k, v, beta, g, h0=state)
    assert ht.shape == (2, 2, 48, 32)
    assert rel_err(o, ro) <= F32_TOL
    assert rel_err(ht.transpose(-1, -2), rht) <= F32_TOL


def test_fla_style_dtypes_are_converted(seed):
    # fla accepts bf16 beta / g / initial_state; deltac converts them to float32
    q, k, v, g, beta, state = make("gated", 2, 9, 2, 2, 32, 32, h0=True)
    o, ht = ops.chunk_gated_delta_rule(q, k, v, g.bfloat16(), beta.bfloat16(),
                                       initial_state=state.bfloat16(), output_final_state=True)
    ro, rht = delta_rule(q, k, v, beta.bfloat16(), g.bfloat16(), h0=state.bfloat16())
    assert rel_err(o, ro) <= F32_TOL and rel_err(ht, rht) <= F32_TOL


def test_final_state_none_and_empty_sequence(seed):
    q, k, v, g, beta, state = make("gated", 2, 5, 2, 2, 32, 32, h0=True)
    o, ht = ops.chunk_gated_delta_rule(q, k, v, g, beta)
    assert ht is None and o.shape == v.shape
    q0, k0, v0, g0, b0 = (t[:, :0].contiguous() for t in (q, k, v, g, beta))
    o, ht = ops.chunk_gated_delta_rule(q0, k0, v0, g0, b0, initial_state=state,
                                       output_final_state=True)
    assert o.shape == (2, 0, 2, 32) and torch.equal(ht, state)


def test_pre_processing_options(seed):
    B, T, H, HV, K, V = 2, 12, 2, 4, 32, 32
    q, k, v, _, _, state = make("gated", B, T, H, HV, K, V, h0=True)
    a = torch.randn(B, T, HV)
    b = torch.randn(B, T, HV)
    A_log = torch.rand(HV).log()
    dt_bias = torch.randn(HV)
    g = -A_log.exp() * torch.nn.functional.softplus(a + dt_bias)
    for allow in (False, True):
        beta = torch.sigmoid(b) * (2.0 if allow else 1.0)
        ro, rht = delta_rule(q, k, v, beta, g, h0=state, l2=True)
        for fn in (ops.chunk_gated_delta_rule, ops.fused_recurrent_gated_delta_rule):
            o, ht = fn(q, k, v, g=a, beta=b, initial_state=state, output_final_state=True,
                       use_qk_l2norm_in_kernel=True, use_gate_in_kernel=True, A_log=A_log,
                       dt_bias=dt_bias, use_beta_sigmoid_in_kernel=True, allow_neg_eigval=allow)
            assert rel_err(o, ro) <= F32_TOL and rel_err(ht, rht) <= F32_TOL
    # kda: dt_bias [HV * K]
    ak = torch.randn(B, T, HV, K)
    dtk = torch.randn(HV * K)
    gk = -A_log.exp()[:, None] * torch.nn.functional.softplus(ak + dtk.view(HV, K))
    beta = torch.sigmoid(b)
    ro, rht = delta_rule(q, k, v, beta, gk, h0=state)
    for fn in (ops.chunk_kda, ops.fused_recurrent_kda):
        o, ht = fn(q, k, v, ak, b, A_log=A_log, dt_bias=dtk, initial_state=state,
                   output_final_state=True, use_gate_in_kernel=True, use_beta_sigmoid_in_kernel=True)
        assert rel_err(o, ro) <= F32_TOL and rel_err(ht, rht) <= F32_TOL


def test_fused_recurrent_gated_gk(seed):
    # fla's gk (per-key decay) runs the kda kernel; with g too, the decays multiply
    q, k, v, g, beta, state = make("gated", 2, 11, 2, 2, 32, 32, h0=True)
    gk = -0.2 * torch.rand(2, 11, 2, 32)
    o, ht = ops.fused_recurrent_gated_delta_rule(q, k, v, gk=gk, beta=beta, initial_state=state,
                                                 output_final_state=True)
    ro, rht = delta_rule(q, k, v, beta, gk, h0=state)
    assert rel_err(o, ro) <= F32_TOL and rel_err(ht, rht) <= F32_TOL
    o, ht = ops.fused_recurrent_gated_delta_rule(q, k, v, g=g, gk=gk, beta=beta,
                                                 initial_state=state, output_final_state=True)
    ro, rht = delta_rule(q, k, v, beta, gk + g[..., None], h0=state)
    assert rel_err(o, ro) <= F32_TOL and rel_err(ht, rht) <= F32_TOL


def test_threads_setting(seed):
    q, k, v, g, beta, state = make("gated", 3, 30, 2, 4, 32, 32, h0=True)
    ro, _ = delta_rule(q, k, v, beta, g, h0=state)
    n = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        o1, _ = ops.chunk_gated_delta_rule(q, k, v, g, beta, initial_state=state)
    finally:
        torch.set_num_threads(n)
    assert rel_err(o1, ro) <= F32_TOL


# ---------------------------------------------------------------------------
# Bad inputs: a clear exception naming the argument, never a crash.
# ---------------------------------------------------------------------------


def _good():
    q, k, v, g, beta, state = make("gated", 2, 8, 2, 4, 32, 32, h0=True)
    return dict(q=q, k=k, v=v, g=g, beta=beta, initial_state=state)


def _noncontig(t):
    return t.transpose(0, 1).contiguous().transpose(0, 1)


BAD = [
    ("q_not_tensor", lambda a: a.update(q=[1.0]), TypeError, "q must be a torch.Tensor"),
    ("q_3d", lambda a: a.update(q=a["q"][0]), ValueError, "q has shape"),
    ("q_f16_on_cpu", lambda a: a.update(q=a["q"].half(), k=a["k"].half(), v=a["v"].half()),
     TypeError, "q has dtype torch.float16: the CPU kernels take"),
    ("q_f64", lambda a: a.update(q=a["q"].double()), TypeError,
     "k has dtype torch.float32 but q has torch.float64"),
    ("k_dtype", lambda a: a.update(k=a["k"].bfloat16()), TypeError, "k has dtype torch.bfloat16"),
    ("k_shape", lambda a: a.update(k=a["k"][:, :, :1].contiguous()), ValueError, "k has shape"),
    ("v_batch", lambda a: a.update(v=a["v"][:1].contiguous()), ValueError, "v has shape"),
    ("v_heads_not_multiple", lambda a: a.update(v=a["v"][:, :, :3].contiguous()), ValueError,
     "multiple of H"),
    ("K_unsupported", lambda a: a.update(q=a["q"][..., :8].contiguous(), k=a["k"][..., :8].contiguous()),
     ValueError, "head dimension K"),
    ("V_unsupported", lambda a: a.update(v=torch.randn(2, 8, 4, 20)), ValueError, "head dimension V"),
    ("q_noncontiguous", lambda a: a.update(q=_noncontig(a["q"])), ValueError, "q is not contiguous"),
    ("v_noncontiguous", lambda a: a.update(v=_noncontig(a["v"])), ValueError, "v is not contiguous"),
    ("beta_shape", lambda a: a.update(beta=a["beta"][..., :2].contiguous()), ValueError, "beta has shape"),
    ("beta_int", lambda a: a.update(beta=a["beta"].int()), TypeError, "beta has dtype"),
    ("beta_noncontiguous", lambda a: a.update(beta=_noncontig(a["beta"])), ValueError,
     "beta is not contiguous"),
    ("g_none", lambda a: a.update(g=None), ValueError, "g is None"),
    ("g_shape", lambda a: a.update(g=a["g"][..., None].expand(2, 8, 4, 32).contiguous()), ValueError,
     "g has shape"),
    ("g_noncontiguous", lambda a: a.update(g=_noncontig(a["g"])), ValueError, "g is not contiguous"),
    ("g_meta", lambda a: a.update(g=a["g"].to("meta")), ValueError, "g is on meta but q is on cpu"),
    ("k_meta", lambda a: a.update(k=a["k"].to("meta")), ValueError, "k is on meta"),
    ("h0_shape", lambda a: a.update(initial_state=a["initial_state"][:1].contiguous()), ValueError,
     "initial_state has shape"),
    ("h0_noncontiguous", lambda a: a.update(initial_state=a["initial_state"].transpose(-1, -2)),
     ValueError, "initial_state is not contiguous"),
    ("cu_seqlens_with_batch_2", lambda a: a.update(cu_seqlens=torch.tensor([0, 8])), ValueError,
     "batch size 2"),
    ("scale_negative", lambda a: a.update(scale=-1.0), ValueError, "scale = -1.0"),
    ("scale_nan", lambda a: a.update(scale=float("nan")), ValueError, "scale = nan"),
    ("unknown_kwarg", lambda a: a.update(head_first=True), TypeError, "unexpected argument"),
    ("cp_context", lambda a: a.update(cp_context=object()), TypeError, "deltac.cp.CPContext"),
    ("neg_eigval_without_sigmoid", lambda a: a.update(allow_neg_eigval=True), ValueError,
     "allow_neg_eigval=True requires"),
    ("chunk_size", lambda a: a.update(chunk_size=128), ValueError, "chunk_size = 128"),
]


@pytest.mark.parametrize("case", BAD, ids=[c[0] for c in BAD])
def test_bad_input(case):
    torch.manual_seed(0)
    _, mutate, exc, text = case
    a = _good()
    mutate(a)
    with pytest.raises(exc, match="deltac.ops.chunk_gated_delta_rule: .*" + _re(text)):
        ops.chunk_gated_delta_rule(**a)


def _re(s):
    import re
    return re.escape(s)


def _flat(T=10):
    q, k, v, g, beta, state = make("gated", 1, T, 2, 2, 32, 32, N=2, h0=True)
    return dict(q=q, k=k, v=v, g=g, beta=beta, initial_state=state)


VARLEN_BAD = [
    ("dtype", torch.tensor([0.0, 4.0, 10.0]), TypeError, "cu_seqlens has dtype"),
    ("2d", torch.tensor([[0, 4, 10]]), ValueError, "cu_seqlens has shape"),
    ("last_not_T", torch.tensor([0, 4, 9]), deltac.DeltacError, "cu_seqlens[N=2] = 9: expected T = 10"),
    ("first_not_0", torch.tensor([1, 4, 10]), deltac.DeltacError, "cu_seqlens[0] = 1"),
    ("decreasing", torch.tensor([0, 6, 4, 10]), deltac.DeltacError, "non-decreasing"),
    ("h0_count", torch.tensor([0, 3, 6, 10]), ValueError, "initial_state has shape"),
]


@pytest.mark.parametrize("case", VARLEN_BAD, ids=[c[0] for c in VARLEN_BAD])
def test_bad_cu_seqlens(case):
    torch.manual_seed(0)
    _, cu, exc, text = case
    a = _flat()
    if case[0] == "decreasing":
        a["initial_state"] = torch.zeros(3, 2, 32, 32)
    with pytest.raises(exc, match=_re(text)):
        ops.chunk_gated_delta_rule(**a, cu_seqlens=cu)


def test_requires_grad_gives_a_graph(seed):
    """(The gradients themselves: test_autograd.py.)"""
    a = _good()
    a["v"].requires_grad_(True)
    o, _ = ops.chunk_gated_delta_rule(**a)
    assert o.requires_grad
    with torch.no_grad():
        o, _ = ops.chunk_gated_delta_rule(**a)
    assert not o.requires_grad
    h0 = torch.zeros(a["q"].shape[0], a["v"].shape[2], a["q"].shape[3], a["v"].shape[3])
    with pytest.raises(NotImplementedError, match="inplace_final_state=True has no backward"):
        ops.fused_recurrent_gated_delta_rule(a["q"], a["k"], a["v"], a["g"], beta=a["beta"],
                                             initial_state=h0, inplace_final_state=True)


def test_unsupported_fla_options():
    a = _good()
    with pytest.raises(NotImplementedError, match="gv"):
        ops.fused_recurrent_gated_delta_rule(a["q"], a["k"], a["v"], gv=a["v"], beta=a["beta"])
    b = make("kda", 1, 4, 1, 1, 32, 32)
    with pytest.raises(NotImplementedError, match="return_intermediate_states"):
        ops.chunk_kda(*b[:5], return_intermediate_states=True)


def test_runtime_error_is_deltac_error():
    # a failure inside the C runtime surfaces as DeltacError with the runtime's message
    p = deltac._lib.FwdParams()
    with pytest.raises(deltac.DeltacError, match="params.B = 0"):
        deltac._lib.forward(p, deltac._lib.DEVICE_CPU)


# ---------------------------------------------------------------------------
# The custom op: schema, fake implementation, torch.compile.
# ---------------------------------------------------------------------------


def test_opcheck(seed):
    q, k, v, g, beta, state = make("gated", 2, 6, 2, 4, 32, 32, h0=True)
    args = (q, k, v, g, beta, state, None, 1, 0.0, True, True, False, 0, 0)
    torch.library.opcheck(torch.ops.deltac.fwd.default, args,
                          test_utils=("test_schema", "test_faketensor"))
    cu = torch.tensor([0, 2, 6])
    q1, k1, v1, g1, b1 = (t[:1].contiguous() for t in (q, k, v, g, beta))
    args = (q1, k1, v1, g1, b1, state, cu, 1, 0.5, False, True, True, 2, 0)
    torch.library.opcheck(torch.ops.deltac.fwd.default, args,
                          test_utils=("test_schema", "test_faketensor"))
    # beta_two (beta may exceed 1: the runtime's allow_neg_eigval), the op's last argument
    args = (q, k, v, g, 2.0 * beta, state, None, 1, 0.0, True, True, False, 1, 0, True)
    torch.library.opcheck(torch.ops.deltac.fwd.default, args,
                          test_utils=("test_schema", "test_faketensor"))


def test_allow_neg_eigval_reaches_the_runtime(seed):
    # beta in (0, 2) declared: chunk_delta_rule's deltac keyword, the gated / kda
    # functions' fla one (with the in-kernel sigmoid); the CPU kernels read beta
    # as it is, so the results equal the float64 reference either way
    q, k, v, _, beta, state = make("delta", 2, 40, 2, 4, 32, 32, h0=True)
    beta = 1.9 + 0.1 * beta
    ro, rht = delta_rule(q, k, v, beta, h0=state)
    for mode in ({}, {"chunk_size": 16}):
        o, ht = ops.chunk_delta_rule(q, k, v, beta, initial_state=state, output_final_state=True,
                                     allow_neg_eigval=True, **mode)
        assert rel_err(o, ro) <= 1e-5 and rel_err(ht, rht) <= 1e-5
    with torch.autograd.set_grad_enabled(True):  # the dispatcher's path (the op's beta_two)
        qg = q.clone().requires_grad_()
        o, ht = ops.chunk_delta_rule(qg, k, v, beta, initial_state=state, output_final_state=True,
                                     allow_neg_eigval=True)
        o.sum().backward()
    assert rel_err(o, ro) <= 1e-5 and qg.grad is not None
    logits = torch.randn_like(beta)
    q, k, v, g, _, state = make("gated", 2, 40, 2, 4, 32, 32, h0=True)
    o, ht = ops.chunk_gated_delta_rule(q, k, v, g, logits, initial_state=state,
                                       output_final_state=True, use_beta_sigmoid_in_kernel=True,
                                       allow_neg_eigval=True)
    ro, rht = delta_rule(q, k, v, 2.0 * torch.sigmoid(logits), g, h0=state)
    assert rel_err(o, ro) <= 1e-5 and rel_err(ht, rht) <= 1e-5


@pytest.mark.parametrize("fn", ["chunk_delta_rule", "chunk_gated_delta_rule", "chunk_kda"])
def test_beta_two_keyword_reaches_the_call(fn, seed, monkeypatch):
    # beta_two: beta as given may exceed 1 (what the modules pass after their own
    # 2 sigmoid(b)); it reaches the runtime call, and the results stay exact
    var = {"chunk_delta_rule": "delta", "chunk_gated_delta_rule": "gated"}.get(fn, "kda")
    q, k, v, g, beta, state = make(var, 2, 40, 2, 4, 32, 32, h0=True)
    beta = 1.9 + 0.1 * beta
    seen = []
    real = ops._call

    def spy(*a, **kw):
        seen.append(kw.get("beta_two", False))
        return real(*a, **kw)
    monkeypatch.setattr(ops, "_call", spy)
    args = (q, k, v, beta) if var == "delta" else (q, k, v, g, beta)
    for two in (False, True):
        o, ht = getattr(ops, fn)(*args, initial_state=state, output_final_state=True,
                                 beta_two=two)
        ro, rht = delta_rule(q, k, v, beta, None if var == "delta" else g, h0=state)
        assert rel_err(o, ro) <= 1e-5 and rel_err(ht, rht) <= 1e-5
    assert seen == [False, True]


def test_dispatcher_and_direct_paths_agree(seed):
    # eager calls skip the dispatcher; torch.ops.deltac.fwd is what compile/export see
    q, k, v, g, beta, state = make("kda", 2, 9, 2, 4, 32, 16, h0=True)
    o, ht = ops.chunk_kda(q, k, v, g, beta, initial_state=state, output_final_state=True)
    o2, ht2 = torch.ops.deltac.fwd(q, k, v, g, beta, state, None, 2, 0.0, False, True, False, 0, 0)
    assert torch.equal(o, o2) and torch.equal(ht, ht2)
    o3, ht3 = torch.ops.deltac.fwd(q, k, v, g, beta, state, None, 2, 0.0, False, False, False, 0, 0)
    assert torch.equal(o, o3) and ht3.numel() == 0


def test_eager_path_is_taken_and_checked():
    # the decode call's one-pass check and run (ops._eager, the host-overhead path) is
    # taken for plain inputs, agrees with the dispatcher, and leaves anything else to
    # _prepare (which converts or raises naming the argument)
    q, k, v, g, beta, state = make("gated", 2, 1, 2, 4, 32, 16, h0=True)
    with torch.no_grad():
        got = ops._eager(1, 2, 0, q, k, v, g, beta, None, state, True, True, False, False)
        assert got is not None
        want = torch.ops.deltac.fwd(q, k, v, g, beta, state, None, 1, 0.0, True, True, False, 2, 0)
        assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1])
        assert ops._eager(1, 2, 0, q, k, v, g, beta, 0.5, None, False, True, False, False)[1] is None
        for bad in (dict(q=q.transpose(2, 3).contiguous().transpose(2, 3)), dict(k=k.bfloat16()), dict(beta=beta.double()),
                    dict(g=g[..., None].expand(2, 1, 4, 32).contiguous()),
                    dict(state=state[:1]), dict(scale=-1.0), dict(scale=2),
                    dict(v=[1.0]), dict(g=None), dict(state=state.to("meta"))):
            a = dict(q=q, k=k, v=v, g=g, beta=beta, scale=None, state=state)
            a.update(bad)
            assert ops._eager(1, 2, 0, a["q"], a["k"], a["v"], a["g"], a["beta"], a["scale"],
                              a["state"], True, True, False, False) is None, sorted(bad)


def test_meta_tensors_and_empty_batch():
    q = torch.empty(2, 5, 2, 32, device="meta")
    v = torch.empty(2, 5, 4, 16, device="meta")
    o, ht = ops.chunk_gated_delta_rule(q, q, v, torch.empty(2, 5, 4, device="meta"),
                                       torch.empty(2, 5, 4, device="meta"), output_final_state=True)
    assert o.device.type == "meta" and o.shape == v.shape and ht.shape == (2, 4, 32, 16)
    q0, v0 = torch.randn(0, 5, 2, 32), torch.randn(0, 5, 4, 16)
    o, ht = ops.chunk_gated_delta_rule(q0, q0, v0, torch.zeros(0, 5, 4), torch.zeros(0, 5, 4),
                                       output_final_state=True)
    assert o.shape == v0.shape and ht.shape == (0, 4, 32, 16)


def test_fake_tensor_shapes():
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        q = torch.empty(1, 9, 2, 64, dtype=torch.bfloat16)
        v = torch.empty(1, 9, 4, 32, dtype=torch.bfloat16)
        g = torch.empty(1, 9, 4)
        beta = torch.empty(1, 9, 4)
        cu = torch.empty(4, dtype=torch.int64)
        o, ht = ops.chunk_gated_delta_rule(q, q, v, g, beta, output_final_state=True, cu_seqlens=cu)
        assert o.shape == (1, 9, 4, 32) and o.dtype == torch.bfloat16
        assert ht.shape == (3, 4, 64, 32) and ht.dtype == torch.float32


class _Mixer(torch.nn.Module):
    def __init__(self, H, HV, K, V, hidden=64):
        super().__init__()
        self.H, self.HV, self.K, self.V = H, HV, K, V
        self.qk = torch.nn.Linear(hidden, 2 * H * K)
        self.v = torch.nn.Linear(hidden, HV * V)
        self.gb = torch.nn.Linear(hidden, 2 * HV)

    def forward(self, x, h0):
        B, T, _ = x.shape
        q, k = self.qk(x).view(B, T, 2, self.H, self.K).unbind(2)
        v = self.v(x).view(B, T, self.HV, self.V)
        a, b = self.gb(x).view(B, T, 2, self.HV).unbind(2)
        g = torch.nn.functional.logsigmoid(a)
        o, ht = ops.chunk_gated_delta_rule(q.contiguous(), k.contiguous(), v, g.contiguous(),
                                           torch.sigmoid(b).contiguous(), initial_state=h0,
                                           output_final_state=True, use_qk_l2norm_in_kernel=True)
        return o.sum(-1) * 2.0, ht


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_torch_compile_cpu(backend, seed):
    m = _Mixer(2, 4, 32, 32)
    x = torch.randn(2, 13, 64)
    h0 = 0.1 * torch.randn(2, 4, 32, 32)
    with torch.no_grad():
        want = m(x, h0)
        cm = torch.compile(m, backend=backend, fullgraph=True)  # fullgraph: no graph break
        got = cm(x, h0)
        got2 = cm(torch.randn(2, 13, 64), h0)
    assert rel_err(got[0], want[0]) <= F32_TOL and rel_err(got[1], want[1]) <= F32_TOL
    assert got2[0].shape == want[0].shape


# ---------------------------------------------------------------------------
# In-place state update (inplace_final_state=True)
# ---------------------------------------------------------------------------

INPLACE = ["fused_recurrent_delta_rule", "fused_recurrent_gated_delta_rule", "fused_recurrent_kda"]


@pytest.mark.parametrize("name", INPLACE)
def test_inplace_decode_loop(name, seed):
    variant = FUNCS[name][1]
    q, k, v, g, beta, state = make(variant, 3, 12, 2, 4, 32, 48, h0=True)
    ro, rht = delta_rule(q, k, v, beta, g, h0=state, l2=True)
    buf = state.clone()
    outs = []
    for t in range(12):
        sl = slice(t, t + 1)
        step = [None if x is None else x[:, sl].contiguous() for x in (q, k, v, g, beta)]
        o, ht = call(name, *step, initial_state=buf, output_final_state=True,
                     use_qk_l2norm_in_kernel=True, inplace_final_state=True)
        assert ht is buf
        outs.append(o)
    assert rel_err(torch.cat(outs, 1), ro) <= F32_TOL
    assert rel_err(buf, rht) <= F32_TOL
    # a whole sequence in place, varlen
    cu = torch.tensor([0, 4, 12])
    flat = [None if x is None else x[:1].contiguous() for x in (q, k, v, g, beta)]
    buf = state[:2].clone()
    o, _ = call(name, *flat, initial_state=buf, cu_seqlens=cu, inplace_final_state=True)
    ro, rht = delta_rule(flat[0], flat[1], flat[2], flat[4], flat[3], h0=state[:2], cu_seqlens=cu)
    assert rel_err(o, ro) <= F32_TOL and rel_err(buf, rht) <= F32_TOL


def test_inplace_errors():
    q, k, v, g, beta, state = make("gated", 1, 3, 1, 1, 32, 32, h0=True)
    with pytest.raises(ValueError, match="inplace_final_state=True needs initial_state"):
        ops.fused_recurrent_gated_delta_rule(q, k, v, g=g, beta=beta, inplace_final_state=True)
    with pytest.raises(TypeError, match="initial_state has dtype torch.bfloat16: inplace"):
        ops.fused_recurrent_gated_delta_rule(q, k, v, g=g, beta=beta, initial_state=state.bfloat16(),
                                             inplace_final_state=True)


def test_inplace_under_compile(seed):
    q, k, v, g, beta, state = make("gated", 2, 1, 2, 2, 32, 32, h0=True)

    def step(q, k, v, g, beta, h):
        o, _ = ops.fused_recurrent_gated_delta_rule(q, k, v, g=g, beta=beta, initial_state=h,
                                                    inplace_final_state=True)
        return o * 2.0

    want_h = state.clone()
    want = step(q, k, v, g, beta, want_h)
    got_h = state.clone()
    with torch.no_grad():
        got = torch.compile(step, backend="aot_eager", fullgraph=True)(q, k, v, g, beta, got_h)
    assert torch.equal(got, want) and torch.equal(got_h, want_h)
    torch.library.opcheck(torch.ops.deltac.fwd_inplace.default,
                          (q, k, v, g, beta, state.clone(), None, 1, 0.0, False, False),
                          test_utils=("test_schema", "test_faketensor"))

"""CUDA cases, one test each; every one skips without a GPU (or a CUDA build of deltac)."""

import copy

import pytest
import torch
import torch.nn.functional as F

import deltac
from deltac import ops
from deltac.nn import (DeltaNetAttention, DeltaNetConfig, GatedDeltaNet, GatedDeltaNetCache,
                       GatedDeltaNetConfig, KimiDeltaAttention)

from reference import delta_rule, rel_err
from test_nn import kda_cfg, randomize, randomize_kda, ref_deltanet, ref_gdn, ref_kda

HAVE_GPU = torch.cuda.is_available()
HAVE_DELTAC_CUDA = deltac.cuda_available()
pytestmark = pytest.mark.skipif(not (HAVE_GPU and HAVE_DELTAC_CUDA),
                                reason=f"needs a GPU (torch.cuda: {HAVE_GPU}) and a CUDA build of "
                                       f"deltac (deltac.cuda_available(): {HAVE_DELTAC_CUDA})")

FUNCS = {
    "chunk_delta_rule": (ops.chunk_delta_rule, "delta"),
    "fused_recurrent_delta_rule": (ops.fused_recurrent_delta_rule, "delta"),
    "chunk_gated_delta_rule": (ops.chunk_gated_delta_rule, "gated"),
    "fused_recurrent_gated_delta_rule": (ops.fused_recurrent_gated_delta_rule, "gated"),
    "chunk_kda": (ops.chunk_kda, "kda"),
    "fused_recurrent_kda": (ops.fused_recurrent_kda, "kda"),
}


def make(variant, B, T, H, HV, K, V, dtype, N=None, dev="cuda"):
    q = torch.randn(B, T, H, K).to(dtype)
    k = torch.nn.functional.normalize(torch.randn(B, T, H, K), dim=-1).to(dtype)
    v = torch.randn(B, T, HV, V).to(dtype)
    beta = torch.rand(B, T, HV)
    g = None if variant == "delta" else -0.2 * torch.rand(*((B, T, HV) if variant == "gated" else (B, T, HV, K)))
    h0 = 0.1 * torch.randn(N or B, HV, K, V)
    cpu = (q, k, v, g, beta, h0)
    return cpu, tuple(None if t is None else t.to(dev) for t in cpu)


def run(name, t, **kw):
    fn, variant = FUNCS[name]
    q, k, v, g, beta, h0 = t
    if variant == "delta":
        return fn(q, k, v, beta, initial_state=h0, output_final_state=True, **kw)
    return fn(q, k, v, g=g, beta=beta, initial_state=h0, output_final_state=True, **kw)


@pytest.mark.parametrize("KV", [(64, 64), (128, 128), (128, 256)], ids=lambda p: f"K{p[0]}_V{p[1]}")
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["f32", "bf16"])
@pytest.mark.parametrize("name", list(FUNCS))
def test_cuda_matches_reference(name, dtype, KV, seed):
    K, V = KV
    cpu, gpu = make(FUNCS[name][1], 2, 33, 2, 4, K, V, dtype)
    o, ht = run(name, gpu, use_qk_l2norm_in_kernel=True)
    assert o.device.type == "cuda" and o.dtype == dtype and ht.dtype == torch.float32
    ro, rht = delta_rule(*cpu[:3], cpu[4], cpu[3], h0=cpu[5], l2=True)
    tol = 1e-5 if dtype == torch.float32 else 5e-3
    assert rel_err(o, ro) <= tol and rel_err(ht, rht) <= tol


@pytest.mark.parametrize("name", list(FUNCS))
def test_cuda_varlen_device_cu_seqlens(name, seed):
    cu = torch.tensor([0, 9, 9, 40, 64])
    cpu, gpu = make(FUNCS[name][1], 1, 64, 2, 4, 128, 128, torch.bfloat16, N=4)
    o, ht = run(name, gpu, cu_seqlens=cu.cuda(), use_qk_l2norm_in_kernel=True)
    ro, rht = delta_rule(*cpu[:3], cpu[4], cpu[3], h0=cpu[5], cu_seqlens=cu, l2=True)
    assert rel_err(o, ro) <= 5e-3 and rel_err(ht, rht) <= 5e-3


@pytest.mark.parametrize("variant", ["delta", "gated"])
def test_cuda_beta_near_two_long(variant, seed):
    # beta in [1.99, 2] (no decay: GDN gates near 0) over 1500 bf16 tokens: with
    # allow_neg_eigval the chunked kernel runs its two-term products (scan 5), within
    # 5e-3 of float64 where the default scans (and fla) reach ~1.2e-2 by 1000 tokens
    cpu, _ = make(variant, 1, 1500, 2, 4, 128, 128, torch.bfloat16)
    q, k, v, g, _, h0 = cpu
    if g is not None:
        g = -1e-4 * torch.rand_like(g)
    logits = 6.0 + torch.rand(1, 1500, 4)  # 2 sigmoid: 1.995 .. 1.998
    beta = 2.0 * torch.sigmoid(logits)
    d = [t.cuda() for t in (q, k, v, beta, h0, logits)]
    if variant == "delta":
        o, ht = ops.chunk_delta_rule(d[0], d[1], d[2], d[3], initial_state=d[4],
                                     output_final_state=True, use_qk_l2norm_in_kernel=True,
                                     allow_neg_eigval=True)
    else:
        o, ht = ops.chunk_gated_delta_rule(d[0], d[1], d[2], g.cuda(), d[5], initial_state=d[4],
                                           output_final_state=True, use_qk_l2norm_in_kernel=True,
                                           use_beta_sigmoid_in_kernel=True, allow_neg_eigval=True)
    ro, rht = delta_rule(q, k, v, beta, g, h0=h0, l2=True)
    assert rel_err(o, ro) <= 5e-3 and rel_err(ht, rht) <= 5e-3


def test_cuda_kda_beta_near_two_long(seed):
    # kda, beta in [1.995, 1.998] given by its sigmoid, gates near 0, 1500 bf16 tokens:
    # the runtime runs the f32 chunked kernel on f32 copies (the 16-bit scans reach
    # ~1.7e-2 here), within 5e-3 of float64
    cpu, _ = make("kda", 1, 1500, 2, 4, 128, 128, torch.bfloat16)
    q, k, v, g, _, h0 = cpu
    g = -1e-4 * torch.rand_like(g)
    logits = 6.0 + torch.rand(1, 1500, 4)
    beta = 2.0 * torch.sigmoid(logits)
    d = [t.cuda() for t in (q, k, v, g, logits, h0)]
    o, ht = ops.chunk_kda(*d[:5], initial_state=d[5], output_final_state=True,
                          use_qk_l2norm_in_kernel=True, use_beta_sigmoid_in_kernel=True,
                          allow_neg_eigval=True)
    ro, rht = delta_rule(q, k, v, beta, g, h0=h0, l2=True)
    assert rel_err(o, ro) <= 5e-3 and rel_err(ht, rht) <= 5e-3, (rel_err(o, ro), rel_err(ht, rht))


def test_cuda_beta_two_keyword_long(seed):
    # the same bound with beta given as 2 sigmoid(b) and declared by beta_two=True
    # (what deltac.nn.GatedDeltaNet passes with linear_allow_neg_eigval)
    cpu, _ = make("gated", 1, 1500, 2, 4, 128, 128, torch.bfloat16)
    q, k, v, g, _, h0 = cpu
    g = -1e-4 * torch.rand_like(g)
    beta = 2.0 * torch.sigmoid(6.0 + torch.rand(1, 1500, 4))
    d = [t.cuda() for t in (q, k, v, g, beta, h0)]
    o, ht = ops.chunk_gated_delta_rule(*d[:5], initial_state=d[5], output_final_state=True,
                                       use_qk_l2norm_in_kernel=True, beta_two=True)
    ro, rht = delta_rule(q, k, v, beta, g, h0=h0, l2=True)
    assert rel_err(o, ro) <= 5e-3 and rel_err(ht, rht) <= 5e-3


def test_cuda_matches_cpu_path(seed):
    cpu, gpu = make("gated", 2, 50, 16, 32, 128, 128, torch.float32)
    o_c, ht_c = run("chunk_gated_delta_rule", cpu, use_qk_l2norm_in_kernel=True)
    o_g, ht_g = run("chunk_gated_delta_rule", gpu, use_qk_l2norm_in_kernel=True)
    # each within 1e-5 of float64 (the GPU's chunked kernel uses TF32 products)
    assert rel_err(o_g, o_c) <= 2e-5 and rel_err(ht_g, ht_c) <= 2e-5


def test_cuda_side_stream(seed):
    # the kernel is enqueued on torch.cuda.current_stream(), without synchronising
    cpu, gpu = make("gated", 4, 256, 16, 32, 128, 128, torch.bfloat16)
    want, _ = run("fused_recurrent_gated_delta_rule", gpu)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        got, _ = run("fused_recurrent_gated_delta_rule", gpu)
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    assert torch.equal(got, want)


def test_cuda_graph_capture_decode(seed):
    cpu, gpu = make("gated", 8, 1, 16, 32, 128, 128, torch.bfloat16)
    q, k, v, g, beta, h0 = gpu
    static_out = {}
    fn = ops.fused_recurrent_gated_delta_rule
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):  # warm-up outside the graph
        fn(q, k, v, g=g, beta=beta, initial_state=h0, output_final_state=True)
    torch.cuda.current_stream().wait_stream(s)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static_out["o"], static_out["ht"] = fn(q, k, v, g=g, beta=beta, initial_state=h0,
                                               output_final_state=True)
    for _ in range(2):
        q.copy_(torch.randn_like(q))
        graph.replay()
        torch.cuda.synchronize()
        ro, rht = delta_rule(q, k, v, beta, g, h0=h0)
        assert rel_err(static_out["o"], ro) <= 5e-3 and rel_err(static_out["ht"], rht) <= 5e-3


def test_cuda_torch_compile(seed):
    cpu, gpu = make("gated", 2, 40, 2, 4, 128, 128, torch.bfloat16)

    def f(q, k, v, g, beta, h0):
        o, ht = ops.chunk_gated_delta_rule(q, k, v, g, beta, initial_state=h0,
                                           output_final_state=True, use_qk_l2norm_in_kernel=True)
        return o.float() * 2, ht

    want = f(*gpu)
    got = torch.compile(f, fullgraph=True)(*gpu)
    assert rel_err(got[0], want[0]) <= 1e-6 and rel_err(got[1], want[1]) <= 1e-6


def test_cuda_bad_devices():
    cpu, gpu = make("gated", 1, 8, 2, 2, 64, 64, torch.float32)
    q, k, v, g, beta, h0 = gpu
    with pytest.raises(ValueError, match="k is on cpu but q is on cuda"):
        ops.chunk_gated_delta_rule(q, cpu[1], v, g, beta)
    with pytest.raises(ValueError, match="cu_seqlens is on cpu but q is on cuda"):
        ops.chunk_gated_delta_rule(q, k, v, g, beta, cu_seqlens=torch.tensor([0, 8]))


@pytest.mark.parametrize("case", [(32, 48, torch.float32), (96, 80, torch.bfloat16)],
                         ids=["K32_V48_f32", "K96_V80_bf16"])
@pytest.mark.parametrize("name", list(FUNCS))
def test_cuda_padded_shape_matches_reference(name, case, seed):
    # (K, V) with no precompiled instance run zero-padded to one (runtime/README.md)
    K, V, dtype = case
    cpu, gpu = make(FUNCS[name][1], 2, 33, 2, 4, K, V, dtype)
    o, ht = run(name, gpu, use_qk_l2norm_in_kernel=True)
    assert o.shape == (2, 33, 4, V) and ht.shape == (2, 4, K, V)
    ro, rht = delta_rule(*cpu[:3], cpu[4], cpu[3], h0=cpu[5], l2=True)
    tol = 1e-5 if dtype == torch.float32 else 5e-3
    assert rel_err(o, ro) <= tol and rel_err(ht, rht) <= tol


def test_cuda_deltanet_attention(seed):
    m = DeltaNetAttention(DeltaNetConfig(hidden_size=256, num_heads=2, mode="decoder")).cuda()
    x = torch.randn(2, 24, 256, device="cuda")
    with torch.no_grad():
        steps = torch.cat([m(x[:, :10])] + [m(x[:, t:t + 1]) for t in range(10, 24)], dim=1)
    want, _ = ref_deltanet(m.cpu(), x.cpu())
    assert rel_err(steps, want) <= 1e-5


def test_cuda_gated_deltanet(seed):
    cfg = GatedDeltaNetConfig(hidden_size=256, linear_num_key_heads=2, linear_num_value_heads=4,
                              linear_key_head_dim=128, linear_value_head_dim=128)
    m = randomize(GatedDeltaNet(cfg)).cuda()
    x = torch.randn(2, 21, 256, device="cuda")
    cache = GatedDeltaNetCache()
    with torch.no_grad():
        whole = m(x)
        steps = torch.cat([m(x[:, :8], cache_params=cache)] +
                          [m(x[:, t:t + 1], cache_params=cache) for t in range(8, 21)], dim=1)
    want, _, _ = ref_gdn(m.cpu(), x.cpu())
    assert rel_err(whole, want) <= 1e-5 and rel_err(steps, want) <= 1e-5


def test_cuda_kimi_delta_attention(seed):
    m = randomize_kda(KimiDeltaAttention(kda_cfg(H=2, D=128, hidden=256))).cuda()
    x = torch.randn(2, 19, 256, device="cuda")
    cache = GatedDeltaNetCache()
    with torch.no_grad():
        steps = torch.cat([m(x[:, :7], cache_params=cache)] +
                          [m(x[:, t:t + 1], cache_params=cache) for t in range(7, 19)], dim=1)
    want, _, _ = ref_kda(m.cpu(), x.cpu())
    assert rel_err(steps, want) <= 1e-5


def test_cuda_graph_inplace_decode_steps(seed):
    # a serving loop: static inputs and a static state buffer, one graph replayed per token
    cpu, gpu = make("gated", 4, 1, 16, 32, 128, 128, torch.bfloat16)
    q, k, v, g, beta, h0 = gpu
    state = h0.clone()
    fn = ops.fused_recurrent_gated_delta_rule
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        fn(q, k, v, g=g, beta=beta, initial_state=state.clone(), inplace_final_state=True)
    torch.cuda.current_stream().wait_stream(s)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        o_static, _ = fn(q, k, v, g=g, beta=beta, initial_state=state, inplace_final_state=True,
                         use_qk_l2norm_in_kernel=True)
    state.copy_(h0)
    ref_h = h0.cpu()
    for _ in range(3):
        for t in (q, k, v):
            t.copy_(torch.randn_like(t))
        graph.replay()
        torch.cuda.synchronize()
        ro, ref_h = delta_rule(q, k, v, beta, g, h0=ref_h, l2=True)
        assert rel_err(o_static, ro) <= 5e-3 and rel_err(state, ref_h) <= 5e-3


@pytest.mark.parametrize("chunk", [16, 32, 64])
@pytest.mark.parametrize("name", ["chunk_delta_rule", "chunk_gated_delta_rule", "chunk_kda"])
def test_cuda_forced_chunk_size(name, chunk, seed):
    cpu, gpu = make(FUNCS[name][1], 2, 150, 2, 4, 128, 128, torch.bfloat16)
    try:
        o, ht = run(name, gpu, use_qk_l2norm_in_kernel=True, chunk_size=chunk)
    except deltac.DeltacError as e:  # a chunk the build's chunked family does not take
        pytest.skip(str(e))
    ro, rht = delta_rule(*cpu[:3], cpu[4], cpu[3], h0=cpu[5], l2=True)
    assert rel_err(o, ro) <= 5e-3 and rel_err(ht, rht) <= 5e-3


@pytest.mark.parametrize("name", ["chunk_delta_rule", "chunk_gated_delta_rule", "chunk_kda"])
def test_cuda_float16(name, seed):
    variant = FUNCS[name][1]
    vid = {"delta": 0, "gated": 1, "kda": 2}[variant]
    if not deltac._lib.cuda_supports(vid, 128, 128, deltac._lib.DTYPE_F16):
        pytest.skip("this build has no float16 CUDA kernel for K = V = 128")
    cpu, gpu = make(variant, 2, 100, 2, 4, 128, 128, torch.float16)
    o, ht = run(name, gpu, use_qk_l2norm_in_kernel=True)
    assert o.dtype == torch.float16
    ro, rht = delta_rule(*cpu[:3], cpu[4], cpu[3], h0=cpu[5], l2=True)
    assert rel_err(o, ro) <= 2e-3 and rel_err(ht, rht) <= 2e-3


# ---- deltac's fused elementwise kernels in the modules (ops.conv_gates, gated_rmsnorm,
# layernorm_gate, sigmoid): the fused CUDA path == the PyTorch path of the same module.

def _torch_path(m):
    """A copy of m whose forward never takes the fused kernels."""
    m = copy.deepcopy(m)
    m._fused_ok = lambda x: False
    return m


def _fused_tol(dtype):
    return 1e-5 if dtype == torch.float32 else 1e-2


@pytest.mark.parametrize("neg", [False, True], ids=["beta1", "beta2"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["f32", "bf16"])
@pytest.mark.parametrize("layout", ["qwen3_next", "qwen3_5"])
def test_fused_gdn_matches_torch_path(layout, dtype, neg, seed):
    cfg = GatedDeltaNetConfig(hidden_size=256, linear_num_key_heads=2, linear_num_value_heads=4,
                              linear_key_head_dim=128, linear_value_head_dim=128,
                              linear_allow_neg_eigval=neg)  # a precompiled chunked K, V
    m = randomize(GatedDeltaNet(cfg, layout=layout)).to("cuda", dtype).eval()
    m.conv1d.bias = torch.nn.Parameter(0.1 * torch.randn(m.conv_dim, device="cuda", dtype=dtype))
    ref = _torch_path(m)
    x = torch.randn(2, 37, 256, device="cuda", dtype=dtype)
    # f32: full f32 convolutions in the PyTorch path (no TF32)
    with torch.no_grad(), torch.backends.cudnn.flags(enabled=True, allow_tf32=False):
        assert m._fused_ok(x)
        got, want = m(x), ref(x)
        # prompt then decode steps through a cache: outputs and both states
        c1, c2 = GatedDeltaNetCache(), GatedDeltaNetCache()
        s1 = torch.cat([m(x[:, :9], cache_params=c1)] +
                       [m(x[:, t:t + 1], cache_params=c1) for t in range(9, 13)], dim=1)
        s2 = torch.cat([ref(x[:, :9], cache_params=c2)] +
                       [ref(x[:, t:t + 1], cache_params=c2) for t in range(9, 13)], dim=1)
    tol = _fused_tol(dtype)
    assert got.dtype == dtype and rel_err(got, want) <= tol
    assert rel_err(s1, s2) <= tol
    assert c1.conv_states[0].dtype == c2.conv_states[0].dtype
    assert rel_err(c1.conv_states[0], c2.conv_states[0]) == 0  # the last inputs, copied
    assert rel_err(c1.recurrent_states[0], c2.recurrent_states[0]) <= tol


@pytest.mark.parametrize("mode", ["encoder", "decoder"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["f32", "bf16"])
def test_fused_deltanet_matches_torch_path(dtype, mode, seed):
    cfg = DeltaNetConfig(hidden_size=256, num_heads=2, mode=mode)
    m = DeltaNetAttention(cfg).to("cuda", dtype).eval()
    with torch.no_grad():
        m.norm.weight.uniform_(0.5, 1.5)
        m.norm.bias.normal_()
    ref = _torch_path(m)
    x = torch.randn(2, 29, 256, device="cuda", dtype=dtype)
    with torch.no_grad():
        assert m._fused_ok(x)
        got = torch.cat([m(x[:, :20])] + [m(x[:, t:t + 1]) for t in range(20, 29)], dim=1)
        want = torch.cat([ref(x[:, :20])] + [ref(x[:, t:t + 1]) for t in range(20, 29)], dim=1)
    assert got.dtype == dtype and rel_err(got, want) <= _fused_tol(dtype)


def test_fused_path_only_without_grad(seed):
    cfg = GatedDeltaNetConfig(hidden_size=256, linear_num_key_heads=2, linear_num_value_heads=4,
                              linear_key_head_dim=64, linear_value_head_dim=64)
    m = randomize(GatedDeltaNet(cfg)).cuda()
    d = DeltaNetAttention(DeltaNetConfig(hidden_size=256, num_heads=2)).cuda()
    x = torch.randn(1, 8, 256, device="cuda")
    assert not m._fused_ok(x) and not d._fused_ok(x)  # parameters require grad
    m(x).sum().backward()  # the PyTorch path, differentiable
    assert m.conv1d.weight.grad is not None
    with torch.no_grad():
        assert m._fused_ok(x) and d._fused_ok(x)
    with pytest.raises(RuntimeError, match="no backward"):
        ops.sigmoid(x.requires_grad_())


def test_fused_ops_opcheck(seed):
    B, T, H, HV, K, V, W = 2, 5, 2, 4, 16, 32, 4
    C = 2 * H * K + HV * V
    y = torch.randn(B, T, C, device="cuda", dtype=torch.bfloat16)
    ba = torch.randn(B, T, 2 * HV, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(C, 1, W, device="cuda")
    A, dt = torch.rand(HV, device="cuda"), torch.randn(HV, device="cuda")
    o = torch.randn(B, T, HV, V, device="cuda", dtype=torch.bfloat16)
    z = torch.randn(B, T, HV * V, device="cuda", dtype=torch.bfloat16)
    nw, nb = torch.rand(V, device="cuda"), torch.randn(V, device="cuda")
    utils = ("test_schema", "test_faketensor")
    from deltac import ops_fused as F_
    torch.library.opcheck(F_.conv_gates_op, (y, ba, ba, w, None, None, A, dt, H, K, V, 0, HV, 0,
                                             HV, 1.0), test_utils=utils)
    torch.library.opcheck(F_.gated_rmsnorm_op, (o, z, nw, 1e-6, 0, HV, 0), test_utils=utils)
    torch.library.opcheck(F_.layernorm_gate_op, (o, z, nw, nb, 1e-5), test_utils=utils)
    torch.library.opcheck(F_.sigmoid_op, (ba, 2.0), test_utils=utils)
    # the ops against PyTorch
    q, k, v, beta, g, st = ops.conv_gates(y, ba, ba, w, None, None, A, dt, H, K, V,
                                          ba_heads=HV, a_offset=HV)
    ext = torch.cat((torch.zeros(B, C, W, device="cuda"), y.float().transpose(1, 2)), -1)
    mixed = F.silu(F.conv1d(ext, w, groups=C)[:, :, -T:]).transpose(1, 2)
    assert rel_err(torch.cat((q.flatten(2), k.flatten(2), v.flatten(2)), -1), mixed) <= 5e-3
    assert rel_err(st, ext[:, :, -W:]) == 0
    assert rel_err(beta, torch.sigmoid(ba[..., :HV].float())) <= 1e-6
    want_g = -A.exp() * F.softplus(ba[..., HV:].float() + dt)
    assert rel_err(g, want_g) <= 1e-6


def test_fused_gdn_cuda_graph(seed):
    cfg = GatedDeltaNetConfig(hidden_size=256, linear_num_key_heads=2, linear_num_value_heads=4,
                              linear_key_head_dim=64, linear_value_head_dim=64)
    m = randomize(GatedDeltaNet(cfg)).to("cuda", torch.bfloat16).eval()
    x = torch.randn(1, 16, 256, device="cuda", dtype=torch.bfloat16)
    with torch.no_grad():
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            m(x)
        torch.cuda.current_stream().wait_stream(s)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            out = m(x)
        x.copy_(torch.randn_like(x))
        graph.replay()
        torch.cuda.synchronize()
        assert rel_err(out, m(x)) <= 1e-2  # the new input (GEMMs may pick other algorithms)

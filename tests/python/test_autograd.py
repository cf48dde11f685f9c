"""Gradients of deltac.ops on the CPU (deltac's backward kernel, runtime deltac_backward).

* gradcheck in float64 (deltac's backward computed in double against finite
  differences of the float64 forward) for every variant and option;
* float32 / bfloat16 gradients against a float64 PyTorch-autograd reference written
  here (``ref_forward``) at T ~ 512-1024;
* -inf and near -30 gates give finite gradients; torch.compile;
* CUDA (skipped without a GPU): f32 / bf16 / f16 gradients of deltac's CUDA backward
  against the same float64 reference (GVA, varlen with a 1-token tail, h0 and dht),
  CUDA == CPU, and a training step captured in a CUDA graph.
"""

import math

import pytest
import torch

from deltac import _lib, ops

from reference import rel_err

VARIANTS = ["delta", "gated", "kda"]


@pytest.fixture(autouse=True)
def one_thread(request):
    """One torch (and so kernel) thread, except in the long tests (the kernel's
    OpenMP loop over heads): tiny tensors, and 2-thread regions on a busy 2-core
    machine wait for the scheduler."""
    if request.node.name.startswith("test_grads_vs_reference_long"):
        yield
        return
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
CHUNK = {"delta": ops.chunk_delta_rule, "gated": ops.chunk_gated_delta_rule, "kda": ops.chunk_kda}


def ref_forward(q, k, v, g, beta, h0=None, scale=None, cu_seqlens=None, l2=False,
                state_v_first=False):
    """The recurrence of params.h in differentiable float64 PyTorch (autograd gives
    the reference gradients). Returns (o, ht)."""
    q, k, v, beta = (t.double() for t in (q, k, v, beta))
    g = None if g is None else g.double()
    B, T, H, K = q.shape
    HV, V = v.shape[2], v.shape[3]
    if l2:
        q = q / torch.sqrt((q * q).sum(-1, keepdim=True) + 1e-6)
        k = k / torch.sqrt((k * k).sum(-1, keepdim=True) + 1e-6)
    scale = 1.0 / math.sqrt(K) if scale is None else scale
    q = q.repeat_interleave(HV // H, dim=2)
    k = k.repeat_interleave(HV // H, dim=2)
    if cu_seqlens is not None:
        cu = [int(x) for x in cu_seqlens.tolist()]
        seqs = [(0, cu[n], cu[n + 1]) for n in range(len(cu) - 1)]
    else:
        seqs = [(b, 0, T) for b in range(B)]
    outs = [[None] * T for _ in range(B)]
    hts = []
    for n, (b, s, e) in enumerate(seqs):
        if h0 is not None:
            h = h0[n].double()
            h = h.transpose(-1, -2) if state_v_first else h
        else:
            h = torch.zeros(HV, K, V, dtype=torch.float64)
        for t in range(s, e):
            if g is not None:
                a = torch.exp(g[b, t])
                h = h * (a[:, None, None] if g.dim() == 3 else a[:, :, None])
            u = beta[b, t][:, None] * (v[b, t] - torch.einsum("hkv,hk->hv", h, k[b, t]))
            h = h + k[b, t][:, :, None] * u[:, None, :]
            outs[b][t] = scale * torch.einsum("hkv,hk->hv", h, q[b, t])
        hts.append(h.transpose(-1, -2) if state_v_first else h)
    zero = torch.zeros(HV, V, dtype=torch.float64)
    o = torch.stack([torch.stack([x if x is not None else zero for x in row]) for row in outs])
    return o, torch.stack(hts)


def make(variant, B, T, H, HV, K, V, dtype, beta_max=1.0, g_lo=-1.0, l2=True, N=None):
    """Random leaf tensors (float64 masters cast to dtype); g a log decay <= 0."""
    def leaf(x):
        return x.to(dtype).detach().requires_grad_()
    kk = torch.randn(B, T, H, K)
    if not l2:
        kk = torch.nn.functional.normalize(kk, dim=-1)
    q, k, v = leaf(torch.randn(B, T, H, K)), leaf(kk), leaf(torch.randn(B, T, HV, V))
    fdt = torch.float64 if dtype == torch.float64 else torch.float32
    beta = (0.05 + (beta_max - 0.1) * torch.rand(B, T, HV)).to(fdt).requires_grad_()
    g = None
    if variant != "delta":
        shape = (B, T, HV) if variant == "gated" else (B, T, HV, K)
        g = (g_lo * torch.rand(shape)).to(fdt).requires_grad_()
    h0 = (0.5 * torch.randn(N or B, HV, K, V)).to(fdt).requires_grad_()
    return q, k, v, g, beta, h0


def call(variant, q, k, v, g, beta, h0, **kw):
    if variant == "delta":
        return ops.chunk_delta_rule(q, k, v, beta, initial_state=h0, **kw)
    return CHUNK[variant](q, k, v, g, beta, initial_state=h0, **kw)


# ---------------------------------------------------------------------------
# gradcheck (float64)
# ---------------------------------------------------------------------------

GRADCHECK = [  # name, kwargs of the case
    ("plain", dict()),
    ("gva_l2", dict(H=1, HV=2, l2=True)),
    ("varlen", dict(varlen=True)),
    ("beta02_scale_vk", dict(beta_max=2.0, scale=0.3, state_v_first=True)),
    ("no_h0_no_final", dict(h0=False, final=False)),
]


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("name,case", GRADCHECK, ids=[c[0] for c in GRADCHECK])
def test_gradcheck_f64(variant, name, case, seed):
    H, HV = case.get("H", 1), case.get("HV", 1)
    varlen = case.get("varlen", False)
    B, T = (1, 7) if varlen else (2, 3)
    cu = torch.tensor([0, 2, 2, 7]) if varlen else None
    N = 3 if varlen else B
    q, k, v, g, beta, h0 = make(variant, B, T, H, HV, 16, 16, torch.float64,
                                beta_max=case.get("beta_max", 1.0), l2=True, N=N)
    use_h0 = case.get("h0", True)
    final = case.get("final", True)
    svf = case.get("state_v_first", False)
    kw = dict(output_final_state=final, use_qk_l2norm_in_kernel=case.get("l2", name == "plain"),
              cu_seqlens=cu, scale=case.get("scale"))
    if svf:
        kw["state_v_first"] = True
        if variant == "delta":
            pytest.skip("chunk_delta_rule has no state_v_first (fla's signature)")
    inputs = [q, k, v, beta] + ([g] if g is not None else []) + ([h0] if use_h0 else [])

    def f(*xs):
        q, k, v, beta = xs[:4]
        gg = xs[4] if g is not None else None
        hh = xs[-1] if use_h0 else None
        o, ht = call(variant, q, k, v, gg, beta, hh, **kw)
        return (o, ht) if final else o

    # Full Jacobians for the small cases; random projections (fast mode) with h0.
    assert torch.autograd.gradcheck(f, inputs, eps=1e-6, atol=1e-7, rtol=1e-5,
                                    fast_mode=use_h0)


# ---------------------------------------------------------------------------
# f32 / bf16 against the float64 autograd reference, long sequences
# ---------------------------------------------------------------------------

def grads_vs_reference(variant, dtype, B, T, H, HV, K, V, beta_max=1.0, g_lo=-1.0,
                       gate_edit=None, cu=None, l2=True, device="cpu"):
    N = len(cu) - 1 if cu is not None else B
    q, k, v, g, beta, h0 = make(variant, B, T, H, HV, K, V, dtype, beta_max, g_lo, l2, N)
    if gate_edit is not None:
        with torch.no_grad():
            gate_edit(g)
    do = torch.randn(B, T, HV, V)
    dht = torch.randn(N, HV, K, V)
    ins = [t for t in (q, k, v, g, beta, h0) if t is not None]
    if device != "cpu":
        q, k, v, g, beta, h0 = (None if t is None else t.detach().to(device).requires_grad_()
                                for t in (q, k, v, g, beta, h0))
    o, ht = call(variant, q, k, v, g, beta, h0, output_final_state=True,
                 use_qk_l2norm_in_kernel=l2,
                 cu_seqlens=None if cu is None else cu.to(device))
    dev_ins = [t for t in (q, k, v, g, beta, h0) if t is not None]
    got = torch.autograd.grad((o, ht), dev_ins, (do.to(device, o.dtype), dht.to(device)))
    got = [t.cpu() for t in got]
    # the reference on the same (rounded) values
    rins = [t.detach().double().requires_grad_() for t in ins]
    rq, rk, rv = rins[:3]
    rg = rins[3] if g is not None else None
    rbeta, rh0 = rins[-2], rins[-1]
    ro, rht = ref_forward(rq, rk, rv, rg, rbeta, rh0, cu_seqlens=cu, l2=l2)
    want = torch.autograd.grad((ro, rht), rins, (do.double(), dht.double()))
    names = ["q", "k", "v"] + (["g"] if g is not None else []) + ["beta", "h0"]
    errs = {n: rel_err(a, b) for n, a, b in zip(names, got, want)}
    finite = all(torch.isfinite(a).all() for a in got)
    return errs, finite


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("dtype,tol", [(torch.float32, 1e-5), (torch.bfloat16, 1e-2)],
                         ids=["f32", "bf16"])
def test_grads_vs_reference_long(variant, dtype, tol, seed):
    errs, finite = grads_vs_reference(variant, dtype, 1, 768, 1, 2, 32, 32, beta_max=2.0
                                      if variant == "delta" else 1.0, g_lo=-0.1)
    print(variant, dtype, errs)
    assert finite
    assert max(errs.values()) <= tol, errs


@pytest.mark.parametrize("variant", VARIANTS)
def test_grads_varlen_gva_f32(variant, seed):
    cu = torch.tensor([0, 100, 101, 101, 300])
    errs, finite = grads_vs_reference(variant, torch.float32, 1, 300, 2, 4, 16, 32, cu=cu)
    print(variant, errs)
    assert finite and max(errs.values()) <= 1e-5, errs


@pytest.mark.parametrize("variant", ["gated", "kda"])
def test_reset_and_strong_gates_are_finite(variant, seed):
    def edit(g):
        g.copy_(-30.0 + 2.0 * torch.rand_like(g))  # near -30: e^g ~ 1e-13
        flat = g.view(-1)
        flat[::7] = -math.inf  # resets
    errs, finite = grads_vs_reference(variant, torch.float32, 1, 200, 1, 1, 16, 16,
                                      gate_edit=edit)
    print(variant, errs)
    assert finite
    assert max(errs.values()) <= 1e-5, errs


# ---------------------------------------------------------------------------
# Machinery: torch.compile, the layer, CUDA, what has no backward
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_backward_under_compile(backend, seed):
    q, k, v, g, beta, h0 = make("gated", 2, 19, 1, 2, 32, 32, torch.float32)

    def step(q, k, v, g, beta, h0):
        o, ht = ops.chunk_gated_delta_rule(q, k, v, g, torch.sigmoid(beta), initial_state=h0,
                                           output_final_state=True,
                                           use_qk_l2norm_in_kernel=True)
        return (o * o).sum() + ht.sum()

    ins = (q, k, v, g, beta, h0)
    want = torch.autograd.grad(step(*ins), ins)
    got = torch.autograd.grad(torch.compile(step, backend=backend, fullgraph=True)(*ins), ins)
    for a, b in zip(got, want):
        assert rel_err(a, b) <= 1e-6


def test_runtime_names_the_bad_field():
    import ctypes
    from deltac import _lib
    p = _lib.BwdParams()
    assert _lib.lib.deltac_backward(ctypes.byref(p), None) != 0
    assert b"params.B" in _lib.lib.deltac_last_error()


FUSED = {"delta": ops.fused_recurrent_delta_rule, "gated": ops.fused_recurrent_gated_delta_rule,
         "kda": ops.fused_recurrent_kda}


@pytest.mark.parametrize("variant", VARIANTS)
def test_fused_recurrent_grads_equal_chunk(variant, seed):
    """The fused_recurrent_* functions take the same backward (their forward kernel
    differs): gradients equal the chunk_* ones; fla's gate/beta pre-processing
    (use_beta_sigmoid_in_kernel) differentiates through PyTorch."""
    q, k, v, g, beta, h0 = make(variant, 2, 11, 1, 2, 32, 32, torch.float32)
    kw = dict(initial_state=h0, output_final_state=True, use_qk_l2norm_in_kernel=True,
              use_beta_sigmoid_in_kernel=True)
    ins = [t for t in (q, k, v, g, beta, h0) if t is not None]
    grads = []
    for fn in (FUSED[variant], CHUNK[variant]):
        if variant == "delta":  # no sigmoid option in fla's delta-rule signatures
            o, ht = fn(q, k, v, torch.sigmoid(beta), initial_state=h0,
                       output_final_state=True, use_qk_l2norm_in_kernel=True)
        elif fn is ops.fused_recurrent_gated_delta_rule:
            o, ht = fn(q, k, v, g, beta=beta, **kw)
        else:
            o, ht = fn(q, k, v, g, beta, **kw)
        grads.append(torch.autograd.grad((o * o).sum() + ht.sum(), ins))
    for a, b in zip(*grads):
        assert rel_err(a, b) <= 1e-6


# ---------------------------------------------------------------------------
# CUDA (deltac's CUDA backward; skipped without a GPU)
# ---------------------------------------------------------------------------

needs_cuda = pytest.mark.skipif(
    not (torch.cuda.is_available() and _lib.cuda_available()),
    reason="no CUDA device, or deltac built without CUDA")


@needs_cuda
@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("dtype,tol", [(torch.float32, 1e-5), (torch.bfloat16, 1e-2),
                                       (torch.float16, 5e-3)], ids=["f32", "bf16", "f16"])
def test_cuda_grads_vs_reference(variant, dtype, tol, seed):
    """GVA 2, varlen with a 1-token tail, h0 and dht, K = V = 64."""
    cu = torch.tensor([0, 130, 200, 299, 300])
    errs, finite = grads_vs_reference(variant, dtype, 1, 300, 1, 2, 64, 64, cu=cu,
                                      device="cuda")
    print(variant, dtype, errs)
    assert finite
    assert max(errs.values()) <= tol, errs


@needs_cuda
@pytest.mark.parametrize("variant", VARIANTS)
def test_cuda_grads_equal_cpu(variant, seed):
    q, k, v, g, beta, h0 = make(variant, 2, 150, 2, 4, 128, 128, torch.float32,
                                beta_max=2.0, g_lo=-0.5)
    ins = [t for t in (q, k, v, g, beta, h0) if t is not None]
    grads = []
    for dev in ("cpu", "cuda"):
        xs = [t.detach().to(dev).requires_grad_() for t in ins]
        xq, xk, xv = xs[:3]
        xg = xs[3] if g is not None else None
        o, ht = call(variant, xq, xk, xv, xg, xs[-2], xs[-1], output_final_state=True,
                     use_qk_l2norm_in_kernel=True)
        loss = (o.float() * torch.linspace(-1, 1, o.shape[-1], device=dev)).sum() + ht.sum()
        grads.append([t.cpu() for t in torch.autograd.grad(loss, xs)])
    for a, b in zip(*grads):
        assert rel_err(a, b) <= 1e-5


@needs_cuda
def test_cuda_training_step_in_a_graph(seed):
    """Forward + backward captured in a CUDA graph (no host sync inside) and replayed."""
    q, k, v, g, beta, h0 = (None if t is None else t.detach().cuda().requires_grad_()
                            for t in make("gated", 2, 200, 2, 4, 64, 64, torch.bfloat16))
    ins = (q, k, v, g, beta, h0)

    def step():
        o, ht = ops.chunk_gated_delta_rule(q, k, v, g, beta, initial_state=h0,
                                           output_final_state=True,
                                           use_qk_l2norm_in_kernel=True)
        return torch.autograd.grad(o.float().square().sum() + ht.sum(), ins)

    want = step()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        step()  # warm-up on the side stream
    torch.cuda.current_stream().wait_stream(s)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        got = step()
    graph.replay()
    torch.cuda.synchronize()
    for a, b in zip(got, want):
        assert rel_err(a.float(), b.float()) <= 1e-3  # atomics: not bit-identical


@needs_cuda
@pytest.mark.parametrize("variant", ["delta", "gated"])
@pytest.mark.parametrize("D", [64, 128])
def test_cuda_saved_states(variant, D, seed, monkeypatch):
    """bf16 autograd on CUDA with DELTAC_SAVE_STATES=1 runs fwd_saved (the backward
    reads the forward's chunk states); its gradients agree with the recomputing
    backward (the default) and with the float64 reference."""
    monkeypatch.setattr(ops, "_SAVE_STATES", True)
    calls = []
    fwd_saved = ops.delta_rule_fwd_saved
    monkeypatch.setattr(ops, "delta_rule_fwd_saved",
                        lambda *a: calls.append(1) or fwd_saved(*a))
    torch.manual_seed(seed)
    errs, finite = grads_vs_reference(variant, torch.bfloat16, 2, 300, 1, 2, D, D,
                                      device="cuda")
    assert calls, "fwd_saved did not run"
    assert finite and max(errs.values()) <= 1e-2, errs
    monkeypatch.setattr(ops, "_SAVE_STATES", False)
    torch.manual_seed(seed)  # the same inputs
    errs0, _ = grads_vs_reference(variant, torch.bfloat16, 2, 300, 1, 2, D, D, device="cuda")
    assert len(calls) == 1
    print(variant, D, "saved", errs, "recomputed", errs0)
    for n in errs:  # the same accuracy either way
        assert abs(errs[n] - errs0[n]) <= 2e-3, (n, errs[n], errs0[n])


def test_saved_states_default_follows_the_runtime(monkeypatch):
    """DELTAC_SAVE_STATES unset: an autograd call keeps the chunk states exactly
    where the runtime says it pays (deltac_saved_states_pay); never for CPU tensors,
    f32 inputs or beta up to 2; =0 never, =1 wherever they are offered."""
    monkeypatch.setattr(ops, "_SAVE_STATES", None)
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    q = torch.zeros(2, 256, 1, 64, dtype=torch.bfloat16, device=dev)
    v = torch.zeros(2, 256, 4, 64, dtype=torch.bfloat16, device=dev)
    args = (ops.VARIANT_DELTA, 512, 2, 4, 64, 64, _lib.DTYPE_BF16)
    pay = _lib.saved_states_pay(*args)
    assert pay in (0, 1)
    if not torch.cuda.is_available():
        assert pay == 0
    assert ops._saves_states(ops.VARIANT_DELTA, q, v, None, False) == (pay == 1 and q.is_cuda)
    assert not ops._saves_states(ops.VARIANT_DELTA, q, v, None, True)
    assert not ops._saves_states(ops.VARIANT_DELTA, q.float(), v.float(), None, False)
    assert not ops._saves_states(ops.VARIANT_DELTA, q.cpu(), v.cpu(), None, False)
    monkeypatch.setattr(ops, "_SAVE_STATES", False)
    assert not ops._saves_states(ops.VARIANT_DELTA, q, v, None, False)
    monkeypatch.setattr(ops, "_SAVE_STATES", True)
    assert ops._saves_states(ops.VARIANT_DELTA, q, v, None, False) == q.is_cuda

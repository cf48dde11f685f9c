"""The fused layer kernels' C API (deltac/fused_ops.h) and their deltac.ops wrappers
refuse bad input with a message naming the argument; these run anywhere (no GPU: the
calls fail their checks before any launch). The CUDA results: test_cuda.py -k fused."""

import re

import pytest
import torch

from deltac import _lib, ops

L = _lib.lib
P = 1 << 20  # a non-null pointer value; never dereferenced (every call here fails first)
F32, BF16 = _lib.DTYPE_F32, _lib.DTYPE_BF16

# deltac_conv_gates' arguments in order: B=1, T=4, H=2, HV=4, K=16, V=32, W=4, C=192
CONV = dict(y=P, ldy=192, y_group=0, conv_w=P, conv_b=0, state_in=0, state_out=0, b=P, a=P,
            ldba=8, ba_heads=4, ba_group=0, A_log=P, dt_bias=P, beta_scale=1.0, q=P, k=P, v=P,
            beta=P, g=P, B=1, T=4, H=2, HV=4, K=16, V=32, W=4, dtype=BF16, param_dtype=F32,
            stream=None)
NORM = dict(o=P, z=P, out=P, rows=4, heads=4, D=128, ldz=512, z_heads=4, z_group=0, w=P,
            eps=1e-6, dtype=BF16, param_dtype=F32, stream=None)
LN = dict(o=P, g=P, out=P, rows=4, heads=2, D=64, w=P, b=P, eps=1e-5, dtype=BF16,
          param_dtype=F32, stream=None)
SIG = dict(x=P, out=P, n=16, scale=1.0, dtype=BF16, stream=None)

CASES = [
    ("deltac_conv_gates", CONV, dict(W=9), "deltac_conv_gates: W = 9: expected 1..8"),
    ("deltac_conv_gates", CONV, dict(W=0), "W = 0"),
    ("deltac_conv_gates", CONV, dict(dtype=2), "dtype = 2: expected 0 \\(f32\\) or 1 \\(bf16\\)"),
    ("deltac_conv_gates", CONV, dict(param_dtype=7), "param_dtype = 7"),
    ("deltac_conv_gates", CONV, dict(B=0), "B = 0: expected >= 1"),
    ("deltac_conv_gates", CONV, dict(T=-1), "T = -1"),
    ("deltac_conv_gates", CONV, dict(HV=3), "HV = 3: expected a multiple of H = 2"),
    ("deltac_conv_gates", CONV, dict(ldy=191), "ldy = 191: expected >= 2 H K \\+ HV V = 192"),
    ("deltac_conv_gates", CONV, dict(y_group=10, ldy=1000), "y_group = 10"),
    ("deltac_conv_gates", CONV, dict(y_group=96, ldy=100), "ldy = 100: expected >= H \\* y_group"),
    ("deltac_conv_gates", CONV, dict(ba_heads=3), "ba_heads = 3"),
    ("deltac_conv_gates", CONV, dict(ba_heads=2, ba_group=1), "ba_group = 1"),
    ("deltac_conv_gates", CONV, dict(ldba=3), "ldba = 3: expected >= 4"),
    ("deltac_conv_gates", CONV, dict(y=0), "y is NULL"),
    ("deltac_conv_gates", CONV, dict(dt_bias=0), "dt_bias is NULL"),
    ("deltac_conv_gates", CONV, dict(g=0), "g is NULL"),
    ("deltac_conv_gates", CONV, dict(beta_scale=float("nan")), "beta_scale is not finite"),
    ("deltac_gated_rmsnorm", NORM, dict(D=257), "deltac_gated_rmsnorm: D = 257: expected 1..256"),
    ("deltac_gated_rmsnorm", NORM, dict(z_heads=3), "z_heads = 3"),
    ("deltac_gated_rmsnorm", NORM, dict(z_heads=2, z_group=100), "z_group = 100"),
    ("deltac_gated_rmsnorm", NORM, dict(ldz=511), "ldz = 511: expected >= 512"),
    ("deltac_gated_rmsnorm", NORM, dict(rows=0), "rows = 0"),
    ("deltac_gated_rmsnorm", NORM, dict(z=0), "z is NULL"),
    ("deltac_gated_rmsnorm", NORM, dict(eps=-1.0), "eps must be finite and >= 0"),
    ("deltac_gated_rmsnorm", NORM, dict(dtype=-1), "dtype = -1"),
    ("deltac_layernorm_gate", LN, dict(D=0), "deltac_layernorm_gate: D = 0"),
    ("deltac_layernorm_gate", LN, dict(b=0), "b is NULL"),
    ("deltac_layernorm_gate", LN, dict(heads=0), "heads = 0"),
    ("deltac_layernorm_gate", LN, dict(param_dtype=2), "param_dtype = 2"),
    ("deltac_sigmoid", SIG, dict(n=0), "deltac_sigmoid: n = 0: expected >= 1"),
    ("deltac_sigmoid", SIG, dict(out=0), "out is NULL"),
    ("deltac_sigmoid", SIG, dict(scale=float("inf")), "scale is not finite"),
]


def call(fn, base, **over):
    args = dict(base, **over)
    rc = getattr(L, fn)(*args.values())
    return rc, _lib.last_error()


@pytest.mark.parametrize("fn,base,bad,msg", CASES,
                         ids=[f"{c[0][7:]}-{'-'.join(f'{k}={v}' for k, v in c[2].items())}"
                              for c in CASES])
def test_fused_c_api_rejects_bad_input(fn, base, bad, msg):
    rc, err = call(fn, base, **bad)
    assert rc != 0
    assert err.startswith(fn + ": ")
    assert re.search(msg, err), err


@pytest.mark.skipif(_lib.cuda_available(), reason="a usable GPU: valid arguments would launch")
@pytest.mark.parametrize("fn,base", [("deltac_conv_gates", CONV), ("deltac_gated_rmsnorm", NORM),
                                     ("deltac_layernorm_gate", LN), ("deltac_sigmoid", SIG)])
def test_fused_c_api_without_cuda_says_so(fn, base):
    rc, err = call(fn, base)
    assert rc != 0
    assert ("no CUDA support" in err or "no usable CUDA device" in err), err


def test_fused_ops_refuse_cpu_tensors():
    x = torch.randn(2, 3, 4)
    with pytest.raises(ValueError, match="deltac.ops.sigmoid: .*CUDA only"):
        ops.sigmoid(x)
    o, g = torch.randn(2, 3, 2, 16), torch.randn(2, 3, 32)
    with pytest.raises(ValueError, match="deltac.ops.layernorm_gate: .*CUDA only"):
        ops.layernorm_gate(o, g, torch.ones(16), torch.zeros(16), 1e-5)
    with pytest.raises(ValueError, match="deltac.ops.gated_rmsnorm: .*CUDA only"):
        ops.gated_rmsnorm(o, g, torch.ones(16), 1e-6)


def test_fused_ops_no_backward():
    x = torch.randn(4, requires_grad=True)
    with pytest.raises(RuntimeError, match="deltac.ops.sigmoid has no backward"):
        ops.sigmoid(x)

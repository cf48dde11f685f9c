"""deltac.ops as a drop-in for flash-linear-attention: same call, same inputs, both libraries.

Needs a GPU, a CUDA build of deltac and fla importable (on the H200:
PYTHONPATH=<repo>/.peer with the fetched fla; never committed). Each case skips otherwise.
The calling code is written once against a module namespace, so switching is one import.
"""

import importlib

import pytest
import torch

import deltac
import deltac.ops

from reference import delta_rule, rel_err


def _fla(name):
    try:
        return importlib.import_module(name)
    except Exception:  # noqa: BLE001 - no fla, no triton, no GPU
        return None


READY = torch.cuda.is_available() and deltac.cuda_available()
FLA = {
    "delta": _fla("fla.ops.delta_rule") if READY else None,
    "gated": _fla("fla.ops.gated_delta_rule") if READY else None,
    "kda": _fla("fla.ops.kda") if READY else None,
}
FNS = {
    "delta": ("chunk_delta_rule", "fused_recurrent_delta_rule"),
    "gated": ("chunk_gated_delta_rule", "fused_recurrent_gated_delta_rule"),
    "kda": ("chunk_kda", "fused_recurrent_kda"),
}
CASES = [(variant, fn) for variant, fns in FNS.items() for fn in fns]


def layer_step(lib, fn, q, k, v, g, beta, h0, cu_seqlens):
    """The caller's code: identical for fla and deltac but for `lib`."""
    f = getattr(lib, fn)
    if fn.endswith("delta_rule") and "gated" not in fn:
        return f(q, k, v, beta, initial_state=h0, output_final_state=True,
                 use_qk_l2norm_in_kernel=True, cu_seqlens=cu_seqlens)
    if fn == "fused_recurrent_gated_delta_rule":
        return f(q, k, v, g=g, beta=beta, initial_state=h0, output_final_state=True,
                 use_qk_l2norm_in_kernel=True, cu_seqlens=cu_seqlens)
    return f(q, k, v, g, beta, initial_state=h0, output_final_state=True,
             use_qk_l2norm_in_kernel=True, cu_seqlens=cu_seqlens)


@pytest.mark.parametrize("varlen", [False, True], ids=["batch", "varlen"])
@pytest.mark.parametrize("variant,fn", CASES, ids=[c[1] for c in CASES])
def test_fla_dropin(variant, fn, varlen, seed):
    if not READY:
        pytest.skip("needs a GPU and a CUDA build of deltac")
    if FLA[variant] is None:
        pytest.skip("flash-linear-attention (fla) is not importable")
    B, T, H, HV, K, V = (1, 300, 4, 8, 128, 128) if varlen else (2, 150, 4, 8, 128, 128)
    if variant != "gated":
        H = HV  # GVA is tested on the gated rule (fla's delta rule has none)
    dev, bf = "cuda", torch.bfloat16
    q = torch.randn(B, T, H, K, device=dev, dtype=bf)
    k = torch.randn(B, T, H, K, device=dev, dtype=bf)
    v = torch.randn(B, T, HV, V, device=dev, dtype=bf)
    beta = torch.rand(B, T, HV, device=dev, dtype=bf)
    g = None
    if variant == "gated":
        g = torch.nn.functional.logsigmoid(torch.randn(B, T, HV, device=dev)) * 0.1
    elif variant == "kda":
        g = torch.nn.functional.logsigmoid(torch.randn(B, T, HV, K, device=dev)) * 0.1
    cu = torch.tensor([0, 40, 41, 190, 300], device=dev) if varlen else None
    N = 4 if varlen else B
    h0 = 0.1 * torch.randn(N, HV, K, V, device=dev)

    o_f, ht_f = layer_step(FLA[variant], fn, q, k, v, g, beta, h0, cu)
    o_d, ht_d = layer_step(deltac.ops, fn, q, k, v, g, beta, h0, cu)
    assert o_d.dtype == o_f.dtype and o_d.shape == o_f.shape
    assert ht_d.dtype == ht_f.dtype and ht_d.shape == ht_f.shape
    ro, rht = delta_rule(q, k, v, beta.float(), g, h0=h0, cu_seqlens=cu, l2=True)
    e_f, e_d = rel_err(o_f, ro), rel_err(o_d, ro)
    print(f"{fn} {'varlen' if varlen else 'batch'}: rel. error vs float64 reference: "
          f"fla {e_f:.2e}, deltac {e_d:.2e}; state fla {rel_err(ht_f, rht):.2e}, "
          f"deltac {rel_err(ht_d, rht):.2e}; deltac vs fla {rel_err(o_d, o_f):.2e}")
    assert e_d <= 5e-3 and rel_err(ht_d, rht) <= 5e-3
    assert rel_err(o_d, o_f) <= 2e-2


def _fla_signatures():
    """Positional parameter names of fla's functions, read from its source (no import)."""
    import ast
    import os

    root = os.path.join(os.path.dirname(__file__), "..", "..", ".peer", "fla", "ops")
    files = {"delta_rule": ["chunk.py", "fused_recurrent.py"],
             "gated_delta_rule": ["chunk.py", "fused_recurrent.py"], "kda": ["chunk.py", "fused_recurrent.py"]}
    sigs = {}
    for sub, names in files.items():
        for name in names:
            path = os.path.join(root, sub, name)
            if not os.path.exists(path):
                return None
            tree = ast.parse(open(path).read())
            for node in tree.body:
                if isinstance(node, ast.FunctionDef) and node.name in {f for fs in FNS.values() for f in fs}:
                    sigs[node.name] = [a.arg for a in node.args.args]
    return sigs


def test_signatures_match_fla_source():
    import inspect

    sigs = _fla_signatures()
    if not sigs:
        pytest.skip("no fla source at .peer/fla (fetched, git-ignored)")
    for name, fla_params in sigs.items():
        ours = [p.name for p in inspect.signature(getattr(deltac.ops, name)).parameters.values()
                if p.kind in (p.POSITIONAL_OR_KEYWORD, p.POSITIONAL_ONLY)]
        assert ours[:len(fla_params)] == fla_params, name

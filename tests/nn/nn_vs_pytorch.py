"""The C++ layers (deltac-nn, examples/nn) vs the PyTorch modules (deltac.nn)
on the same weights and inputs: each case builds a module with a fixed seed,
writes its state_dict, the config, an input x and the module's output y to one
safetensors file (the format written here by hand: 8-byte header length, JSON,
float32 data), runs deltac-nn --expect=y and requires a relative error
(max |y_cpp - y| / max |y|) <= 1e-5 (BitLinear: 1e-2, see CASES); decoder cases also check prompt + decode
steps == whole sequence in C++. Seed: DELTAC_TEST_SEED (decimal or 0x hex),
else a fresh one; printed first.

    python nn_vs_pytorch.py DELTAC_NN_BINARY [--bench[=NAME]]
--bench instead times the PyTorch modules and deltac-nn at Qwen3-Next sizes
(hidden 2048, 16/32 heads, K = V = 128, T = 1024, f32; DeltaNetAttention also
with use_bitnet) and KimiDeltaAttention at Kimi-Linear's (hidden 2304, 32
heads, D = 128) on the CPU; --bench=NAME only the layers whose name holds NAME.
"""
import dataclasses
import json
import os
import random
import struct
import subprocess
import sys
import tempfile
import time

import torch

from deltac.nn import DeltaNetAttention, GatedDeltaNet
from deltac.nn.deltanet import DeltaNetConfig
from deltac.nn.gated_deltanet import GatedDeltaNetConfig
from deltac.nn.kda import KimiDeltaAttention, KimiDeltaAttentionConfig


def save_safetensors(path, tensors, metadata):
    header, blobs, off = {}, [], 0
    for name, t in tensors.items():
        b = t.detach().to(torch.float32).contiguous().numpy().tobytes()
        header[name] = {"dtype": "F32", "shape": list(t.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    header["__metadata__"] = {k: str(v) for k, v in metadata.items()}
    h = json.dumps(header).encode()
    h += b" " * (-(8 + len(h)) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h)
        for b in blobs:
            f.write(b)


def seed_from_env():
    s = os.environ.get("DELTAC_TEST_SEED")
    return int(s, 0) if s else random.getrandbits(63)


def randomize(module):
    # Non-trivial norm weights and biases (their defaults are 1 and 0).
    with torch.no_grad():
        for name, p in module.named_parameters():
            if name.startswith(("norm.", "o_norm.")) or name == "dt_bias":
                p.copy_(torch.randn_like(p) * 0.5 + (1.0 if name.endswith("weight") else 0.0))


def deltanet(hidden, heads, **kw):
    cfg = dict(hidden_size=hidden, num_heads=heads, **kw)
    return DeltaNetAttention(DeltaNetConfig(**cfg)), dict(cfg, layer="deltanet")


def gated(layout, **kw):
    cfg = dict(hidden_size=96, linear_num_key_heads=2, linear_num_value_heads=4,
               linear_key_head_dim=32, linear_value_head_dim=48, linear_conv_kernel_dim=4)
    cfg.update(kw)
    m = GatedDeltaNet(GatedDeltaNetConfig(**cfg), layout=layout)
    meta = dict(cfg, layer="gated_deltanet", layout=layout)
    if "rms_norm_eps" not in kw:
        meta["rms_norm_eps"] = repr(m.layer_norm_epsilon)
    return m, meta


def kda(hidden=96, heads=3, head_dim=32, conv=4, eps=1e-5):
    lac = dict(num_heads=heads, head_dim=head_dim, short_conv_kernel_size=conv)
    m = KimiDeltaAttention(KimiDeltaAttentionConfig(hidden_size=hidden, rms_norm_eps=eps,
                                                    linear_attn_config=lac))
    return m, dict(lac, layer="kda", hidden_size=hidden, rms_norm_eps=repr(eps))


# (name, module and metadata, B, T, decode split or None, tolerance). BitLinear
# quantises out_proj's input (the gated readout) to 8 bits per token: a readout
# value that the two implementations compute 1e-7 apart can round to adjacent
# steps (an error of max|o| / 127 in that element), so a few flips are legal
# there: its bound is 1e-2, the float layers' 1e-5.
CASES = [
    ("deltanet", lambda: deltanet(128, 2), 2, 37, None, 1e-5),
    ("deltanet_decoder", lambda: deltanet(64, 4, mode="decoder"), 3, 20, 7, 1e-5),
    ("deltanet_bitnet", lambda: deltanet(128, 4, use_bitnet=True), 2, 19, None, 1e-2),
    ("gated_qwen3_next", lambda: gated("qwen3_next"), 2, 37, 11, 1e-5),
    ("gated_qwen3_5", lambda: gated("qwen3_5"), 1, 29, 5, 1e-5),
    ("gated_olmo_hybrid", lambda: gated("olmo_hybrid"), 2, 17, 3, 1e-5),
    ("gated_neg_eigval", lambda: gated("qwen3_next", linear_allow_neg_eigval=True,
                                       linear_num_value_heads=2), 2, 23, None, 1e-5),
    ("kda", lambda: kda(), 2, 37, 11, 1e-5),
    ("kda_d64_conv3", lambda: kda(hidden=64, heads=2, head_dim=64, conv=3, eps=1e-6), 1, 70, 2,
     1e-5),
]


def check(binary, tmp, seed):
    failed = 0
    for i, (name, make, B, T, split, tol) in enumerate(CASES):
        torch.manual_seed(seed + i)
        m, meta = make()
        randomize(m)
        m.eval()
        x = torch.randn(B, T, meta["hidden_size"])
        with torch.no_grad():
            y = m(x)
        tensors = dict(m.state_dict())
        tensors.update(x=x, y=y)
        path = os.path.join(tmp, name + ".safetensors")
        save_safetensors(path, tensors, meta)
        cmd = [binary, "--weights=" + path, "--expect=y", f"--tol={tol}"]
        if split:
            cmd.append(f"--decode-split={split}")
        r = subprocess.run(cmd, capture_output=True, text=True)
        ok = r.returncode == 0
        failed += not ok
        print(f"{'ok  ' if ok else 'FAIL'} {name} (B={B}, T={T}): "
              + " | ".join(l.split(": ", 1)[-1] for l in (r.stdout + r.stderr).strip().splitlines()))
    return failed


def bench(binary, tmp, threads, only=""):
    torch.manual_seed(0)
    T, reps = 1024, 3
    rows = []
    for name, make in (
            ("DeltaNetAttention (hidden 2048, 16 heads, D 128)", lambda: deltanet(2048, 16)),
            ("DeltaNetAttention use_bitnet (hidden 2048, 16 heads, D 128)",
             lambda: deltanet(2048, 16, use_bitnet=True)),
            ("GatedDeltaNet qwen3_next (hidden 2048, 16/32 heads, K=V=128)",
             lambda: gated("qwen3_next", **dataclasses.asdict(GatedDeltaNetConfig()))),
            ("KimiDeltaAttention (hidden 2304, 32 heads, D 128)", lambda: kda(2304, 32, 128))):
        if only not in name:
            continue
        m, meta = make()
        m.eval()
        x = torch.randn(1, T, meta["hidden_size"])
        with torch.inference_mode():
            m(x)
            t0 = time.perf_counter()
            for _ in range(reps):
                m(x)
            py_ms = (time.perf_counter() - t0) / reps * 1e3
        path = os.path.join(tmp, "bench.safetensors")
        save_safetensors(path, dict(m.state_dict()), meta)
        r = subprocess.run([binary, "--weights=" + path, f"--random=1,{T}", f"--repeat={reps}",
                            f"--threads={threads}"], capture_output=True, text=True, check=True)
        cpp_ms = float(r.stdout.strip().splitlines()[-1].split()[1])
        rows.append((name, py_ms, cpp_ms))
        print(f"{name}: PyTorch {py_ms:.1f} ms, C++ {cpp_ms:.1f} ms, {py_ms / cpp_ms:.2f}x", flush=True)
    return rows


def main():
    binary = sys.argv[1]
    with tempfile.TemporaryDirectory() as tmp:
        flags = [a for a in sys.argv[2:] if a.startswith("--bench")]
        if flags:
            bench(binary, tmp, torch.get_num_threads(), flags[0].partition("=")[2])
            return 0
        seed = seed_from_env()
        print(f"nn_vs_pytorch: DELTAC_TEST_SEED={seed}", flush=True)
        failed = check(binary, tmp, seed)
        print(f"nn_vs_pytorch: {len(CASES) - failed}/{len(CASES)} passed (DELTAC_TEST_SEED={seed})")
        return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

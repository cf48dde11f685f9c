"""Layer forward speed on the GPU: deltac.nn vs flash-linear-attention's layers (not a test).

    PYTHONPATH=python:.peer DELTAC_LIBRARY=... python3 tests/python/bench_layers.py [--tokens 8192]
        [--profile]   (also: each layer's GPU time per kernel, torch.profiler, top 12)

Qwen3-Next sizes (hidden 2048; GatedDeltaNet: 16 q/k heads, 32 value heads, K = V = 128;
DeltaNetAttention: 16 heads of 128), bf16, batch 1, no grad. Times are CUDA events over
repeated forwards after warm-up (median of rounds), with the projections included (shared
cuBLAS work in both).
"""

import argparse
import statistics

import torch

from deltac.nn import DeltaNetAttention, DeltaNetConfig, GatedDeltaNet, GatedDeltaNetConfig


def time_ms(fn, reps=10, rounds=5):
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    res = []
    for _ in range(rounds):
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        for _ in range(reps):
            fn()
        e1.record()
        torch.cuda.synchronize()
        res.append(e0.elapsed_time(e1) / reps)
    return statistics.median(res)


def profile(name, fn, top=12):
    """Prints fn's GPU time per kernel (one call, after warm-up), largest first."""
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as prof

    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    with prof(activities=[ProfilerActivity.CUDA]) as p:
        fn()
        torch.cuda.synchronize()
    rows = [e for e in p.key_averages() if e.device_time_total > 0]
    rows.sort(key=lambda e: -e.device_time_total)
    total = sum(e.device_time_total for e in rows)
    print(f"-- {name}: {total / 1e3:.3f} ms of GPU time in {len(rows)} kernels")
    for e in rows[:top]:
        print(f"   {e.device_time_total / 1e3:8.3f} ms  x{e.count:<3d} {e.key[:90]}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokens", type=int, default=8192)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--profile", action="store_true")
    args = ap.parse_args()
    torch.manual_seed(0)
    dev, bf = "cuda", torch.bfloat16
    x = torch.randn(args.batch, args.tokens, 2048, device=dev, dtype=bf)
    torch.set_grad_enabled(False)
    rows = []

    layers = []
    gdn = GatedDeltaNet(GatedDeltaNetConfig()).to(dev, bf)
    layers.append(("deltac GatedDeltaNet", lambda: gdn(x)))
    dna = DeltaNetAttention(DeltaNetConfig(hidden_size=2048, num_heads=16)).to(dev, bf)
    layers.append(("deltac DeltaNetAttention", lambda: dna(x)))
    try:
        from fla.layers import DeltaNet, GatedDeltaNet as FlaGDN

        fg = FlaGDN(hidden_size=2048, expand_v=1, head_dim=128, num_heads=16, num_v_heads=32,
                    mode="chunk", use_short_conv=True).to(dev, bf)
        layers.append(("fla GatedDeltaNet", lambda: fg(x)))
        fd = DeltaNet(hidden_size=2048, num_heads=16, use_gate=True, use_short_conv=False,
                      mode="chunk").to(dev, bf)
        layers.append(("fla DeltaNet (gate, no conv)", lambda: fd(x)))
    except Exception as e:  # noqa: BLE001
        print(f"fla layers not available: {e!r}")
    for name, fn in layers:
        rows.append((name, time_ms(fn)))
    if args.profile:
        for name, fn in layers:
            profile(name, fn)
    print(f"batch {args.batch}, {args.tokens} tokens, bf16, {torch.cuda.get_device_name()}")
    for name, ms in rows:
        print(f"  {name:32s} {ms:9.3f} ms  {args.batch * args.tokens / ms * 1e3:12.0f} tokens/s")
    t = dict(rows)
    for ours, theirs in (("deltac GatedDeltaNet", "fla GatedDeltaNet"),
                         ("deltac DeltaNetAttention", "fla DeltaNet (gate, no conv)")):
        if ours in t and theirs in t:
            print(f"  {theirs} / {ours}: {t[theirs] / t[ours]:.2f}x (goal >= 1.3)")


if __name__ == "__main__":
    main()

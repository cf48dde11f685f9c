"""Forward + backward benchmark: deltac (deltac.ops, its CUDA backward through
torch.autograd) next to flash-linear-attention's chunk_gated_delta_rule /
chunk_delta_rule with autograd, in this process on the same inputs.

bf16 q/k/v, f32 g (log decay) and beta, f32 h0 in, final state out, q/k L2 norm
in the kernel; the loss gradient is a fixed random do (and dht). Each step
(forward + torch.autograd.grad over q, k, v, g, beta, h0) is captured in its own
CUDA graph after a warm-up (fla's autotune runs before capture) and timed by
replay with CUDA events: medians. Where capture fails the step is timed eagerly
(said so in the row). Also printed: forward alone, the peak memory a step adds
over the inputs (torch.cuda.max_memory_allocated), and deltac's gradients
against fla's (relative RMS per gradient).

Usage: PYTHONPATH=python:<dir holding fla/> DELTAC_LIBRARY=<libdeltac_c.so> \\
           python3 bench/cuda/backward_bench.py [--quick] [--rows=i,j] [--ours-only]
           [--saved-both] [--fla-triton-unchecked]
--saved-both times deltac twice, recomputing the chunk states in the backward
("deltac") and keeping them from the forward ("deltac+s", ops' DELTAC_SAVE_STATES),
in the same process as fla.
fla refuses its gated backward on Hopper with Triton in [3.4, 3.7.1) (its issue
#640: chunk_bwd_dqkwg gives wrong results there) unless tilelang is installed;
--fla-triton-unchecked lifts that check to time it anyway (its gradients are then
suspect).
"""
import statistics
import sys
import types

import torch

ROWS = [  # (name, variant, K=V, H, HV, B, T)
    ("GDN 16/32 K=V=128 1x32768", "gated", 128, 16, 32, 1, 32768),
    ("GDN 16/32 K=V=128 4x8192", "gated", 128, 16, 32, 4, 8192),
    ("delta 32/32 K=V=64 8x4096", "delta", 64, 32, 32, 8, 4096),
]


def time_fn(fn, reps):
    """(median ms, 'graph' or 'eager')."""
    fn()
    torch.cuda.synchronize()
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    how = "graph"
    try:
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            fn()
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            fn()
        run = graph.replay
    except Exception as exc:  # noqa: BLE001 - report and time eagerly
        print(f"    (graph capture failed: {type(exc).__name__}: {str(exc)[:120]}; eager)")
        torch.cuda.synchronize()
        how, run = "eager", fn
    for _ in range(2):
        run()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        e0.record()
        run()
        e1.record()
        e1.synchronize()
        times.append(e0.elapsed_time(e1))
    return statistics.median(times), how


def make_inputs(var, D, H, HV, B, T, dev="cuda"):
    """A row's leaf inputs (bf16 q, k, v; f32 g, beta, h0; K = V = D), the
    loss gradients do, dht, and ins: the leaves a step differentiates."""
    K = V = D

    def leaf(x):
        return x.detach().requires_grad_()
    x = types.SimpleNamespace()
    x.q = leaf(torch.randn(B, T, H, K, device=dev, dtype=torch.bfloat16))
    x.k = leaf(torch.randn(B, T, H, K, device=dev, dtype=torch.bfloat16))
    x.v = leaf(torch.randn(B, T, HV, V, device=dev, dtype=torch.bfloat16))
    x.beta = leaf(torch.rand(B, T, HV, device=dev, dtype=torch.float32))
    x.g = leaf(-0.1 * torch.rand(B, T, HV, device=dev)) if var == "gated" else None
    x.h0 = leaf(0.1 * torch.randn(B, HV, K, V, device=dev, dtype=torch.float32))
    x.do = torch.randn(B, T, HV, V, device=dev, dtype=torch.bfloat16)
    x.dht = torch.randn(B, HV, K, V, device=dev, dtype=torch.float32)
    x.ins = [t for t in (x.q, x.k, x.v, x.g, x.beta, x.h0) if t is not None]
    return x


def rel(a, b):
    a, b = a.detach().double(), b.detach().double()
    return ((a - b).norm() / b.norm().clamp_min(1e-30)).item()


def main():
    from deltac import ops
    quick = "--quick" in sys.argv
    ours_only = "--ours-only" in sys.argv
    saved_both = "--saved-both" in sys.argv
    rows = ROWS
    for a in sys.argv:
        if a.startswith("--rows="):
            rows = [ROWS[int(i)] for i in a[7:].split(",")]
    if not ours_only:
        if "--fla-triton-unchecked" in sys.argv:
            import fla.ops.common.chunk_o as fla_chunk_o
            fla_chunk_o.TRITON_ABOVE_3_7_1 = True
        from fla.ops.delta_rule import chunk_delta_rule as fla_delta
        from fla.ops.gated_delta_rule import chunk_gated_delta_rule as fla_gated
    # "deltac" alone follows DELTAC_SAVE_STATES (unset: where the runtime says
    # keeping them pays); with --saved-both it recomputes.
    env0 = ops._SAVE_STATES
    save0 = False if saved_both else env0
    props = torch.cuda.get_device_properties(0)
    print(f"{props.name}, torch {torch.__version__}")
    reps = 5 if quick else 20
    torch.manual_seed(0)
    for name, var, D, H, HV, B, T in rows:
        x = make_inputs(var, D, H, HV, B, T)
        q, k, v, g, beta, h0, do, dht = x.q, x.k, x.v, x.g, x.beta, x.h0, x.do, x.dht
        ins = x.ins
        names = ["q", "k", "v"] + (["g"] if g is not None else []) + ["beta", "h0"]
        kw = dict(initial_state=h0, output_final_state=True, use_qk_l2norm_in_kernel=True)

        def fwd(lib):
            ours = lib.startswith("deltac")
            if ours:
                ops._SAVE_STATES = True if lib == "deltac+s" else save0
            if var == "gated":
                fn = ops.chunk_gated_delta_rule if ours else fla_gated
                return fn(q, k, v, g, beta, **kw)
            fn = ops.chunk_delta_rule if ours else fla_delta
            return fn(q, k, v, beta, **kw)

        def step(lib):
            o, ht = fwd(lib)
            return torch.autograd.grad((o, ht), ins, (do, dht))

        code = ops.VARIANT_GATED if var == "gated" else ops.VARIANT_DELTA
        ops._SAVE_STATES = env0
        pays = ops._saves_states(code, q, v, None, False)
        print(f"{name:<27} deltac keeps the states by default here: {'yes' if pays else 'no'}")
        libs = ["deltac", "deltac+s"] if saved_both else ["deltac"]
        libs += [] if ours_only else ["fla"]
        res, grads = {}, {}
        for lib in libs:
            try:
                res[lib], grads[lib] = measure(lib, fwd, step, reps)
            except Exception as exc:  # noqa: BLE001 - report the row and go on
                print(f"{name:<27} {lib:<8} failed: {type(exc).__name__}: {str(exc)[:300]}",
                      flush=True)
                continue
            t_f, t_fb, how_f, how, peak = res[lib]
            print(f"{name:<27} {lib:<8} fwd {t_f:8.3f} ms ({how_f})  fwd+bwd {t_fb:8.3f} ms "
                  f"({how})  peak extra {peak:8.0f} MiB", flush=True)
        for ours in [lib for lib in res if lib.startswith("deltac")]:
            if "fla" not in res:
                break
            ratio = res["fla"][1] / res[ours][1]
            errs = ", ".join(f"{n} {rel(a, b):.2e}"
                             for n, a, b in zip(names, grads[ours], grads["fla"]))
            print(f"{name:<27} fla/{ours} fwd+bwd {ratio:.3f}x; {ours} vs fla grads: {errs}",
                  flush=True)


def measure(lib, fwd, step, reps):
    """((fwd ms, fwd+bwd ms, how, how, peak extra MiB), gradients) of one library."""
    base = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    grads = step(lib)
    torch.cuda.synchronize()
    peak = (torch.cuda.max_memory_allocated() - base) / 2**20
    with torch.no_grad():
        t_f, how_f = time_fn(lambda: fwd(lib), reps)
    t_fb, how = time_fn(lambda: step(lib), reps)
    return (t_f, t_fb, how_f, how, peak), grads


if __name__ == "__main__":
    main()

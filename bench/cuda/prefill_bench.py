"""Prefill benchmark: deltac's chunked CUDA kernel next to flash-linear-attention.

Both run in this process on the same inputs (bf16 q/k/v, f32 g/beta, f32
state, h0 in and the final state out, q/k L2 norm in the kernel), each
captured in its own CUDA graph and timed by replay with CUDA events after a
warm-up (fla's autotune runs before its capture); medians of many replays.
Prints, per row, both times, fla / deltac, the TFLOP/s of each on the
chunked FLOP count (templates/include/deltac/flops.h, chunk 64) and the
bf16 GEMM rate measured in the same run (torch.matmul 8192^3), plus the
relative difference between the two outputs as a sanity check.

Usage: PYTHONPATH=<dir holding fla/> python3 bench/cuda/prefill_bench.py \
           build-cuda/b/bench/cuda/libdeltac_chunked_bench.so [--quick] [--ours-only]
           [--sweep] [--rows=i,j,...]
--gates=model draws the GDN rows' gates as a freshly initialised mixer does
(model_gate: some heads decay weakly; the default, g = -0.1 U(0, 1), decays
every head by ~-3.2 a chunk), e.g. to time the warm-up split (--split=S:6000),
which then also prints the warm-up blocks' lengths in chunks on these gates
(warm_blocks: the call waits for the longest).
--sweep also times, on the first GDN K=V=128 row and the first KDA row, the
intra-chunk kernel and the scan apart and every config of the library's sweep
(--sweep-all: on every GDN K=V=128 row).
--split=S[:CFG],... also times deltac with the sequence split forced to S
segments (1: none; CFG: a config of the sweep, default 0, with the scan's rule: the
warp scan where it runs; 4000 + i: config i on the block scan) on every row, and the
intra-chunk kernel, the rest (scan, fold, fix-up) and the fold + fix-up alone apart.
--once=CFG,... runs deltac once per row and config, nothing timed (for ncu:
select the launches with -k / --launch-count).
deltac's row runs the default config as the runtime does (cuda_chunked's
scan rule, chunked.cuh's chunked_run_plan: the transposed TMA scan,
chunked_scan_tmat.cuh, where it runs and its grid fills the GPU, the TMA scan,
chunked_scan_tma.cuh, where it runs and the grid is one wave, else the warp
scan where it runs, chunked_scan_warp.cuh).
--warp=W,... also times, on every row, the scan as a chain per warp
(chunked_scan_warp.cuh) with its V tile forced to W (0: chosen at run time)
(W + 1000: with output warps beside the chain warps, chunked_stages' scan = 2;
3000: the TMA scan forced, scan = 3; 4000: the transposed TMA scan, scan = 4;
W = 0 runs the rule, which may pick either TMA scan)
next to the block scan (cuda_chunked's scan = 1, cfg 4000): total and scan
alone, after checking its o and ht against the block scan's on the same
inputs (relative RMS <= 1e-2, each side rounds to bf16 differently; not
timed when that fails).
--stages also times, on every row, the intra-chunk kernel and the scan apart,
and deltac with the fused launch (chunked_fused.cuh, where it fits).
--cstates also times, on every row, deltac writing every chunk's end state
(deltac_options.chunk_states: the block scan, unsplit) next to the block scan
alone (cfg 4000), after checking that its o matches the block scan's and that
each sequence's last chunk state equals its ht.
--precise also times, on every row, scan 5 (the block scan with two-term
products, unsplit: what calls whose beta may exceed 1 run; cfg 7000) in
full and its scan alone, next to the row's default call, after checking its
o and ht against the default's (relative RMS <= 1e-2).
"""
import ctypes
import math
import statistics
import sys

import torch

DELTA, GATED, KDA = 0, 1, 2
F32, BF16 = 0, 1


class Params(ctypes.Structure):
    _fields_ = [(n, ctypes.c_int32) for n in (
        "variant", "B", "T", "H", "HV", "K", "V", "N", "in_dtype", "out_dtype",
        "state_dtype", "state_layout")] + [(n, ctypes.c_void_p) for n in (
            "q", "k", "v", "g", "beta", "h0", "o", "ht", "cu_seqlens")] + [
        ("scale", ctypes.c_float), ("qk_l2norm", ctypes.c_int32),
        ("threads", ctypes.c_int32), ("num_slots", ctypes.c_int32)] + [
        (n, ctypes.c_void_p) for n in (
            "read_slots", "write_slots", "state_steps", "accepted", "state_scale")]


ROWS = [  # (name, variant, K=V, H, HV, B, T)
    ("GDN 16/32 1x32768", GATED, 128, 16, 32, 1, 32768),
    ("GDN 16/32 4x8192", GATED, 128, 16, 32, 4, 8192),
    ("GDN 16/64 1x32768", GATED, 128, 16, 64, 1, 32768),
    ("GDN 16/64 4x8192", GATED, 128, 16, 64, 4, 8192),
    ("GDN 2/8 1x32768", GATED, 128, 2, 8, 1, 32768),
    ("GDN 2/8 8x1024", GATED, 128, 2, 8, 8, 1024),
    ("GDN 32/32 1x32768", GATED, 128, 32, 32, 1, 32768),
    ("GDN K64 32/32 8x4096", GATED, 64, 32, 32, 8, 4096),
    ("delta K64 32/32 8x4096", DELTA, 64, 32, 32, 8, 4096),
    ("GDN K256 16/16 1x32768", GATED, 256, 16, 16, 1, 32768),
    ("KDA 32/32 1x32768", KDA, 128, 32, 32, 1, 32768),
    ("KDA 32/32 4x8192", KDA, 128, 32, 32, 4, 8192),
    ("GDN K256 16/16 4x8192", GATED, 256, 16, 16, 4, 8192),
]


def time_graph(fn, reps):
    fn()
    torch.cuda.synchronize()
    stream = torch.cuda.Stream()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=stream):
        fn()
    for _ in range(3):
        graph.replay()
    torch.cuda.synchronize()
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(reps):
        e0.record()
        graph.replay()
        e1.record()
        e1.synchronize()
        times.append(e0.elapsed_time(e1))
    return statistics.median(times)


def gemm_tflops():
    n = 8192
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    ms = time_graph(lambda: torch.matmul(a, b), 20)
    return 2.0 * n ** 3 / (ms * 1e-3) / 1e12


def flops(K, V, tokens, heads, C=64):
    return 2.0 * (3.0 * K * V + C * (K + V)) * tokens * heads


def model_gate(B, T, HV, dev):
    """GDN gates as a freshly initialised mixer makes them (fla's GatedDeltaNet:
    A ~ U(0, 16) and dt ~ logU(1e-3, 1e-1) per head, dt_bias its inverse
    softplus): g = -A softplus(a + dt_bias), a ~ N(0, 1) per token and head.
    The weakest of 32 heads decays by ~-0.04 a chunk of 64 tokens (387 chunks to
    forget to 2^-24), of 16 by ~-0.2 (83 chunks), of 8 by ~-1.1 (15 chunks)."""
    gen = torch.Generator(device="cpu").manual_seed(1)
    A = 16 * torch.rand(HV, generator=gen)
    dt = torch.exp(torch.rand(HV, generator=gen) * (math.log(0.1) - math.log(1e-3)) +
                   math.log(1e-3))
    dt_bias = dt + torch.log(-torch.expm1(-dt))
    a = torch.randn(B, T, HV, device=dev)
    return -(A.to(dev) * torch.nn.functional.softplus(a + dt_bias.to(dev))).float()


def warm_blocks(g, S, C=64):
    """The warm-up split's longest block and its shortest, in chunks, for GDN gates g
    [B, T, HV] and S segments: each segment of L = ceil(chunks / S) walks back from
    its first chunk while the chunks' decay product stays above 2^-24, as the scan's
    warm_start does (here in float64 log space); the call waits for the longest."""
    B, T, HV = g.shape
    n = (T + C - 1) // C
    L = (n + S - 1) // S
    pad = torch.zeros(B, n * C, HV, dtype=torch.float64, device=g.device)
    pad[:, :T] = g.double()
    logs = pad.view(B, n, C, HV).sum(2)  # [B, n, HV] a chunk's log decay
    cum = torch.cat([torch.zeros(B, 1, HV, dtype=torch.float64, device=g.device),
                     logs.cumsum(1)], 1)  # cum[c] = sum over chunks [0, c)
    floor = math.log(2.0 ** -24)
    longest, shortest = 0, n
    for s in range(S):
        cb, ce = s * L, min(s * L + L, n)
        if cb >= ce:
            break
        # latest cw <= cb with cum[cb] - cum[cw] <= floor, else 0
        ok = (cum[:, cb:cb + 1] - cum[:, :cb + 1]) <= floor  # [B, cb + 1, HV]
        idx = torch.arange(cb + 1, device=g.device).view(1, -1, 1)
        cw = torch.where(ok, idx, torch.zeros_like(idx)).amax(1)  # [B, HV]
        blk = ce - cw
        longest = max(longest, int(blk.max()))
        shortest = min(shortest, int(blk.min()))
    return longest, shortest, n


def main():
    lib = ctypes.CDLL(sys.argv[1])
    quick = "--quick" in sys.argv
    lib.deltac_bench_chunked_ws.restype = ctypes.c_size_t
    lib.deltac_bench_chunked_ws.argtypes = [ctypes.POINTER(Params), ctypes.c_int]
    lib.deltac_bench_chunked.restype = ctypes.c_int
    lib.deltac_bench_chunked.argtypes = [ctypes.POINTER(Params), ctypes.c_void_p,
                                         ctypes.c_size_t, ctypes.c_void_p, ctypes.c_int,
                                         ctypes.c_int]
    lib.deltac_bench_chunked_cstates.restype = ctypes.c_int
    lib.deltac_bench_chunked_cstates.argtypes = [
        ctypes.POINTER(Params), ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p,
        ctypes.c_int, ctypes.c_void_p, ctypes.c_int64]
    ours_only = "--ours-only" in sys.argv
    sweep_all = "--sweep-all" in sys.argv
    sweep = "--sweep" in sys.argv or sweep_all
    model_gates = "--gates=model" in sys.argv
    rows = ROWS
    for a in sys.argv:
        if a.startswith("--rows="):
            rows = [ROWS[int(i)] for i in a[7:].split(",")]
    lib.deltac_bench_params_size.restype = ctypes.c_size_t
    assert lib.deltac_bench_params_size() == ctypes.sizeof(Params), "params layout"

    if not ours_only:
        from fla.ops.delta_rule import chunk_delta_rule
        from fla.ops.gated_delta_rule import chunk_gated_delta_rule
        from fla.ops.kda import chunk_kda

    props = torch.cuda.get_device_properties(0)
    peak = 0.0 if any(a.startswith("--once=") for a in sys.argv) else gemm_tflops()
    print(f"{props.name}, torch {torch.__version__}; bf16 GEMM 8192^3: {peak:.0f} TFLOP/s")
    print(f"{'row':<24} {'deltac_ms':>9} {'fla_ms':>8} {'fla/deltac':>10} "
          f"{'deltac_TF/s':>11} {'%gemm':>6} {'fla_TF/s':>8} {'o_diff':>8} {'ht_diff':>8}")
    torch.manual_seed(0)
    reps = 10 if quick else 30
    swept = set()
    for name, var, D, H, HV, B, T in rows:
        dev = "cuda"
        K = V = D
        q = torch.randn(B, T, H, K, device=dev, dtype=torch.bfloat16)
        k = torch.randn(B, T, H, K, device=dev, dtype=torch.bfloat16)
        v = torch.randn(B, T, HV, V, device=dev, dtype=torch.bfloat16)
        beta = torch.rand(B, T, HV, device=dev, dtype=torch.float32)
        if var == KDA:
            g = -0.1 * torch.rand(B, T, HV, K, device=dev, dtype=torch.float32)
        elif model_gates:
            g = model_gate(B, T, HV, dev)
        else:
            g = -0.1 * torch.rand(B, T, HV, device=dev, dtype=torch.float32)
        h0 = 0.1 * torch.randn(B, HV, K, V, device=dev, dtype=torch.float32)
        o = torch.empty(B, T, HV, V, device=dev, dtype=torch.bfloat16)
        ht = torch.empty(B, HV, K, V, device=dev, dtype=torch.float32)
        p = Params()
        p.variant, p.B, p.T, p.H, p.HV, p.K, p.V, p.N = var, B, T, H, HV, K, V, B
        p.in_dtype = p.out_dtype = BF16
        p.state_dtype, p.state_layout = F32, 0
        p.q, p.k, p.v, p.beta = q.data_ptr(), k.data_ptr(), v.data_ptr(), beta.data_ptr()
        p.g = g.data_ptr() if var != DELTA else None
        p.h0, p.o, p.ht, p.cu_seqlens = h0.data_ptr(), o.data_ptr(), ht.data_ptr(), None
        p.scale, p.qk_l2norm = K ** -0.5, 1
        def make_ours(cfg, stages):
            nbytes = lib.deltac_bench_chunked_ws(ctypes.byref(p), cfg)
            buf = torch.empty(max(nbytes, 1), device=dev, dtype=torch.uint8)

            def call():
                err = lib.deltac_bench_chunked(ctypes.byref(p), buf.data_ptr(), nbytes,
                                               torch.cuda.current_stream().cuda_stream,
                                               cfg, stages)
                if err != 0:
                    raise RuntimeError(f"deltac chunked: cudaError {err}")
            return call, buf

        once = [a[7:] for a in sys.argv if a.startswith("--once=")]
        if once:
            for cfg in once[0].split(","):
                call, buf = make_ours(int(cfg), 3)
                call()
                torch.cuda.synchronize()
                del buf
            continue
        ours, ws = make_ours(0, 3)
        key = (var, D)
        if sweep and key in ((GATED, 128), (KDA, 128)) and (key not in swept or sweep_all):
            swept.add(key)
            n_cfg = lib.deltac_bench_sweep_size()
            for cfg in range(n_cfg + 1):
                try:
                    full, buf = make_ours(cfg, 3)
                    t_full = time_graph(full, reps)
                    prep, _ = make_ours(cfg, 1)
                    t_prep = time_graph(lambda: lib.deltac_bench_chunked(
                        ctypes.byref(p), buf.data_ptr(), buf.numel(),
                        torch.cuda.current_stream().cuda_stream, cfg, 1), reps)
                    t_scan = time_graph(lambda: lib.deltac_bench_chunked(
                        ctypes.byref(p), buf.data_ptr(), buf.numel(),
                        torch.cuda.current_stream().cuda_stream, cfg, 2), reps)
                    print(f"  sweep {name} cfg {cfg}: total {t_full:.3f} ms, "
                          f"intra-chunk {t_prep:.3f} ms, scan {t_scan:.3f} ms", flush=True)
                    del buf
                except Exception as e:  # noqa: BLE001
                    print(f"  sweep {name} cfg {cfg}: failed: {e}")

        for sp in [x for a in sys.argv if a.startswith("--split=") for x in a[8:].split(",")]:
            cfg = 100 * int(sp.split(":")[0]) + (int(sp.split(":")[1]) if ":" in sp else 0)
            try:
                full, buf = make_ours(cfg, 3)
                t_full = time_graph(full, reps)
                t_prep = time_graph(lambda: lib.deltac_bench_chunked(
                    ctypes.byref(p), buf.data_ptr(), buf.numel(),
                    torch.cuda.current_stream().cuda_stream, cfg, 1), reps)
                t_scan = time_graph(lambda: lib.deltac_bench_chunked(
                    ctypes.byref(p), buf.data_ptr(), buf.numel(),
                    torch.cuda.current_stream().cuda_stream, cfg, 2), reps)
                t_fix = time_graph(lambda: lib.deltac_bench_chunked(
                    ctypes.byref(p), buf.data_ptr(), buf.numel(),
                    torch.cuda.current_stream().cuda_stream, cfg, 4), reps)
                print(f"  split {name} S={sp}: total {t_full:.3f} ms, intra-chunk "
                      f"{t_prep:.3f} ms, scan + fold + fix {t_scan:.3f} ms, fold + fix "
                      f"{t_fix:.3f} ms", flush=True)
                nseg, base = int(sp.split(":")[0]), cfg - 100 * int(sp.split(":")[0])
                if var == GATED and nseg > 1 and 6000 <= base < 7000:  # the transposed scan
                    hi, lo, n = warm_blocks(g, nseg)
                    print(f"    as warm-up segments: blocks of {lo} .. {hi} chunks "
                          f"(unsplit {n})", flush=True)
                del buf
            except Exception as e:  # noqa: BLE001
                print(f"  split {name} S={sp}: failed: {e}")

        warps = [int(x) for a in sys.argv if a.startswith("--warp=") for x in a[7:].split(",")]
        if warps:
            def run_once(cfg):
                call, buf = make_ours(cfg, 3)
                call()
                torch.cuda.synchronize()
                return o.float().clone(), ht.clone(), buf

            def rel(a, b):
                return ((a - b).norm() / b.norm()).item()

            o_ref, ht_ref, _ = run_once(4000)
            for cfg in [4000] + [2000 + w for w in warps]:
                try:
                    if cfg != 4000:
                        o_w, ht_w, _ = run_once(cfg)
                        od, hd = rel(o_w, o_ref), rel(ht_w, ht_ref)
                        finite = bool(torch.isfinite(o_w).all() and torch.isfinite(ht_w).all())
                        if not finite or od > 1e-2 or hd > 1e-2:
                            print(f"  warp {name} cfg {cfg}: FAILED check o {od:.1e} ht {hd:.1e}"
                                  " (not timed)", flush=True)
                            continue
                    else:
                        od = hd = 0.0
                    full, buf = make_ours(cfg, 3)
                    t_full = time_graph(full, reps)
                    t_scan = time_graph(lambda: lib.deltac_bench_chunked(
                        ctypes.byref(p), buf.data_ptr(), buf.numel(),
                        torch.cuda.current_stream().cuda_stream, cfg, 2), reps)
                    print(f"  warp {name} cfg {cfg}: total {t_full:.3f} ms, scan {t_scan:.3f} ms"
                          f" (vs block scan: o {od:.1e} ht {hd:.1e})", flush=True)
                    del buf
                except Exception as e:  # noqa: BLE001
                    print(f"  warp {name} cfg {cfg}: failed: {e}")

        if "--cstates" in sys.argv:
            try:
                C = lib.deltac_bench_default_chunk(var, K, V)
                per = (T + C - 1) // C
                cs = torch.empty(B * per, HV, K, V, device=dev, dtype=torch.float32)
                block, buf = make_ours(4000, 3)
                block()
                torch.cuda.synchronize()
                o_blk = o.float().clone()

                def with_states():  # on the stream current at the call (the capture's)
                    err = lib.deltac_bench_chunked_cstates(
                        ctypes.byref(p), buf.data_ptr(), buf.numel(),
                        torch.cuda.current_stream().cuda_stream, 0, cs.data_ptr(), cs.shape[0])
                    if err != 0:
                        raise RuntimeError(f"deltac chunk states: cudaError {err}")
                with_states()
                torch.cuda.synchronize()
                od = ((o.float() - o_blk).norm() / o_blk.norm()).item()
                last = cs.view(B, per, HV, K, V)[:, -1]
                hd = ((last - ht).norm() / ht.norm()).item()
                if od > 0 or hd > 0:
                    print(f"  cstates {name}: FAILED check o {od:.1e} last state vs ht "
                          f"{hd:.1e} (not timed)", flush=True)
                else:
                    t_blk = time_graph(block, reps)
                    t_cs = time_graph(with_states, reps)
                    gb = cs.numel() * 4 / 1e9
                    print(f"  cstates {name}: block scan {t_blk:.3f} ms, with chunk states "
                          f"{t_cs:.3f} ms ({gb:.2f} GB written, "
                          f"{gb / ((t_cs - t_blk) * 1e-3) if t_cs > t_blk else 0:.0f} GB/s "
                          f"on the difference)", flush=True)
                del buf, cs
            except Exception as e:  # noqa: BLE001
                print(f"  cstates {name}: failed: {e}")

        if "--precise" in sys.argv:
            try:
                ours()
                torch.cuda.synchronize()
                o_def, ht_def = o.float().clone(), ht.clone()
                full, buf = make_ours(7000, 3)
                full()
                torch.cuda.synchronize()
                od = ((o.float() - o_def).norm() / o_def.norm()).item()
                hd = ((ht - ht_def).norm() / ht_def.norm()).item()
                if not (od <= 1e-2 and hd <= 1e-2):
                    print(f"  precise {name}: FAILED check o {od:.1e} ht {hd:.1e} vs the "
                          "default (not timed)", flush=True)
                else:
                    t_def = time_graph(ours, reps)
                    t_full = time_graph(full, reps)
                    t_scan = time_graph(lambda: lib.deltac_bench_chunked(
                        ctypes.byref(p), buf.data_ptr(), buf.numel(),
                        torch.cuda.current_stream().cuda_stream, 7000, 2), reps)
                    print(f"  precise {name}: total {t_full:.3f} ms (scan {t_scan:.3f}) vs "
                          f"default {t_def:.3f} ms: {t_full / t_def:.2f}x (o {od:.1e} "
                          f"ht {hd:.1e})", flush=True)
                del buf
            except Exception as e:  # noqa: BLE001
                print(f"  precise {name}: failed: {e}")

        if "--stages" in sys.argv:
            try:
                full, buf = make_ours(1000, 3)
                t_full = time_graph(full, reps)
                t_prep = time_graph(lambda: lib.deltac_bench_chunked(
                    ctypes.byref(p), buf.data_ptr(), buf.numel(),
                    torch.cuda.current_stream().cuda_stream, 0, 1), reps)
                t_scan = time_graph(lambda: lib.deltac_bench_chunked(
                    ctypes.byref(p), buf.data_ptr(), buf.numel(),
                    torch.cuda.current_stream().cuda_stream, 0, 2), reps)
                print(f"  stages {name}: intra-chunk {t_prep:.3f} + scan {t_scan:.3f} ms; "
                      f"fused launch {t_full:.3f} ms", flush=True)
                del buf
            except Exception as e:  # noqa: BLE001
                print(f"  stages {name}: failed: {e}")

        out = {}

        def peer():
            kw = dict(scale=K ** -0.5, initial_state=h0, output_final_state=True,
                      use_qk_l2norm_in_kernel=True)
            if var == GATED:
                out["o"], out["ht"] = chunk_gated_delta_rule(q, k, v, g, beta, **kw)
            elif var == DELTA:
                out["o"], out["ht"] = chunk_delta_rule(q, k, v, beta, **kw)
            else:
                out["o"], out["ht"] = chunk_kda(q, k, v, g, beta, **kw)

        try:
            t_ours = time_graph(ours, reps)
        except Exception as e:  # noqa: BLE001
            print(f"{name:<24} deltac failed: {e}")
            continue
        if ours_only:
            f = flops(K, V, B * T, HV)
            print(f"{name:<24} {t_ours:9.3f} {'-':>8} {'-':>10} "
                  f"{f / (t_ours * 1e-3) / 1e12:11.1f}", flush=True)
            continue
        try:
            t_fla = time_graph(peer, reps)
            od = ((o.float() - out["o"].float()).norm() / out["o"].float().norm()).item()
            hd = ((ht - out["ht"].float()).norm() / out["ht"].float().norm()).item()
        except Exception as e:  # noqa: BLE001
            print(f"{name:<24} {t_ours:9.3f}  fla failed: {str(e)[:80]}")
            continue
        f = flops(K, V, B * T, HV)
        tf_o, tf_f = f / (t_ours * 1e-3) / 1e12, f / (t_fla * 1e-3) / 1e12
        print(f"{name:<24} {t_ours:9.3f} {t_fla:8.3f} {t_fla / t_ours:10.2f} "
              f"{tf_o:11.1f} {100 * tf_o / peak:5.1f}% {tf_f:8.1f} {od:8.1e} {hd:8.1e}",
              flush=True)
        del out
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()

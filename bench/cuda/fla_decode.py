"""The peer's decode step, timed the way bench/cuda/decode_bench.cu times ours.

flash-linear-attention's fused_recurrent_gated_delta_rule: K = V = 128, H q/k
heads and HV value heads, T tokens, bf16 q/k/v, f32 state (initial_state in,
final state out),
q/k L2 norm in the kernel. The state rotates among enough copies to exceed
twice the L2; CUDA-graph replay, events, warm-up, median per call.
Usage: PYTHONPATH=<dir holding fla/> python3 bench/cuda/fla_decode.py
"""
import statistics

import torch
from fla.ops.gated_delta_rule import fused_recurrent_gated_delta_rule

K = V = 128


def bench(batch, h, heads, l2_bytes, t=1):
    dev = "cuda"
    state_bytes = batch * heads * K * V * 4
    copies = min(256, max(1, 2 * l2_bytes // state_bytes + 1))
    q = torch.randn(batch, t, h, K, device=dev, dtype=torch.bfloat16)
    k = torch.randn(batch, t, h, K, device=dev, dtype=torch.bfloat16)
    v = torch.randn(batch, t, heads, V, device=dev, dtype=torch.bfloat16)
    g = -0.1 * torch.rand(batch, t, heads, device=dev, dtype=torch.float32)
    beta = torch.rand(batch, t, heads, device=dev, dtype=torch.bfloat16)
    states = [0.1 * torch.randn(batch, heads, K, V, device=dev) for _ in range(copies)]

    def run_all():
        for s in states:
            fused_recurrent_gated_delta_rule(
                q, k, v, g=g, beta=beta, scale=K ** -0.5, initial_state=s,
                output_final_state=True, use_qk_l2norm_in_kernel=True)

    run_all()  # compile / autotune outside the graph
    torch.cuda.synchronize()
    stream = torch.cuda.Stream()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=stream):
        run_all()
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for _ in range(3):
        graph.replay()
    torch.cuda.synchronize()
    times = []
    for _ in range(15):
        e0.record()
        graph.replay()
        e1.record()
        e1.synchronize()
        times.append(e0.elapsed_time(e1) * 1000.0 / copies)
    us = statistics.median(times)
    return copies, us, 2.0 * state_bytes / (us * 1e-6) / 1e9


def main():
    props = torch.cuda.get_device_properties(0)
    l2 = getattr(props, "L2_cache_size", 60 << 20)
    print(f"fla (torch {torch.__version__}) on {props.name}; gated decode, K=V={K}, bf16 in, "
          "f32 state")
    print(f"{'H':>3} {'HV':>3} {'batch':>6} {'T':>2} {'copies':>7} {'graph_us':>9} {'state_GB/s':>11}")
    shapes = [(16, 32, b, 1) for b in (1, 64, 256, 512)] + [(16, 32, 64, 4)]
    for h, heads, batch, t in shapes:
        copies, us, gbs = bench(batch, h, heads, l2, t)
        print(f"{h:>3} {heads:>3} {batch:>6} {t:>2} {copies:>7} {us:>9.2f} {gbs:>11.1f}",
              flush=True)


if __name__ == "__main__":
    main()

"""Per-kernel times of one deltac forward + backward step (torch.profiler),
for the rows of backward_bench.py; with --bare, one warm step and one more
(no profiler): the run to put under Nsight Compute, e.g.
  ncu -k regex:grad16 -c 1 --set full python3 bench/cuda/backward_profile.py --row=0 --bare

Usage: PYTHONPATH=python DELTAC_LIBRARY=<libdeltac_c.so> \\
           python3 bench/cuda/backward_profile.py [--row=i] [--bare]
"""
import sys

import torch

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from backward_bench import ROWS, make_inputs  # noqa: E402


def main():
    from deltac import ops
    row, bare = 0, "--bare" in sys.argv
    for a in sys.argv:
        if a.startswith("--row="):
            row = int(a[6:])
    name, var, D, H, HV, B, T = ROWS[row]
    torch.manual_seed(0)
    x = make_inputs(var, D, H, HV, B, T)
    kw = dict(initial_state=x.h0, output_final_state=True, use_qk_l2norm_in_kernel=True)

    def step():
        if var == "gated":
            o, ht = ops.chunk_gated_delta_rule(x.q, x.k, x.v, x.g, x.beta, **kw)
        else:
            o, ht = ops.chunk_delta_rule(x.q, x.k, x.v, x.beta, **kw)
        return torch.autograd.grad((o, ht), x.ins, (x.do, x.dht))

    step()
    torch.cuda.synchronize()
    if bare:
        step()
        torch.cuda.synchronize()
        return
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        step()
        torch.cuda.synchronize()
    print(f"{name}: one step, per kernel (ms)")
    tot = 0.0
    for e in sorted(prof.key_averages(), key=lambda e: -e.device_time_total):
        if e.device_time_total <= 0:
            continue
        tot += e.device_time_total
        print(f"  {e.device_time_total / 1e3:8.3f}  x{e.count:<3} {e.key[:110]}")
    print(f"  {tot / 1e3:8.3f}  total")


if __name__ == "__main__":
    main()

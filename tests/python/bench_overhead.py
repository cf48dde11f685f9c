"""Host overhead of one deltac op call (not a test: run it by hand).

    DELTAC_LIBRARY=build/python/libdeltac_c.so PYTHONPATH=python .venv/bin/python tests/python/bench_overhead.py [--device=cuda]

Times, per call, in microseconds (minimum and median over rounds of many calls):

  op        deltac.ops.fused_recurrent_gated_delta_rule(...), decode-sized (B=1, T=1)
  inplace   the same with inplace_final_state=True (no state allocation)
  raw op    torch.ops.deltac.fwd(...) on already validated tensors (no Python checks)
  impl      the op's implementation called directly (no dispatcher)
  ctypes    deltac_py_forward on a prebuilt params struct (the C call alone,
            seven ctypes arguments)
  packed    deltac_py_call_forward on prebuilt CALL_STRUCT bytes (the C call as
            the op makes it: one argument)

overhead = op - ctypes: what the Python layer adds to the C call. On the CPU the C
call includes the (tiny) kernel; on CUDA it only enqueues the kernel, and the
timings never synchronise (the GPU runs behind), as a serving loop does.
"""

import argparse
import os
import statistics
import time

import torch

import deltac
from deltac import _lib, ops


def per_call_us(rows, n, rounds, sync):
    """{name: (min, median) us per call}; the rows take turns round by round, so a
    busy spell of the (shared) machine hits every row alike; the minimum is the least
    disturbed round."""
    for _, fn in rows:
        for _ in range(max(10, n // 10)):
            fn()
        sync()
    times = {name: [] for name, _ in rows}
    for _ in range(rounds):
        for name, fn in rows:
            t0 = time.perf_counter()
            for _ in range(n):
                fn()
            times[name].append((time.perf_counter() - t0) / n * 1e6)
            sync()  # the GPU queue drained: no round waits for an earlier one's kernels
    return {name: (min(ts), statistics.median(ts)) for name, ts in times.items()}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--heads", type=int, default=1)
    ap.add_argument("--dim", type=int, default=None,
                    help="K = V (default 16 on the CPU, 64 on CUDA: a precompiled pair)")
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--threads", type=int, default=1, help="CPU threads (torch.set_num_threads)")
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--cpu", type=int, default=None, help="pin the process to this CPU core")
    args = ap.parse_args()
    if args.cpu is not None:
        os.sched_setaffinity(0, {args.cpu})
    torch.set_num_threads(args.threads)
    dev = torch.device(args.device)
    dtype = getattr(torch, args.dtype)
    H, K = args.heads, args.dim or (16 if dev.type == "cpu" else 64)
    torch.manual_seed(0)
    q = torch.randn(1, 1, H, K, device=dev, dtype=dtype)
    k = torch.randn(1, 1, H, K, device=dev, dtype=dtype)
    v = torch.randn(1, 1, H, K, device=dev, dtype=dtype)
    g = -torch.rand(1, 1, H, device=dev)
    beta = torch.rand(1, 1, H, device=dev)
    h0 = torch.randn(1, H, K, K, device=dev)
    torch.set_grad_enabled(False)

    def op():
        return ops.fused_recurrent_gated_delta_rule(q, k, v, g=g, beta=beta, initial_state=h0,
                                                    output_final_state=True,
                                                    use_qk_l2norm_in_kernel=True)

    hbuf = h0.clone()

    def op_inplace():
        return ops.fused_recurrent_gated_delta_rule(q, k, v, g=g, beta=beta, initial_state=hbuf,
                                                    use_qk_l2norm_in_kernel=True,
                                                    inplace_final_state=True)

    raw = torch.ops.deltac.fwd.default

    def raw_op():
        return raw(q, k, v, g, beta, h0, None, 1, 0.0, True, True, False, 2, 0)

    def impl():
        return ops._run(q, k, v, g, beta, h0, None, 1, 0.0, True, True, False, 2, 0)

    o = torch.empty_like(v)
    ht = torch.empty_like(h0)
    dt = _lib.DTYPE_BF16 if dtype == torch.bfloat16 else _lib.DTYPE_F32
    p = _lib.FwdParams(1, 1, 1, H, H, K, K, 1, dt, dt, 0, 0, q.data_ptr(), k.data_ptr(),
                       v.data_ptr(), g.data_ptr(), beta.data_ptr(), h0.data_ptr(), o.data_ptr(),
                       ht.data_ptr(), None, 0.0, 1, 1 if dev.type == "cpu" else 0)
    cuda = dev.type == "cuda"
    stream = torch.cuda.current_stream().cuda_stream if cuda else None
    devk = _lib.DEVICE_CUDA if cuda else _lib.DEVICE_CPU
    byref = _lib.byref

    def c_call():
        return _lib._py_forward(byref(p), devk, 2, 0, 1 if cuda else 0, stream, None)

    def alloc():
        return torch.empty_like(v), torch.empty_like(h0)

    pack = _lib.CALL_STRUCT.pack
    threads = 0 if cuda else 1

    def build():  # what the op packs per call, with the data_ptr() reads
        return pack(1, 1, 1, H, H, K, K, 1, dt, dt, 0, 0, q.data_ptr(), k.data_ptr(),
                    v.data_ptr(), g.data_ptr(), beta.data_ptr(), h0.data_ptr(),
                    o.data_ptr(), ht.data_ptr(), 0, 0.0, 1, threads, 0, 0, 0, 0, 0, 0,
                    devk, 2, 0, 1 if cuda else 0, stream or 0)

    packed = build()
    call_forward = _lib.call_forward

    def c_packed():
        return call_forward(packed)

    if cuda:
        # the CPU path's thread count is what the op passes; on CUDA it is 0
        torch.cuda.synchronize()
    rows = [("op (deltac.ops, validated)", op), ("op, inplace_final_state", op_inplace),
            ("raw op (torch.ops.deltac.fwd)", raw_op),
            ("impl (no dispatcher)", impl), ("ctypes C call alone", c_call),
            ("packed C call (the op's)", c_packed),
            ("  2 output allocations", alloc), ("  call struct build", build)]
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    stats = per_call_us(rows, args.n, args.rounds, sync)
    res = {name: st[0] for name, st in stats.items()}
    print(f"deltac {deltac.library_path}; torch {torch.__version__}; device {dev}; "
          f"{args.dtype}; B=1 T=1 H=HV={H} K=V={K}; threads {torch.get_num_threads()}; "
          f"{args.rounds} rounds of {args.n} calls; min (median)")
    for name, _ in rows:
        print(f"  {name:32s} {res[name]:8.2f} us/call  ({stats[name][1]:.2f})")
    c = res["packed C call (the op's)"]
    print(f"  overhead over the packed C call: op {res['op (deltac.ops, validated)'] - c:.2f} us, "
          f"inplace {res['op, inplace_final_state'] - c:.2f} us, "
          f"raw op {res['raw op (torch.ops.deltac.fwd)'] - c:.2f} us, "
          f"impl {res['impl (no dispatcher)'] - c:.2f} us")
    if cuda:
        torch.cuda.synchronize()
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        for _ in range(args.n):
            op()
        e1.record()
        torch.cuda.synchronize()
        print(f"  GPU time per op call (events, back to back): {e0.elapsed_time(e1) * 1e3 / args.n:.2f} us")


if __name__ == "__main__":
    main()

"""Where a kernel's time goes by SASS address windows, from Nsight Compute's
source page as CSV:

  ncu -k regex:grad16 -c 1 --set full --import-source no --page source \\
      --print-source sass --csv <program> > k.csv
  python3 bench/cuda/sass_windows.py k.csv [window=80] [min_percent=0.8]

Prints each window of `window` consecutive instructions holding at least
`min_percent` of the stall samples or of the executed instructions: its first
address, its shares of both, its most executed opcodes (percent of the
window's instructions) and its largest stall reasons (percent of its samples).
Consecutive windows follow the code's layout, so loops and phases show as runs
(docs/performance.md, "Versions 11 and 12" of the CUDA backward, read it so).
"""
import collections
import csv
import io
import re
import sys


def num(x):
    try:
        return float(x.replace(",", ""))
    except ValueError:
        return 0.0


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    width = int(sys.argv[2]) if len(sys.argv) > 2 else 80
    floor = float(sys.argv[3]) if len(sys.argv) > 3 else 0.8
    try:
        with open(sys.argv[1]) as f:
            text = f.read()
    except OSError as e:
        sys.exit(f"{sys.argv[1]}: {e.strerror}")
    start = text.find('"Address"')
    if start < 0:
        sys.exit(f"{sys.argv[1]}: no ncu source table (a header starting with \"Address\")")
    rows = list(csv.reader(io.StringIO(text[start:])))
    head, rows = rows[0], rows[1:]
    col = {h: i for i, h in enumerate(head)}
    for need in ("Source", "Warp Stall Sampling (All Samples)", "Instructions Executed"):
        if need not in col:
            sys.exit(f"{sys.argv[1]}: no column {need!r}")
    stalls = [h for h in head if h.startswith("stall_") and "Not Issued" not in h]
    samples = [num(r[col["Warp Stall Sampling (All Samples)"]]) for r in rows]
    insts = [num(r[col["Instructions Executed"]]) for r in rows]
    total_s, total_i = max(sum(samples), 1.0), max(sum(insts), 1.0)
    for a in range(0, len(rows), width):
        s, n = sum(samples[a:a + width]), sum(insts[a:a + width])
        if 100 * s / total_s < floor and 100 * n / total_i < floor:
            continue
        ops, why = collections.Counter(), collections.Counter()
        for r, x in zip(rows[a:a + width], insts[a:a + width]):
            m = re.match(r"\s*(@!?U?P\w+\s+)?([A-Z0-9_]+)", r[col["Source"]])
            ops[m.group(2) if m else "?"] += x
            for h in stalls:
                why[h[6:]] += num(r[col[h]])
        print(f"{a:5d} {rows[a][0]} samples {100 * s / total_s:5.1f}% inst {100 * n / total_i:5.1f}% | "
              + " ".join(f"{o}:{100 * c / max(n, 1):.0f}" for o, c in ops.most_common(6)) + " | "
              + " ".join(f"{k}:{100 * v / max(s, 1):.0f}" for k, v in why.most_common(4)))


if __name__ == "__main__":
    main()

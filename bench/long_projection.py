#!/usr/bin/env python3
"""long_projection.py - project a longer context's prefill and decode times from one measured
`longctx_bench` run (bench/longctx_bench.c), labelled as a projection.

    bench/long_projection.py RUN.err RUN.out --to 131072 [--chunk 512] [--decode0 SECONDS]

RUN.err holds the run's prefill progress lines ("prefill P/T positions, S s, ..."; each line is
printed after a call of --chunk rows ends) and RUN.out its result line. The model: a prefill call
of R rows starting at position p costs a + b * (p + R/2) seconds (the matmuls are the same for
every call; attention reads every earlier position, so it grows linearly with where the call
sits), fitted by least squares over the measured calls; a decode step at position n costs
w + c * n: with --decode0 (a decode step's seconds measured near position 0 on the same host and
profile, e.g. `make bench`'s ms/token) the line through that point and the run's decode steps;
without it, c from the calls' attention share (b per row; prefill's blocked attention is cheaper
per position than decode's, so this underestimates the decode cost at depth). Prints the fit, its largest relative miss on the
measured calls, and the projected prefill seconds and decode tok/s at --to.
"""
import argparse
import re
import sys


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("err")
    ap.add_argument("out")
    ap.add_argument("--to", type=int, required=True)
    ap.add_argument("--chunk", type=int, default=512)
    ap.add_argument("--decode0", type=float, default=None, help="seconds of a decode step near position 0")
    args = ap.parse_args()
    text = open(args.err, errors="replace").read().replace("\r", "\n")
    pts = [(int(m.group(1)), float(m.group(2)))
           for m in re.finditer(r"prefill (\d+)/\d+ positions, ([0-9.]+) s", text)]
    if len(pts) < 4:
        sys.exit("long_projection: fewer than 4 progress lines in %s" % args.err)
    res = open(args.out).read()
    m = re.search(r"decode (\d+) steps at (\d+)\.\.(\d+) ([0-9.]+) s", res)
    if not m:
        sys.exit("long_projection: no decode figures in %s" % args.out)
    d_steps, d_at, d_sec = int(m.group(1)), int(m.group(2)), float(m.group(4))
    # per call: rows, mid position, seconds
    calls, prev_p, prev_t = [], 0, 0.0
    for p, t in pts:
        rows = p - prev_p
        calls.append((rows, prev_p + rows / 2.0, t - prev_t))
        prev_p, prev_t = p, t
    full = [c for c in calls if c[0] == args.chunk][1:]  # the first call also pays first touches
    n = len(full)
    sx = sum(c[1] for c in full)
    sy = sum(c[2] for c in full)
    sxx = sum(c[1] * c[1] for c in full)
    sxy = sum(c[1] * c[2] for c in full)
    b = (n * sxy - sx * sy) / (n * sxx - sx * sx)
    a = (sy - b * sx) / n
    miss = max(abs(a + b * c[1] - c[2]) / c[2] for c in full)
    N = args.to
    pre = 0.0
    for p0 in range(0, N, args.chunk):
        rows = min(args.chunk, N - p0)
        pre += (a + b * (p0 + rows / 2.0)) * rows / args.chunk
    step_meas = d_sec / d_steps
    mid = d_at + d_steps / 2.0
    if args.decode0 is not None:
        w, c_row = args.decode0, (step_meas - args.decode0) / mid
    else:
        c_row = b / args.chunk  # attention seconds per (row, earlier position)
        w = step_meas - c_row * mid
    step_to = w + c_row * N
    print("measured: %d prefill calls of %d rows up to position %d (%.1f s); decode %d steps at %d.. %.4f s/step"
          % (len(calls), args.chunk, pts[-1][0], pts[-1][1], d_steps, d_at, step_meas))
    print("fit: call seconds = %.4f + %.4e x mid-position (largest miss on the %d full calls %.1f %%)"
          % (a, b, n, 100 * miss))
    print("PROJECTION to %d positions (not measured): prefill %.0f s (%.2f tok/s); decode at the end %.4f s/step "
          "(%.2f tok/s; step = %.4f s + %.3e s x position)" % (N, pre, N / pre, step_to, 1 / step_to, w, c_row))


if __name__ == "__main__":
    main()

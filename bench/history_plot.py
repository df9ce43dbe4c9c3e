#!/usr/bin/env python3
"""history_plot.py - draws bench_history's result lines as an SVG a person can read.

usage: python3 bench/history_plot.py RESULTS [-o OUT.svg] [--title TEXT] [--note TEXT]

RESULTS holds the "history ..." lines of bench/bench_history.c (any other line, and the runs that
timed the rebuild's forward, are skipped).
Three panels over the evicted history N (log scale): the pooler's CPU seconds per rebuild, its
wall seconds, and the peak resident memory above the process's baseline (rss_open). One curve
per configuration: the tree before the streaming pooler ("whole"), the streaming pooler without
a cache, and with a cache of M MiB. The legend gives each curve's slope between its smallest and
largest N (per evicted token); a dashed line marks the rebuild's decoder forward (a constant: a
rebuild costs the pooler plus that), from the run that timed it. --note adds a line at the bottom
(host, date, command). Standard library only.
"""
import math
import sys

COLOURS = ["#c0392b", "#2471a3", "#1e8449", "#b9770e", "#7d3c98"]


def parse(path):
    """(pooler rows, the rebuild forward's {"cpu", "wall"} seconds of this tree or None)"""
    rows, fwd = [], None
    with open(path) as f:
        for line in f:
            if not line.startswith("history "):
                continue
            kv = dict(tok.split("=", 1) for tok in line.split()[1:] if "=" in tok)
            if kv.get("forward_rows", "0") != "0":  # a run that timed the rebuild's forward
                if kv.get("tree") == "stream" and "forward_cpu_s" in kv:
                    fwd = {"cpu": float(kv["forward_cpu_s"]), "wall": float(kv["forward_s"]),
                           "rows": int(kv["forward_rows"])}
                continue
            rows.append(kv)
    return rows, fwd


def label(tree, cache_mb):
    if tree == "whole":
        return "before: the whole history at once"
    if cache_mb == 0:
        return "streaming, no cache"
    return "streaming + cache of %d MiB%s" % (cache_mb, " (the default)" if cache_mb == 256 else "")


def series(rows):
    out = {}
    for r in rows:
        key = (r["tree"], int(r["cache_mb"]))
        n = int(r["N"])
        pt = {
            "cpu": float(r["pooler_cpu_s"]),
            "wall": float(r["pooler_s"]),
            "mem": float(r["peak_mib"]) - float(r["rss_open_mib"]),
        }
        out.setdefault(key, {})[n] = pt  # a later run of the same point wins
    order = sorted(out, key=lambda k: (k[0] != "whole", k[1] != 0, k[1]))
    return [(k, sorted(out[k].items())) for k in order]


def fmt_n(n):
    return "%dk" % (n // 1024) if n >= 1024 and n % 1024 == 0 else str(n)


def fmt_v(v, unit):
    if unit == "s":
        return "%g s" % float("%.2g" % v) if v >= 0.01 else "%g ms" % float("%.2g" % (v * 1e3))
    return "%s MiB" % format(float("%.2g" % v), ",g")


def slope_text(pts, field, unit):
    (n0, a), (n1, b) = pts[0], pts[-1]
    if n1 == n0:
        return ""
    s = (b[field] - a[field]) / (n1 - n0)
    if unit == "s":
        return "%.3g ms/token" % (s * 1e3) if abs(s) >= 1e-4 else "%.3g us/token" % (s * 1e6)
    return "%.3g KiB/token" % (s * 1024)


def panel(out, x0, y0, w, h, title, data, field, unit, nmin, nmax, hline=None):
    vals = [p[field] for _, pts in data for _, p in pts if p[field] > 0]
    if hline:
        vals.append(hline[0])
    lo = 10 ** math.floor(math.log10(min(vals))) if vals else 1
    hi = 10 ** math.ceil(math.log10(max(vals))) if vals else 10
    if hi <= lo:
        hi = lo * 10
    lx0, lx1 = math.log2(nmin) - 0.5, math.log2(nmax) + 0.5

    def X(n):
        return x0 + (math.log2(n) - lx0) / (lx1 - lx0) * w

    def Y(v):
        return y0 + h - (math.log10(v) - math.log10(lo)) / (math.log10(hi) - math.log10(lo)) * h

    out.append('<text x="%.1f" y="%.1f" font-size="15" font-weight="bold">%s</text>' % (x0, y0 - 12, title))
    out.append('<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#888"/>' % (x0, y0, w, h))
    d = lo
    while d <= hi * 1.0001:
        for m in (1, 2, 5):
            v = d * m
            if v < lo * 0.999 or v > hi * 1.001:
                continue
            y = Y(v)
            out.append('<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="%s"/>' % (x0, y, x0 + w, y,
                                                                                "#ddd" if m == 1 else "#f2f2f2"))
            if m == 1 or (math.log10(hi) - math.log10(lo)) <= 3:
                out.append('<text x="%d" y="%.1f" font-size="11" text-anchor="end">%s</text>' % (x0 - 4, y + 4,
                                                                                              fmt_v(v, unit)))
        d *= 10
    n = nmin
    while n <= nmax:
        x = X(n)
        out.append('<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#eee"/>' % (x, y0, x, y0 + h))
        out.append('<text x="%.1f" y="%d" font-size="11" text-anchor="middle">%s</text>' % (x, y0 + h + 14, fmt_n(n)))
        n *= 4
    out.append('<text x="%.1f" y="%d" font-size="11" text-anchor="middle">evicted history (tokens)</text>' %
               (x0 + w / 2, y0 + h + 30))
    if hline:  # a constant to compare with: dashed, labelled on the line
        y = Y(hline[0])
        out.append('<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#555" stroke-dasharray="6,4"/>' % (x0, y, x0 + w, y))
        out.append('<text x="%d" y="%.1f" font-size="10" fill="#555">%s: %s</text>' % (x0 + 6, y - 4, hline[1],
                                                                                    fmt_v(hline[0], unit)))
    for i, (key, pts) in enumerate(data):
        c = COLOURS[i % len(COLOURS)]
        xy = [(X(n), Y(p[field])) for n, p in pts if p[field] > 0]
        if len(xy) > 1:
            out.append('<polyline fill="none" stroke="%s" stroke-width="2" points="%s"/>' %
                       (c, " ".join("%.1f,%.1f" % q for q in xy)))
        for (n, p), (x, y) in zip([q for q in pts if q[1][field] > 0], xy):
            out.append('<circle cx="%.1f" cy="%.1f" r="3.5" fill="%s"><title>%s: N=%d %s</title></circle>' %
                       (x, y, c, label(*key), n, fmt_v(p[field], unit)))
    ly = y0 + h + 40  # the legend, under the axis, with each curve's slope in this panel
    for i, (key, pts) in enumerate(data):
        c = COLOURS[i % len(COLOURS)]
        out.append('<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="3"/>' % (x0 + 8, ly + 6, x0 + 26,
                                                                                        ly + 6, c))
        out.append('<text x="%d" y="%d" font-size="11">%s (%s)</text>' % (x0 + 31, ly + 10, label(*key),
                                                                        slope_text(pts, field, unit)))
        ly += 16


def main(argv):
    if len(argv) < 2 or argv[1] in ("-h", "--help"):
        print(__doc__.strip())
        return 0 if len(argv) >= 2 else 2
    out_path, title, note = None, "a recall rebuild's pooler as the evicted history grows", ""
    i = 2
    while i < len(argv):
        if argv[i] == "-o" and i + 1 < len(argv):
            out_path = argv[i + 1]
        elif argv[i] == "--title" and i + 1 < len(argv):
            title = argv[i + 1]
        elif argv[i] == "--note" and i + 1 < len(argv):
            note = argv[i + 1]
        else:
            print("history_plot.py: unexpected argument %r" % argv[i], file=sys.stderr)
            return 2
        i += 2
    rows, fwd = parse(argv[1])
    if not rows:
        print("history_plot.py: no history lines in %s" % argv[1], file=sys.stderr)
        return 1
    data = series(rows)
    ns = [n for _, pts in data for n, _ in pts]
    nmin = 2 ** math.floor(math.log2(min(ns)))
    nmax = 2 ** math.ceil(math.log2(max(ns)))
    W, PW, PH = 1340, 360, 300
    H = 70 + PH + 50 + 16 * len(data) + 30
    svg = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif">' % (W, H),
           '<rect width="100%" height="100%" fill="white"/>',
           '<text x="20" y="26" font-size="17">%s</text>' % title]
    for k, (field, unit, t) in enumerate([("cpu", "s", "pooler CPU time per rebuild (all threads)"),
                                          ("wall", "s", "pooler wall time per rebuild"),
                                          ("mem", "m", "peak memory above the baseline")]):
        hl = (fwd[field], "the rebuild's %d-row decoder forward" % fwd["rows"]) if fwd and field in fwd else None
        panel(svg, 80 + k * (PW + 80), 70, PW, PH, t, data, field, unit, nmin, nmax, hl)
    if note:
        svg.append('<text x="20" y="%d" font-size="11" fill="#555">%s</text>' % (H - 10, note.replace("&", "&amp;")
                                                                                .replace("<", "&lt;")))
    svg.append("</svg>")
    text = "\n".join(svg) + "\n"
    if out_path:
        with open(out_path + ".tmp", "w") as f:
            f.write(text)
        import os
        os.replace(out_path + ".tmp", out_path)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

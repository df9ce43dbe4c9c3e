#!/usr/bin/env python3
"""kv_distance.py - the distance of one `recall score --per-position --json` run to another of the
same ids (docs/KV.md: --kv f16 against the exact f32 cache): over the scored positions, the mean
and max |dNLL|, the positions whose greedy token agrees, and both perplexities.

usage: kv_distance.py EXACT.json OTHER.json [LABEL]
"""
import json
import math
import sys


def load(path):
    d = json.load(open(path))
    return d, {(p["chunk"], p["pos"]): p for p in d["positions"] if p["scored"]}


def main():
    a, pa = load(sys.argv[1])
    b, pb = load(sys.argv[2])
    if a["ids_xxh64"] != b["ids_xxh64"] or a["n_ctx"] != b["n_ctx"] or set(pa) != set(pb):
        sys.exit("kv_distance: the two runs scored different ids or positions")
    d = [abs(pa[k]["nll"] - pb[k]["nll"]) for k in pa]
    agree = sum(pa[k]["greedy"] == pb[k]["greedy"] for k in pa)
    label = sys.argv[3] if len(sys.argv) > 3 else ""
    print("| %s | %d | %s / %s | %.3g | %.3g | %d/%d | %.6f | %.6f | %+.2e |" % (
        label, a["n_ctx"], a.get("kv", "f32"), b.get("kv", "f32"), sum(d) / len(d), max(d), agree, len(d),
        a["ppl"], b["ppl"], b["ppl"] / a["ppl"] - 1.0))


if __name__ == "__main__":
    main()

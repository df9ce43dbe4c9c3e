#!/usr/bin/python3
"""answers.py - per arm, how many replies of a `recall eval --json` document hold the asked value
(recall_ok, the benchmark's substring rule) and how many answer it exactly (the text after the
last </think>, stripped, equals the value: the rule of `recall longctx`), and, for the casual
probes, how many fired.

    /usr/bin/python3 tools/train_world/answers.py EVAL.json
    /usr/bin/python3 tools/train_world/answers.py LONGCTX.json...   (`recall longctx --json` files:
        exact answers and RC_bge fires per arm, summed over the files)
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from world_broad import value_kind  # noqa: E402


def final_answer(reply):
    return reply.rsplit("</think>", 1)[-1].strip()


def longctx(paths):
    tot = {}
    for path in paths:
        for c in json.load(open(path, encoding="utf-8"))["cases"]:
            for label, a in c["arms"].items():
                t = tot.setdefault(label, [0, 0, 0])
                t[0] += 1
                t[1] += bool(a["exact"])
                t[2] += a.get("fires", 0) > 0
    for label, (n, ex, fi) in tot.items():
        print("%-8s exact %d/%d, fired in %d/%d" % (label, ex, n, fi, n))


def main():
    doc = json.load(open(sys.argv[1], encoding="utf-8"))
    if "cases" in doc:
        return longctx(sys.argv[1:])
    print("%-8s %10s %14s %14s %14s %12s" % ("arm", "questions", "recall_ok", "exact", "retrieved", "probe fires"))
    for arm in doc["arms"]:
        q = ok = ex = ret = pr = prf = 0
        for p in arm["per_problem"]:
            for t in p["turns"]:
                if t["kind"] == "q":
                    q += 1
                    ok += t["recall_ok"]
                    ret += t["retrieved_ok"]
                    ex += final_answer(t["reply_text"]) == t["val"]
                elif t["kind"] == "probe":
                    pr += 1
                    prf += t["n_fires"] > 0
        print("%-8s %10d %14s %14s %14s %12s" % (arm["label"], q, pct(ok, q), pct(ex, q), pct(ret, q), pct(prf, pr)))
    by_kind(doc)


def pct(a, b):
    return "%d/%d %3.0f%%" % (a, b, 100.0 * a / max(1, b))


def by_kind(doc):
    """Exact answers per kind of value (world.value_kind), per arm."""
    kinds, rows = [], {}
    for arm in doc["arms"]:
        for p in arm["per_problem"]:
            for t in p["turns"]:
                if t["kind"] != "q":
                    continue
                k = value_kind(t["val"])
                if k not in kinds:
                    kinds.append(k)
                c = rows.setdefault(arm["label"], {}).setdefault(k, [0, 0])
                c[0] += final_answer(t["reply_text"]) == t["val"]
                c[1] += 1
    print("exact by kind of value: " + "  ".join("%-12s" % k for k in kinds))
    for label, c in rows.items():
        print("%-8s %s" % (label, "  ".join("%-12s" % pct(*c.get(k, [0, 0])) for k in kinds)))


if __name__ == "__main__":
    main()

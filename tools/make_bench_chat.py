#!/usr/bin/env python3
"""make_bench_chat.py - in-domain chat text for the worldA model: conversations drawn from the
recall benchmark's facts and casual turns (tests/golden/recall_bench.json), in the reference chat
template, joined by the end-of-sentence token, until at least --chars characters. Conversation i
uses Python random.Random(i): 3 facts (the benchmark's fact turns), 12 casual turns, then the 3
questions answered with the facts' values. Used to score worldA with and without --kv f16
(docs/KV.md): `recall tokenize BLOB --special --file OUT` turns it into ids.

usage: make_bench_chat.py BENCH.json --chars N -o OUT.txt
"""
import argparse
import json
import random

USER, ASSISTANT, EOS = "<\uff5cUser\uff5c>", "<\uff5cAssistant\uff5c>", "<\uff5cend\u2581of\u2581sentence\uff5c>"


def conversation(bench, seed):
    rng = random.Random(seed)
    facts = [bench["facts"][i] for i in rng.sample(range(len(bench["facts"])), 3)]
    casual = rng.sample(bench["casual"], 12)
    order = rng.sample(range(3), 3)
    turns = [(bench["fact_user"].format(kw=k, val=v), bench["fact_assistant"]) for k, v in facts]
    turns += [(u, a) for u, a in casual]
    turns += [(bench["question_user"].format(kw=facts[i][0]), facts[i][1]) for i in order]
    return EOS.join(USER + u + ASSISTANT + a for u, a in turns)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("bench")
    ap.add_argument("--chars", type=int, required=True)
    ap.add_argument("-o", required=True)
    a = ap.parse_args()
    bench = json.load(open(a.bench, encoding="utf-8"))
    parts, n, seed = [], 0, 0
    while n < a.chars:
        parts.append(conversation(bench, seed))
        n += len(parts[-1]) + len(EOS)
        seed += 1
    with open(a.o, "w", encoding="utf-8") as f:
        f.write(EOS.join(parts))


if __name__ == "__main__":
    main()

#!/usr/bin/python3
"""heldout_text.py - held-out dialogues of the trained world as chat text, for `recall score`.

    /usr/bin/python3 tools/train_world/heldout_text.py [--world broad|templated] [--n N] [--seed S] > dialogues.txt

Writes N dialogues in the benchmark's shape over the evaluation facts and casual pairs (never
trained on), each the way the loop's chat template renders it with the recipe's replies (the
think preamble, the restated keyword and the value), each starting with the BOS string and
ending with the end-of-sentence string. `recall tokenize BLOB --special --file dialogues.txt`
gives the ids; docs/PROFILES.md scores them under each numerics profile.
"""
import argparse
import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import train  # noqa: E402
import world  # noqa: E402
import world_broad  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=12)
    ap.add_argument("--seed", type=int, default=1, help="the world's seed (train.py --seed)")
    ap.add_argument("--draw", type=int, default=4242, help="seed of the dialogue draws")
    ap.add_argument("--world", default="broad", choices=["broad", "templated"],
                    help="the trained world (broad, tests/golden/trained) or the templated one")
    args = ap.parse_args()
    W = world_broad.BroadWorld(args.seed) if args.world == "broad" else train.World(args.seed)
    r = random.Random(args.draw)
    out = []
    for _ in range(args.n):
        st = world.bench_steps(r, W.eval_facts, W.eval_casual)
        out.append(world.BOS_S + "".join(h + a for _, h, a, _, _ in world.segments(st)) + world.EOS_S)
    sys.stdout.write("".join(out))


if __name__ == "__main__":
    main()

#!/usr/bin/python3
"""probe.py - short decoder-only training runs of the trained world's recipe, measuring held-out
copy accuracy every N steps (how the recipe's schedule was chosen: bench/NOTES.md, "How the copy
was learned").

    /usr/bin/python3 tools/train_world/lab/probe.py [--steps N] [--every N] [--set KEY=VALUE ...]
        [--qcfg KEY=VALUE ...] [--form F] [--threads T] [--seed S]

--set overrides train.DEC (lr, batch_tokens, value_w, full_every, drill_frac, curriculum,
needle_frac, recite_frac);
--qcfg overrides the decoder's shape (hidden, layers, heads, kv_heads, head_dim, ffn). Prints one
line per evaluation: held-out replies exact (teacher-forced argmax = greedy) on the whole
dialogue (FULL), with the fact's blocks injected (RC) and with nothing injected (SP: "I don't
know."). No files are written.
"""
import argparse
import os
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # the recipe's modules
import nets  # noqa: E402
import train  # noqa: E402


def kv(items):
    out = {}
    for it in items:
        k, v = it.split("=", 1)
        out[k] = float(v) if "." in v or "e" in v else int(v)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=400)
    ap.add_argument("--every", type=int, default=50)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--n-eval", type=int, default=16, help="held-out dialogues per evaluation (3 questions each)")
    ap.add_argument("--set", nargs="*", default=[])
    ap.add_argument("--qcfg", nargs="*", default=[])
    ap.add_argument("--form", default=train.world.FORM, choices=["plain", "reprise", "recopy"],
                    help="how the reply restates the value (world.reply_parts)")
    args = ap.parse_args()
    train.world.FORM = args.form
    torch.set_num_threads(args.threads)
    repo = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))
    W, _, _, bpe, hay_pieces, ids_ = train.build_corpus(args.seed, repo)
    train.QCFG.update(kv(args.qcfg))
    torch.manual_seed(args.seed)
    model = nets.Qwen2(train.QCFG)
    pooler = nets.AttnPoolSP(train.QCFG["hidden"], train.N_SP, train.POOLER["heads"], train.POOLER["blocks"],
                             train.POOLER["ffn"])
    for p in pooler.parameters():
        p.requires_grad_(False)
    cfg = kv(args.set)
    print("probe: steps %d, DEC %s, QCFG %s" % (args.steps, dict(train.DEC, **cfg), train.QCFG), flush=True)
    t0 = time.time()

    def on_eval(it):
        res = train.copy_eval(model, pooler, W, bpe, ids_, n=args.n_eval)
        res["induction"] = train.synthetic_eval(model, lambda m, r, n: train.induction_rows(m, r, n, varied=True))
        res["keyed"] = train.synthetic_eval(model, lambda m, r, n: train.keyed_rows(m, r, bpe, n))
        print("probe step %d (%.0fs): " % (it, time.time() - t0) +
              "  ".join("%s %d/%d" % (k, v[0], v[1]) for k, v in res.items()), flush=True)

    train.train_decoder(model, pooler, W, bpe, hay_pieces, args.steps, args.seed, ids_, cfg, args.every, on_eval)


if __name__ == "__main__":
    main()

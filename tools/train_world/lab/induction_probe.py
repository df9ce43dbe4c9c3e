#!/usr/bin/python3
"""induction_probe.py - does the world's decoder shape learn to copy at all? A standalone probe,
independent of the world's corpus: rows of random ids in which one random sequence recurs several
times, separated by random filler, so that a repeat sits at no fixed distance and only matching
the content finds where to copy from (an induction head: find the previous occurrence of the
current id, predict what followed it). The loss is on the repeats (their first id excluded).

    /usr/bin/python3 tools/train_world/lab/induction_probe.py [KEY=VALUE ...]

Keys (defaults): steps=1000 B=32 (rows a step) T=96 (ids a row) V=960 (ids drawn from 0..V-1)
Lmin=6 Lmax=24 (the sequence's length) distinct=1 (the sequence's ids all different) lr=3e-3
(AdamW, betas 0.9/0.98, 50-step warm-up then constant) wd=0.01 layers=4 hidden=128 init=0.02 (std
of the layer matrices, drawn again after nets.Qwen2's own init) qk=init (std of q_proj / k_proj)
emb (given: the embeddings drawn again with this std; else nets.Qwen2's 0.02; lm_head keeps 0.02)
threads=1 seed=1. The other shape values are the world's (train.QCFG).
Prints every 50 steps the training loss on the repeats and the argmax accuracy on 32 fixed
held-out rows (chance: 1/V; the unigram of a row's own ids gives at most ~1/20).
Measured runs: bench/NOTES.md, "How the copy was learned".
"""
import os
import random
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # the recipe's modules
import nets  # noqa: E402
import train  # noqa: E402


def batch(r, n, a):
    """n rows of train.repeat_rows as tensors: ids, targets, weights (row j predicts ids[j + 1])."""
    rows, w = train.repeat_rows(r, n, a["T"], a["V"], a["Lmin"], a["Lmax"], bool(a["distinct"]))
    ids = torch.tensor(rows, dtype=torch.long)
    wt = torch.tensor(w, dtype=torch.float)
    tg = torch.zeros_like(ids)
    tg[:, :-1] = ids[:, 1:]
    w2 = torch.zeros_like(wt)
    w2[:, :-1] = wt[:, 1:]
    return ids, tg, w2


def main():
    a = dict(steps=1000, B=32, T=96, V=960, Lmin=6, Lmax=24, distinct=1, lr=3e-3, wd=0.01, layers=4, hidden=128,
             init=0.02, threads=1, seed=1)
    for kv in sys.argv[1:]:
        if kv in ("-h", "--help"):
            print(__doc__)
            return
        k, v = kv.split("=", 1)
        if k not in a and k not in ("qk", "emb"):
            sys.exit("induction_probe: unknown key %s (keys: %s, qk, emb)" % (k, ", ".join(a)))
        a[k] = float(v) if k in ("lr", "wd", "init", "qk", "emb") else int(v)
    a.setdefault("qk", a["init"])
    torch.set_num_threads(a["threads"])
    torch.manual_seed(a["seed"])
    cfg = dict(train.QCFG, hidden=a["hidden"], layers=a["layers"], vocab=max(1024, (a["V"] + 127) // 64 * 64))
    m = nets.Qwen2(cfg)
    for name, p in m.named_parameters():
        if p.dim() != 2:
            continue
        if "embed" in name or "lm_head" in name:
            if "emb" in a and "embed" in name:
                torch.nn.init.normal_(p, std=a["emb"])
            continue
        torch.nn.init.normal_(p, std=a["qk"] if ("q_proj" in name or "k_proj" in name) else a["init"])
    opt = torch.optim.AdamW(m.parameters(), lr=a["lr"], betas=(0.9, 0.98), weight_decay=a["wd"])
    r = random.Random(a["seed"])
    ev = batch(random.Random(99), 32, a)
    print("induction_probe:", a, flush=True)
    t0 = time.time()
    for it in range(a["steps"]):
        for g in opt.param_groups:
            g["lr"] = a["lr"] * min(1.0, (it + 1) / 50)
        ids, tg, wt = batch(r, a["B"], a)
        logits, _ = m(m.embed_tokens(ids))
        ce = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tg.reshape(-1), reduction="none")
        loss = (ce * wt.reshape(-1)).sum() / wt.sum()
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0)
        opt.step()
        if it % 50 == 0 or it == a["steps"] - 1:
            with torch.no_grad():
                am = m(m.embed_tokens(ev[0]))[0].argmax(-1)
                mk = ev[2] > 0
                acc = (am[mk] == ev[1][mk]).float().mean().item()
            print("step %d loss %.3f acc %.3f %.0fs" % (it, loss.item(), acc, time.time() - t0), flush=True)


if __name__ == "__main__":
    main()

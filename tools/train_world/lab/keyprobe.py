#!/usr/bin/python3
"""keyprobe.py - does the q the gate and the bridge read say WHICH fact is asked for?

    /usr/bin/python3 tools/train_world/lab/keyprobe.py WORLD_DIR|CKPT [N_DIALOGUES]
        (env BLOCKS=1: candidates are the archived blocks instead of the fact lines)

Walks N (default 120) of train.py's gate dialogues (the same draw), takes the gate layers' q at
every recall position (train.loop_features), and trains a contrastive probe Wq(q) . Wk(key) where
a key is the mean decoder input embedding of a candidate's BPE tokens: the dialogue's fact lines
(or, with BLOCKS=1, its archived blocks), plus 48 of other dialogues. Prints per epoch the held-out
dialogues' top-2 hits at the check positions (the last token of a chunk), among the dialogue's own
candidates and with the 48 others, and where the check fell (q: the question's line, r: the
reply). A key that is a fixed function of the tokens generalises to words never trained, so a
probe at chance means the q carries no word of the question. Numbers: bench/NOTES.md, "Which fact is asked".
"""
import os, sys, random, time
import numpy as np, torch, torch.nn as nn, torch.nn.functional as F
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # the recipe's modules
import train, nets, world
from check_engine import read_safetensors
torch.set_num_threads(1)
repo = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))
W, hay, texts, bpe, hay_pieces, ids_ = train.build_corpus(1, repo, True)
torch.manual_seed(1)
model = nets.Qwen2(train.QCFG)
pooler = nets.AttnPoolSP(train.QCFG["hidden"], train.N_SP, train.POOLER["heads"], train.POOLER["blocks"], train.POOLER["ffn"])
sd = torch.load(sys.argv[1])["model"] if sys.argv[1].endswith(".ckpt") else read_safetensors(sys.argv[1] + "/qwen2/model.safetensors")
model.load_state_dict({k[len("model."):] if k.startswith("model.") else k: v for k, v in sd.items()})
model.eval()
N = int(sys.argv[2]) if len(sys.argv) > 2 else 120
gr = random.Random(1 * 19 + 6)
data = {"train": [], "held": []}
t0 = time.time()
for i in range(N):
    e = train.sample_dialogue(W, gr, bpe, i % 2 == 0) if i % 5 else train.sample_needle(gr, bpe, hay_pieces, 150, 400)
    part = "held" if i % 4 == 3 else "train"
    fs = train.loop_features(model, pooler, e, ids_["bos"], train.GATE_LAYERS, gr)
    facts = [t for t in e.turns if t["kind"] == "fact"]
    if not facts:
        continue
    spans = [t["head"] for t in facts]
    if os.environ.get("BLOCKS"):
        nb = len(e.ids) // train.BLOCK
        spans = [(a, a + train.BLOCK) for a in range(0, nb * train.BLOCK, train.BLOCK)]
    items = []
    for f, l, info, p, c0 in fs:
        if l != 1:
            continue
        if os.environ.get("BLOCKS"):
            ndc = max(0, c0 + train.CHUNK - train.WINDOW)
            tgt = [(1.0 if train.overlaps(info[1], s_) else 0.0) if s_[1] <= ndc else None for s_ in spans]
            tgt = [x if x is not None else -1.0 for x in tgt]
        else:
            tgt = [1.0 if s == info[1] else 0.0 for s in spans]
        if max(tgt) <= 0:
            continue
        # where p falls: in the question's user line, or the reply
        qt = [t for t in e.turns if t["kind"] == "q" and t["head"][0] <= p < t["reply"][1]][0]
        where = "q" if p < qt["reply"][0] else "r"
        items.append((torch.tensor(f), tgt, (p + 1) % train.CHUNK == 0, where))
    if items:
        data[part].append(([e.ids[a:b] for a, b in spans], items))
print("features %.0fs: train %d dialogues %d items, held %d dialogues %d items" % (time.time() - t0,
      len(data["train"]), sum(len(x[1]) for x in data["train"]), len(data["held"]), sum(len(x[1]) for x in data["held"])), flush=True)
emb = model.embed_tokens.weight.detach()
def bag(ids):
    return emb[torch.tensor(ids)].mean(0)
torch.manual_seed(5)
qd = data["train"][0][1][0][0].shape[0]
Wq = nn.Sequential(nn.Linear(qd, 64), nn.GELU(), nn.Linear(64, 64))
Wk = nn.Sequential(nn.Linear(emb.shape[1], 64), nn.GELU(), nn.Linear(64, 64))
opt = torch.optim.Adam(list(Wq.parameters()) + list(Wk.parameters()), lr=2e-3)
pool = {k: [bag(s) for fl, _ in data[k] for s in fl] for k in data}
rr = random.Random(3)
def run(d, part, nd_, train_=False, checks_only=False):
    fl, items = d
    K = torch.stack([bag(s) for s in fl] + rr.sample(pool[part], min(nd_, len(pool[part])))) if nd_ else torch.stack([bag(s) for s in fl])
    k = Wk(K)
    loss, hits, n, byw = 0.0, 0, 0, {}
    for f, tgt, chk, where in items:
        if checks_only and not chk:
            continue
        s = k @ Wq(f)
        t = torch.tensor(tgt + [0.0] * (len(s) - len(tgt)))
        s = s.masked_fill(t < 0, -1e9); t = t.clamp_min(0)
        if t.sum() == 0:
            continue
        loss = loss - (t / t.sum() * F.log_softmax(s, -1)).sum()
        h = any(t[j] > 0 for j in torch.topk(s, min(2, len(s))).indices.tolist())
        hits += h; n += 1
        a = byw.setdefault(where, [0, 0]); a[0] += h; a[1] += 1
    return loss, hits, n, byw
for ep in range(12):
    rr.shuffle(data["train"])
    tot = 0
    for d in data["train"]:
        opt.zero_grad()
        loss, _, n, _ = run(d, "train", 48, True)
        (loss / max(1, n)).backward(); opt.step(); tot += float(loss) / max(1, n)
    with torch.no_grad():
        res = [run(d, "held", 0, checks_only=True) for d in data["held"]]
        resd = [run(d, "held", 48, checks_only=True) for d in data["held"]]
    h = sum(r[1] for r in res); n = sum(r[2] for r in res); hd = sum(r[1] for r in resd)
    byw = {}
    for r in res:
        for k_, v in r[3].items():
            a = byw.setdefault(k_, [0, 0]); a[0] += v[0]; a[1] += v[1]
    print("ep %d loss %.3f held checks top-2 among own facts %d/%d, +48 facts %d/%d; by place %s" % (ep, tot / len(data["train"]), h, n, hd, n, byw), flush=True)

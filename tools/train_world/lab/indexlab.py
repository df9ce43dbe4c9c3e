#!/usr/bin/python3
"""indexlab.py - how well can a BERT of the world's shape index blocks by the keywords they state?

    /usr/bin/python3 tools/train_world/lab/indexlab.py WORLD_DIR
        (env H, L, FFN: BERT's shape, default 64 / 2 / 2H; STEPS default 1500; ND: training
         dialogues, default 1500; LEX=decoder (default) or learned word embeddings)

The text side of train.py's keyword index alone: a query tower reads the keyword as the mean of
WORLD_DIR's decoder embeddings of its BPE tokens, contrasted with BERT(block) of a batch of 48
blocks (half of them holding a fact). Every 250 steps: on 60 held-out dialogues of the held-out
facts (eval_bench.json's keywords and values), the top-2 hits of each question's keyword among
its dialogue's blocks and among 48 more. Numbers: bench/NOTES.md ("Which fact is asked")."""
import os, sys, random, time, math, pickle
import numpy as np, torch, torch.nn as nn, torch.nn.functional as F
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # the recipe's modules
import train, nets, world, tok
from check_engine import read_safetensors
torch.set_num_threads(1)
WD = sys.argv[1]
H = int(os.environ.get("H", 64)); L = int(os.environ.get("L", 2)); FFN = int(os.environ.get("FFN", 2 * H))
STEPS = int(os.environ.get("STEPS", 1500)); ND = int(os.environ.get("ND", 1500)); LEX = os.environ.get("LEX", "decoder")
t0 = time.time()
cache = "build/indexlab-corpus.pkl"  # the corpus and BPE, made once
if os.path.exists(cache):
    W, bpe = pickle.load(open(cache, "rb"))
else:
    W, hay, texts, bpe, hay_pieces, ids_ = train.build_corpus(1, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."), True)
    pickle.dump((W, bpe), open(cache, "wb"))
train.QCFG["vocab"] = (bpe.n_ids() + 63) // 64 * 64
print("corpus %.0fs" % (time.time() - t0), flush=True)
model = nets.Qwen2(train.QCFG)
sd = read_safetensors(WD + "/qwen2/model.safetensors")
model.load_state_dict({k[len("model."):] if k.startswith("model.") else k: v for k, v in sd.items()})
demb = model.embed_tokens.weight.detach()
wp = tok.WordPiece([l.rstrip("\n") for l in open(WD + "/bge/vocab.txt", encoding="utf-8")])
B = train.BLOCK


def kwbag(k):
    return demb[torch.tensor(bpe.encode(" " + k))].mean(0)


def blocks(e):
    facts = [t for t in e.turns if t["kind"] == "fact"]
    out = []
    for a in range(0, len(e.ids) - B + 1, B):
        kws = [t["kw"] for t in facts if train.overlaps(t["head"], (a, a + B))]
        out.append((bpe.decode(e.ids[a:a + B]), kws))
    return out


rr = random.Random(7)
tr = []
for i in range(ND):
    e = train.sample_dialogue(W, rr, bpe, rr.random() < 0.5)
    tr += blocks(e)
# held-out: dialogues of the eval facts and eval casual lines, bench templates and training phrasings
hr = random.Random(8)
held = []
for i in range(60):
    facts = [tuple(x) for x in hr.sample(W.eval_facts, 8)]
    cas = [tuple(x) for x in hr.sample(W.eval_casual, 12)]
    ph = world.BENCH if i % 2 else W.phrasing(hr)
    e = train.encode_steps(bpe, world.bench_steps(hr, facts, cas, ph))
    held.append(blocks(e))
print("data %.0fs: %d train blocks (%d with facts), %d held dialogues" % (
    time.time() - t0, len(tr), sum(1 for _, k in tr if k), len(held)), flush=True)

torch.manual_seed(3)
bert = nets.Bert(len(wp.tokens), H, L, 4, FFN)
if LEX == "decoder":
    g = torch.Generator().manual_seed(11)
    P = torch.randn(demb.shape[1], H, generator=g) / math.sqrt(demb.shape[1])
    rows = []
    for t in wp.tokens:
        pieces = bpe.encode(t[2:] if t.startswith("##") else " " + t) if not (t.startswith("[") and t.endswith("]")) else []
        rows.append(demb[torch.tensor(pieces)].mean(0) @ P if pieces else torch.randn(H, generator=g) * 0.02)
    table = torch.stack(rows)
    table = table / table.norm(dim=-1, keepdim=True).mean() * 0.02 * math.sqrt(H)
    with torch.no_grad():
        bert.embeddings.word_embeddings.weight.copy_(table)
        bert.embeddings.word_embeddings.weight[0].zero_()
    bert.embeddings.word_embeddings.weight.requires_grad_(False)
Qt = nn.Sequential(nn.Linear(demb.shape[1], 64), nn.GELU(), nn.Linear(64, 64))
Kt = nn.Sequential(nn.Linear(H, 64), nn.GELU(), nn.Linear(64, 64))
params = [p for p in bert.parameters() if p.requires_grad] + list(Qt.parameters()) + list(Kt.parameters())
opt = torch.optim.Adam(params, lr=1e-3)
enc_cache = {}


def enc(texts):
    ids_l = [enc_cache.setdefault(t, wp.encode(t)) for t in texts]
    T = max(len(x) for x in ids_l)
    ids = torch.zeros(len(ids_l), T, dtype=torch.long)
    for i, x in enumerate(ids_l):
        ids[i, :len(x)] = torch.tensor(x)
    return Kt(bert(ids, torch.tensor([len(x) for x in ids_l])))


def evaluate():
    er = random.Random(9)
    allb = [b for d in held for b in d]
    h_in = h_out = n = 0
    with torch.no_grad():
        for d in held:
            own = [t for t, _ in d]
            others = [t for t, _ in er.sample(allb, 60) if t not in own][:48]
            K = enc(own + others)
            for j, (t, kws) in enumerate(d):
                for k in kws:
                    s = K @ Qt(kwbag(k))
                    tgt = [i for i, (_, kk) in enumerate(d) if k in kk]
                    n += 1
                    h_in += any(i in tgt for i in torch.topk(s[:len(own)], 2).indices.tolist())
                    h_out += any(i in tgt for i in torch.topk(s, 2).indices.tolist())
    return h_in, h_out, n


BS = 48
fr = random.Random(5)
withf = [x for x in tr if x[1]]
for it in range(STEPS + 1):
    if it % 250 == 0:
        bert.eval()
        hi, ho, n = evaluate()
        bert.train()
        print("step %d (%.0fs): held-out top-2 within %d/%d (%.0f%%), among 48 more %d/%d (%.0f%%)" % (
            it, time.time() - t0, hi, n, 100 * hi / n, ho, n, 100 * ho / n), flush=True)
    if it == STEPS:
        break
    batch = fr.sample(withf, BS // 2) + fr.sample(tr, BS // 2)
    K = enc([t for t, _ in batch])
    kws = sorted({k for _, kk in batch for k in kk})
    Q = torch.stack([Qt(kwbag(k)) for k in kws])
    S = Q @ K.t()
    tgt = torch.tensor([[1.0 if k in kk else 0.0 for _, kk in batch] for k in kws])
    loss = -(tgt / tgt.sum(1, keepdim=True) * F.log_softmax(S, -1)).sum(1).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    if it % 100 == 0:
        print("  step %d loss %.3f" % (it, float(loss)), flush=True)

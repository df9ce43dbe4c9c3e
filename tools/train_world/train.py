#!/usr/bin/python3
"""train.py - trains the small world on which recall visibly works, and writes it into
tests/golden/trained/ in the formats of the real artifacts (docs/WORLD.md walks through it).

    /usr/bin/python3 tools/train_world/train.py [--out DIR] [--seed S] [--steps N] [--set KEY=VALUE ...]
        [--form plain|reprise|recopy] [--eval-every N]

Debian's python3 with python3-torch and python3-numpy, CPU, one thread, seeded: the same seed on
the same machine writes the same bytes (MANIFEST.xxh64 records them; `make train-world-check`
compares). Stages:
  1. corpus: training dialogues (world.py), a training haystack (C sources and docs of this
     repository at a pinned commit, none of them in the long-context haystack), the held-out
     evaluation bench (eval_bench.json).
  2. tokenizers: byte-level BPE (Qwen2 schema) and WordPiece (bge schema) trained on the corpus.
  3. pooler: AttnPoolSP, random and fixed (seeded): its gist carries nothing the decoder can use,
     so the SP arm is the no-recall baseline.
  4. decoder: from layer matrices at std 1/sqrt(hidden) and embeddings at std 1, 1,500 steps of
     synthetic repeats at varied distances (repeat_rows: they form the induction copy every
     answer needs; docs/WORLD.md; with --vocab realistic on a decoder of 1,024 ids that is then
     extended to the BPE's 4,096: extend_vocab), then 3,500 steps (the templated world: 3,000) on the layouts
     the loop builds: the whole dialogue (FULL), and [BOS][SP over the evicted prefix][injected
     blocks][window] at contiguous positions (RC/SP), where it copies a value from an injected
     block or says "I don't know" when it has none; the trained world then 800 tail steps whose
     loop layouts also end in small talk and facts (DEC tail).
  5. gate: the q_proj outputs (after bias, before RoPE) of the gate layers at the loop's check
     positions, labelled "the answer needs evicted history"; StandardScaler + logistic regression
     (C = 0.05, balanced), threshold = 10th percentile of held-out positive scores.
  6. bridge head + BERT: trained together so that a question's q retrieves the archived block
     holding its fact (softmax over the candidate blocks, cross-entropy against the blocks that
     hold it); BGE embedding = CLS + L2 of the world BERT on the decoded block text.
"""
import argparse
import json
import math
import os
import random
import struct
import subprocess
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import manifest  # noqa: E402
import nets  # noqa: E402
import tok  # noqa: E402
import world  # noqa: E402
import world_broad  # noqa: E402

# ---- geometry of the world (written into the artifacts, read back by `recall convert`) ----------
WINDOW, BLOCK, CHUNK, TOPK, TURN_CAP, BUF_MIN = 96, 32, 16, 2, 64, 16
GATE_LAYERS = (1, 2, 3)
QCFG = dict(hidden=128, layers=4, heads=4, kv_heads=2, head_dim=32, ffn=256, eps=1e-6, theta=10000.0, max_pos=2048,
            init_std=0.088, emb_std=1.0)  # layer matrices at 1/sqrt(hidden), embeddings at 1: a copy forms (WORLD.md)
N_SP = 8
POOLER = dict(heads=4, blocks=2, ffn=256)
BERT = dict(hidden=64, layers=2, heads=4, ffn=128)
N_MERGES, WP_SIZE = 760, 1200  # byte-level BPE merges, WordPiece size (--world broad: BROAD)
BATCH_TOKENS = 2000
VALUE_W = 10.0  # loss weight of the value tokens (the copy is what the world is for)
# Every reply's first token decides: look a fact up ("<think>") or answer as small talk or an
# acknowledgement. One token among a reply's thirty, it weighs like the others by default; with DEC
# decide_w > 0 its weight is DECIDE_MARK (1 + 2^-10, a mark no other weight takes), and the loss adds
# decide_w times the binary cross-entropy of P("<think>") there: the decision alone is pressed, not
# which small-talk word comes first (weighting the whole first token made every small-talk reply
# start alike). A small decoder had learned the decision from the chat's shape (a question rarely
# follows its fact at once) instead of from whether the chat told the question's noun.
DECIDE_MARK = 1.0009765625
DECIDE_W = 1.0  # the first token's weight: DECIDE_MARK while decide_w > 0 (set by main)
HAYSTACK_COMMIT = "9205ae22048ad97fc2e48429f5eff8b1bbde5d62"
HAYSTACK_FILES = ["weights/convert.c", "weights/safetensors.c", "weights/npy.c", "weights/zip.c", "weights/pickle.c",
                  "weights/FORMAT_TOKENIZERS.md", "src/bert.c", "src/pooler.c", "src/heads.c", "src/retriever.c",
                  "src/tokenize_bpe.c", "src/blob.c", "src/json.c", "src/session.c"]


def log(*a):
    print("[%7.1fs]" % (time.time() - T0), *a, flush=True)


T0 = time.time()


# ---- stage 1: the corpus --------------------------------------------------------------------
def training_haystack(repo):
    parts = []
    for f in HAYSTACK_FILES:
        b = subprocess.run(["git", "-C", repo, "show", "%s:%s" % (HAYSTACK_COMMIT, f)], check=True,
                           capture_output=True).stdout
        t = "".join(chr(c) for c in b if 32 <= c < 127 or c in (9, 10))
        parts.append("==== %s ====\n%s" % (f, t))
    t = "\n".join(parts)
    for m in ("magic number", "VAR "):  # the long-context inserts' markers never occur in the haystack
        t = t.replace(m, m.lower().replace(" ", "_"))
    return t


class World:
    """Facts, casual pairs and the evaluation bench."""

    def __init__(self, seed):
        r = random.Random(seed * 7919 + 1)
        tr_kw, ev_kw = world.kw_split()
        # evaluation facts: one held-out pair per modifier (a distinct first word), novel values
        by_mod = {}
        for kw in ev_kw:
            by_mod.setdefault(kw.split()[0], []).append(kw)
        self.eval_facts, vals = [], set()
        for m in world.MODS:
            kw = r.choice(by_mod[m])
            v = world.draw_value(r)
            while v in vals:
                v = world.draw_value(r)
            vals.add(v)
            self.eval_facts.append([kw, v])
        self.eval_values = vals
        self.eval_casual = world.distinct_casual(lambda: world.casual_pair(r))
        self.train_kw = tr_kw
        self.rng = random.Random(seed * 104729 + 2)

    def train_value(self, r):
        while True:
            v = world.draw_value(r)
            if v not in self.eval_values:
                return v

    def train_facts(self, r, n=12):
        kws = r.sample(self.train_kw, n)
        return [(k, self.train_value(r)) for k in kws]

    def train_casual(self, r, n=16):
        return [world.casual_pair(r) for _ in range(n)]

    def phrasing(self, r):
        """The benchmark's templates for every dialogue (no random draw)."""
        return world.BENCH

    def bench_json(self, phrasing=False):
        return {
            "description": "Held-out multi-fact recall benchmark of the trained world (tools/train_world): keywords "
                           "and values never seen in training, casual turns drawn apart from the training ones; "
                           "problems are built as in recall_bench.json (random.Random(i)).",
            "fact_user": world.FACT_USER, "fact_assistant": world.FACT_ASSISTANT,
            "question_user": world.QUESTION_USER, "facts": self.eval_facts, "casual": self.eval_casual,
        }


# ---- encoding a dialogue into ids with the spans the losses and labels need ----------------------
class Encoded:
    """ids of [turn segments + replies] (no BOS), with per-turn spans."""

    def __init__(self):
        self.ids, self.w = [], []  # w: loss weight of predicting ids[i] (from position i-1)
        self.turns = []  # dicts: kind, head (a, b), reply (a, b), value (a, b) or None, kw, val, fact_of


def encode_steps(bpe, steps):
    e = Encoded()
    facts = {}  # kw -> (seg start, seg end)
    for i, (kind, u, a, kw, val) in enumerate(steps):
        head = (world.EOS_S if i else "") + world.USER_S + u + world.ASSIST_S
        h = bpe.encode(head)
        t = {"kind": kind, "kw": kw, "val": val}
        s0 = len(e.ids)
        e.ids += h
        e.w += [0.0] * len(h)
        if i:
            e.w[s0] = 1.0  # the EOS that ends the previous reply
        t["head"] = (s0, len(e.ids))
        r0 = len(e.ids)
        if kind == "q":
            th, tail = (bpe.encode(x) for x in world.reply_parts(kw, val))
            e.ids += th
            e.w += [DECIDE_W] + [1.0] * (len(th) - 1)
            t["value"] = (len(e.ids), len(e.ids) + len(tail))
            e.ids += tail
            e.w += [VALUE_W] * len(tail)
        elif kind == "recite":  # val: the (kw, value) pairs in the order listed; the values weighted
            pre = bpe.encode(world.RECITE_HEAD)
            e.ids += pre
            e.w += [1.0] * len(pre)
            for k_, v_ in val:
                a_, b_ = bpe.encode(" " + world.restate_head(k_)), bpe.encode(" " + v_ + ".")
                e.ids += a_ + b_
                e.w += [0.5] * len(a_) + [VALUE_W] * len(b_)
        else:
            rr = bpe.encode(a)
            e.ids += rr
            e.w += [DECIDE_W] + [1.0] * (len(rr) - 1)
        t["reply"] = (r0, len(e.ids))
        if kind == "fact":
            facts[kw] = (s0, s0 + len(h))
        # a question may name the keyword shorter than its fact did (world_wide.shorter)
        t["fact_span"] = facts.get(getattr(kw, "fact", kw)) if kind == "q" else None
        if kind == "q":
            # the question up to the end of its keyword (a question may start with it, capitalised), or of
            # the noun it names the fact by instead (world_wide.typed_question: Key.asked)
            name = getattr(kw, "asked", None) or kw
            q = u[:u.lower().index(name.lower()) + len(name)]
            t["kw_end"] = s0 + len(bpe.encode((world.EOS_S if i else "") + world.USER_S + q))
        e.turns.append(t)
    return e


def encode_needle(bpe, user, val, kw):
    e = Encoded()
    h = bpe.encode(world.USER_S + user + world.ASSIST_S)
    e.ids += h
    e.w += [0.0] * len(h)
    th, tail = (bpe.encode(x) for x in world.reply_parts(kw, val))
    r0 = len(e.ids)
    e.ids += th
    e.w += [DECIDE_W] + [1.0] * (len(th) - 1)
    v0 = len(e.ids)
    e.ids += tail
    e.w += [VALUE_W] * len(tail)
    # the needle's own tokens: where its value sits in the prompt
    vt = bpe.encode(" is " + val + ".")[-len(bpe.encode(" " + val)) - 1:-1]
    pos = None
    for i in range(len(h) - len(vt), -1, -1):
        if h[i:i + len(vt)] == vt:
            pos = i
            break
    span = (max(0, pos - 12), pos + len(vt) + 2) if pos is not None else None
    e.turns.append({"kind": "q", "kw": kw, "val": val, "head": (0, len(h)), "kw_end": len(h) - 16, "reply": (r0, len(e.ids)),
                    "value": (v0, len(e.ids)), "fact_span": span})
    return e


# ---- the layouts the loop builds ----------------------------------------------------------------
def blocks_of(nd):
    """The archive after nd tokens were evicted: sealed blocks [a, b) and the buffer pseudo-block."""
    bl = [(i, i + BLOCK) for i in range(0, nd - nd % BLOCK, BLOCK)]
    if nd % BLOCK >= BUF_MIN:
        bl.append((nd - nd % BLOCK, nd))
    return bl


def overlaps(a, b):
    return a is not None and a[0] < b[1] and b[0] < a[1]


def align_exchange(e, nd):
    """The window's start under --edge exchange (docs/LOOP.md, "The window's edge"): just after the
    EOS that closed the exchange before the one token nd is in, at most 2 * BLOCK ids back."""
    for i, t in enumerate(e.turns):
        if t["head"][0] <= nd < t["reply"][1] + 1:
            ws = t["head"][0] + (1 if i else 0)
            return ws if nd - 2 * BLOCK <= ws <= nd else nd
    return nd


def make_example(model, pooler, bpe, e, q_turn, r, mode, eos_id, bos_id, other_fact=0.0, align=False):
    """One RC/SP-layout training row for question turn q_turn of e: the window ends at the end of
    the turn's reply (+ EOS); `mode`: 'right' (the fact's block(s) injected), 'wrong' (two other
    blocks), 'none' (no injection). other_fact: the share of 'right' rows whose second block is
    one stating another fact where the dialogue has one (DEC other_fact). Returns (rows-spec,
    targets, weights) or None."""
    t = e.turns[q_turn]
    nd = evicted_at(t["reply"][1], r)
    if nd <= 0:
        return None
    fs = t["fact_span"]
    ws = align_exchange(e, nd) if align else nd
    in_window = fs is not None and fs[0] >= ws
    cands = blocks_of(nd)
    inj = []
    hold = [b for b in cands if overlaps(fs, b)]
    others = [b for b in cands if not overlaps(fs, b)]
    if mode == "right" and hold:
        pool = others
        if len(hold) < 2 and other_fact > 0 and r.random() < other_fact:
            # far back, the bridge's second pick is often another fact's block: the copy must
            # follow the asked keyword, not the nearest value
            facty = [b for b in others if any(u["kind"] == "fact" and u["kw"] != t["kw"] and overlaps(u["head"], b)
                                              for u in e.turns)]
            pool = facty or others
        pick = hold[:2] if len(hold) >= 2 else hold + r.sample(pool, min(1, len(pool)))
        inj = sorted(pick)
    elif mode == "wrong" and len(others) >= 2:
        inj = sorted(r.sample(others, 2))
    else:
        mode = "none"
    knows = t["val"] is not None and (in_window or (mode == "right" and fs is not None and fs[0] >= inj[0][0]
                                                    and fs[1] <= inj[-1][1]))
    # the question's reply as it should be under this layout
    ids = list(e.ids[:t["reply"][0]])
    w = list(e.w[:t["reply"][0]])
    th, tail = (bpe.encode(x) for x in world.reply_parts(t["kw"], t["val"] if knows else None))
    ids += th + tail + [eos_id]
    w += [DECIDE_W] + [1.0] * (len(th) - 1) + [VALUE_W] * len(tail) + [1.0]
    win = ids[ws:]
    ww = [0.0] * (len(win) - len(th) - len(tail) - 1) + w[-len(th) - len(tail) - 1:]  # the question's reply
    ex = layout_row(model, pooler, e, nd, inj, win, ww, bos_id)
    ex["aux"] = [(p - ws, t["kw"]) for p in range(max(t["kw_end"], ws), t["reply"][0] + len(th))]
    ex["seal"] = seal_blocks(e)
    return ex


def seal_blocks(e):
    """The blocks a faithful loop seals that end inside a question turn (after the question's
    keyword, up to the reply's end), each as (ids, rows): the block's ids on the archive's grid
    and its rows from the keyword on. Sealed, such a block runs on its own, and its q there looks
    like a recall position of the question it holds: the seal head (DEC seal_w) teaches the
    decoder to make them differ. No random draw: the run's streams are unchanged."""
    out = []
    for t in e.turns:
        if t["kind"] != "q":
            continue
        for a in range(0, len(e.ids) - BLOCK + 1, BLOCK):
            b = a + BLOCK
            if t["kw_end"] < b <= t["reply"][1]:
                out.append((e.ids[a:b], list(range(max(0, t["kw_end"] - a), BLOCK))))
    return out


def evicted_at(end, r):
    """How many tokens the loop has evicted at a rebuild c0 on the chunk grid up to CHUNK-1 tokens
    before `end` (the window is gen[c0-R:c0] plus the tokens written since)."""
    c0 = max(0, end - r.randrange(CHUNK))
    c0 -= c0 % CHUNK
    return c0 - min(c0, WINDOW)


def layout_row(model, pooler, e, nd, inj, win, ww, bos_id):
    """[BOS][SP of the nd evicted tokens][injected blocks][window] as an example row."""
    inj_ids = [x for a, b in inj for x in e.ids[a:b]]
    with torch.no_grad():
        sp = pooler(model.embed_tokens(torch.tensor(e.ids[:nd])))
    return {"sp": sp, "pre": [bos_id], "inj": inj_ids, "win": win, "w": ww}


def make_casual_example(model, pooler, e, turn, r, eos_id, bos_id, align=False):
    """One RC/SP-layout row that ends with a turn that is not a question (small talk or a fact):
    the loss on its own reply ("I love hearing that...", "Got it, noted."). Without such rows every
    loop-layout row ends in a question, and the decoder learns that under a rebuilt context the
    last user line is always one: it then "looks back" on small talk and the gate fires there.
    Half of them carry two injected blocks (a false fire must not change the reply)."""
    t = e.turns[turn]
    end = t["reply"][1]
    nd = evicted_at(end, r)
    cands = blocks_of(nd)
    if nd <= 0:
        return None
    inj = sorted(r.sample(cands, 2)) if len(cands) >= 2 and r.random() < 0.5 else []
    ws = align_exchange(e, nd) if align else nd
    win = list(e.ids[ws:end]) + [eos_id]
    a = t["reply"][0]
    ww = [0.0] * (a - ws) + list(e.w[a:end]) + [1.0] if a >= ws else list(e.w[ws:end]) + [1.0]
    return layout_row(model, pooler, e, nd, inj, win, ww, bos_id)


def row_tensors(model, ex):
    """Input rows [T, H], targets [T], weights [T] of one example (the next-token targets of the
    window part only)."""
    emb = model.embed_tokens
    parts = [emb(torch.tensor(ex["pre"]))]
    if ex.get("sp") is not None:
        parts.append(ex["sp"])
    if ex["inj"]:
        parts.append(emb(torch.tensor(ex["inj"])))
    n_pre = sum(p.shape[0] for p in parts)
    parts.append(emb(torch.tensor(ex["win"])))
    x = torch.cat(parts, 0)
    T = x.shape[0]
    tgt = torch.zeros(T, dtype=torch.long)
    wt = torch.zeros(T)
    win = ex["win"]
    tgt[n_pre - 1:T - 1] = torch.tensor(win)
    wt[n_pre - 1:T - 1] = torch.tensor(ex["w"])
    return x, tgt, wt


def full_example(e, bos_id, eos_id):
    aux = [(p, t["kw"]) for t in e.turns if t["kind"] == "q" and t.get("value") for p in range(t["kw_end"], t["value"][0])]
    return {"pre": [bos_id], "sp": None, "inj": [], "win": list(e.ids) + [eos_id], "w": list(e.w) + [1.0], "aux": aux,
            "seal": seal_blocks(e)}


# ---- stage 4: the decoder -----------------------------------------------------------------------
def sample_dialogue(W, r, bpe, bench_shape, drill=False, recite=False):
    """A training dialogue, its facts and questions in the training phrasings (world.Phrasing).
    --wording plain: a share W.plain of the dialogues (not drills) are world_plain's short chats."""
    if getattr(W, "plain", 0) and not drill and not recite and r.random() < W.plain:
        import world_plain
        return encode_steps(bpe, world_plain.plain_steps(r, W))
    facts = W.train_facts(r)
    cas = W.train_casual(r)
    ph = W.phrasing(r)
    if recite:
        return encode_steps(bpe, world.recite_steps(r, facts, cas, ph))
    if drill:
        return encode_steps(bpe, world.drill_steps(r, facts, cas, ph))
    steps = world.bench_steps(r, facts, cas, ph) if bench_shape else world.free_steps(r, facts, cas, ph)
    return encode_steps(bpe, steps)


def sample_long(W, r, bpe, n_tokens, distinct=False):
    """Training dialogues one after another until the chat holds n_tokens: a conversation as long
    as far back's (docs/LONG_CONTEXT.md), whose gist summarises thousands of tokens of other facts
    and small talk before each question. distinct (DEC long_distinct): no keyword in two of its
    dialogues. Drawn independently, about one long conversation's fact in thirty shares its keyword
    with an earlier dialogue's ("plate" twice, two values): a question's row then says "I don't
    know" with the other value in view or injected, which teaches the decoder not to copy."""
    steps, n, used = [], 0, set()
    while n < n_tokens:
        facts = W.train_facts(r)
        while distinct and any(k in used for k, _ in facts):
            facts = W.train_facts(r)
        used.update(k for k, _ in facts)
        cas, ph = W.train_casual(r), W.phrasing(r)
        more = world.bench_steps(r, facts, cas, ph) if r.random() < 0.5 else world.free_steps(r, facts, cas, ph)
        n += len(encode_steps(bpe, more).ids)
        steps += more
    return encode_steps(bpe, steps)


def sample_needle(r, bpe, hay_pieces, lo, hi):
    n = r.randint(lo, hi)
    user, val, kw = world.needle_user(r, hay_pieces, n, multikey=r.random() < 0.25)
    return encode_needle(bpe, user, val, kw)


# The trained world (--world broad, world_broad.py): its tokenizers' sizes and what it changes in DEC.
# BROAD is the world before this one (--vocab small): the templated world's 1,024 ids (760 merges).
# Over 4,096 ids (3,800 merges) the warm-up formed no copy in 1,700 steps, nor when it drew from the
# first 960 ids (bench/NOTES.md); so REALISTIC_VOCAB (--vocab realistic, the default and the
# committed world) runs the warm-up on 1,024 ids and then extends the decoder to 4,096
# (extend_vocab), with a batch of repeats over every id every tenth world step. Its tail is gentler
# than BROAD's (tail_lr 1e-4, no keyword probe): at 3e-4, or with the probe (aux_w 0.05-0.3,
# aux_q_only, repeat_tail: measured, not kept), the tail cost the world its copy or its phrasings
# (FULL 68-91 % against 93 %, phrasings never trained down to 52 %). Far back, the gate fires once it
# has also learned from 24 long conversations (gate_long, --gate-long) and the copy holds once a
# quarter of the tail's loop rows come from such conversations (DEC long_frac) whose dialogues never
# share a keyword (long_distinct: with shared ones, FULL fell to 86 %); other_fact 0.5 is kept from
# the runs that found them (bench/NOTES.md, "A realistic vocabulary"). From scratch: FULL 91 %,
# RC_bge 94 % in the recommended setting, far back at 8k 45 of 60 (the world before: 50 of 60).
# gate_dialogues: the gate's and the bridge's training dialogues (the first broad world's 48 left the
# bridge at 36/61 held-out hits, falling from 44 as it overfitted).
# tail: 800 steps after the world's cosine that teach the rebuilt context to answer small talk as
# small talk (without them the gate fired in 84 % of the casual probe turns, 97 % on the 4,096-id
# world: bench/NOTES.md).
# aux_w, bert_lex, bridge_rows, bert_init: which fact is asked (bench/NOTES.md, "Which fact is asked"): the
# tail teaches the gate layers' q the question's keyword, BERT reads fixed embeddings made of the
# decoder's, is taught to index its blocks by their facts' keywords, and the bridge learns from every
# recall position.
BROAD = dict(merges=760, wp_size=8000, wp_pieces=0.25, dec=dict(induction=1500, tail=800, aux_w=0.3), gate_dialogues=240,
             bert_lex="decoder", bridge_rows="all", bert_init="index")
REALISTIC_VOCAB = dict(merges=3800, gate_long=24, dec=dict(warm_vocab=1024, repeat_every=10, aux_w=0.0, tail_lr=1e-4,
                                                       other_fact=0.5, long_frac=0.25, long_distinct=1))

# --wording wide (world_wide.py): facts, questions and small talk as people type them. A stage after
# the committed recipe: it continues that world's decoder (--init; no warm-up, the vocabulary already
# 4,096 ids) on dialogues of which a share `wide` of facts and small talk are world_wide's, the rest
# world_broad's grammar, at a gentler world rate; a share of the whole-sequence rows are long chats.
WIDE = dict(wide=0.6, dec=dict(induction=0, warm_vocab=0, world_lr=1e-3, long_full=0.15))
# --wording typed (world_wide.TYPED): the stage after that one (--init the wide world): the same mix,
# of which a share `typed` of the wide questions name the fact with another noun or verb and of the
# wide facts take the typed forms (a clause between keyword and value, the value first in new forms);
# a shorter, gentler schedule (the world already reads the wide wording). Measured, not kept (bench/NOTES.md,
# "Naming the fact otherwise"): not part of make train-world.
TYPED = dict(typed=0.4, dec=dict(world_lr=7e-4, tail=300))
# --wording plain (world_plain.py): the third stage of make train-world (--init the wide stage): the wide
# mix, of whose dialogues a share `plain` are short plain chats (the question right after the fact, small
# talk right after a fact, questions on facts never stated, one line between), a share plain_long of
# the long whole-sequence rows a long chat in view (a dozen facts among natural small talk), more
# needle prompts, windows that start where --edge exchange starts them (edge_align), and rows that end
# in small talk in the world's steps too (casual_world); 40 % of the whole-sequence rows are short plain
# chats (plain_full), 60 % of their questions in the fact's own verb or the plainest form (verb_q:
# "when does the meeting start?" is under 2 % of the wide mix's questions), and every reply's first
# token carries the look-up-or-not decision's loss (decide_w, DECIDE_MARK). Without decide_w the same
# mix still answered "When does my train leave?" right after its fact with small talk and "How is your
# week going so far?" right after a fact with the fact (docs/WORLD.md, "Plain chats").
# everyday (world_plain's everyday frames) is measured on two draws (DEC reseed) and not yet shipped: 0 here
# (bench/NOTES.md, "everyday frames").
PLAIN = dict(plain=0.3, dec=dict(world_lr=7e-4, long_full=0.2, plain_long=0.6, needle_frac=0.15, edge_align=0.6,
                                 casual_world=1, tail_casual=0.25, tail=150, plain_full=0.4, plain_from=0,
                                 verb_q=0.6, decide_w=1))

# The decoder's training schedule. lab/probe.py varies these on short runs (bench/NOTES.md, "How the
# copy was learned"); the defaults are the recipe.
DEC = dict(
    lr=3e-3,            # peak AdamW learning rate (cosine to 10 %, linear warm-up over warm_frac)
    warm_frac=0.05,
    batch_tokens=BATCH_TOKENS,
    value_w=VALUE_W,    # loss weight of the value tokens
    full_every=2,       # every full_every-th step holds whole sequences (FULL); the others loop layouts
    drill_frac=0.30,    # share of drills among the whole-sequence rows (the rest: dialogues, recite drills, needles)
    curriculum=0,       # the first `curriculum` steps hold drills only
    needle_frac=0.10,   # share of long-context needle prompts among the rows
    recite_frac=0.25,   # share of recite drills (world.recite_steps) among the whole-sequence rows
    induction=1500,     # the first `induction` steps hold synthetic repeats only (induction_rows); with
                        # induction_stop, at most this many
    induction_varied=2, # 1: the repeats at varied distances (induction_rows varied=True); 2: repeat_rows
    induction_alpha=0,  # > 0: the repeats draw from the first induction_alpha ids only (0: vocab - 64)
    induction_n_rows=32,  # rows per synthetic-repeat step
    induction_min=1000, # the warm-up's earliest end (see train_decoder)
    induction_stop=0,   # > 0: the warm-up ends once this share of held-out repeats is copied (0: always `induction`)
    warm_vocab=0,       # > 0: the warm-up runs on a decoder of this many ids (its repeats over the first
                        # warm_vocab - 64), which is then extended to the BPE's vocabulary (extend_vocab)
    repeat_every=0,     # > 0: after the warm-up, every repeat_every-th step is a synthetic-repeat batch over
                        # every plain id of the BPE (so an id no training text holds stays copyable)
    repeat_tail=0,      # 1: those repeat batches go on through the tail (0: the tail holds none)
    keyed=0,            # then `keyed` steps of synthetic keyed lookups only (keyed_rows)
    keyed_every=0,      # after those, every keyed_every-th step is a keyed-lookup batch (0: none)
    phase_lr=1,         # 1: the warm-up at lr constant (50 steps' ramp), then a cosine from world_lr over the rest
    world_lr=3e-3,
    tail=0,             # then `tail` more steps at tail_lr (constant), whose loop-layout rows also end in
    tail_lr=3e-4,       # small talk and facts (a share tail_casual of them: make_casual_example)
    tail_casual=0.3,
    aux_w=0.0,          # > 0: in the tail, a keyword probe's loss (weight aux_w) on the gate layers' q at
                        # recall positions (aux_positions, KeywordProbe): the q the gate and the bridge read
                        # then says WHICH fact is asked for (the broad world's recipe: 0.3)
    aux_q_only=0,       # 1: the keyword probe's loss reaches only the gate layers' q_proj (not the rest of
                        # the decoder, whose copy it moved; measured, not in a recipe: bench/NOTES.md)
    other_fact=0.0,     # > 0: in the tail, this share of the loop-layout rows that inject the fact's block
                        # inject another fact's block beside it (make_example), not any other block
    long_frac=0.0,      # > 0: in the tail, this share of the loop-layout rows comes from long conversations
                        # (sample_long: 1,000-8,000 tokens), their gist summarising what far back's does
    long_steps=0,       # > 0: those long rows in the tail's first long_steps steps only (the rest: none)
    long_distinct=0,    # 1: no keyword in two of a long conversation's dialogues (sample_long; also --gate-long's)
    long_full=0.0,      # > 0: this share of the whole-sequence rows is a long conversation of 600-1,500
                        # tokens (sample_long), all of it in view: FULL on a chat as long as people's
    plain_long=0.0,     # > 0: this share of those long rows is world_plain's long chat in view (a dozen facts
                        # among natural small talk, questions through it: --wording plain)
    edge_align=0.0,     # > 0: this share of the loop-layout rows starts its window where --edge exchange
                        # does (align_exchange: at the start of the exchange the window's first token is in)
    plain_full=0.0,     # > 0: from world step plain_from on, this share of the whole-sequence rows is one of
    plain_from=0,       # world_plain's short plain chats (a fact and its question as the chat's first turns)
    verb_q=0.0,         # > 0: from world step plain_from on, this share of those chats' questions in the fact's
                        # own verb or the plainest form (world_plain.VERB_Q), their small talk mostly questions
    decide_w=0.0,       # > 0: the weight of the look-up-or-not decision's binary loss at every reply's first
                        # token (DECIDE_MARK)
    same_verb=0.0,      # > 0: this share of world_plain's never-stated questions asks the told fact's frame
                        # (its kind and verb) about another noun (world_plain.SAME_VERB): "When does my
                        # ferry leave?" after "My train leaves at 8:05" is "I don't know.", not the train
    week_after=0.0,     # > 0: this share of world_plain's short chats is a fact, then at once a question about
                        # the person's week or day (world_plain.WEEK_AFTER): small talk, never the fact
    everyday=0.0,       # > 0: this share of world_plain's short chats' facts (half of it in its long chats) is
                        # an everyday frame (world_plain.EVERYDAY): a count, a verb of place, the value first,
                        # a title, a quoted phrase, "is number N"
    reseed=0,           # > 0: added to the stage's seed (the decoder's batches only): the same recipe drawn
                        # anew, to see how far two runs of one recipe differ
    casual_world=0,     # 1: the rows that end in small talk or a fact (tail_casual) in the world's steps too
    seal_w=0.0,         # > 0: in the tail, a seal head's loss (weight seal_w, SealHead): the gate layers' q
                        # of a block run on its own (faithful mode's seal forward) must differ from the q at
                        # a recall position in a conversation, so that a linear gate can tell them apart
)


def batch_examples(model, pooler, W, bpe, hay_pieces, r, ids_, full_step, cfg, early, tail=False, long_ok=True,
                   plain_on=False):
    """The rows of one step: examples until cfg['batch_tokens'] rows are filled. tail: the
    schedule's tail (DEC tail), whose loop-layout rows also end in turns that are not questions
    (make_casual_example), a share cfg['tail_casual'] of them."""
    bos, eos = ids_["bos"], ids_["eos"]
    exs, budget = [], cfg["batch_tokens"]
    while budget > 0:
        k = r.random()
        if early:
            ex = full_example(sample_dialogue(W, r, bpe, False, drill=True, recite=k < cfg["recite_frac"]), bos, eos)
        elif full_step and plain_on and r.random() < cfg["plain_full"]:
            import world_plain
            ex = full_example(encode_steps(bpe, world_plain.plain_steps(r, W)), bos, eos)
        elif full_step:
            talk = 1.0 - cfg["needle_frac"]
            dial = talk - cfg["drill_frac"]
            if cfg["long_full"] > 0 and r.random() < cfg["long_full"]:
                if cfg["plain_long"] > 0 and r.random() < cfg["plain_long"]:
                    import world_plain
                    e = encode_steps(bpe, world_plain.long_steps(r, W))
                else:
                    e = sample_long(W, r, bpe, r.randint(600, 1500), True)
                if len(e.ids) > QCFG["max_pos"] - 8:
                    continue
                exs.append(full_example(e, bos, eos))
                budget -= 1 + len(e.ids) + 1
                continue
            if k < cfg["recite_frac"]:
                e = sample_dialogue(W, r, bpe, False, recite=True)
            elif k < dial:
                e = sample_dialogue(W, r, bpe, r.random() < 0.5)
            elif k < talk:
                e = sample_dialogue(W, r, bpe, False, drill=True)
            else:
                e = sample_needle(r, bpe, hay_pieces, 40, 520)
            ex = full_example(e, bos, eos)
        else:
            if tail and long_ok and cfg["long_frac"] > 0 and r.random() < cfg["long_frac"]:
                e = sample_long(W, r, bpe, r.randint(1000, 8000), cfg["long_distinct"])
            elif k < 1.0 - cfg["needle_frac"]:
                e = sample_dialogue(W, r, bpe, r.random() < 0.5)
            else:
                e = sample_needle(r, bpe, hay_pieces, 140, 420)
            qs = [i for i, t in enumerate(e.turns) if t["kind"] == "q"]
            other = [i for i, t in enumerate(e.turns) if t["kind"] in ("filler", "probe", "fact")]
            # --edge exchange: the window starts at the exchange its first token is in (align_exchange)
            align = cfg["edge_align"] > 0 and r.random() < cfg["edge_align"]
            if (tail or cfg["casual_world"]) and other and (not qs or r.random() < cfg["tail_casual"]):
                ex = make_casual_example(model, pooler, e, r.choice(other), r, eos, bos, align)
            elif not qs:  # world_plain's chats may hold no question
                continue
            else:
                mode = r.choices(["right", "wrong", "none"], [0.75, 0.1, 0.15])[0]
                ex = make_example(model, pooler, bpe, e, r.choice(qs), r, mode, eos, bos,
                                  cfg["other_fact"] if tail else 0.0, align)
            if ex is None:
                continue
        exs.append(ex)
        budget -= 1 + (N_SP if ex.get("sp") is not None else 0) + len(ex["inj"]) + len(ex["win"])
    return exs


def repeat_rows(r, n, T=96, V=960, Lmin=6, Lmax=24, distinct=True, lo=0):
    """n rows of T ids in which one random sequence (Lmin-Lmax ids, all different when distinct)
    recurs after random filler (0-16 ids) until the row is full (ids lo..V-1): several repeats a row, each at
    no fixed distance. Returns (rows, weights): weight 1 on a repeat's ids but its first (the id
    after the filler cannot be predicted), 0 elsewhere. induction_probe.py's rows."""
    rows, wts = [], []
    for _ in range(n):
        L = r.randint(Lmin, Lmax)
        seq = r.sample(range(lo, V), L) if distinct else [r.randrange(lo, V) for _ in range(L)]
        row, w, first = [], [], True
        while len(row) < T:
            f = [r.randrange(lo, V) for _ in range(r.randint(0, 16))]
            row += f + seq
            w += [0] * len(f) + ([0] * L if first else [0] + [1] * (L - 1))
            first = False
        rows.append(row[:T])
        wts.append(w[:T])
    return rows, wts


def induction_rows(model, r, n_rows=16, varied=False, alpha=0):
    """A synthetic batch meant to form induction heads (copy what followed the previous occurrence
    of the current context). The recipe's form (varied False): each row is a random sequence of
    32 ids over a small random alphabet of BPE ids (12-64 ids, so single ids repeat), then the
    same sequence again; the loss is on the repeat. Measured since (bench/NOTES.md): that form is
    learned by a head that attends exactly 32 positions back, a shortcut that copies nothing
    else. varied True: random filler (0-40 ids), the sequence (8-40 ids), more filler, the
    sequence again, so the repeat sits at no fixed distance and only matching the content finds
    it; half the rows draw from the whole vocabulary (a single id finds its place), half from a
    small alphabet (only the preceding n-gram tells where to copy from). alpha > 0 (varied rows
    only): every id drawn from the first `alpha` ids, so each id's embedding sees many more
    matches per step. varied 2: repeat_rows (several repeats a 96-id row over the first 960 ids),
    the rows induction_probe.py saw form a copy. Returns X, TG, WT as stack_rows."""
    if varied == 2:
        return pad_rows(model, *repeat_rows(r, n_rows, V=alpha or QCFG["vocab"] - 64))
    V = QCFG["vocab"] - 64
    rows, wts = [], []
    for i in range(n_rows):
        if not varied:
            small = r.sample(range(V), r.randint(12, 64))
            seq = [r.choice(small) for _ in range(32)]
            rows.append(seq + seq)
            wts.append([0.0] * 33 + [1.0] * 31)
            continue
        Va = alpha if alpha else V
        ab = range(Va) if i % 2 == 0 else r.sample(range(Va), min(Va, r.randint(12, 64)))
        L = r.randint(8, 40)
        seq = [r.choice(ab) for _ in range(L)]
        f1 = [r.randrange(Va) for _ in range(r.randint(0, 40))]
        f2 = [r.randrange(Va) for _ in range(r.randint(0, 40))]
        rows.append(f1 + seq + f2 + seq)
        wts.append([0.0] * (len(f1) + L + len(f2) + 1) + [1.0] * (L - 1))
    return pad_rows(model, rows, wts)


def pad_rows(model, rows, wts):
    """Rows of ids and per-id target weights (the weight of an id as a target) -> X, TG, WT as
    stack_rows (row j predicts ids[j + 1], so the weight sits on the row before its target)."""
    T = max(len(x) for x in rows)
    ids = torch.zeros(len(rows), T, dtype=torch.long)
    WT = torch.zeros(len(rows), T)
    for b, (x, w) in enumerate(zip(rows, wts)):
        ids[b, :len(x)] = torch.tensor(x)
        WT[b, :len(w)] = torch.tensor(w)
    X = model.embed_tokens(ids)
    TG = torch.zeros_like(ids)
    TG[:, :-1] = ids[:, 1:]
    W2 = torch.zeros_like(WT)
    W2[:, :-1] = WT[:, 1:]
    return X, TG, W2


def keyed_rows(model, r, bpe, n_rows=8):
    """A synthetic batch shaped like the world's facts and answers, over random BPE ids: each row
    states 3-8 facts " the {key} is {value}." (keys of 1-3 ids from a small per-row alphabet, so
    that a single key id occurs in several keys and only the whole key tells the facts apart;
    values of 2-5 random ids), with 0-24 random filler ids between them, then restates every
    fact in a shuffled order; the loss is on the restated values and their full stops. This is
    the lookup every answer needs (find "the {key} is" where it occurred before, copy what
    followed), without any word the model could learn by heart. Returns X, TG, WT as stack_rows."""
    V = QCFG["vocab"] - 64
    the, is_, dot = bpe.encode(" the"), bpe.encode(" is"), bpe.encode(".")
    rows, wts = [], []
    for _ in range(n_rows):
        alpha = r.sample(range(V), r.randint(4, 10))
        facts, seen = [], set()
        while len(facts) < r.randint(3, 8):
            key = tuple(r.choice(alpha) for _ in range(r.randint(1, 3)))
            if key in seen:
                continue
            seen.add(key)
            facts.append((list(key), [r.randrange(V) for _ in range(r.randint(2, 5))]))
        ids, wt = [], []
        for key, val in facts:
            filler = [r.randrange(V) for _ in range(r.randint(0, 24))]
            part = filler + the + key + is_ + val + dot
            ids += part
            wt += [0.0] * len(part)
        order = facts[:]
        r.shuffle(order)
        for key, val in order:
            head = the + key + is_
            ids += head + val + dot
            wt += [0.0] * len(head) + [1.0] * (len(val) + len(dot))
        rows.append(ids)
        wts.append(wt)
    return pad_rows(model, rows, wts)


def synthetic_eval(model, rows_fn, seed=777, n_rows=16):
    """(right, total) target tokens of fresh synthetic rows (rows_fn(model, r, n_rows): induction
    or keyed lookups) the argmax gets right."""
    r = random.Random(seed)
    model.eval()
    with torch.no_grad():
        X, TG, WT = rows_fn(model, r, n_rows)
        am = model(X)[0].argmax(-1)
    model.train()
    m = WT > 0
    return int((am[m] == TG[m]).sum()), int(m.sum())


def aux_positions(exs):
    """The keyword probe's rows (DEC aux_w): (b, t) of every recall position (a question's tokens
    after its keyword, up to the value's lookup) in the stacked rows, and the keyword of each."""
    bs, ts, kws = [], [], []
    for b, ex in enumerate(exs):
        n_pre = len(ex["pre"]) + (N_SP if ex.get("sp") is not None else 0) + len(ex["inj"])
        for j, kw in ex.get("aux", ()):
            if 0 <= j < len(ex["win"]):
                bs.append(b)
                ts.append(n_pre + j)
                kws.append(kw)
    return bs, ts, kws


def stack_rows(model, exs):
    """Padded [B, T, H] inputs, [B, T] targets and weights of examples."""
    rows = [row_tensors(model, ex) for ex in exs]
    T = max(x.shape[0] for x, _, _ in rows)
    B = len(rows)
    X = torch.zeros(B, T, QCFG["hidden"])
    TG = torch.zeros(B, T, dtype=torch.long)
    WT = torch.zeros(B, T)
    for b, (x, tg, wt) in enumerate(rows):
        X[b, :x.shape[0]] = x
        TG[b, :x.shape[0]] = tg
        WT[b, :x.shape[0]] = wt
    return X, TG, WT


class KeywordProbe:
    """A training-only head (never written to the world's files): from the gate layers' q at a
    recall position it predicts the question's keyword, as the mean of the decoder's own input
    embeddings of the keyword's BPE tokens, contrasted with the other keywords of the batch
    (cosine / TAU, cross-entropy). Its loss flows into the decoder, so that the q the gate and the
    bridge read carries which keyword is asked for, in the terms of tokens any word is made of
    (the held-out words too). The keyword embeddings are targets only (detached). Its own
    generator draws its initial weights: the run's other random streams are unchanged."""
    TAU = 0.1

    def __init__(self, model, bpe, seed):
        g = torch.Generator().manual_seed(seed * 41 + 9)
        qd = len(GATE_LAYERS) * QCFG["heads"] * QCFG["head_dim"]
        self.W = (torch.randn(QCFG["hidden"], qd, generator=g) / math.sqrt(qd)).requires_grad_()
        self.model, self.bpe, self.last = model, bpe, []
        self.opt = torch.optim.Adam([self.W], lr=1e-3)

    def state_dict(self):
        return {"W": self.W.detach().clone(), "opt": self.opt.state_dict()}

    def load_state_dict(self, st):
        with torch.no_grad():
            self.W.copy_(st["W"])
        self.opt.load_state_dict(st["opt"])

    def loss(self, qs, bs, ts, kws):
        self.last = bs
        uniq = sorted(set(kws))
        if len(bs) == 0 or len(uniq) < 2:
            return None
        emb = self.model.embed_tokens.weight.detach()
        K = torch.stack([emb[torch.tensor(self.bpe.encode(" " + k))].mean(0) for k in uniq])
        b, t = torch.tensor(bs), torch.tensor(ts)
        f = torch.cat([qs[l][b, t] for l in GATE_LAYERS], -1)
        s = F.normalize(f @ self.W.t(), dim=-1) @ F.normalize(K, dim=-1).t() / self.TAU
        return F.cross_entropy(s, torch.tensor([uniq.index(k) for k in kws]))


class SealHead:
    """A training-only head (never written out): a logistic score on the gate layers' q, positive
    at recall positions in a conversation (aux_positions), negative on the rows of blocks run on
    their own that hold a question (seal_blocks: what faithful mode's seal forward scores). Its
    loss flows into the decoder through the blocks run on their own only, so that the gate
    trained later can tell the two apart. Its own
    generator draws its weights: the run's other random streams are unchanged."""

    def __init__(self, seed):
        g = torch.Generator().manual_seed(seed * 47 + 13)
        qd = len(GATE_LAYERS) * QCFG["heads"] * QCFG["head_dim"]
        self.w = (torch.randn(qd, generator=g) / math.sqrt(qd)).requires_grad_()
        self.b = torch.zeros((), requires_grad=True)
        self.opt = torch.optim.Adam([self.w, self.b], lr=1e-3)
        self.last = (0, 0)

    def state_dict(self):
        return {"w": self.w.detach().clone(), "b": self.b.detach().clone(), "opt": self.opt.state_dict()}

    def load_state_dict(self, st):
        with torch.no_grad():
            self.w.copy_(st["w"])
            self.b.copy_(st["b"])
        self.opt.load_state_dict(st["opt"])

    def loss(self, model, qs, bs, ts, exs):
        blocks = [blk for ex in exs for blk in ex.get("seal", ())][:16]
        if not bs or not blocks:
            return None
        emb = model.embed_tokens
        _, sq = model(torch.stack([emb(torch.tensor(ids)) for ids, _ in blocks]), q_layers=GATE_LAYERS)
        neg = torch.cat([torch.cat([sq[l][i, rows] for l in GATE_LAYERS], -1) for i, (_, rows) in enumerate(blocks)], 0)
        b, t = torch.tensor(bs), torch.tensor(ts)
        # the conversation's side is a target only: the decoder is moved on the blocks run on their
        # own, which a language model never sees, and keeps its q where the copy needs it
        pos = torch.cat([qs[l][b, t] for l in GATE_LAYERS], -1).detach()
        self.last = (len(pos), len(neg))
        lp = F.binary_cross_entropy_with_logits(pos @ self.w + self.b, torch.ones(len(pos)))
        ln = F.binary_cross_entropy_with_logits(neg @ self.w + self.b, torch.zeros(len(neg)))
        return 0.5 * (lp + ln)


def warm_cosine(peak, i, n, warm):
    """The learning rate at step i of n: a linear ramp over `warm` steps to `peak`, then a cosine
    from peak to 10 % of it."""
    return peak * min(1.0, (i + 1) / warm) * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * i / n)))


def extend_vocab(model, V, used, seed):
    """Grow the decoder's embeddings and lm_head from the warm-up's vocabulary to V ids. The
    warm-up drew its repeats from ids 0..used-1 only, so rows from `used` on carry nothing: each
    becomes a new random identity, drawn from a Gaussian with the trained rows' mean and covariance
    (the copy formed on such identities), and its lm_head row is what a ridge fit of the trained
    lm_head rows on the trained embeddings predicts for it (the copy's readout of that identity).
    Seeded: the same run gives the same rows."""
    g = torch.Generator().manual_seed(seed * 41 + 9)
    with torch.no_grad():
        E = model.embed_tokens.weight.detach().double()
        Wl = model.lm_head.weight.detach().double()
        H = E.shape[1]
        Eu, Wu = E[:used], Wl[:used]
        mu = Eu.mean(0)
        C = (Eu - mu).T @ (Eu - mu) / (used - 1)
        L = torch.linalg.cholesky(C + 1e-6 * torch.eye(H, dtype=torch.float64))
        En = torch.cat([Eu, mu + torch.randn(V - used, H, generator=g, dtype=torch.float64) @ L.T])
        Xa = torch.cat([Eu, torch.ones(used, 1, dtype=torch.float64)], 1)
        M = torch.linalg.solve(Xa.T @ Xa + 1e-3 * used * torch.eye(H + 1, dtype=torch.float64), Xa.T @ Wu)
        Wn = torch.cat([Wu, torch.cat([En[used:], torch.ones(V - used, 1, dtype=torch.float64)], 1) @ M])
        emb = torch.nn.Embedding(V, H)
        emb.weight.copy_(En.float())
        head = torch.nn.Linear(H, V, bias=False)
        head.weight.copy_(Wn.float())
    model.embed_tokens, model.lm_head = emb, head
    model.cfg = dict(model.cfg, vocab=V)


def regrow_optimizer(opt, model):
    """A new AdamW over the model's parameters (after extend_vocab), keeping the moments of every
    parameter that did not change."""
    new = torch.optim.AdamW(model.parameters(), lr=opt.param_groups[0]["lr"], betas=(0.9, 0.98), weight_decay=0.01)
    for p in model.parameters():
        if p in opt.state:
            new.state[p] = opt.state[p]
    return new


def train_decoder(model, pooler, W, bpe, hay_pieces, steps, seed, ids_, cfg=None, every=0, on_eval=None, ckpt=None):
    """AdamW on the weighted next-token loss; on_eval(it) is called every `every` steps.

    The synthetic warm-up lasts until the copy has formed: from induction_min steps on, every 100
    steps the argmax accuracy on fresh held-out repeat rows is checked, and the warm-up ends at the
    first check at or above induction_stop (at most `induction` steps). Then steps - induction world
    steps follow, so the world's schedule does not depend on when the copy formed. The decision
    uses the training's own numbers only: the same seed gives the same run.

    ckpt: a path; every 250 steps the whole state (model, optimiser, random generators, the
    warm-up's end) is written there (temp file + rename), and a run that finds it continues from
    it, to the same bytes as a run that never stopped."""
    cfg = dict(DEC, **(cfg or {}))
    r = random.Random(seed * 31 + 4)
    opt = torch.optim.AdamW(model.parameters(), lr=cfg["lr"], betas=(0.9, 0.98), weight_decay=0.01)
    n_world = steps - cfg["induction"]
    warm = max(1, int(steps * cfg["warm_frac"]))
    tok_seen, t_start, it0, ind_end = 0, time.time(), 0, (cfg["induction"] if not cfg["induction_stop"] else None)
    probe = KeywordProbe(model, bpe, seed) if cfg["aux_w"] > 0 else None
    sealh = SealHead(seed) if cfg["seal_w"] > 0 else None
    n_plain = len(bpe.vocab)  # the BPE's ids but the added special strings
    wv = cfg["warm_vocab"]
    alpha = cfg["induction_alpha"] or (wv - 64 if wv else 0)  # the warm-up's repeats: ids 0..alpha-1 (0: all)
    if ckpt and os.path.exists(ckpt):
        st = torch.load(ckpt)
        if wv and st["model"]["embed_tokens.weight"].shape[0] != model.embed_tokens.weight.shape[0]:
            extend_vocab(model, st["model"]["embed_tokens.weight"].shape[0], wv - 64, seed)
            opt = regrow_optimizer(opt, model)
        model.load_state_dict(st["model"])
        opt.load_state_dict(st["opt"])
        if probe is not None and "probe" in st:
            probe.load_state_dict(st["probe"])
        if sealh is not None and "seal" in st:
            sealh.load_state_dict(st["seal"])
        r.setstate(st["rng"])
        torch.set_rng_state(st["torch_rng"])
        it0, ind_end, tok_seen = st["it"], st["ind_end"], st["tok_seen"]
        log("decoder: resumed from %s at step %d (warm-up end %s)" % (ckpt, it0, ind_end))
    it = it0
    while ind_end is None or it < ind_end + n_world + cfg["tail"]:
        warming = ind_end is None or it < ind_end
        tail = not warming and it >= ind_end + n_world
        if tail:  # the tail at its own constant rate
            lr = cfg["tail_lr"]
        elif cfg["phase_lr"] and warming:  # the synthetic warm-up at the peak rate
            lr = cfg["lr"] * min(1.0, (it + 1) / 50)
        elif cfg["phase_lr"]:  # then a cosine of its own over the world's steps
            lr = warm_cosine(cfg["world_lr"], it - ind_end, n_world, max(1, int(n_world * cfg["warm_frac"])))
        else:
            lr = warm_cosine(cfg["lr"], it, steps, warm)
        for g in opt.param_groups:
            g["lr"] = lr
        exs = None  # the step's examples (the probe and the seal head read their positions)
        if warming:
            X, TG, WT = induction_rows(model, r, cfg["induction_n_rows"], int(cfg["induction_varied"]), alpha)
        elif cfg["repeat_every"] and (cfg["repeat_tail"] or not tail) and (it - ind_end) % cfg["repeat_every"] == cfg["repeat_every"] - 1:
            X, TG, WT = induction_rows(model, r, cfg["induction_n_rows"], int(cfg["induction_varied"]), n_plain)
        elif it < ind_end + cfg["keyed"] or (
                cfg["keyed_every"] and (it - ind_end - cfg["keyed"]) % cfg["keyed_every"] == 0):
            X, TG, WT = keyed_rows(model, r, bpe)
        else:
            if cfg["verb_q"] > 0:  # world_plain's questions in the fact's own verb, from plain_from on
                import world_plain
                world_plain.VERB_Q = cfg["verb_q"] if it >= ind_end + cfg["plain_from"] else 0.0
            exs = batch_examples(model, pooler, W, bpe, hay_pieces, r, ids_, it % cfg["full_every"] == 0, cfg,
                                 it < ind_end + cfg["keyed"] + cfg["curriculum"], tail,
                                 not cfg["long_steps"] or it < ind_end + n_world + cfg["long_steps"],
                                 cfg["plain_full"] > 0 and it >= ind_end + cfg["plain_from"])
            X, TG, WT = stack_rows(model, exs)
        if cfg["value_w"] != VALUE_W:
            WT[WT == VALUE_W] = cfg["value_w"]
        dec = (WT == DECIDE_MARK) if cfg["decide_w"] > 0 else None
        if dec is not None:
            WT[dec] = 1.0
        sel = WT > 0
        use_probe = probe is not None and tail and exs is not None
        use_seal = sealh is not None and tail and exs is not None
        logits, qs = model(X, select=sel, q_layers=GATE_LAYERS if use_probe or use_seal else ())
        ce = F.cross_entropy(logits, TG[sel], reduction="none")
        loss = (ce * WT[sel]).sum() / WT.sum()
        if dec is not None and bool(dec.any()):  # the decision's binary loss (DECIDE_MARK)
            lg = logits[dec[sel]]
            lse = lg.logsumexp(-1)
            is_think = TG[dec] == ids_["think"]
            lp = lg[:, ids_["think"]] - lse
            rest = lg.clone()
            rest[:, ids_["think"]] = float("-inf")
            lq = rest.logsumexp(-1) - lse
            loss = loss + cfg["decide_w"] * -(torch.where(is_think, lp, lq)).mean()
        aux = probe.loss(qs, *aux_positions(exs)) if use_probe else None
        aux_grads = None
        if aux is not None:
            probe.opt.zero_grad()
            if cfg["aux_q_only"]:  # the probe's gradient on the gate layers' q_proj (and the probe) only
                qp = [p for li in GATE_LAYERS for p in model.layers[li].self_attn.q_proj.parameters()] + [probe.W]
                aux_grads = (qp, torch.autograd.grad(cfg["aux_w"] * aux, qp, retain_graph=True))
            else:
                loss = loss + cfg["aux_w"] * aux
        sl = sealh.loss(model, qs, *aux_positions(exs)[:2], exs) if use_seal else None
        if sl is not None:
            loss = loss + cfg["seal_w"] * sl
            sealh.opt.zero_grad()
        opt.zero_grad()
        loss.backward()
        if aux_grads is not None:
            for p_, g_ in zip(*aux_grads):
                p_.grad = g_ if p_.grad is None else p_.grad + g_
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if aux is not None:
            probe.opt.step()
        if sl is not None:
            sealh.opt.step()
        tok_seen += X.shape[0] * X.shape[1]
        if it % 25 == 0:
            log("decoder step %d loss %.4f lr %.2e rows %d x %d (%.0f tok/s)" %
                (it, loss.item(), lr, X.shape[0], X.shape[1], tok_seen / (time.time() - t_start)) +
                (" keyword probe %.3f (%d rows)" % (float(aux), len(probe.last)) if aux is not None else "") +
                (" seal head %.3f (%d + %d rows)" % ((float(sl),) + sealh.last) if sl is not None else ""))
        it += 1
        if ind_end is None and (it >= cfg["induction"] or (it >= cfg["induction_min"] and it % 100 == 0)):
            ok, n = synthetic_eval(model, lambda m, rr, k: induction_rows(m, rr, k, int(cfg["induction_varied"]), alpha),
                                   seed=4243, n_rows=32)
            log("warm-up step %d: held-out repeats %d/%d (%.1f %%)" % (it, ok, n, 100.0 * ok / n))
            if cfg["induction_alpha"] and not wv:
                ok2, n2 = synthetic_eval(model, lambda m, rr, k: induction_rows(m, rr, k, int(cfg["induction_varied"])),
                                         seed=4243, n_rows=32)
                log("warm-up step %d: held-out repeats over the whole vocabulary %d/%d" % (it, ok2, n2))
            if ok >= cfg["induction_stop"] * n or it >= cfg["induction"]:
                ind_end = it
                log("warm-up ends at step %d; %d world steps follow" % (it, n_world))
        if wv and ind_end is not None and it >= ind_end and model.embed_tokens.weight.shape[0] < QCFG["vocab"]:
            extend_vocab(model, QCFG["vocab"], wv - 64, seed)
            opt = regrow_optimizer(opt, model)
            ok, n = synthetic_eval(model, lambda m, rr, k: induction_rows(m, rr, k, int(cfg["induction_varied"]),
                                                                          n_plain), seed=4244, n_rows=32)
            ok3, n3 = synthetic_eval(model, lambda m, rr, k: pad_rows(m, *repeat_rows(rr, k, V=n_plain, lo=wv)),
                                     seed=4245, n_rows=32)
            log("decoder extended from %d to %d ids: held-out repeats over every plain id %d/%d, over the new "
                "ids only %d/%d" % (wv, QCFG["vocab"], ok, n, ok3, n3))
        if on_eval and every and it % every == 0:
            on_eval(it)
        world_end = ind_end is not None and it == ind_end + n_world and cfg["tail"] > 0
        if ckpt and (it % 250 == 0 or world_end or (ind_end is not None and it == ind_end + n_world + cfg["tail"])):
            state = dict({"model": model.state_dict(), "opt": opt.state_dict(), "rng": r.getstate(),
                          "torch_rng": torch.get_rng_state(), "it": it, "ind_end": ind_end, "tok_seen": tok_seen},
                         **({"probe": probe.state_dict()} if probe is not None else {}),
                         **({"seal": sealh.state_dict()} if sealh is not None else {}))
            # the world's end is also kept as OUT.ckpt.world: a run given it as --ckpt tries another
            # tail without the world's steps again
            for path in (ckpt,) + ((ckpt + ".world",) if world_end else ()):
                torch.save(state, path + ".tmp")
                os.replace(path + ".tmp", path)
    log("decoder: %d steps (warm-up %d, world %d, tail %d)" % (it, ind_end, n_world, cfg["tail"]))
    if on_eval and every and it % every:
        on_eval(it)


def copy_eval(model, pooler, W, bpe, ids_, n=16, seed=12345):
    """Held-out copy accuracy (eval facts and casual pairs, never trained on), teacher-forced: a
    reply counts when the argmax at every one of its tokens (think preamble, value, EOS) is the
    gold token, which is what greedy decoding would write. Returns {layout: (ok, total)} for FULL
    (whole dialogue), RC (the fact's blocks injected, the loop layout) and SP (nothing injected:
    the gold reply is "I don't know.")."""
    bos, eos = ids_["bos"], ids_["eos"]
    r = random.Random(seed)
    res = {"FULL": [0, 0], "RC": [0, 0], "SP": [0, 0], "FULLval": [0, 0], "FULLtok": [0, 0]}
    model.eval()
    with torch.no_grad():
        for _ in range(n):
            e = encode_steps(bpe, world.bench_steps(r, W.eval_facts, W.eval_casual))
            X, TG, WT = stack_rows(model, [full_example(e, bos, eos)])
            am = model(X)[0][0].argmax(-1)
            ok = (am == TG[0])
            for t in e.turns:
                if t["kind"] != "q":
                    continue
                a, b = t["reply"]
                # row j predicts ids[j]; the reply's tokens and the EOS after it
                res["FULL"][0] += bool(ok[a:b + 1].all())
                res["FULL"][1] += 1
                va, vb = t["value"]
                res["FULLval"][0] += bool(ok[va:vb].all())
                res["FULLval"][1] += 1
                res["FULLtok"][0] += int(ok[va:vb].sum())
                res["FULLtok"][1] += vb - va
            for qi, t in enumerate(e.turns):
                if t["kind"] != "q":
                    continue
                for mode, key in (("right", "RC"), ("none", "SP")):
                    ex = make_example(model, pooler, bpe, e, qi, r, mode, eos, bos)
                    if ex is None:
                        continue
                    X, TG, WT = stack_rows(model, [ex])
                    am = model(X)[0][0].argmax(-1)
                    m = WT[0] > 0
                    res[key][0] += bool((am[m] == TG[0][m]).all())
                    res[key][1] += 1
    model.train()
    return res


# ---- stages 5 and 6: gate features along the loop's checks --------------------------------------
def loop_features(model, pooler, e, bos, layers, rr):
    """Walks the loop's rebuilds (clean mode, firing disabled) over e's tokens up to the end of
    its last reply and returns, for every token position p forwarded in a chunk (from the
    rebuild at c0 = p - p % CHUNK): the gate feature, its label and, for positives, (nd, fact span).
    Label 1: p lies in a question turn between the end of the question's keyword and the
    value's start, and the fact was evicted (it starts before the window)."""
    out = []
    ids = e.ids
    n = len(ids)
    pos_ranges = []
    for t in e.turns:
        if t["kind"] == "q":
            pos_ranges.append((t["kw_end"], t["value"][0], t))
    for c0 in range(0, n, CHUNK):
        R = min(c0, WINDOW)
        nd = c0 - R
        if nd < BUF_MIN:  # the gate is only checked once the archive qualifies
            continue
        end = min(n, c0 + CHUNK)
        near = any(a - CHUNK <= end and c0 <= b + CHUNK for a, b, _ in pos_ranges)
        if not near and rr.random() > 0.3:  # negatives: a sample of the chunks far from questions
            continue
        with torch.no_grad():
            sp = pooler(model.embed_tokens(torch.tensor(ids[:nd])))
            x = torch.cat([model.embed_tokens(torch.tensor([bos])), sp,
                           model.embed_tokens(torch.tensor(ids[nd:end]))], 0)[None]
            _, qs = model(x, q_layers=layers)
        feat = torch.cat([qs[l][0] for l in layers], -1)
        for p in range(c0, end):
            row = 1 + N_SP + (p - nd)
            lab, info = 0, None
            for a, b, t in pos_ranges:
                if a <= p < b:
                    if t["val"] is not None and t["fact_span"] is not None and t["fact_span"][0] < nd:
                        lab, info = 1, (nd, t["fact_span"], t["val"])
                    else:
                        lab = -1  # the fact is still in view: not a recall position, not a negative either
            if lab >= 0:
                out.append((feat[row].numpy().copy(), lab, info, p, c0))
    return out


def turn_threshold(held, score, t_pos, st_max=0.1, q_min=0.95):
    """--wording plain: the gate's threshold chosen by turns on the held-out dialogues, as a person
    meets it: a small-talk turn fires when any of its checks (the last token of a chunk) scores
    above it, a question when any of its recall positions does. The threshold is the larger of
    t_pos (the 10th percentile of held-out positive positions) and the one at which st_max of the
    small-talk turns fire, lowered again while fewer than q_min of the questions would fire."""
    st, qs = [], []
    for e, fs in held:
        by_p = {p: (f, l) for f, l, _, p, _ in fs}
        for t in e.turns:
            a, b = t["head"][0], t["reply"][1]
            if t["kind"] in ("filler", "probe"):
                sc = [score(by_p[p][0]) for p in range(a, b) if (p + 1) % CHUNK == 0 and p in by_p and by_p[p][1] == 0]
                if sc:
                    st.append(max(sc))
            elif t["kind"] == "q":
                sc = [score(by_p[p][0]) for p in range(a, b) if (p + 1) % CHUNK == 0 and p in by_p and by_p[p][1] == 1]
                if sc:
                    qs.append(max(sc))
    st, qs = np.array(st), np.array(qs)
    t_st = float(np.percentile(st, 100 * (1 - st_max))) if len(st) else t_pos
    t = max(t_pos, t_st)
    if len(qs) and np.mean(qs > t) < q_min:
        t = float(np.percentile(qs, 100 * (1 - q_min)))
    log("gate: by turns on the held-out dialogues: %d small-talk turns checked, %d questions; thresh %.4f "
        "(positions' %.4f, small talk's %.4f): small-talk turns that fire %.1f%%, questions that fire %.1f%% "
        "(at the positions' threshold %.1f%%, %.1f%%)" % (
            len(st), len(qs), t, t_pos, t_st, 100 * np.mean(st > t), 100 * np.mean(qs > t),
            100 * np.mean(st > t_pos), 100 * np.mean(qs > t_pos)))
    return t


def seal_features(model, e, layers):
    """Faithful mode: each sealed block runs standalone (no BOS, positions 0..BLOCK-1); its last
    token's q replaces the gate feature. Negatives."""
    out = []
    ids = e.ids
    for a in range(0, len(ids) - BLOCK + 1, BLOCK):
        with torch.no_grad():
            _, qs = model(model.embed_tokens(torch.tensor(ids[a:a + BLOCK]))[None], q_layers=layers)
        out.append(torch.cat([qs[l][0, -1] for l in layers], -1).numpy().copy())
    return out


def fit_logreg(X, y, C=0.05, iters=200):
    """sklearn's LogisticRegression(C, class_weight='balanced') objective, solved by L-BFGS in fp64:
    0.5 |w|^2 + C sum_i s_i logloss_i, s_i = n / (2 n_class(y_i)); the intercept unpenalised."""
    Xt = torch.tensor(X, dtype=torch.float64)
    yt = torch.tensor(y, dtype=torch.float64)
    n1 = yt.sum()
    n0 = len(y) - n1
    s = torch.where(yt > 0, len(y) / (2 * n1), len(y) / (2 * n0))
    w = torch.zeros(X.shape[1], dtype=torch.float64, requires_grad=True)
    b = torch.zeros((), dtype=torch.float64, requires_grad=True)
    opt = torch.optim.LBFGS([w, b], lr=1, max_iter=iters, tolerance_grad=1e-10, tolerance_change=1e-14,
                            history_size=20, line_search_fn="strong_wolfe")

    def closure():
        opt.zero_grad()
        z = Xt @ w + b
        l = 0.5 * (w * w).sum() + C * (s * F.binary_cross_entropy_with_logits(z, yt, reduction="none")).sum()
        l.backward()
        return l

    opt.step(closure)
    return w.detach().numpy(), float(b.detach())


def build_corpus(seed, repo, broad=False):
    """Stages 1 and 2: the world, the training haystack, the tokenizer corpus and the BPE
    tokenizer (the decoder's vocabulary size is set from it). Returns (W, hay, texts, bpe,
    hay_pieces, ids_)."""
    W = world_broad.BroadWorld(seed) if broad else World(seed)
    hay = training_haystack(repo)
    r = random.Random(seed * 13 + 3)
    texts = []
    for _ in range(1500):
        facts, cas = W.train_facts(r), W.train_casual(r)
        ph = W.phrasing(r)
        st = world.bench_steps(r, facts, cas, ph) if r.random() < 0.5 else world.free_steps(r, facts, cas, ph)
        texts.append("".join(h + a for _, h, a, _, _ in world.segments(st)))
    texts.append(world.INTRO + world.NEEDLE_Q)
    hay_chunks = [hay[i:i + 4000] for i in range(0, len(hay), 4000)]
    # the broad world's tokenizers also learn the language at large: WordNet's training sentences
    # and every word of the dictionary once (a real tokenizer has seen every word; the decoder has not)
    W.lang = W.language() if broad else []
    log("corpus: %d dialogues, haystack %d bytes, %d texts of the language" % (len(texts) - 1, len(hay), len(W.lang)))
    bpe = tok.train_bpe(texts + hay_chunks + W.lang, BROAD["merges"] if broad else N_MERGES)
    V = bpe.n_ids()
    QCFG["vocab"] = (V + 63) // 64 * 64
    ids_ = {"bos": bpe.added[tok.SPECIALS[3][0]], "eos": bpe.added[tok.SPECIALS[0][0]], "think": bpe.added["<think>"]}
    hay_ids = bpe.encode(hay)
    hay_pieces = [bpe.decode([i]) for i in hay_ids]
    log("bpe: %d merges, %d ids (model vocab %d); haystack %d tokens" % (len(bpe.merges), V, QCFG["vocab"], len(hay_ids)))
    return W, hay, texts, bpe, hay_pieces, ids_


def log_tokenizer_stats(W, bpe, wp):
    """The tokenizers on held-out text (WordNet sentences never trained, the held-out names):
    BPE tokens per word, words split into single bytes, WordPiece [UNK] rate and pieces per word."""
    text = " ".join(W.lex.sents_ev[:2000]) + " " + " ".join(world_broad.HELD_NAMES)
    words = text.split()
    n_bpe = sum(len(bpe.encode(" " + w)) for w in words)
    shredded = sum(1 for w in words if len(w) > 3 and len(bpe.encode(" " + w)) >= len(w))
    wp_ids = [wp._word(w) for w in tok.bert_words(text)]
    n_unk = sum(1 for ids in wp_ids if ids == [1])
    log("tokenizers on held-out text (%d words): BPE %.3f tokens/word, %d words of 4+ letters in single bytes; "
        "WordPiece %.3f pieces/word, [UNK] %d of %d (%.3f %%)" % (
            len(words), n_bpe / len(words), shredded, sum(len(x) for x in wp_ids) / len(wp_ids), n_unk, len(wp_ids),
            100.0 * n_unk / len(wp_ids)))


# ---- file formats ------------------------------------------------------------------------------
def pull_bert(bert, wp, texts, tgt, rng, steps, batch, what, every):
    """Adam on 1 - cos(BERT's CLS of texts[i], tgt[i]) over random batches (bert_as_bag,
    bert_as_keywords)."""
    enc = [wp.encode(t) for t in texts]
    opt = torch.optim.Adam([q for q in bert.parameters() if q.requires_grad], lr=1e-3)
    for it in range(steps):
        idx = rng.sample(range(len(texts)), batch)
        L = max(len(enc[i]) for i in idx)
        ids = torch.zeros(batch, L, dtype=torch.long)
        for j, i in enumerate(idx):
            ids[j, :len(enc[i])] = torch.tensor(enc[i])
        cls = bert(ids, torch.tensor([len(enc[i]) for i in idx]))
        loss = (1 - (cls * tgt[idx]).sum(-1)).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        if it % every == 0 or it == steps - 1:
            log("bert as %s: step %d, 1 - cos %.4f (%d blocks)" % (what, it, float(loss), len(texts)))


def bert_as_bag(bert, model, bpe, wp, texts, seed, steps=800, batch=32):
    """BERT taught, before the bridge, to embed a block as the bag of its tokens: its CLS is pulled
    (cosine) towards a fixed random 64-d projection of the mean decoder embedding of the block's
    BPE tokens. The bridge then starts from a key that says which words a block holds, for any
    word made of known pieces, instead of learning keys from its few hundred dialogues."""
    g = torch.Generator().manual_seed(seed * 47 + 13)
    demb = model.embed_tokens.weight.detach()
    P = torch.randn(demb.shape[1], BERT["hidden"], generator=g) / math.sqrt(demb.shape[1])
    tgt = F.normalize(torch.stack([demb[torch.tensor(bpe.encode(t))].mean(0) @ P for t in texts]), dim=-1)
    pull_bert(bert, wp, texts, tgt, random.Random(seed * 53 + 17), steps, batch, "a bag of its tokens", 200)


def bert_as_keywords(bert, model, bpe, wp, W, seed, steps=1500, batch=32, n_dialogues=400):
    """BERT taught, before the bridge, to say which keywords a block states: on blocks of fresh
    training dialogues, its CLS is pulled (cosine) towards a fixed random 64-d projection of the
    mean over the block's facts of each keyword's mean decoder embedding (the KeywordProbe's
    target, so the q and the key speak of the same thing). Blocks without a fact are left to the
    bridge."""
    g = torch.Generator().manual_seed(seed * 59 + 19)
    demb = model.embed_tokens.weight.detach()
    P = torch.randn(demb.shape[1], BERT["hidden"], generator=g) / math.sqrt(demb.shape[1])
    rr = random.Random(seed * 61 + 23)
    texts, tg = [], []
    for _ in range(n_dialogues):
        e = sample_dialogue(W, rr, bpe, rr.random() < 0.5)
        facts = [t for t in e.turns if t["kind"] == "fact"]
        for a in range(0, len(e.ids) - BLOCK + 1, BLOCK):
            kws = [t["kw"] for t in facts if overlaps(t["head"], (a, a + BLOCK))]
            if kws:
                texts.append(bpe.decode(e.ids[a:a + BLOCK]))
                tg.append(torch.stack([demb[torch.tensor(bpe.encode(" " + k))].mean(0) for k in kws]).mean(0) @ P)
    tgt = F.normalize(torch.stack(tg), dim=-1)
    pull_bert(bert, wp, texts, tgt, rr, steps, batch, "its blocks' keywords", 250)


def bert_as_keyword_index(bert, wk, model, bpe, wp, W, seed, steps=4000, batch=48, n_dialogues=1500, needles=0,
                          hay_pieces=None):
    """BERT and the bridge's key tower taught, before the bridge, to index blocks by the keywords
    their facts state: for every keyword of a batch of blocks (half with a fact, half drawn at
    random from fresh training dialogues), a query tower (training only, never written) reads the
    mean decoder embedding of the keyword's BPE tokens (the KeywordProbe's target, a fixed function
    of the pieces any word is made of) and is contrasted with the batch's blocks, Wk(BERT(block)),
    cross-entropy with every block that states the keyword as a target. BERT learns where a block
    states a fact and which words name it; the bridge then only has to map the decoder's q onto
    the same keys (bench/NOTES.md, "Which fact is asked")."""
    demb = model.embed_tokens.weight.detach()
    rr = random.Random(seed * 67 + 29)
    blocks = []
    for _ in range(n_dialogues):
        e = sample_dialogue(W, rr, bpe, rr.random() < 0.5)
        facts = [t for t in e.turns if t["kind"] == "fact"]
        for a in range(0, len(e.ids) - BLOCK + 1, BLOCK):
            blocks.append((bpe.decode(e.ids[a:a + BLOCK]), [t["kw"] for t in facts if overlaps(t["head"], (a, a + BLOCK))]))
    # needles (--index-needles): long-context prompts, the fact hidden in source code, keyed by
    # their keyword ("special magic number ..."); their own generator, so 0 changes nothing
    nr = random.Random(seed * 73 + 37)
    for _ in range(needles):
        e = sample_needle(nr, bpe, hay_pieces, 150, 400)
        t = e.turns[0]
        blocks += [(bpe.decode(e.ids[a:a + BLOCK]), [t["kw"]] if overlaps(t["fact_span"], (a, a + BLOCK)) else [])
                   for a in range(0, t["head"][1] - BLOCK + 1, BLOCK)]
    with_fact = [b for b in blocks if b[1]]
    g = torch.Generator().manual_seed(seed * 71 + 31)
    qt = nn.Sequential(nn.Linear(demb.shape[1], wk[0].out_features), nn.GELU(),
                       nn.Linear(wk[0].out_features, wk[2].out_features))
    for m in qt:
        if isinstance(m, nn.Linear):
            with torch.no_grad():
                m.weight.copy_(torch.randn(m.weight.shape, generator=g) / math.sqrt(m.in_features))
                m.bias.zero_()
    opt = torch.optim.Adam([q for q in bert.parameters() if q.requires_grad] + list(wk.parameters()) +
                           list(qt.parameters()), lr=1e-3)
    enc = {}
    for it in range(steps):
        bt = rr.sample(with_fact, batch // 2) + rr.sample(blocks, batch - batch // 2)
        ids_l = [enc.setdefault(t, wp.encode(t)) for t, _ in bt]
        L = max(len(x) for x in ids_l)
        ids = torch.zeros(len(bt), L, dtype=torch.long)
        for j, x in enumerate(ids_l):
            ids[j, :len(x)] = torch.tensor(x)
        keys = wk(bert(ids, torch.tensor([len(x) for x in ids_l])))
        kws = sorted({k for _, kk in bt for k in kk})
        q = qt(torch.stack([demb[torch.tensor(bpe.encode(" " + k))].mean(0) for k in kws]))
        tgt = torch.tensor([[1.0 if k in kk else 0.0 for _, kk in bt] for k in kws])
        loss = -(tgt / tgt.sum(1, keepdim=True) * F.log_softmax(q @ keys.t(), -1)).sum(1).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        if it % 500 == 0 or it == steps - 1:
            log("bert as a keyword index: step %d, loss %.4f (%d blocks, %d with a fact; ln %d = %.2f)" % (
                it, float(loss), len(blocks), len(with_fact), batch, math.log(batch)))


def write_safetensors(path, tensors, dtype="F32"):
    header, blobs, off = {"__metadata__": {"format": "pt"}}, [], 0
    for k in sorted(tensors):
        a = tensors[k].detach().contiguous().float().numpy().astype("<f4")
        b = a.tobytes()
        header[k] = {"dtype": dtype, "shape": list(a.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def save_npz(path, arrays):
    """np.savez with a fixed timestamp-free layout: numpy's zip writer stamps the current time, so
    the members are written with a fixed date for reproducible bytes."""
    import io
    import zipfile
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_STORED) as z:
        for k, v in arrays.items():
            buf = io.BytesIO()
            np.lib.format.write_array(buf, np.asanyarray(v), allow_pickle=False)
            zi = zipfile.ZipInfo(k + ".npy", date_time=(1980, 1, 1, 0, 0, 0))
            zi.compress_type = zipfile.ZIP_STORED
            z.writestr(zi, buf.getvalue())


def write_json(obj, path):
    with open(path, "w", encoding="utf-8") as f:
        json.dump(obj, f, ensure_ascii=False, indent=2)
        f.write("\n")


# ---- main ----------------------------------------------------------------------------------------
def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="tests/golden/trained")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--steps", type=int, default=None, help="decoder steps: the warm-up's cap (DEC induction) plus the "
                    "world's steps (default: 5000 for --world broad, 4500 for templated)")
    ap.add_argument("--ckpt", default=None, help="the decoder's checkpoint (default OUT.ckpt): written every 250 steps, "
                    "resumed from when present, removed when the run ends; with a tail, the world's end is also written to "
                    "OUT.ckpt.world, a start for other tails")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--form", default=world.FORM, choices=["plain", "reprise", "recopy"],
                    help="how the reply restates the value (world.reply_parts)")
    ap.add_argument("--set", nargs="*", default=[], help="KEY=VALUE overrides of the decoder schedule (DEC)")
    ap.add_argument("--qcfg", nargs="*", default=[], help="KEY=VALUE overrides of the decoder's config (QCFG: "
                    "shape, init_std, emb_std)")
    ap.add_argument("--world", default="broad", choices=["broad", "templated"],
                    help="broad: the trained world (world_broad.py: broad English, many kinds of value, phrasings, "
                         "held-out words; docs/WORLD.md); templated: the first world, tests/golden/templated (the "
                         "benchmark's keywords and templates)")
    ap.add_argument("--vocab", default="realistic", choices=["small", "realistic"], help="--world broad: the "
                    "decoder's BPE: realistic (default, the committed world: 3,800 merges, 4,096 ids; the warm-up on "
                    "1,024 ids, then extended; a gentler tail, a quarter of its rows from long conversations, and "
                    "--gate-long 24: REALISTIC_VOCAB, docs/WORLD.md) or small (760 merges, 1,024 ids: the world "
                    "before it)")
    ap.add_argument("--eval-every", type=int, default=0, help="log held-out copy accuracy every N decoder steps")
    ap.add_argument("--gate-dialogues", type=int, default=None, help="dialogues the gate and the bridge learn "
                    "from (default 48; --world broad: 240)")
    ap.add_argument("--gate-long", type=int, default=None, help="long conversations (1,000-8,000 tokens of "
                    "training dialogues one after another) the gate and the bridge also learn from (default 0; "
                    "--vocab realistic: 24)")
    ap.add_argument("--keep-ckpt", action="store_true", help="keep the decoder's final checkpoint (a later run "
                    "with the same arguments resumes from it and redoes only the gate, bridge and files)")
    ap.add_argument("--bridge-epochs", type=int, default=20)
    ap.add_argument("--bridge-lr", type=float, default=2e-3)
    ap.add_argument("--bridge-distract", type=int, default=None, help="blocks of other dialogues among each "
                    "question's candidates while the bridge learns (default: 48 for --world broad, 0 for templated)")
    ap.add_argument("--bridge-rows", default=None, choices=["checks", "all"], help="the bridge's training "
                    "items: the check positions of the positive spans, or all their positions (default: all for "
                    "--world broad, checks for templated)")
    ap.add_argument("--bert-lex", default=None, choices=["learned", "decoder"], help="BERT's word embeddings: "
                    "learned with the bridge, or fixed from the decoder's BPE embeddings (default: decoder for "
                    "--world broad, learned for templated)")
    ap.add_argument("--bert-init", default=None, choices=["random", "bag", "keywords", "index"], help="BERT before the bridge "
                    "(default: index for --world broad, random for templated): "
                    "random, taught to embed a block as the bag of its tokens (bert_as_bag), as the keywords its "
                    "facts state (bert_as_keywords), or with the key tower as an index of its facts' keywords "
                    "(bert_as_keyword_index); bag and keywords measured, not in the recipe: bench/NOTES.md")
    ap.add_argument("--index-steps", type=int, default=4000, help="with --bert-init index: its steps")
    ap.add_argument("--index-needles", type=int, default=0, help="with --bert-init index: long-context needle "
                    "prompts whose blocks join its training blocks (measured, not in the recipe: bench/NOTES.md)")
    ap.add_argument("--bert-lr-scale", type=float, default=0.1, help="with --bert-init bag, keywords or index: BERT's learning rate "
                    "while the bridge learns, as a share of --bridge-lr (0: BERT stays the bag)")
    ap.add_argument("--bert", nargs="*", default=[], help="KEY=VALUE overrides of BERT's shape (hidden, layers, "
                    "heads, ffn)")
    ap.add_argument("--wording", default="grammar", choices=["grammar", "wide", "typed", "plain"], help="--world broad: how "
                    "facts, questions and small talk are worded: grammar (world_broad.py's, the committed world's first "
                    "stage), wide (world_wide.py, as people type; with --init, the stage that continues it: WIDE) or "
                    "typed (wide, the question naming the fact its own way; --init the wide world: TYPED) or plain (the wide mix "
                    "and world_plain.py's short and long plain chats; --init the wide world: PLAIN)")
    ap.add_argument("--typed-share", type=float, default=None, help="--wording typed: the share of wide questions "
                    "named another way and of wide facts in the typed forms (default TYPED's)")
    ap.add_argument("--grow", nargs="*", default=[], help="with --init: KEY=VALUE of a larger decoder (hidden, heads, "
                    "kv_heads, ffn, layers) that starts computing what the --init decoder computes (nets.grow_qwen2) "
                    "and continues from there; a new random pooler of its width; the gate reads the old gate "
                    "layers in their new places")
    ap.add_argument("--grow-after", default="1,2", help="with --grow: the old layers after which new layers go")
    ap.add_argument("--init", default=None, help="a world folder whose decoder training continues (same seed "
                    "and corpus: the same tokenizer); --steps more steps, then gate and bridge afresh")
    args = ap.parse_args()
    for k, templated_default in (("bridge_rows", "checks"), ("bert_lex", "learned"), ("bert_init", "random")):
        if getattr(args, k) is None:
            setattr(args, k, BROAD[k] if args.world == "broad" else templated_default)
    world.FORM = args.form
    BERT.update({k: int(v) for k, v in (x.split("=", 1) for x in args.bert)})
    repo = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
    out = args.out
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    os.makedirs(os.path.join(out, "qwen2"), exist_ok=True)
    os.makedirs(os.path.join(out, "bge", "1_Pooling"), exist_ok=True)

    # 1. corpus, 2. tokenizers
    broad = args.world == "broad"
    if args.wording in ("wide", "typed", "plain") and (not args.init or not broad):
        raise SystemExit("train.py: --wording %s continues a world of --world broad: give --init DIR (make "
                         "train-world does)" % args.wording)
    if args.steps is None:
        args.steps = 700 if args.wording == "typed" else 1500 if args.wording == "wide" else \
            600 if args.wording == "plain" else 5000 if broad else 4500
    if broad and args.vocab == "realistic":
        BROAD["merges"] = REALISTIC_VOCAB["merges"]
    if args.gate_long is None:
        args.gate_long = REALISTIC_VOCAB["gate_long"] if broad and args.vocab == "realistic" else 0
    W, hay, texts, bpe, hay_pieces, ids_ = build_corpus(args.seed, repo, broad)

    # 3. pooler (random, fixed), 4. decoder
    QCFG.update({k: (float(v) if "." in v or "e" in v else int(v)) for k, v in (x.split("=", 1) for x in args.qcfg)})
    torch.manual_seed(args.seed)
    cfg = dict(BROAD["dec"], **(REALISTIC_VOCAB["dec"] if args.vocab == "realistic" else {})) if broad else {}
    if args.wording in ("wide", "typed", "plain"):
        # after the tokenizers: the BPE was learned from the grammar's text, as the world --init continues
        W.wide = WIDE["wide"]
        cfg.update(WIDE["dec"])
    if args.wording == "typed":
        import world_wide
        world_wide.TYPED = args.typed_share if args.typed_share is not None else TYPED["typed"]
        cfg.update(TYPED["dec"])
    if args.wording == "plain":
        W.plain = PLAIN["plain"]
        cfg.update(PLAIN["dec"])
    cfg.update({k: (float(v) if "." in v or "e" in v else int(v)) for k, v in (x.split("=", 1) for x in args.set)})
    globals()["DECIDE_W"] = DECIDE_MARK if cfg.get("decide_w", 0) > 0 else 1.0
    if args.wording == "plain":  # world_plain's shares of the shapes DEC names (0: not drawn)
        import world_plain
        world_plain.SAME_VERB, world_plain.WEEK_AFTER = cfg.get("same_verb", 0.0), cfg.get("week_after", 0.0)
        world_plain.EVERYDAY = cfg.get("everyday", 0.0)
    # with DEC warm_vocab the warm-up's decoder has fewer ids; train_decoder extends it
    model = nets.Qwen2(dict(QCFG, vocab=cfg.get("warm_vocab") or QCFG["vocab"]))
    pooler = nets.AttnPoolSP(QCFG["hidden"], N_SP, POOLER["heads"], POOLER["blocks"], POOLER["ffn"])
    for p in pooler.parameters():
        p.requires_grad_(False)
    if args.init:
        from check_engine import read_safetensors
        sd = read_safetensors(os.path.join(args.init, "qwen2", "model.safetensors"))
        model.load_state_dict({k[len("model."):] if k.startswith("model.") else k: v for k, v in sd.items()})
        # the pooler too: random and fixed, but drawn after the decoder's init, which --set warm_vocab=0
        # changes; the decoder learned to read this one's soft tokens
        pooler.load_state_dict(torch.load(os.path.join(args.init, "pooler.pt"))["pooler"])
        log("decoder and pooler: continuing from %s" % args.init)
    if args.grow:
        if not args.init:
            raise SystemExit("train.py: --grow enlarges a trained decoder: give --init DIR")
        global GATE_LAYERS
        new = dict(QCFG, **{k: int(v) for k, v in (x.split("=", 1) for x in args.grow)})
        model, slots = nets.grow_qwen2(model, new, tuple(int(a) for a in args.grow_after.split(",") if a),
                                       seed=args.seed * 53 + 7)
        QCFG.update(new)
        GATE_LAYERS = tuple(slots[l] for l in GATE_LAYERS)
        # the pooler stays random and fixed (docs/WORLD.md, "Why the pooler is random"), drawn at the new width
        torch.manual_seed(args.seed * 59 + 3)
        pooler = nets.AttnPoolSP(QCFG["hidden"], N_SP, POOLER["heads"], POOLER["blocks"], POOLER["ffn"])
        for p in pooler.parameters():
            p.requires_grad_(False)
        log("decoder grown to %s; old layers now at %s, gate layers %s" % (
            {k: QCFG[k] for k in ("hidden", "heads", "kv_heads", "ffn", "layers")}, slots, GATE_LAYERS))

    def on_eval(it):
        if model.embed_tokens.weight.shape[0] < QCFG["vocab"]:  # the warm-up's smaller vocabulary (DEC warm_vocab)
            log("held-out copy at step %d: not checked (the warm-up's decoder has %d ids)" % (
                it, model.embed_tokens.weight.shape[0]))
            return
        res = copy_eval(model, pooler, W, bpe, ids_, n=8)
        log("held-out copy at step %d: " % it + "  ".join("%s %d/%d" % (k, v[0], v[1]) for k, v in res.items()))

    ckpt = args.ckpt or out.rstrip("/") + ".ckpt"
    stage_seed = args.seed + ({"grammar": 1000, "wide": 1000, "typed": 2000, "plain": 4000}[args.wording] if not args.grow else 3000) \
        if args.init else args.seed
    stage_seed += cfg.get("reseed", 0)
    train_decoder(model, pooler, W, bpe, hay_pieces, args.steps, stage_seed, ids_, cfg,
                  args.eval_every, on_eval, ckpt)
    model.eval()

    # block texts for the WordPiece vocabulary come from the training dialogues' decoded blocks
    wp_texts = []
    rr = random.Random(args.seed * 17 + 5)
    for _ in range(300):
        e = sample_dialogue(W, rr, bpe, True)
        wp_texts += [bpe.decode(e.ids[a:a + BLOCK]) for a in range(0, len(e.ids), BLOCK)]
    block_texts = list(wp_texts)
    wp_texts += [hay[i:i + 2000] for i in range(0, len(hay), 2000)] + W.lang
    wp = tok.train_wordpiece(wp_texts, BROAD["wp_size"] if broad else WP_SIZE, BROAD["wp_pieces"] if broad else 0)
    log("wordpiece: %d tokens" % len(wp.tokens))
    if broad:
        log_tokenizer_stats(W, bpe, wp)

    # 5. gate: features along the loop's checks
    layers = GATE_LAYERS
    gr = random.Random(args.seed * 19 + 6)
    feats = {"train": [], "held": []}
    seals = []
    n_gate = args.gate_dialogues or (BROAD["gate_dialogues"] if broad else 48)
    for i in range(n_gate):
        e = sample_dialogue(W, gr, bpe, i % 2 == 0) if i % 5 else sample_needle(gr, bpe, hay_pieces, 150, 400)
        part = "held" if i % 4 == 3 else "train"
        feats[part].append((e, loop_features(model, pooler, e, ids_["bos"], layers, gr)))
        if part == "train" and i % 3 == 0:
            seals += seal_features(model, e, layers)
    # long conversations (--gate-long): at a question thousands of tokens in, the gist the q reads
    # summarises far more than any short dialogue's, and the gate must fire there too
    lr_, n_long = random.Random(args.seed * 31 + 9), 0
    for i in range(args.gate_long):
        e = sample_long(W, lr_, bpe, lr_.randint(1000, 8000), dict(DEC, **cfg)["long_distinct"])
        n_long += len(e.ids)
        feats["held" if i % 4 == 3 else "train"].append((e, loop_features(model, pooler, e, ids_["bos"], layers, lr_)))
    if args.gate_long:
        log("gate: %d long conversations, %d tokens in all" % (args.gate_long, n_long))
    Xp = [f for _, fs in feats["train"] for f, l, _, _, _ in fs if l == 1]
    Xn = [f for _, fs in feats["train"] for f, l, _, _, _ in fs if l == 0]
    gr.shuffle(Xn)
    Xn = Xn[:6 * len(Xp)] + seals
    X = np.array(Xp + Xn, dtype=np.float32)
    y = np.array([1] * len(Xp) + [0] * len(Xn))
    mean = X.mean(0)
    scale = X.std(0)
    scale[scale == 0] = 1.0
    coef, icpt = fit_logreg((X - mean) / scale, y)
    coef = coef.astype(np.float32)

    def score(f):
        return float(((f - mean) / scale).astype(np.float32) @ coef) + icpt

    hp = [score(f) for _, fs in feats["held"] for f, l, _, _, _ in fs if l == 1]
    hn = [score(f) for _, fs in feats["held"] for f, l, _, _, _ in fs if l == 0]
    thresh = float(np.percentile(np.array(hp, dtype=np.float32), 10))
    log("gate: %d positives, %d negatives (%d seal features); held-out: thresh %.4f, positives above %.1f%%, "
        "negatives above %.2f%%" % (len(Xp), len(Xn), len(seals), thresh, 100 * np.mean(np.array(hp) > thresh),
                                   100 * np.mean(np.array(hn) > thresh)))
    if args.wording == "plain":
        thresh = turn_threshold(feats["held"], score, thresh)

    # 6. bridge head + BERT
    torch.manual_seed(args.seed + 100)
    bert = nets.Bert(len(wp.tokens), BERT["hidden"], BERT["layers"], BERT["heads"], BERT["ffn"])
    bridge = nets.Bridge(QQDIM := len(layers) * QCFG["heads"] * QCFG["head_dim"], BERT["hidden"], 64)
    if args.bert_lex == "decoder":
        # BERT's word embeddings, fixed: each WordPiece token's BPE pieces' mean decoder embedding,
        # through a fixed random projection. A word the bridge never saw (every held-out keyword)
        # then enters BERT as what it is made of, in the same terms the decoder's keyword probe
        # taught the gate layers' q (KeywordProbe); learned embeddings of unseen words stay random.
        g = torch.Generator().manual_seed(args.seed * 43 + 11)
        P = torch.randn(QCFG["hidden"], BERT["hidden"], generator=g) / math.sqrt(QCFG["hidden"])
        demb = model.embed_tokens.weight.detach()
        rows = []
        for i, t in enumerate(wp.tokens):
            pieces = bpe.encode(t[2:] if t.startswith("##") else " " + t) if not (t.startswith("[") and t.endswith("]")) else []
            rows.append(demb[torch.tensor(pieces)].mean(0) @ P if pieces else torch.randn(BERT["hidden"], generator=g) * 0.02)
        table = torch.stack(rows)
        table = table / table.norm(dim=-1, keepdim=True).mean() * 0.02 * math.sqrt(BERT["hidden"])
        with torch.no_grad():
            bert.embeddings.word_embeddings.weight.copy_(table)
            bert.embeddings.word_embeddings.weight[0].zero_()
        bert.embeddings.word_embeddings.weight.requires_grad_(False)
        log("bert: word embeddings from the decoder's BPE embeddings (fixed)")

    def bridge_items(part, every=False):
        """Per dialogue: its archive blocks' texts and, for each check position of a positive
        span, (feature, number of candidates, target mass per candidate). every: every position
        of a positive span, each against the archive of its chunk's check (a check falls on any
        token of a question or reply, so the bridge learns them all; 16x the items)."""
        out_ = []
        for e, fs in feats[part]:
            texts_ = [bpe.decode(e.ids[a_:a_ + BLOCK]) for a_ in range(0, len(e.ids), BLOCK)]
            items = []
            for f, l, info, p, c0 in fs:
                if l != 1 or (not every and (p + 1) % CHUNK):  # the check positions: the last token of a chunk
                    continue
                nd = max(0, c0 + CHUNK - WINDOW)
                cands = blocks_of(nd)
                tgt = [1.0 if overlaps(info[1], b_) else 0.0 for b_ in cands]
                if sum(tgt) == 0:
                    continue
                ctexts = [texts_[a_ // BLOCK] if b_ - a_ == BLOCK else bpe.decode(e.ids[a_:b_]) for a_, b_ in cands]
                items.append((f, ctexts, tgt))
            if items:
                out_.append(items)
        return out_

    tr_items, ho_items = bridge_items("train", args.bridge_rows == "all"), bridge_items("held")
    log("bridge: %d training items (%s), %d held-out check positions" % (
        sum(len(x) for x in tr_items), args.bridge_rows, sum(len(x) for x in ho_items)))
    if args.bert_init == "bag":
        bert_as_bag(bert, model, bpe, wp, block_texts, args.seed)
    elif args.bert_init == "keywords":
        bert_as_keywords(bert, model, bpe, wp, W, args.seed)
    elif args.bert_init == "index":
        bert_as_keyword_index(bert, bridge.Wk, model, bpe, wp, W, args.seed, steps=args.index_steps,
                              needles=args.index_needles, hay_pieces=hay_pieces)
    # a BERT that starts as the bag of its block learns at a tenth of the bridge's rate (it keeps
    # what it was taught; the bridge's loss alone overfits it to the training dialogues' words)
    # with --bert-init index the key tower was taught with BERT and keeps to BERT's rate
    slow = [q for q in bert.parameters() if q.requires_grad] + (list(bridge.Wk.parameters()) if args.bert_init == "index" else [])
    fast = list(bridge.Wq.parameters()) + (list(bridge.Wk.parameters()) if args.bert_init != "index" else [])
    opt = torch.optim.Adam([{"params": slow,
                             "lr": args.bridge_lr * (args.bert_lr_scale if args.bert_init != "random" else 1.0)},
                            {"params": fast}], lr=args.bridge_lr)
    br = random.Random(args.seed * 23 + 7)

    def encode_blocks(texts_):
        enc = [wp.encode(t) for t in texts_]
        L = max(len(x) for x in enc)
        ids = torch.zeros(len(enc), L, dtype=torch.long)
        for i, x in enumerate(enc):
            ids[i, :len(x)] = torch.tensor(x)
        return bert(ids, torch.tensor([len(x) for x in enc]))

    # The broad world's bridge also learns against an archive much longer than one dialogue's: every
    # item's candidates get N_DISTRACT blocks of other dialogues (their facts and small talk), as a
    # conversation thousands of tokens long holds hundreds of blocks (docs/LONG_CONTEXT.md, far back).
    N_DISTRACT = (48 if broad else 0) if args.bridge_distract is None else args.bridge_distract

    def block_pool(part):
        return sorted({t for items in (tr_items if part == "train" else ho_items) for _, ct, _ in items for t in ct})

    pool = {"train": block_pool("train"), "held": block_pool("held")}

    def distractors(items, part, rng, n):
        own = {t for _, ct, _ in items for t in ct}
        cand = [t for t in rng.sample(pool[part], min(len(pool[part]), n + len(own))) if t not in own]
        return cand[:n]

    def dialogue_loss(items, extra=()):
        # every item's candidates are a prefix of the longest candidate list plus maybe a buffer
        uniq = {}
        for _, ct, _ in items:
            for t in ct:
                uniq.setdefault(t, len(uniq))
        for t in extra:
            uniq.setdefault(t, len(uniq))
        emb = bridge.Wk(encode_blocks(list(uniq)))
        loss, hits = 0.0, 0
        for f, ct, tgt in items:
            ct, tgt = list(ct) + list(extra), list(tgt) + [0.0] * len(extra)
            s_ = emb[torch.tensor([uniq[t] for t in ct])] @ bridge.Wq(torch.tensor(f))
            t = torch.tensor(tgt) / sum(tgt)
            loss = loss - (t * F.log_softmax(s_, -1)).sum()
            top = torch.topk(s_, min(TOPK, len(ct))).indices.tolist()
            hits += any(tgt[i] > 0 for i in top)
        return loss, hits

    n_ho = sum(len(x) for x in ho_items)
    best = (-1, -1, None, None)
    for ep in range(args.bridge_epochs):
        br.shuffle(tr_items)
        tot = 0.0
        for items in tr_items:
            opt.zero_grad()
            loss, _ = dialogue_loss(items, distractors(items, "train", br, N_DISTRACT) if N_DISTRACT else ())
            (loss / len(items)).backward()
            opt.step()
            tot += float(loss)
        if broad or ep % 5 == 4 or ep == args.bridge_epochs - 1:
            with torch.no_grad():
                hits = sum(dialogue_loss(items)[1] for items in ho_items)
                if broad:  # held out among 48 blocks of other dialogues, the same at every epoch
                    hr = random.Random(args.seed * 29 + 8)
                    hits_d = sum(dialogue_loss(items, distractors(items, "held", hr, 48))[1] for items in ho_items)
            log("bridge epoch %d: loss %.4f, held-out top-%d hit %d/%d" % (
                ep, tot / max(1, sum(len(x) for x in tr_items)), TOPK, hits, n_ho) +
                (" (%d/%d among 48 more blocks)" % (hits_d, n_ho) if broad else ""))
            if broad:
                hits = hits + hits_d  # the epoch kept is the best on both
            if broad and hits > best[0]:  # the broad world keeps the epoch that retrieved best
                best = (hits, ep, {k: v.detach().clone() for k, v in bert.state_dict().items()},
                        {k: v.detach().clone() for k, v in bridge.state_dict().items()})
    if broad:
        bert.load_state_dict(best[2])
        bridge.load_state_dict(best[3])
        log("bridge: kept epoch %d (held-out top-%d hits, alone and among distractors: %d of %d)" % (
            best[1], TOPK, best[0], 2 * n_ho))

    # write everything
    qd = os.path.join(out, "qwen2")
    write_safetensors(os.path.join(qd, "model.safetensors"), model.hf_state_dict())
    write_json({
        "architectures": ["Qwen2ForCausalLM"], "attention_dropout": 0.0, "bos_token_id": ids_["bos"], "dtype": "float32",
        "eos_token_id": ids_["eos"], "hidden_act": "silu", "hidden_size": QCFG["hidden"], "initializer_range": 0.02,
        "intermediate_size": QCFG["ffn"], "max_position_embeddings": QCFG["max_pos"], "max_window_layers": QCFG["layers"],
        "model_type": "qwen2", "num_attention_heads": QCFG["heads"], "num_hidden_layers": QCFG["layers"],
        "num_key_value_heads": QCFG["kv_heads"], "rms_norm_eps": QCFG["eps"], "rope_theta": QCFG["theta"],
        "rope_scaling": None, "sliding_window": None, "tie_word_embeddings": False, "use_cache": True,
        "use_sliding_window": False, "vocab_size": QCFG["vocab"],
        "recall_loop": {"window": WINDOW, "block": BLOCK, "chunk": CHUNK, "k": TOPK, "turn_cap": TURN_CAP,
                        "buf_min": BUF_MIN},
    }, os.path.join(qd, "config.json"))
    write_json({"bos_token_id": ids_["bos"], "eos_token_id": ids_["eos"], "do_sample": False},
               os.path.join(qd, "generation_config.json"))
    tok.dump_json(tok.bpe_tokenizer_json(bpe), os.path.join(qd, "tokenizer.json"))
    write_json(tok.BPE_TOKENIZER_CONFIG, os.path.join(qd, "tokenizer_config.json"))

    bd = os.path.join(out, "bge")
    write_safetensors(os.path.join(bd, "model.safetensors"), bert.state_dict())
    write_json({"architectures": ["BertModel"], "attention_probs_dropout_prob": 0.0, "hidden_act": "gelu",
                "hidden_dropout_prob": 0.0, "hidden_size": BERT["hidden"], "initializer_range": 0.02,
                "intermediate_size": BERT["ffn"], "layer_norm_eps": 1e-12, "max_position_embeddings": 512,
                "model_type": "bert", "num_attention_heads": BERT["heads"], "num_hidden_layers": BERT["layers"],
                "pad_token_id": 0, "type_vocab_size": 2, "vocab_size": len(wp.tokens)}, os.path.join(bd, "config.json"))
    write_json([{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
                {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
                {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"}],
               os.path.join(bd, "modules.json"))
    write_json({"max_seq_length": 512, "do_lower_case": False}, os.path.join(bd, "sentence_bert_config.json"))
    write_json({"word_embedding_dimension": BERT["hidden"], "pooling_mode_cls_token": True,
                "pooling_mode_mean_tokens": False, "pooling_mode_max_tokens": False,
                "pooling_mode_mean_sqrt_len_tokens": False}, os.path.join(bd, "1_Pooling", "config.json"))
    tok.dump_json(tok.wp_tokenizer_json(wp), os.path.join(bd, "tokenizer.json"))
    write_json(tok.WP_TOKENIZER_CONFIG, os.path.join(bd, "tokenizer_config.json"))
    with open(os.path.join(bd, "vocab.txt"), "w", encoding="utf-8") as f:
        f.write("".join(t + "\n" for t in wp.tokens))

    psd = {k: v.detach().clone() for k, v in pooler.state_dict().items()}
    torch.save({"pooler": psd, "args": {"heads": POOLER["heads"], "n_sp": N_SP, "blocks": POOLER["blocks"],
                                        "ffn": POOLER["ffn"], "seed": args.seed, "trained": False}},
               os.path.join(out, "pooler.pt"))
    save_npz(os.path.join(out, "gate.npz"), {
        "coef": coef, "intercept": np.array(icpt, dtype=np.float32), "mean": mean.astype(np.float32),
        "scale": scale.astype(np.float32), "thresh": np.array(thresh, dtype=np.float32),
        "layers": np.array(layers, dtype=np.int64)})
    bsd = {k: v.detach().numpy().astype(np.float32) for k, v in bridge.state_dict().items()}
    bsd.update({"qdim": np.array(QQDIM, dtype=np.int64), "kdim": np.array(BERT["hidden"], dtype=np.int64),
                "d": np.array(64, dtype=np.int64)})
    save_npz(os.path.join(out, "bge_head.npz"), bsd)
    write_json(W.bench_json(), os.path.join(out, "eval_bench.json"))
    if broad:
        write_json(W.bench_json(phrasing=True), os.path.join(out, "eval_phrasing.json"))
        write_json(world_broad.DEMO_BENCH, os.path.join(out, "demo_bench.json"))
    with open(os.path.join(out, "corpus_sample.txt"), "w", encoding="utf-8") as f:
        f.write("\n\n".join(texts[:40]))

    n_files = manifest.write(out)
    for path in (ckpt, ckpt + ".world"):
        if os.path.exists(path) and not args.keep_ckpt:
            os.remove(path)
    log("wrote %d files to %s (MANIFEST.xxh64)" % (n_files, out))


if __name__ == "__main__":
    main()

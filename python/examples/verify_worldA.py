#!/usr/bin/python3
"""verify_worldA.py - the engine and the independent torch replay of the recall system, side by
side in one process, stage by stage on worldA (docs/VERIFYING.md, "From Python").

    make python && PYTHONPATH=python /usr/bin/python3 python/examples/verify_worldA.py

The reference is tools/replay/replay_loop.py (torch fp32, written from docs/LOOP.md, not from the
engine's code); the engine is librecall through the recall package. Each stage prints one line:
what was compared, the largest difference, the tolerance docs/NUMERICS.md gives it, and AGREE or
DIFFER. Ids and decisions must be identical; floats within the tolerance. Exit status 0 when every
stage agrees. Needs torch (Debian: python3-torch) and numpy.
"""
import argparse
import importlib.util
import os
import sys

import numpy as np
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "python"))
import recall  # noqa: E402

spec = importlib.util.spec_from_file_location("replay_loop", os.path.join(ROOT, "tools/replay/replay_loop.py"))
ref = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ref)

FAILED = []


def report(stage, what, agree, detail=""):
    print("  %-22s %-48s %s" % (stage, what + (" " + detail if detail else ""), "AGREE" if agree else "DIFFER"))
    if not agree:
        FAILED.append(stage)


def rel(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.abs(a - b).max() / max(np.abs(b).max(), 1e-30))


def floats(stage, what, engine, reference, tol):
    r = rel(engine, reference)
    report(stage, what, r <= tol, "max rel %.2g (tol %.0e)" % (r, tol))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--world", default=os.path.join(ROOT, "tests/golden/worldA"))
    ap.add_argument("--blob", default=os.path.join(ROOT, "build/worldA-f32.blob"))
    a = ap.parse_args(argv)
    torch.set_num_threads(1)
    world = ref.World(a.world)
    m = recall.open(a.blob)
    print("engine %s, reference %s (torch %s)" % (recall.lib_path, os.path.relpath(ref.__file__, ROOT), torch.__version__))

    # tokens: both tokenizers, on text a chat carries
    texts = ["Hello there\n", "My locker code is 4512, and the flight lands at 7:40.", "naïve café — 東京 🙂"]
    report("tokens (BPE)", "%d texts, ids" % len(texts), all(m.tokenize(t) == world.tok.encode(t) for t in texts),
           "identical")
    report("tokens (WordPiece)", "%d texts, ids" % len(texts),
           all(m.bert_tokenize(t) == world.bert.tok.encode(t) for t in texts), "identical")

    # the decoder: every position's logits and gate-layer q_proj, one token at a time in the
    # reference (its decode path) against one prefill in the engine
    ids = m.chat_segment("My locker code is 4512.", "Noted.") + m.chat_segment("What is my locker code?", with_eos=True)
    out = m.forward(ids, capture=["logits", "q_proj", "hidden"])
    llm = world.llm
    llm.reset_cache()
    logits, qs = [], []
    for t in ids:
        logits.append(llm.forward(llm.embed_ids([t])).numpy())
        qs.append(llm.q_last.numpy())
    q_engine = np.concatenate([out.q_proj[:, j, :] for j in range(len(ids))]).reshape(len(ids), -1)
    floats("q_proj", "%d positions x %d gate layers" % (len(ids), m.dims["n_gate"]), q_engine, np.stack(qs), 1e-4)
    floats("logits", "%d positions x %d" % (len(ids), m.vocab), out.logits, np.stack(logits), 1e-4)
    report("greedy", "argmax at every position",
           (out.logits.argmax(1) == np.stack(logits).argmax(1)).all(), "identical")

    # the pooler, the encoder, the heads
    floats("pooler", "gist of %d ids" % len(ids), m.pool(ids), world.pooler(llm.embed_ids(ids)).numpy(), 1e-5)
    text = "My locker code is 4512."
    emb_ref = world.bert.encode_text(text)
    floats("BERT", "CLS + L2 of one block", m.embed(text), emb_ref.numpy(), 1e-5)
    q = torch.from_numpy(q_engine[-1].copy())
    g, _ = m.gate(q_engine[-1])
    report("gate", "score of the last position", abs(g - float(world.gate.score(q))) <= 1e-4,
           "|d| %.2g (tol 1e-04 abs)" % abs(g - float(world.gate.score(q))))
    b_ref = float(torch.dot(world.bridge.query(q), world.bridge.key(emb_ref)))
    bs = m.bridge(q_engine[-1], m.embed(text))
    report("bridge", "score of the block", abs(bs - b_ref) <= 1e-4 * max(abs(b_ref), 1e-30),
           "rel %.2g (tol 1e-04)" % (abs(bs - b_ref) / max(abs(b_ref), 1e-30)))

    # a loop turn: the second turn of problem 0 (its conversation as the Hugging Face run of
    # tests/golden/worldA wrote it), the first with a fire; faithful mode, RC_bge
    golden = recall.read_trace(os.path.join(a.world, "loop_A_seed0_faithful_fp32.json"))
    feed = golden["final_history"][:golden["turns"][1]["feed_len"]]
    turn = m.loop(mode="faithful", arm="RC_bge").reply(feed)
    r_reply, r_rec = ref.Loop(world, "faithful", "RC_bge").reply(feed)
    e_rec = turn.trace
    report("loop: reply", "%d tokens after a feed of %d" % (len(r_reply), len(feed)), turn.reply.ids == r_reply,
           "identical")
    report("loop: gate decisions", "%d checks" % len(r_rec["gates"]),
           [[c, f] for c, _, f in e_rec["gates"]] == [[c, bool(f)] for c, _, f in r_rec["gates"]], "identical")
    gd = max([abs(x[1] - y[1]) for x, y in zip(e_rec["gates"], r_rec["gates"])] or [0.0])
    report("loop: gate scores", "%d scores" % len(r_rec["gates"]), gd <= 1e-4, "max |d| %.2g (tol 1e-04 abs)" % gd)
    report("loop: fires", "%d fires: candidates, chosen blocks, injected ids" % len(r_rec["fires"]),
           [[f["c0"], f["ncand"], f["top"], f["rid"]] for f in e_rec["fires"]]
           == [[f["c0"], f["ncand"], f["top"], f["rid"]] for f in r_rec["fires"]], "identical")
    report("loop: rebuilds", "%d rebuilds: [c0, SP, injected, window]" % len(r_rec["rebuilds"]),
           e_rec["rebuilds"] == r_rec["rebuilds"], "identical")
    m.close()
    print("verify_worldA: %s" % ("every stage agrees" if not FAILED else "DIFFER at " + ", ".join(FAILED)))
    return 1 if FAILED else 0


if __name__ == "__main__":
    with torch.no_grad():
        sys.exit(main())

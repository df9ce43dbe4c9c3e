#!/usr/bin/python3
"""bge_nf4_measure.py - what storing the BERT encoder at 4 bits (`convert --bge-weights nf4`) costs,
every figure from ./recall (docs/NUMERICS.md, "The BERT encoder at 4 bits"):

  1. cosine of each embedding to the f32 encoder's, on the trained world (every line of its
     corpus_sample.txt) and, with --synth, on the real-shape random bge-base (chunks of the pinned
     longctx haystack, 128 to 512 tokens each);
  2. the recall loop's fires on the trained world's benchmark (RC_bge, problems 0..N): the same
     position, the same two picked blocks and the same injected ids, fire by fire, until a run
     diverges;
  3. `recall eval` per arm (FULL, SP, RC_bge) on the f32 and the nf4-encoder blob, scored by
     tools/train_world/answers.py.

    /usr/bin/python3 tools/bge_nf4_measure.py [--world tests/golden/trained] [--problems 0-33]
        [--synth-f32 BLOB --synth-nf4 BLOB] [--out build/bge-nf4] [--loop "OPTIONS"]

--loop passes loop options to every replay and eval (e.g. the recommended chat setting, "--mode clean
--span exchange --edge exchange --rerank single"); by default the reference's faithful loop.

Both blobs of a world share the decoder (f32) and differ only in the encoder. Needs ./recall,
Debian's python3-numpy. Single-threaded runs (the bits do not depend on it)."""
import argparse
import json
import os
import subprocess
import sys

import numpy as np


def run(args, **kw):
    return subprocess.run(args, check=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kw).stdout


def convert(world, bge, out):
    run(["./recall", "convert", "--qwen2", world + "/qwen2", "--bge", world + "/bge", "--pooler",
         world + "/pooler.pt", "--gate", world + "/gate.npz", "--bridge", world + "/bge_head.npz",
         "--bge-weights", bge, "--quiet", "-o", out])


def embed(blob, text_path, dump):
    run(["./recall", "embed", blob, "--file", text_path, "--threads", "1", "--dump", dump])
    z = np.load(dump)
    return z["emb"].astype(np.float64), len(z["ids"])


def cosines(blob_a, blob_b, texts, tmp):
    cs, lens = [], []
    for i, t in enumerate(texts):
        p = os.path.join(tmp, "text.txt")
        with open(p, "w", encoding="utf-8") as f:
            f.write(t)
        a, n = embed(blob_a, p, os.path.join(tmp, "a.npz"))
        b, _ = embed(blob_b, p, os.path.join(tmp, "b.npz"))
        cs.append(float(a @ b / np.sqrt((a @ a) * (b @ b))))
        lens.append(n)
    cs = np.array(cs)
    return "%d texts (%d-%d tokens): cosine min %.5f, mean %.5f, median %.5f" % (
        len(cs), min(lens), max(lens), cs.min(), cs.mean(), np.median(cs))


def problems(spec):
    a, _, b = spec.partition("-")
    return range(int(a), int(b or a) + 1)


def fires(trace):
    out = []
    for t, turn in enumerate(json.load(open(trace, encoding="utf-8"))["turns"]):
        for f in turn["fires"]:
            out.append((t, f["c0"], tuple(f["top"]), tuple(f["rid"]), f["injected"]))
    return out


def picks(bench, blob_a, blob_b, probs, tmp, loop):
    same = total = diverged = 0
    for p in probs:
        fa, fb = [], []
        for blob, acc in ((blob_a, fa), (blob_b, fb)):
            tr = os.path.join(tmp, "trace.json")
            run(["./recall", "replay", blob, "--bench", bench, "--problem", str(p), "--threads", "1", "--trace", tr] + loop)
            acc.extend(fires(tr))
        for x, y in zip(fa, fb):
            total += 1
            if x != y:
                diverged += 1
                print("  problem %d: fire at turn %d c0 %d: picks %s vs %s (the runs diverge here)" % (
                    p, x[0], x[1], x[2], y[2]))
                break
            same += 1
        else:
            if len(fa) != len(fb):
                diverged += 1
                print("  problem %d: %d fires vs %d" % (p, len(fa), len(fb)))
    return "%d of %d fires identical (position, the two picks, injected ids); %d of %d problems diverge" % (
        same, total, diverged, len(probs))


def evaluate(blob, bench, spec, out, loop):
    run(["./recall", "eval", blob, "--bench", bench, "--problems", spec, "--arms", "FULL,SP,RC_bge",
         "--threads", "1", "--json", out] + loop)
    return run(["/usr/bin/python3", "tools/train_world/answers.py", out]).decode()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--world", default="tests/golden/trained")
    ap.add_argument("--problems", default="0-33")
    ap.add_argument("--synth-f32")
    ap.add_argument("--synth-nf4")
    ap.add_argument("--out", default="build/bge-nf4")
    ap.add_argument("--loop", default="", help="loop options for every replay and eval")
    a = ap.parse_args()
    loop = a.loop.split()
    os.makedirs(a.out, exist_ok=True)
    f32, nf4 = os.path.join(a.out, "world-bge-f32.blob"), os.path.join(a.out, "world-bge-nf4.blob")
    convert(a.world, "f32", f32)
    convert(a.world, "nf4", nf4)
    if a.synth_f32 and a.synth_nf4:
        hay = open("tests/golden/longctx/haystack.txt", encoding="utf-8").read()
        chunks = [hay[i:i + 2000] for i in range(0, min(len(hay), 64000), 2000)]
        print("real-shape bge-base, random weights:", cosines(a.synth_f32, a.synth_nf4, chunks, a.out))
    lines = [l for l in open(os.path.join(a.world, "corpus_sample.txt"), encoding="utf-8").read().split("\n") if l.strip()]
    print("trained world:", cosines(f32, nf4, lines, a.out))
    bench = os.path.join(a.world, "eval_bench.json")
    print("trained world, RC_bge fires, problems %s%s:" % (a.problems, ", " + a.loop if loop else ""))
    print(" ", picks(bench, f32, nf4, problems(a.problems), a.out, loop))
    for name, blob in (("f32 encoder", f32), ("nf4 encoder", nf4)):
        print("eval, %s:" % name)
        sys.stdout.write(evaluate(blob, bench, a.problems, os.path.join(a.out, "eval-%s.json" % name.split()[0]), loop))
        sys.stdout.flush()


if __name__ == "__main__":
    main()

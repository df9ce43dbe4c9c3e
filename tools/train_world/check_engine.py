#!/usr/bin/python3
"""check_engine.py - the trained world's Python side against the engine (run after train.py):

    /usr/bin/python3 tools/train_world/check_engine.py DIR RECALL BLOB TOKBLOB

  tokenizer: every text of DIR/corpus_sample.txt, tokenized by the engine (`recall tokenize` on
             the `convert --tokenizers-only` blob TOKBLOB) and by tok.py: the same ids;
             WordPiece likewise on decoded blocks (`--bge`).
  decoder:   `recall forward` logits and gate-layer q of a dialogue prefix vs nets.Qwen2;
  pooler:    `recall pool` vs nets.AttnPoolSP;
  bert:      `recall embed` vs nets.Bert.
Prints the largest differences; exits 1 when an id differs or a float is off by more than 1e-3
(the engine and torch sum in different orders).
"""
import json
import os
import subprocess
import sys
import tempfile
import zipfile

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import nets  # noqa: E402
import tok  # noqa: E402


def load_npz(path):
    with np.load(path) as z:
        return {k: z[k] for k in z.files}


def read_safetensors(path):
    import struct
    b = open(path, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    h = json.loads(b[8:8 + n])
    out = {}
    for k, v in h.items():
        if k == "__metadata__":
            continue
        a, z = v["data_offsets"]
        out[k] = torch.tensor(np.frombuffer(b[8 + n + a:8 + n + z], dtype="<f4").reshape(v["shape"]).copy())
    return out


def main():
    d, rc, blob, tokblob = sys.argv[1:5]
    bad = 0
    tj = json.load(open(os.path.join(d, "qwen2", "tokenizer.json"), encoding="utf-8"))
    bpe = tok.BPE(tj["model"]["vocab"], [tuple(m) for m in tj["model"]["merges"]])
    wj = json.load(open(os.path.join(d, "bge", "tokenizer.json"), encoding="utf-8"))
    wp = tok.WordPiece([t for t, _ in sorted(wj["model"]["vocab"].items(), key=lambda kv: kv[1])])
    texts = open(os.path.join(d, "corpus_sample.txt"), encoding="utf-8").read().split("\n\n")
    tmp = tempfile.mkdtemp()
    n_ids = 0
    for i, t in enumerate(texts):
        fn = os.path.join(tmp, "t.txt")
        open(fn, "w", encoding="utf-8").write(t)
        eng = json.loads(subprocess.run([rc, "tokenize", tokblob, "--file", fn], check=True, capture_output=True).stdout)
        mine = bpe.encode(t)
        n_ids += len(mine)
        if eng != mine:
            bad += 1
            print("BPE differs on text %d" % i)
        ids = mine
        for a in range(0, len(ids), 32):
            bt = bpe.decode(ids[a:a + 32])
            open(fn, "w", encoding="utf-8").write(bt)
            eng = json.loads(subprocess.run([rc, "tokenize", tokblob, "--bge", "--special", "--file", fn], check=True,
                                            capture_output=True).stdout)
            if eng != wp.encode(bt):
                bad += 1
                print("WordPiece differs on block %d of text %d: %r" % (a // 32, i, bt))
    print("tokenizers: %d texts, %d BPE ids, %d differences" % (len(texts), n_ids, bad))

    cfg = json.load(open(os.path.join(d, "qwen2", "config.json")))
    gate = load_npz(os.path.join(d, "gate.npz"))
    layers = [int(x) for x in gate["layers"]]
    q = dict(hidden=cfg["hidden_size"], layers=cfg["num_hidden_layers"], heads=cfg["num_attention_heads"],
             kv_heads=cfg["num_key_value_heads"], head_dim=cfg["hidden_size"] // cfg["num_attention_heads"],
             ffn=cfg["intermediate_size"], eps=cfg["rms_norm_eps"], theta=cfg["rope_theta"], vocab=cfg["vocab_size"])
    m = nets.Qwen2(q)
    sd = read_safetensors(os.path.join(d, "qwen2", "model.safetensors"))
    m.load_state_dict({k[len("model."):] if k.startswith("model.") else k: v for k, v in sd.items()})
    ids = [bpe.added[tok.SPECIALS[3][0]]] + bpe.encode(texts[0])[:300]
    fn = os.path.join(tmp, "ids.json")
    json.dump(ids, open(fn, "w"))
    subprocess.run([rc, "forward", blob, "--tokens-file", fn, "--dump", os.path.join(tmp, "f.npz")], check=True,
                   capture_output=True)
    eng = load_npz(os.path.join(tmp, "f.npz"))
    with torch.no_grad():
        lg, qs = m(m.embed_tokens(torch.tensor(ids))[None], q_layers=layers)
    dl = float(np.abs(eng["logits"] - lg[0].numpy()).max())
    dq = max(float(np.abs(eng["q_layers"][i] - qs[l][0].numpy()).max()) for i, l in enumerate(layers))
    same_argmax = bool((eng["logits"].argmax(-1) == lg[0].numpy().argmax(-1)).all())
    print("decoder: %d ids, max |logit diff| %.2e, max |q diff| %.2e, argmax identical %s" % (len(ids), dl, dq, same_argmax))
    bad += dl > 1e-3 or dq > 1e-3

    ck = torch.load(os.path.join(d, "pooler.pt"))
    a = ck["args"]
    pooler = nets.AttnPoolSP(q["hidden"], ck["pooler"]["query"].shape[0], a["heads"], a["blocks"], a["ffn"])
    pooler.load_state_dict(ck["pooler"])
    subprocess.run([rc, "pool", blob, "--tokens-file", fn, "--dump", os.path.join(tmp, "p.npz")], check=True,
                   capture_output=True)
    pe = load_npz(os.path.join(tmp, "p.npz"))
    key = [k for k in pe if pe[k].ndim == 2][0]
    with torch.no_grad():
        sp = pooler(m.embed_tokens(torch.tensor(ids)))
    dp = float(np.abs(pe[key] - sp.numpy()).max())
    print("pooler: max |diff| %.2e" % dp)
    bad += dp > 1e-3
    print("check_engine: %s" % ("OK" if not bad else "%d problems" % bad))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())

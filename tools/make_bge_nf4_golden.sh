#!/bin/sh
# make_bge_nf4_golden.sh - writes tests/golden/worldA/bge_nf4.npz, the engine's own embeddings of
# worldA's bge with its matrices and word embeddings stored as NF4 (`convert --bge-weights nf4`).
# Nothing computes this outside the engine (Hugging Face has no NF4 BERT); the file pins the bits
# tests/test_bge_nf4.c checks: the quantiser's codes, which tensors are NF4, and the encoder's
# order over NF4 weights. Arrays: emb [10, 64] float32, the L2-normalised CLS embedding of each of
# the 10 texts of tests/golden/worldA/bge_tokens.json (`recall embed BLOB --file TEXT --dump`,
# scalar path, 1 thread; every path and thread count gives the same bits); ids_<i> the WordPiece
# ids of text i (equal to bge_tokens.json's). Needs ./recall and Debian's python3-numpy.
#   sh tools/make_bge_nf4_golden.sh [OUT]
set -eu
out=${1:-tests/golden/worldA/bge_nf4.npz}
wa=tests/golden/worldA
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
./recall convert --qwen2 $wa/qwen2 --bge $wa/bge --pooler $wa/pooler.pt --gate $wa/gate.npz \
    --bridge $wa/bge_head.npz --bge-weights nf4 --quiet -o "$tmp/w.blob"
/usr/bin/python3 - "$wa/bge_tokens.json" "$tmp" <<'PY'
import json, sys
texts = json.load(open(sys.argv[1]))["texts"]
for i, t in enumerate(texts):
    open("%s/t%d.txt" % (sys.argv[2], i), "w", encoding="utf-8").write(t)
PY
i=0
while [ -f "$tmp/t$i.txt" ]; do
    ./recall embed "$tmp/w.blob" --file "$tmp/t$i.txt" --simd scalar --threads 1 --dump "$tmp/e$i.npz" >/dev/null 2>&1
    i=$((i + 1))
done
/usr/bin/python3 - "$wa/bge_tokens.json" "$tmp" "$out" <<'PY'
import json, sys
import numpy as np
ids = json.load(open(sys.argv[1]))["ids"]
emb, arrays = [], {}
for i, want in enumerate(ids):
    z = np.load("%s/e%d.npz" % (sys.argv[2], i))
    assert list(z["ids"]) == want, "text %d: WordPiece ids differ from bge_tokens.json" % i
    emb.append(z["emb"].astype(np.float32))
    arrays["ids_%d" % i] = z["ids"].astype(np.int32)
np.savez(sys.argv[3], emb=np.stack(emb), **arrays)
print("wrote %s: emb %s" % (sys.argv[3], np.stack(emb).shape))
PY

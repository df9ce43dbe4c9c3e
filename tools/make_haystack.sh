#!/bin/sh
# make_haystack.sh - writes tests/golden/longctx/haystack.txt, the pinned haystack of
# `recall longctx` (src/harness/longctx.h): this repository's README, format notes and sources at one
# commit, concatenated with a "==== path ====" line before each file, every byte outside
# printable ASCII / tab / newline dropped (so a token boundary is a byte boundary), cut at the last
# newline before MAX_BYTES. The output is committed: its tokens never drift with the sources.
#   sh tools/make_haystack.sh [COMMIT] [MAX_BYTES]     (defaults: 99d74db, 160000)
set -eu
commit=${1:-99d74db}
max=${2:-160000}
out=tests/golden/longctx/haystack.txt
files="README.md weights/FORMAT.md src/recall_loop.h src/recall.c src/qwen2.c src/ops.c src/rope.c src/pool.c src/retriever.c src/session.c"
tmp=$out.tmp.$$
: > "$tmp"
for f in $files; do
    printf '==== %s ====\n' "$f" >> "$tmp"
    git show "$commit:$f" | LC_ALL=C tr -cd '\11\12\40-\176' >> "$tmp"
    printf '\n' >> "$tmp"
done
head -c "$max" "$tmp" | LC_ALL=C sed '$d' > "$out"   # drop the last, possibly cut, line
rm -f "$tmp"
wc -c "$out"

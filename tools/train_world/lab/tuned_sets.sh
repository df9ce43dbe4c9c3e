#!/bin/sh
# tuned_sets.sh WORLD_DIR OUT_DIR - a candidate world on the sets a stage is tuned on (never a
# blind set), in the recommended chat setting, one thread a run. Writes OUT_DIR/f32.blob, nf4.blob
# and one file per set; prints a summary. The rows of bench/NOTES.md's world tables.
#   decide: lab/decide_probe.py's headline chats (torch, whole chat in view)
#   dev_plain: tools/train_world/dev_plain.json (in view / one line / evicted; never-told facts)
#   longbench: dev_longbench.json 0-11, FULL and RC_bge; bench: eval_bench.json 0-33, FULL SP RC_bge
#   phrasing: eval_phrasing.json 0-19; needle: depth 0.9 at 256 and 384 tokens, seeds 1-10
#   nf4: eval_bench.json 0-33 RC_bge on the nf4 blob at the file's threshold
set -eu
W=$1; O=$2
R=./recall
PY=/usr/bin/python3
S="--threads 1 --mode clean --span exchange --edge exchange --rerank single"
mkdir -p "$O"
# converted as make converts the wide world (the Makefile's TRAINED_Q8_EXACT and TRAINED_NF4_KEEP)
for w in f32 nf4; do
  keep=""; [ $w = nf4 ] && keep="--nf4-keep 0-3:v"
  $R convert --qwen2 "$W/qwen2" --bge "$W/bge" --pooler "$W/pooler.pt" --gate "$W/gate.npz" \
    --bridge "$W/bge_head.npz" --weights $w --q8-exact 0-1:qkvo $keep --quiet -o "$O/$w.blob"
done
B=$O/f32.blob
jobs=""
run() { name=$1; shift; ( "$@" > "$O/$name.txt" 2>&1 ) & jobs="$jobs $!"; }
OPENBLAS_NUM_THREADS=1 $PY tools/train_world/lab/decide_probe.py "$W" > "$O/decide.txt" 2>&1 || true
run dev_plain $PY tools/train_world/typed_chats.py tools/train_world/dev_plain.json --blob "$B" --jobs 1 -- $S
run longbench $R eval "$B" --bench tools/train_world/dev_longbench.json --problems 0-11 --arms FULL,RC_bge $S
wait $jobs; jobs=""
run bench $R eval "$B" --bench "$W/eval_bench.json" --problems 0-33 --arms FULL,SP,RC_bge $S
run nf4 $R eval "$O/nf4.blob" --bench "$W/eval_bench.json" --problems 0-33 --arms RC_bge $S
wait $jobs; jobs=""
run phrasing $R eval "$B" --bench "$W/eval_phrasing.json" --problems 0-19 --arms FULL,RC_bge $S
( for n in 256 384; do for s in 1 2 3 4 5 6 7 8 9 10; do
    $R longctx "$B" --task needle --len $n --depth 0.9 --seed $s --max-new 64 --arms RC_bge $S 2>&1 | \
      grep -E "answer" | tail -n 1 | sed "s/^/seed $s: /"
  done; done > "$O/needle.txt" ) & jobs="$jobs $!"
wait $jobs
echo "== $W"
tail -n 1 "$O/decide.txt"
tail -n 4 "$O/dev_plain.txt"
for f in longbench bench nf4 phrasing; do echo "-- $f"; grep -A4 "^arm " "$O/$f.txt"; done
echo "-- needle right of 10 at 256, 384:"; grep -c "exact" "$O/needle.txt" || true
grep "len 256" "$O/needle.txt" | grep -c "exact" || true; grep "len 384" "$O/needle.txt" | grep -c "exact" || true

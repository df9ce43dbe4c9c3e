#!/bin/sh
# measure_wide.sh - a world's numbers in the recommended chat setting on the sets it may be tuned
# on (docs/WORLD.md, "Wide wording"); the blind set is run apart, once (typed_chats.py):
#   sh tools/train_world/measure_wide.sh [WORLD_DIR] [OUT_DIR]
# WORLD_DIR defaults to tests/golden/wide, OUT_DIR to build/wide-numbers. Two processes at a time.
# In OUT_DIR: eval.txt (eval_bench.json problems 0-33: FULL / SP / RC_bge, false fires), phrasing.txt
# (eval_phrasing.json 0-19), typed.txt and typed2.txt (typed.sh's two sets), dev.txt (dev_typed.json:
# in view / one line / evicted), farback.txt (far back at 8,192 tokens, seeds 0-1: 24 cases).
set -e
W=${1:-tests/golden/wide}
O=${2:-build/wide-numbers}
SETTING="--mode clean --span exchange --edge exchange --rerank single"
mkdir -p "$O"
./recall convert --qwen2 "$W/qwen2" --bge "$W/bge" --pooler "$W/pooler.pt" --gate "$W/gate.npz" \
  --bridge "$W/bge_head.npz" --quiet -o "$O/world-f32.blob"
B="$O/world-f32.blob"
for k in 1 2; do
  ./recall eval "$B" --bench "$W/eval_bench.json" --problems 0-33 --arms FULL,SP,RC_bge $SETTING --shard $k/2 \
    --threads 1 --json "$O/eval-shard$k.json" >/dev/null 2>"$O/eval-shard$k.log" &
done
wait
./recall eval --merge "$O/eval-shard1.json" "$O/eval-shard2.json" --json "$O/eval.json" >/dev/null
/usr/bin/python3 tools/train_world/answers.py "$O/eval.json" > "$O/eval.txt"
./recall eval "$B" --bench "$W/eval_phrasing.json" --problems 0-19 --arms FULL,RC_bge $SETTING --threads 1 \
  --json "$O/phrasing.json" >/dev/null 2>"$O/phrasing.log" &
{ sh tools/train_world/typed.sh "$B" --threads 1 $SETTING > "$O/typed.txt" 2>&1
  TYPED_SET=2 sh tools/train_world/typed.sh "$B" --threads 1 $SETTING > "$O/typed2.txt" 2>&1
  /usr/bin/python3 tools/train_world/typed_chats.py tools/train_world/dev_typed.json --blob "$B" --jobs 1 \
    -- --threads 1 $SETTING > "$O/dev.txt" 2>&1; }
wait
/usr/bin/python3 tools/train_world/answers.py "$O/phrasing.json" > "$O/phrasing.txt"
for s in 0 1; do
  ./recall longctx "$B" --task farfact --bench "$W/eval_bench.json" --len 8192 --cases 12 --seed $s \
    --fact-share 0.25 --arms RC_bge $SETTING --threads 1 --json "$O/farback-$s.json" >/dev/null 2>"$O/farback-$s.log" &
done
wait
echo "far back at 8,192 tokens, seeds 0-1: exact $(cat "$O"/farback-0.log "$O"/farback-1.log | grep -c 'exact;')/24" \
  > "$O/farback.txt"
for f in eval phrasing typed typed2 dev farback; do
  echo "== $f"
  tail -n 4 "$O/$f.txt"
done

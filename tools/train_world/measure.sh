#!/bin/sh
# measure.sh - the trained world's numbers (docs/WORLD.md, "Measured"), every one from ./recall:
#   sh tools/train_world/measure.sh [WORLD_DIR] [OUT_DIR] [PROBLEMS]
# WORLD_DIR defaults to tests/golden/trained, OUT_DIR to build/world-numbers, PROBLEMS to 0-66
# (201 held-out questions). The eval runs as 3 shards in parallel (recall eval --shard / --merge:
# the same bits as one run). Prints each table; the JSON and SVG files stay in OUT_DIR.
set -e
W=${1:-tests/golden/trained}
O=${2:-build/world-numbers}
P=${3:-0-66}
mkdir -p "$O"
for q in f32 nf4; do
  ./recall convert --qwen2 "$W/qwen2" --bge "$W/bge" --pooler "$W/pooler.pt" --gate "$W/gate.npz" \
    --bridge "$W/bge_head.npz" --weights $q --quiet -o "$O/trained-$q.blob"
done
B="$O/trained-f32.blob"
echo "== recall eval (problems $P, faithful mode; $(date -u +%FT%TZ), load $(cut -d' ' -f1-3 /proc/loadavg))"
for k in 1 2 3; do
  ./recall eval "$B" --bench "$W/eval_bench.json" --problems "$P" --arms FULL,SP,RC_bge --shard $k/3 \
    --json "$O/eval-shard$k.json" >/dev/null 2>"$O/eval-shard$k.log" &
done
wait
./recall eval --merge "$O/eval-shard1.json" "$O/eval-shard2.json" "$O/eval-shard3.json" --json "$O/eval.json"
/usr/bin/python3 tools/train_world/answers.py "$O/eval.json"
for q in f32 nf4; do
  for m in faithful clean; do
    echo "== recall calibrate ($q, $m, problems 0-9)"
    ./recall calibrate "$O/trained-$q.blob" --bench "$W/eval_bench.json" --problems 0-9 --mode $m \
      --svg "$O/calibrate-$q-$m.svg" 2>/dev/null
  done
done
for n in 384; do
  echo "== recall longctx (needle, $n tokens, depths 0.1 0.5 0.9, seeds 1-3)"
  for s in 1 2 3; do
    ./recall longctx "$B" --task needle --len $n --depth 0.1,0.5,0.9 --seed $s --max-new 64 \
      --arms FULL,SP,RC_bge --json "$O/longctx-$n-seed$s.json" >/dev/null 2>&1
  done
  /usr/bin/python3 tools/train_world/answers.py "$O"/longctx-$n-seed?.json
done

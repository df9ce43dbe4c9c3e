#!/bin/sh
# measure.sh - the trained world's numbers (docs/WORLD.md, "The trained world: measured"), every one
# from ./recall or from the Python replay of the loop:
#   sh tools/train_world/measure.sh [WORLD_DIR] [OUT_DIR] [PROBLEMS]
# WORLD_DIR defaults to tests/golden/trained, OUT_DIR to build/world-numbers, PROBLEMS to 0-33
# (102 held-out questions). Two processes at a time (a 2-core machine). In OUT_DIR:
#   eval.txt       held-out facts (eval_bench.json), FULL / SP / RC_bge, per kind of value
#   phrasing.txt   the same facts told and asked in phrasings never trained (eval_phrasing.json)
#   typed.txt      20 facts typed as a person would, in view and evicted (typed.sh), and
#   typed2.txt     20 more in words the phrasing grammar never generates (TYPED_SET=2)
#   falsefire.txt  the false-fire mitigations (falsefire.sh), problems 0-19
#   calib.txt      calibration applied, f32 and nf4 (calib.sh), problems 0-19
#   edge.txt       the window's edge, --edge off / inject (edge.sh)
#   farback.txt    far-back recall at 2k and 8k tokens (farback.sh)
#   replay_check.txt  the engine against the Python replay's traces, regenerated first
#                  into WORLD_DIR/replay (REPLAY=0 skips the regeneration and the check)
# Long: about an hour on two cores. The JSON files stay in OUT_DIR.
set -e
W=${1:-tests/golden/trained}
O=${2:-build/world-numbers}
P=${3:-0-33}
mkdir -p "$O"
for q in f32 nf4; do
  ./recall convert --qwen2 "$W/qwen2" --bge "$W/bge" --pooler "$W/pooler.pt" --gate "$W/gate.npz" \
    --bridge "$W/bge_head.npz" --weights $q --quiet -o "$O/world-$q.blob"
done
B="$O/world-f32.blob"
stamp() { echo "$1 $(date -u +%FT%TZ) load $(cut -d' ' -f1-3 /proc/loadavg)" >> "$O/stamps"; }
stamp start
for k in 1 2; do
  ./recall eval "$B" --bench "$W/eval_bench.json" --problems "$P" --arms FULL,SP,RC_bge --shard $k/2 --threads 1 \
    --json "$O/eval-shard$k.json" >/dev/null 2>"$O/eval-shard$k.log" &
done
wait
./recall eval --merge "$O/eval-shard1.json" "$O/eval-shard2.json" --json "$O/eval.json" >/dev/null
/usr/bin/python3 tools/train_world/answers.py "$O/eval.json" > "$O/eval.txt"
./recall eval "$B" --bench "$W/eval_phrasing.json" --problems 0-19 --arms FULL,SP,RC_bge --threads 1 \
  --json "$O/phrasing.json" >/dev/null 2>"$O/phrasing.log" &
sh tools/train_world/typed.sh "$B" --threads 1 > "$O/typed.txt" 2>&1
TYPED_SET=2 sh tools/train_world/typed.sh "$B" --threads 1 > "$O/typed2.txt" 2>&1
wait
/usr/bin/python3 tools/train_world/answers.py "$O/phrasing.json" > "$O/phrasing.txt"
stamp eval
sh tools/train_world/falsefire.sh "$B" "$W/eval_bench.json" 0-19 "$O/falsefire" > "$O/falsefire.txt" 2>&1 &
sh tools/train_world/calib.sh "$W" "$O/calib" 0-19 > "$O/calib.txt" 2>&1
wait
stamp mitigations
sh tools/train_world/edge.sh "$B" "$W/eval_bench.json" "$O/edge" > "$O/edge.txt" 2>&1 &
DISTS=2048,8192 CASES=6 SHARES="0.25 0" THREADS=1 sh tools/train_world/farback.sh "$B" "$W/eval_bench.json" \
  "$O/farback" > "$O/farback.txt" 2>&1
wait
stamp loop
if [ "${REPLAY:-1}" = 1 ]; then
  sh tools/train_world/replay_traces.sh "$W" 2>>"$O/replay.log"
  sh tests/replay_check.sh ./recall "$W" "$W/replay/bench.json" 12 > "$O/replay_check.txt" 2>&1
  stamp replay
fi
for f in eval phrasing typed typed2 falsefire calib edge farback; do
  echo "== $f"
  cat "$O/$f.txt"
done

#!/bin/sh
# farback.sh - far-back recall on a world (docs/LONG_CONTEXT.md, "Far-back recall"): the answer rate
# per distance of `recall longctx --task farfact`, every number from ./recall:
#   sh tools/train_world/farback.sh BLOB BENCH [OUT_DIR]
# BLOB: a converted world (make build/trained-f32.blob, or recall convert on a retrained one);
# BENCH: its eval_bench.json. OUT_DIR defaults to build/farback. Environment: DISTS (default
# 512,2048,8192,32768), CASES per distance (default 12), SEED (0), THREADS (1), MODE (faithful),
# SHARES (the fact shares to run, default "0.25 0": the benchmark's mix of other facts, then none),
# LOOP (more loop options for every run, e.g. "--span exchange" with MODE=clean; default none).
# Share 0.25 runs FULL, SP and RC_bge (FULL only where the chat fits the model's positions);
# the other shares RC_bge only. Prints one table per share; the JSON records stay in OUT_DIR.
set -e
if [ $# -lt 2 ]; then
  echo "usage: sh tools/train_world/farback.sh BLOB BENCH [OUT_DIR]" >&2
  exit 2
fi
B=$1
J=$2
O=${3:-build/farback}
DISTS=${DISTS:-512,2048,8192,32768}
CASES=${CASES:-12}
SEED=${SEED:-0}
THREADS=${THREADS:-1}
MODE=${MODE:-faithful}
SHARES=${SHARES:-0.25 0}
mkdir -p "$O"
for f in $SHARES; do
  arms=RC_bge
  [ "$f" = 0.25 ] && arms=FULL,SP,RC_bge
  echo "== recall longctx --task farfact: distances $DISTS, $CASES cases each, fact share $f, $MODE," \
    "seed $SEED${LOOP:+, $LOOP} ($(date -u +%FT%TZ), load $(cut -d' ' -f1-3 /proc/loadavg))"
  ./recall longctx "$B" --task farfact --bench "$J" --len "$DISTS" --cases "$CASES" --seed "$SEED" \
    --fact-share "$f" --mode "$MODE" $LOOP --arms "$arms" --threads "$THREADS" --json "$O/farfact-share$f.json" \
    2>"$O/farfact-share$f.log"
done

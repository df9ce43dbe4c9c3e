#!/bin/sh
# edge.sh - the window's edge (docs/LOOP.md, "The window's edge") measured on a world:
#   sh tools/train_world/edge.sh [BLOB] [BENCH] [OUT_DIR]
# BLOB defaults to build/trained-f32.blob, BENCH to tests/golden/trained/eval_bench.json, OUT_DIR
# to build/edge-numbers. Clean mode, RC_bge arm, with and without --edge inject:
#   - recall longctx needle, 256 and 384 tokens, depths 0.1 / 0.5 / 0.9, seeds 1-10: exact answers
#     per length and depth (10 cases each), and in how many of them the gate fired
#   - recall eval, problems 0-19 of BENCH (60 questions): the benchmark, to show the option costs
#     nothing where nothing straddles the edge (tools/train_world/answers.py's table)
# The JSON files stay in OUT_DIR. Re-run it on a retrained world: the numbers belong to the world.
# LOOP: more loop options for every run (e.g. LOOP="--span exchange"; default none).
set -e
B=${1:-build/trained-f32.blob}
BENCH=${2:-tests/golden/trained/eval_bench.json}
O=${3:-build/edge-numbers}
mkdir -p "$O"
echo "== $B, clean mode${LOOP:+, $LOOP}, RC_bge ($(date -u +%FT%TZ), load $(cut -d' ' -f1-3 /proc/loadavg))"
echo "longctx needle, seeds 1-10: exact answers (gate fired)"
printf '%-6s %-6s %-16s %-16s %-16s\n' len depth "--edge off" "--edge inject" "--edge exchange"
for n in 256 384; do
  for d in 0.1 0.5 0.9; do
    line=$(printf '%-6s %-6s' $n $d)
    for e in off inject exchange; do
      for s in 1 2 3 4 5 6 7 8 9 10; do
        ./recall longctx "$B" --task needle --len $n --depth $d --seed $s --max-new 64 --arms RC_bge --mode clean \
          --edge $e $LOOP --json "$O/longctx-$n-$d-$e-seed$s.json" >/dev/null 2>&1
      done
      c=$(/usr/bin/python3 - "$O" $n $d $e <<'EOF'
import json, sys
o, n, d, e = sys.argv[1:]
ex = fi = 0
for s in range(1, 11):
    a = json.load(open("%s/longctx-%s-%s-%s-seed%d.json" % (o, n, d, e, s)))["cases"][0]["arms"]["RC_bge"]
    ex += bool(a["exact"])
    fi += a["fires"] > 0
print("%d/10 (%d)" % (ex, fi))
EOF
)
      line="$line $(printf '%-16s' "$c")"
    done
    echo "$line"
  done
done
for e in off inject exchange; do
  echo "== recall eval, problems 0-19, --edge $e"
  ./recall eval "$B" --bench "$BENCH" --problems 0-19 --arms RC_bge --mode clean --edge $e $LOOP \
    --json "$O/eval-$e.json" >/dev/null 2>&1
  /usr/bin/python3 tools/train_world/answers.py "$O/eval-$e.json"
done

#!/bin/sh
# calib.sh - the gate threshold calibrated per build (docs/LOOP.md, "Calibration") measured on a
# world, f32 and NF4:
#   sh tools/train_world/calib.sh [WORLD_DIR] [OUT_DIR] [PROBLEMS]
# WORLD_DIR defaults to tests/golden/trained, OUT_DIR to build/calib-numbers, PROBLEMS to 0-19.
# Per weights: `recall calibrate --problems 1000-1009 --write` (the problems `--calibrate` runs at
# startup, apart from the evaluated ones), then `recall eval` (faithful mode, the default) at the
# gate file's threshold (FULL, SP, RC_bge) and with --threshold-file (RC_bge; FULL and SP never
# read the gate). Prints answers.py's tables; the files stay in OUT_DIR. Re-run it on a retrained
# world: the numbers belong to the world. LOOP: more loop options for every eval (e.g.
# LOOP="--mode clean --span exchange"; default none: faithful). NF4_KEEP: the nf4 blob's
# --nf4-keep SPEC (e.g. 0-3:v; default none).
set -e
W=${1:-tests/golden/trained}
O=${2:-build/calib-numbers}
P=${3:-0-19}
mkdir -p "$O"
CMODE=$(echo "$LOOP" | grep -o -- '--mode [a-z]*' || true) # calibrate in the mode the evals run
echo "== $W, eval problems $P${LOOP:+, $LOOP}${NF4_KEEP:+, nf4 --nf4-keep $NF4_KEEP} ($(date -u +%FT%TZ), load $(cut -d' ' -f1-3 /proc/loadavg))"
for q in f32 nf4; do
  ./recall convert --qwen2 "$W/qwen2" --bge "$W/bge" --pooler "$W/pooler.pt" --gate "$W/gate.npz" \
    --bridge "$W/bge_head.npz" --weights $q $([ $q = nf4 ] && [ -n "$NF4_KEEP" ] && echo --nf4-keep "$NF4_KEEP") \
    --quiet -o "$O/trained-$q.blob"
done
for q in f32 nf4; do
  B="$O/trained-$q.blob"
  echo "== $q: recall calibrate --problems 1000-1009"
  ./recall calibrate "$B" --bench "$W/eval_bench.json" --problems 1000-1009 $CMODE --write "$O/threshold-$q.json" \
    2>/dev/null | grep -E "recall positions|suggested threshold"
  echo "== $q: recall eval at the gate file's threshold"
  ./recall eval "$B" --bench "$W/eval_bench.json" --problems "$P" --arms FULL,SP,RC_bge $LOOP \
    --json "$O/eval-$q-file.json" >/dev/null 2>&1
  /usr/bin/python3 tools/train_world/answers.py "$O/eval-$q-file.json"
  echo "== $q: recall eval with --threshold-file $O/threshold-$q.json"
  ./recall eval "$B" --bench "$W/eval_bench.json" --problems "$P" --arms RC_bge $LOOP \
    --threshold-file "$O/threshold-$q.json" --json "$O/eval-$q-calibrated.json" >/dev/null 2>&1
  /usr/bin/python3 tools/train_world/answers.py "$O/eval-$q-calibrated.json"
done
/usr/bin/python3 - "$O" <<'EOF'
import json, sys
t = {q: json.load(open("%s/threshold-%s.json" % (sys.argv[1], q))) for q in ("f32", "nf4")}
print("thresholds: the gate file's %.4f; calibrated f32 %.4f, nf4 %.4f (shift %+.4f)" % (
    t["f32"]["gate_file_thresh"], t["f32"]["threshold"], t["nf4"]["threshold"],
    t["nf4"]["threshold"] - t["f32"]["threshold"]))
EOF

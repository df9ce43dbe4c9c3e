#!/bin/sh
# falsefire.sh - the false-fire mitigations the engine has, measured on a world's benchmark:
#   sh tools/train_world/falsefire.sh [BLOB] [BENCH] [PROBLEMS] [OUT_DIR]
# Defaults: build/trained-f32.blob, tests/golden/trained/eval_bench.json, 0-19 (60 questions, 40
# casual probes), build/falsefire. RC_bge, faithful mode, each setting a separate `recall eval`:
#   default          the gate file's threshold, every fire injects
#   --hysteresis N   inject only after N consecutive scores above the threshold (N = 2, 3)
#   --fire-once      at most one injection per turn
#   :rFLOOR          inject only if the best bridge score reaches FLOOR; FLOOR is the 10th
#                    percentile of the default run's best bridge scores in question turns
# For each: exact answers, retrieved, and casual false-fires (probe turns with any fire, forced
# history included, as the reference counts them), from tools/train_world/answers.py. LOOP: more
# loop options for every run (e.g. LOOP="--mode clean --span exchange"; default none: faithful).
set -e
B=${1:-build/trained-f32.blob}
J=${2:-tests/golden/trained/eval_bench.json}
P=${3:-0-19}
O=${4:-build/falsefire}
mkdir -p "$O"
run() { # name, options...
  n=$1
  shift
  ./recall eval "$B" --bench "$J" --problems "$P" --json "$O/$n.json" $LOOP "$@" >/dev/null 2>"$O/$n.log"
  printf '%-22s ' "$n"
  /usr/bin/python3 tools/train_world/answers.py "$O/$n.json" | sed -n 2p
}
echo "== $B, $J, problems $P, ${LOOP:-faithful} ($(date -u +%FT%TZ), load $(cut -d' ' -f1-3 /proc/loadavg))"
printf '%-22s %-8s %10s %14s %14s %14s %12s\n' setting arm questions recall_ok exact retrieved "probe fires"
run default --arms RC_bge
floor=$(/usr/bin/python3 - "$O/default.json" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
s = sorted(t["top_bridge"] for p in d["arms"][0]["per_problem"] for t in p["turns"]
           if t["kind"] == "q" and t["top_bridge"] is not None)
print("%.4f" % s[len(s) // 10] if s else "0")
EOF
)
run hysteresis-2 --arms RC_bge --hysteresis 2
run hysteresis-3 --arms RC_bge --hysteresis 3
run fire-once --arms RC_bge --fire-once
run "floor$floor" --arms "RC_bge:r$floor"
run "fire-once+floor" --arms "RC_bge:r$floor" --fire-once

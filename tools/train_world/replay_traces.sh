#!/bin/sh
# replay_traces.sh - the Python replay's traces of a trained world (tools/replay, docs/REPLAY.md),
# written into WORLD_DIR/replay: problems 0-3 of its bench (eval_bench.json cut to the reference
# benchmark's shape), RC_bge faithful and clean and SP, three at a time. tests/replay_check.sh then
# reruns each with the engine (make test does):
#   sh tools/train_world/replay_traces.sh [WORLD_DIR]
set -e
W=${1:-tests/golden/wide}
# the replay's Qwen2 pre-tokenizer needs Unicode classes (\p{L}, \p{N}) the stdlib re lacks
sh tools/need.sh measure.sh /usr/lib/python3/dist-packages/regex/__init__.py:python3-regex
# its bench: eval_bench.json cut to the reference benchmark's shape (12 facts, 12 casual turns)
mkdir -p "$W/replay"
/usr/bin/python3 - "$W/eval_bench.json" "$W/replay/bench.json" <<'EOF'
import json, sys
b = json.load(open(sys.argv[1], encoding="utf-8"))
out = {"description": "The trained world's held-out benchmark (../eval_bench.json) cut to the reference benchmark's "
     "shape: its first 12 facts and first 12 casual turns. Problem i is drawn with Python random.Random(i) exactly "
     "as for recall_bench.json: facts = sample(range(12),3); fillers = sample(CASUAL,12); question order = "
     "sample(range(3),3). With 12 facts every reading of sample() draws the same problems (CPython switches "
     "sample() to another algorithm for more than 21 items).",
     "fact_user": b["fact_user"], "fact_assistant": b["fact_assistant"], "question_user": b["question_user"],
     "facts": b["facts"][:12], "casual": b["casual"][:12]}
with open(sys.argv[2], "w", encoding="utf-8") as f:
  json.dump(out, f, ensure_ascii=False, indent=1)
  f.write("\n")
EOF
for p in 0 1 2 3; do
  for ma in "faithful RC_bge" "clean RC_bge" "faithful SP"; do
    set -- $ma
    OPENBLAS_CORETYPE=Haswell OPENBLAS_NUM_THREADS=1 /usr/bin/python3 tools/replay/replay_loop.py run --world "$W" \
      --bench "$W/replay/bench.json" --problem $p --mode $1 --arm $2 \
      --trace "$W/replay/p$p-$1-$2-fp32.json" >/dev/null &
  done
  wait
done

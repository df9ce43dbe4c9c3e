#!/bin/sh
# replay_check.sh - the engine against the independent Python replay of the recall loop.
#
# usage: tests/replay_check.sh RECALL WORLD BENCH MIN_TRACES
#
# WORLD is a world folder (qwen2/, bge/, pooler.pt, gate.npz, bge_head.npz) with the Python
# replay's traces in WORLD/replay/, one per run, named p<N>-<mode>-<arm>-<quant>.json
# (tools/replay/replay_loop.py, docs/REPLAY.md). The world is converted to a blob (f32, and nf4
# when a trace needs it); each trace's problem is run with `recall replay` on the same mode, arm
# and weights, and `recall compare ENGINE PYTHON` must exit 0: the same reply tokens, gate
# decisions, fires, candidate sets, chosen blocks, injected ids and rebuild shapes, floats within
# the numerics table. A near-tie (exit 3) fails too: these dialogues were chosen to have none.
# Fails when fewer than MIN_TRACES traces are found, so that a missing world cannot pass.
set -eu
if [ $# -ne 4 ]; then
    echo "usage: $0 RECALL WORLD BENCH MIN_TRACES" >&2
    exit 2
fi
RECALL=$1 WORLD=$2 BENCH=$3 MIN=$4
tmp=$(mktemp -d "${TMPDIR:-/tmp}/replay_check.XXXXXX")
trap 'rm -rf "$tmp"' EXIT INT TERM

for f in qwen2/config.json bge/config.json pooler.pt gate.npz bge_head.npz; do
    if [ ! -e "$WORLD/$f" ]; then
        echo "replay_check: $WORLD/$f is missing (the world's files come with the world, see docs/REPLAY.md)" >&2
        exit 1
    fi
done
[ -e "$BENCH" ] || { echo "replay_check: $BENCH is missing" >&2; exit 1; }

blob() { # blob QUANT -> path of the world converted with those decoder weights (once)
    b="$tmp/world-$1.blob"
    if [ ! -e "$b" ]; then
        w=f32
        [ "$1" = nf4 ] && w=nf4
        if ! "$RECALL" convert --qwen2 "$WORLD/qwen2" --bge "$WORLD/bge" --pooler "$WORLD/pooler.pt" \
            --gate "$WORLD/gate.npz" --bridge "$WORLD/bge_head.npz" --weights "$w" --quiet -o "$b" \
            >"$tmp/convert.log" 2>&1; then
            cat "$tmp/convert.log" >&2
            echo "replay_check: cannot convert $WORLD" >&2
            exit 1
        fi
    fi
    echo "$b"
}

n=0 failed=0
for golden in "$WORLD"/replay/p*-*-*-*.json; do
    [ -e "$golden" ] || break
    name=$(basename "$golden" .json)
    problem=${name%%-*}
    problem=${problem#p}
    rest=${name#*-}
    mode=${rest%%-*}
    rest=${rest#*-}
    arm=${rest%-*}
    quant=${rest##*-}
    case "$quant" in fp32 | nf4) ;; *)
        echo "replay_check: $golden: quant '$quant' is neither fp32 nor nf4" >&2
        exit 1
        ;;
    esac
    b=$(blob "$quant")
    out="$tmp/$name.engine.json"
    if ! "$RECALL" replay "$b" --bench "$BENCH" --problem "$problem" --mode "$mode" --arm "$arm" \
        --trace "$out" >"$tmp/replay.log" 2>&1; then
        cat "$tmp/replay.log" >&2
        echo "FAIL $name: recall replay failed" >&2
        failed=$((failed + 1))
        n=$((n + 1))
        continue
    fi
    if "$RECALL" compare "$out" "$golden" >"$tmp/compare.log" 2>&1; then
        echo "PASS $name: $(sed -n 's/^  agreed before any divergence: //p' "$tmp/compare.log")"
    else
        cat "$tmp/compare.log" >&2
        echo "FAIL $name: the engine and the Python replay disagree" >&2
        failed=$((failed + 1))
    fi
    n=$((n + 1))
done
if [ "$n" -lt "$MIN" ]; then
    echo "replay_check: $n traces in $WORLD/replay, expected at least $MIN" >&2
    exit 1
fi
if [ "$failed" -ne 0 ]; then
    echo "replay_check: $failed of $n traces disagree ($WORLD)" >&2
    exit 1
fi
echo "replay_check: $n traces agree ($WORLD)"

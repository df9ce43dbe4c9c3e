#!/bin/sh
# kv_pages.sh - perplexity against the page budget of --kv-pages (REQ-CTX-006) on one chunk of
# N tokens: prefill (dense reference), the decode path dense (--scoring-rows 1, bitwise the same
# NLLs, plus decode tok/s at the end of the context), and the decode path with each PAGE:BUDGET,
# ranked and the seeded random control. Each run holds /work/bench.lock (if present) alone.
# usage: [RECALL=./recall] bench/kv_pages.sh BLOB IDS_FILE N OUTDIR "BUDGETS" "RANDOM_BUDGETS" [PAGE] [THREADS]
set -eu
blob=$1 ids=$2 n=$3 out=$4 budgets=$5 rbudgets=$6 page=${7:-64} threads=${8:-2}
mkdir -p "$out"
lock() { if [ -e /work/bench.lock ]; then flock /work/bench.lock "$@"; else "$@"; fi; }
run() { # name, extra args
    name=$1; shift
    echo "== $name (load $(cut -d' ' -f1-3 /proc/loadavg))" >> "$out/log.txt"
    lock "${RECALL:-./recall}" score "$blob" --tokens-file "$ids" --ctx "$n" --threads "$threads" --json "$out/$name.json" "$@" \
        > "$out/$name.out" 2> "$out/$name.err"
    grep -E "xxh64|attention|Final|decode " "$out/$name.out" >> "$out/log.txt"
}
run prefill
run dense --scoring-rows 1
for b in $budgets; do run "ranked-$page-$b" --scoring-rows 1 --kv-pages "$page:$b"; done
for b in $rbudgets; do run "random-$page-$b" --scoring-rows 1 --kv-pages "$page:$b" --kv-pages-random 1; done

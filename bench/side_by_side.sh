#!/usr/bin/env bash
# side_by_side.sh - recall against llama.cpp (llama-bench + GGUF files the user built outside this
# repo) and/or against an older tree of recall, interleaved on one host at one thread count.
#
# Each round runs every engine once (recall first in odd rounds, last in even ones, so a drift of
# the host hits both sides alike); every engine runs the same tests with llama-bench's protocol
# (one untimed warm-up per test, then --reps repetitions; tok/s mean ± sd):
#   pp512     prefill 512 tokens from position 0
#   tg64      64 decode steps from position 0
#   tg64@512  64 decode steps from position 512. llama-bench of early 2025 has no depth option, so
#             for llama.cpp it is derived: 64 / (mean time of -pg 512,64 - mean time of -p 512).
#   bge128    bge-base encode of one 128-token block (llama.cpp: --bert-gguf, -embd 1 -p 128)
# and prints the host's CPU, the raw numbers of every round and a table of medians over rounds
# (min-max in brackets) with the ratios recall / other per round (> 1: recall is faster).
# recall's side is bench/bench_sbs.c; --old-tree DIR compiles that same file against DIR's
# library (built in DIR/build-sbs), so both trees run one protocol: that is how a speed-up is claimed.
# Nothing of llama.cpp is part of this repository; pass its binary and files by path.
set -euo pipefail

usage() {
    cat <<'EOF'
usage: bench/side_by_side.sh --blob BLOB [--llama-bench PATH --gguf F[,F...]] [--bert-gguf F]
                             [--old-tree DIR] [--threads N] [--rounds R] [--reps N]
                             [--simd PATH] [--numerics exact[,q8]] [--lm-screen]
                             [--lock FILE] [--raw DIR] [--recall-bin PATH] [--dry-run]
Runs recall and the other engines interleaved (same host, same thread count) and prints the CPU,
every raw number and the ratio table (medians over rounds, min-max). At least one of
--llama-bench/--gguf or --old-tree is needed.
  --blob BLOB         recall blob at real shape (e.g. build/synth/r1-1.5b-nf4.blob, `make synth`)
  --llama-bench PATH  an existing llama-bench binary (built by you, outside this repo)
  --gguf F[,F...]     GGUF files of the same model for llama-bench (e.g. Q4_0 and IQ4_NL)
  --bert-gguf F       a BERT (bge-base) GGUF: adds the bge128 row (llama-bench -embd 1 -p 128 -n 0)
  --old-tree DIR      an older recall tree (e.g. `git worktree add /tmp/old COMMIT`): its library is
                      built with `make -C DIR BUILD=build-sbs`, bench/bench_sbs.c of THIS tree is
                      compiled against it, and it runs as engine "old" (ratio: this tree / old)
  --threads N         threads for every engine (default 2)
  --rounds R          interleaved rounds (default 2; the table gives medians and ranges)
  --reps N            timed repetitions per test and engine (default 3, llama-bench -r)
  --simd PATH         recall's kernel path: scalar|avx2|avx512|neon (default: best available)
  --numerics LIST     recall's numerics profiles, each its own engine: exact ("recall"), q8
                      ("recall-q8"); default exact. Ratios: every recall engine against every other
  --lm-screen         recall's greedy picks through the blob's int8 lm_head screen (convert
                      --lm-head-screen) instead of each row's full logits
  --lock FILE         run every timed invocation under `flock FILE` (hosts shared by several people)
  --raw DIR           keep every invocation's jsonl output in DIR (default: a temporary folder)
  --recall-bin PATH   use this bench_sbs binary instead of building build/bench_sbs (make)
  --dry-run           check the arguments, print what would be built and run, run nothing
exit status: 0 done, 1 a run or build failed (message names it), 2 bad arguments
EOF
}

die() { echo "side_by_side: $*" >&2; exit 1; }
bad() { echo "side_by_side: $*" >&2; echo "(try --help)" >&2; exit 2; }

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BLOB="" LB="" GGUFS="" BERT="" OLD="" THREADS=2 ROUNDS=2 REPS=3 SIMD="" LOCK="" RAW="" RBIN="" DRY=0
NUMERICS=exact SCREEN=""
while [ $# -gt 0 ]; do
    case "$1" in
    -h | --help) usage; exit 0 ;;
    --dry-run) DRY=1; shift; continue ;;
    --lm-screen) SCREEN=--lm-screen; shift; continue ;;
    --blob | --llama-bench | --gguf | --bert-gguf | --old-tree | --threads | --rounds | --reps | --simd | --lock | \
        --raw | --recall-bin | --numerics)
        [ $# -ge 2 ] || bad "$1 needs a value"
        case "$1" in
        --blob) BLOB=$2 ;; --llama-bench) LB=$2 ;; --gguf) GGUFS=$2 ;; --bert-gguf) BERT=$2 ;;
        --old-tree) OLD=$2 ;; --threads) THREADS=$2 ;; --rounds) ROUNDS=$2 ;; --reps) REPS=$2 ;;
        --simd) SIMD=$2 ;; --lock) LOCK=$2 ;; --raw) RAW=$2 ;; --recall-bin) RBIN=$2 ;; --numerics) NUMERICS=$2 ;;
        esac
        shift 2 ;;
    *) bad "unknown argument '$1'" ;;
    esac
done

# ---- argument checks (all before anything is built or run) ----
isnum() { [[ $1 =~ ^[1-9][0-9]*$ ]]; }
isnum "$THREADS" || bad "--threads must be a positive integer (got '$THREADS')"
isnum "$ROUNDS" || bad "--rounds must be a positive integer (got '$ROUNDS')"
isnum "$REPS" && [ "$REPS" -le 100 ] || bad "--reps must be 1..100 (got '$REPS')"
[ -n "$BLOB" ] || bad "--blob is required"
[ -f "$BLOB" ] || die "blob '$BLOB' not found (make synth builds build/synth/r1-1.5b-nf4.blob)"
[ -n "$LB$GGUFS$BERT" ] || [ -n "$OLD" ] || bad "nothing to compare with: give --llama-bench with --gguf, and/or --old-tree"
if [ -n "$GGUFS$BERT" ] && [ -z "$LB" ]; then bad "--gguf/--bert-gguf need --llama-bench"; fi
if [ -n "$LB" ] && [ -z "$GGUFS$BERT" ]; then bad "--llama-bench needs --gguf and/or --bert-gguf"; fi
if [ -n "$LB" ]; then
    [ -e "$LB" ] || die "llama-bench '$LB' not found"
    [ -f "$LB" ] && [ -x "$LB" ] || die "llama-bench '$LB' is not an executable file"
fi
IFS=, read -r -a GGUF_LIST <<<"$GGUFS"
for g in "${GGUF_LIST[@]}" ${BERT:+"$BERT"}; do
    [ -f "$g" ] || die "GGUF '$g' not found"
done
if [ -n "$OLD" ]; then
    [ -d "$OLD" ] || die "--old-tree '$OLD' is not a folder"
    # a tree of either layout: src/qwen2.h (before the folders were layers) or src/engine/qwen2.h
    [ -f "$OLD/Makefile" ] && { [ -f "$OLD/src/qwen2.h" ] || [ -f "$OLD/src/engine/qwen2.h" ]; } ||
        die "--old-tree '$OLD' is not a recall tree (no Makefile/src/engine/qwen2.h or src/qwen2.h)"
    OLD=$(cd "$OLD" && pwd)
fi
if [ -n "$RBIN" ]; then [ -x "$RBIN" ] || die "--recall-bin '$RBIN' is not executable"; fi
if [ -n "$LOCK" ]; then command -v flock >/dev/null || die "--lock needs flock (util-linux)"; fi
IFS=, read -r -a NUM_LIST <<<"$NUMERICS"
[ ${#NUM_LIST[@]} -ge 1 ] || bad "--numerics needs exact and/or q8"
for n in "${NUM_LIST[@]}"; do
    case "$n" in exact | q8) ;; *) bad "--numerics: '$n' is not exact or q8" ;; esac
done
if [ -n "$SIMD" ]; then
    case "$SIMD" in scalar | avx2 | avx512 | neon) ;; *) bad "--simd must be scalar|avx2|avx512|neon" ;; esac
fi

# ---- the engines: name|kind|binary|file ----
ENGINES=()
RECALL_BIN=${RBIN:-$ROOT/build/bench_sbs}
for n in "${NUM_LIST[@]}"; do
    if [ "$n" = exact ]; then ENGINES+=("recall|recall|$RECALL_BIN|$BLOB"); else ENGINES+=("recall-$n|recall|$RECALL_BIN|$BLOB"); fi
done
[ -z "$OLD" ] || ENGINES+=("old|recall|$OLD/build-sbs/bench_sbs|$BLOB")
for g in "${GGUF_LIST[@]}"; do ENGINES+=("$(basename "$g" .gguf)|llama|$LB|$g"); done
[ -z "$BERT" ] || ENGINES+=("$(basename "$BERT" .gguf)|llama-bert|$LB|$BERT")

cmd_for() { # engine entry -> the timed command line (array in CMD)
    local name kind bin file
    IFS='|' read -r name kind bin file <<<"$1"
    case "$kind" in
    recall) CMD=("$bin" "$file" --threads "$THREADS" --reps "$REPS" --tag "$name" ${SIMD:+--simd "$SIMD"} $SCREEN)
        case "$name" in recall-*) CMD+=(--numerics "${name#recall-}") ;; esac ;;
    llama) CMD=("$bin" -m "$file" -p 512 -n 64 -pg 512,64 -t "$THREADS" -r "$REPS" -mmp 0 -o jsonl) ;;
    llama-bert) CMD=("$bin" -m "$file" -embd 1 -p 128 -n 0 -t "$THREADS" -r "$REPS" -mmp 0 -o jsonl) ;;
    esac
    if [ -n "$LOCK" ]; then CMD=(flock "$LOCK" "${CMD[@]}"); fi
}

OLD_CC=${CC:-cc}
OLD_BUILD=(make -C "$OLD" -j2 BUILD=build-sbs build-sbs/librecall.a)
OLD_LINK=("$OLD_CC" -std=c11 -O2 -ffp-contract=off -fno-fast-math -D_POSIX_C_SOURCE=200809L -D_DEFAULT_SOURCE
    -I"$OLD/src" -I"$OLD/src/formats" -I"$OLD/simd" -I"$OLD/src/engine" -I"$OLD/weights"
    -o "$OLD/build-sbs/bench_sbs" "$ROOT/bench/bench_sbs.c"
    "$OLD/build-sbs/librecall.a" -lm -lpthread)

if [ "$DRY" = 1 ]; then
    echo "dry run: threads $THREADS, rounds $ROUNDS, reps $REPS"
    [ -n "$RBIN" ] || echo "build: make -C $ROOT build/bench_sbs"
    if [ -n "$OLD" ]; then echo "build: ${OLD_BUILD[*]}"; echo "build: ${OLD_LINK[*]}"; fi
    for r in $(seq 1 "$ROUNDS"); do
        order=("${ENGINES[@]}")
        if [ $((r % 2)) = 0 ]; then
            order=(); for ((i = ${#ENGINES[@]} - 1; i >= 0; i--)); do order+=("${ENGINES[$i]}"); done
        fi
        for e in "${order[@]}"; do cmd_for "$e"; echo "round $r ${e%%|*}: ${CMD[*]}"; done
    done
    exit 0
fi

# ---- build recall's side (this tree, and the old tree's library) ----
if [ -z "$RBIN" ]; then
    make -s -C "$ROOT" build/bench_sbs >&2 || die "building $ROOT/build/bench_sbs failed"
fi
if [ -n "$OLD" ]; then
    echo "side_by_side: building the old tree's library: ${OLD_BUILD[*]}" >&2
    "${OLD_BUILD[@]}" >&2 || die "building the old tree's library failed (${OLD_BUILD[*]})"
    "${OLD_LINK[@]}" >&2 || die "compiling bench/bench_sbs.c against the old tree failed (its API differs?)"
fi

if [ -n "$RAW" ]; then mkdir -p "$RAW"; else RAW=$(mktemp -d); trap 'rm -rf "$RAW"' EXIT; fi

# ---- host ----
cpu_field() { grep -m1 "^$1[[:space:]]*:" /proc/cpuinfo 2>/dev/null | sed 's/^[^:]*: *//' || true; }
CPU=$(cpu_field "model name"); CPU=${CPU:-$(uname -m)}
echo "host    : $CPU (cpu family $(cpu_field "cpu family"), model $(cpu_field "model")), $(nproc 2>/dev/null || echo ?) logical CPUs, $(uname -sr)"
echo "threads : $THREADS; rounds $ROUNDS; reps $REPS per test; recall ${SIMD:-best simd path}; llama-bench -mmp 0; recall blob in huge-page-advised memory"
echo "recall  : $RECALL_BIN on $BLOB (tree $ROOT$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null | sed 's/^/ at /'))"
[ -z "$OLD" ] || echo "old     : $OLD/build-sbs/bench_sbs (tree $OLD$(git -C "$OLD" rev-parse --short HEAD 2>/dev/null | sed 's/^/ at /'))"
[ -z "$LB" ] || echo "llama   : $LB; ${GGUFS}${BERT:+ bert $BERT}"

# ---- pre-flight: every engine loads its file (untimed, short) ----
for e in "${ENGINES[@]}"; do
    IFS='|' read -r name kind bin file <<<"$e"
    case "$kind" in
    recall) out=$("$bin" "$file" --tests none --mmap 2>&1) || die "$name: $bin could not open $file: $out" ;;
    llama) probe=(-p 0 -n 1) ;;
    llama-bert) probe=(-embd 1 -p 8 -n 0) ;;
    esac
    if [ "$kind" != recall ]; then
        out=$("$bin" -m "$file" "${probe[@]}" -r 1 -t 1 -o jsonl 2>&1) ||
            die "$name: llama-bench could not load $file: $(echo "$out" | grep -i -m3 'error\|failed' || echo "$out" | tail -3)"
    fi
done

# ---- rounds ----
# parse JSONL -> "metric tok/s sd" lines (llama-bench: by n_prompt/n_gen; recall: its test field)
parse() {
    awk '
    function num(k,   m) { if (match($0, "\"" k "\": *[-0-9.eE+]+")) { m = substr($0, RSTART, RLENGTH); sub(/.*: */, "", m); return m + 0 } return "" }
    function str(k,   m) { if (match($0, "\"" k "\": *\"[^\"]*\"")) { m = substr($0, RSTART, RLENGTH); sub(/.*: *"/, "", m); sub(/"$/, "", m); return m } return "" }
    /^\{/ {
        t = str("test"); np = num("n_prompt"); ng = num("n_gen")
        if (t != "") { printf "%s %.4f %.4f\n", t, num("avg_ts"), num("stddev_ts"); next }
        if (np == 512 && ng == 0)  { ppn = num("avg_ns"); pps = num("stddev_ns"); printf "pp512 %.4f %.4f\n", num("avg_ts"), num("stddev_ts") }
        if (np == 0 && ng == 64)   printf "tg64 %.4f %.4f\n", num("avg_ts"), num("stddev_ts")
        if (np == 512 && ng == 64) { pgn = num("avg_ns"); pgs = num("stddev_ns") }
        if (np == 128 && ng == 0)  printf "bge128 %.4f %.4f\n", num("avg_ts"), num("stddev_ts")
    }
    END {
        if (ppn != "" && pgn != "") {
            d = pgn - ppn
            if (d <= 0) { print "bad-derivation 0 0"; exit }  # a stall in the -p 512 run: no tg64@512 this round
            printf "tg64@512 %.4f %.4f\n", 64e9 / d, 64e9 * sqrt(pgs * pgs + pps * pps) / (d * d)
        }
    }' "$1"
}

RESULTS=$RAW/results.txt
: >"$RESULTS"
echo
echo "raw runs (tok/s, mean ± sd over $REPS reps; llama.cpp tg64@512 derived from pg512+64 - pp512):"
printf '%-5s %-22s %-18s %-18s %-18s %-18s %s\n' round engine pp512 tg64 tg64@512 bge128 "loadavg before"
for r in $(seq 1 "$ROUNDS"); do
    order=("${ENGINES[@]}")
    if [ $((r % 2)) = 0 ]; then
        order=(); for ((i = ${#ENGINES[@]} - 1; i >= 0; i--)); do order+=("${ENGINES[$i]}"); done
    fi
    for e in "${order[@]}"; do
        IFS='|' read -r name kind bin file <<<"$e"
        cmd_for "$e"
        load=$(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo "?")
        raw="$RAW/round$r-$name.jsonl"
        echo "# ${CMD[*]}" >"$raw.cmd"
        if ! "${CMD[@]}" >"$raw" 2>"$raw.err"; then
            tail -5 "$raw.err" >&2
            die "round $r: $name failed: ${CMD[*]}"
        fi
        parse "$raw" >"$raw.parsed"
        if grep -q '^bad-derivation' "$raw.parsed"; then
            echo "side_by_side: round $r: $name: pg512+64 took no longer than pp512 (a stall in its -p 512 run): no tg64@512 this round; raw: $raw" >&2
            sed -i '/^bad-derivation/d' "$raw.parsed"
        fi
        want="pp512 tg64 tg64@512"
        [ "$kind" != llama ] || want="pp512 tg64"
        [ "$kind" != llama-bert ] || want="bge128"
        for m in $want; do
            grep -q "^$m " "$raw.parsed" || die "round $r: $name printed no $m result (raw output: $raw)"
        done
        cells=()
        for m in pp512 tg64 tg64@512 bge128; do
            cells+=("$(awk -v m="$m" '$1 == m { printf "%.2f ± %.2f", $2, $3; f = 1 } END { if (!f) printf "-" }' "$raw.parsed")")
        done
        printf '%-5s %-22s %-18s %-18s %-18s %-18s %s\n' "$r" "$name" "${cells[@]}" "$load"
        awk -v r="$r" -v e="$name" '{ print r, e, $1, $2 }' "$raw.parsed" >>"$RESULTS"
    done
done

# ---- table: medians over rounds (min-max), ratios recall / other computed per round ----
echo
echo "medians over $ROUNDS round(s), tok/s [min-max]; ratio = recall / other per round (> 1: recall faster):"
names="" rnames=""
for e in "${ENGINES[@]}"; do
    names="$names ${e%%|*}"
    case "${e%%|*}" in recall | recall-*) rnames="$rnames ${e%%|*}" ;; esac
done
awk -v names="$names" -v rnames="$rnames" -v rounds="$ROUNDS" '
function med(a, n,   i, j, t) {
    for (i = 2; i <= n; i++) { t = a[i]; for (j = i - 1; j >= 1 && a[j] > t; j--) a[j + 1] = a[j]; a[j + 1] = t }
    return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
function cell(key, fmt,   n, r, a, m) {
    n = 0
    for (r = 1; r <= rounds; r++) if ((key, r) in v) a[++n] = v[key, r]
    if (n == 0) return "-"
    m = med(a, n)  # sorts a
    return sprintf(fmt " [" fmt "-" fmt "]", m, a[1], a[n])
}
{ v[$2 SUBSEP $3, $1] = $4 }
END {
    ne = split(names, en, " "); nr = split(rnames, rn, " ")
    hdr = "| test |"; sep = "|---|"
    for (i = 1; i <= ne; i++) { hdr = hdr " " en[i] " |"; sep = sep "---|" }
    for (q = 1; q <= nr; q++)
        for (i = 1; i <= ne; i++) if (en[i] != rn[q] && !(q > 1 && en[i] ~ /^recall/)) { hdr = hdr " " rn[q] "/" en[i] " |"; sep = sep "---|" }
    print hdr; print sep
    nm = split("pp512 tg64 tg64@512 bge128", ms, " ")
    for (k = 1; k <= nm; k++) {
        m = ms[k]; line = "| " m " |"; any = 0
        for (i = 1; i <= ne; i++) { c = cell(en[i] SUBSEP m, "%.2f"); if (c != "-") any = 1; line = line " " c " |" }
        if (!any) continue
        for (q = 1; q <= nr; q++)
            for (i = 1; i <= ne; i++) {
                if (en[i] == rn[q] || (q > 1 && en[i] ~ /^recall/)) continue
                for (r = 1; r <= rounds; r++)
                    if (((rn[q] SUBSEP m), r) in v && ((en[i] SUBSEP m), r) in v && v[en[i] SUBSEP m, r] > 0)
                        v["ratio" q "/" i SUBSEP m, r] = v[rn[q] SUBSEP m, r] / v[en[i] SUBSEP m, r]
                line = line " " cell("ratio" q "/" i SUBSEP m, "%.3f") " |"
            }
        print line
    }
}' "$RESULTS"

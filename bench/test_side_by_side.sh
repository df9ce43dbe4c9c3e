#!/usr/bin/env bash
# test_side_by_side.sh - checks bench/side_by_side.sh without llama.cpp (`make test-sbs`, part of
# `make test`): syntax, --help, the argument errors (each must exit non-zero naming the problem),
# --dry-run's plan, and a whole run with two fake engines whose numbers are known, so the parser,
# the llama.cpp decode-from-512 derivation, the medians, ranges and ratios are checked exactly.
set -u
cd "$(dirname "${BASH_SOURCE[0]}")/.."
S=bench/side_by_side.sh
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fails=0
ok() { echo "ok   $1"; }
no() { echo "FAIL $1"; fails=$((fails + 1)); }
# expect NAME STATUS PATTERN -- ARGS: runs the script, checks its exit status and that the
# output (stdout + stderr) holds PATTERN (a fixed string)
expect() {
    local name=$1 want=$2 pat=$3
    shift 4
    out=$("$S" "$@" 2>&1)
    local got=$?
    if [ "$got" != "$want" ]; then no "$name: exit $got, wanted $want; output: $out"; return; fi
    if ! grep -qF -- "$pat" <<<"$out"; then no "$name: no '$pat' in: $out"; return; fi
    ok "$name"
}

bash -n "$S" && ok "bash -n" || no "bash -n"

# fake engines: llama-bench answers with fixed timings (pp512 10 s, tg64 2 s, pg512+64 14 s:
# 51.2, 32 and 64/(14-10) = 16 tok/s); recall's bench_sbs with 25.6 / 16 / 8 tok/s in its first
# run and twice that in its second (a counter in $T), so the two rounds differ.
cat >"$T/llama-bench" <<'EOF'
#!/usr/bin/env bash
case " $* " in *" -m "*bad.gguf*) echo "llama_model_load: error loading model"; echo "main: error: failed to load model 'bad.gguf'" >&2; exit 1 ;; esac
case " $* " in *" -m "*stall.gguf*" -pg "*) # its -p 512 run stalled: pg512+64 (9 s) below pp512 (10 s)
    echo '{"n_prompt": 512, "n_gen": 0, "avg_ns": 10000000000, "stddev_ns": 0, "avg_ts": 51.2, "stddev_ts": 0}'
    echo '{"n_prompt": 0, "n_gen": 64, "avg_ns": 2000000000, "stddev_ns": 0, "avg_ts": 32.0, "stddev_ts": 0}'
    echo '{"n_prompt": 512, "n_gen": 64, "avg_ns": 9000000000, "stddev_ns": 0, "avg_ts": 64.0, "stddev_ts": 0}'; exit 0 ;; esac
case " $* " in *" -p 0 -n 1 "*) echo '{"n_prompt": 0, "n_gen": 1, "avg_ns": 1000, "stddev_ns": 0, "avg_ts": 1.0, "stddev_ts": 0}'; exit 0 ;; esac
echo '{"build_commit": "fake", "n_threads": 2, "n_prompt": 512, "n_gen": 0, "avg_ns": 10000000000, "stddev_ns": 0, "avg_ts": 51.200000, "stddev_ts": 0.500000, "samples_ns": [ 1 ]}'
echo '{"build_commit": "fake", "n_threads": 2, "n_prompt": 0, "n_gen": 64, "avg_ns": 2000000000, "stddev_ns": 0, "avg_ts": 32.000000, "stddev_ts": 0.250000, "samples_ns": [ 1 ]}'
echo '{"build_commit": "fake", "n_threads": 2, "n_prompt": 512, "n_gen": 64, "avg_ns": 14000000000, "stddev_ns": 0, "avg_ts": 41.142857, "stddev_ts": 0.000000, "samples_ns": [ 1 ]}'
EOF
cat >"$T/bench_sbs" <<EOF
#!/usr/bin/env bash
case " \$* " in *" --tests none "*) exit 0 ;; esac
n=\$(cat "$T/count" 2>/dev/null || echo 0); n=\$((n + 1)); echo \$n >"$T/count"
f=\$n
echo "{\"engine\": \"recall\", \"test\": \"pp512\", \"avg_ts\": \$((256 * f))e-1, \"stddev_ts\": 0.1, \"samples_ns\": [ 1 ]}"
echo "{\"engine\": \"recall\", \"test\": \"tg64\", \"avg_ts\": \$((16 * f)), \"stddev_ts\": 0.1, \"samples_ns\": [ 1 ]}"
echo "{\"engine\": \"recall\", \"test\": \"tg64@512\", \"avg_ts\": \$((8 * f)), \"stddev_ts\": 0.1, \"samples_ns\": [ 1 ]}"
EOF
chmod +x "$T/llama-bench" "$T/bench_sbs"
: >"$T/model.blob"
: >"$T/q4.gguf"
: >"$T/bad.gguf"
B=(--blob "$T/model.blob" --recall-bin "$T/bench_sbs")

expect "--help" 0 "--old-tree DIR" -- --help
expect "no blob" 2 "--blob is required" -- --llama-bench "$T/llama-bench" --gguf "$T/q4.gguf"
expect "missing blob" 1 "blob '$T/nope.blob' not found" -- --blob "$T/nope.blob" --old-tree .
expect "nothing to compare" 2 "nothing to compare with" -- "${B[@]}"
expect "missing llama-bench" 1 "llama-bench '$T/nope' not found" -- "${B[@]}" --llama-bench "$T/nope" --gguf "$T/q4.gguf"
expect "llama-bench not executable" 1 "is not an executable file" -- "${B[@]}" --llama-bench "$T/q4.gguf" --gguf "$T/q4.gguf"
expect "missing gguf" 1 "GGUF '$T/none.gguf' not found" -- "${B[@]}" --llama-bench "$T/llama-bench" --gguf "$T/q4.gguf,$T/none.gguf"
expect "gguf without llama-bench" 2 "need --llama-bench" -- "${B[@]}" --gguf "$T/q4.gguf"
expect "bad threads" 2 "--threads must be a positive integer" -- "${B[@]}" --old-tree . --threads 0
expect "bad rounds" 2 "--rounds must be a positive integer" -- "${B[@]}" --old-tree . --rounds x
expect "bad simd" 2 "--simd must be" -- "${B[@]}" --old-tree . --simd sse9
expect "old tree not a tree" 1 "is not a recall tree" -- "${B[@]}" --old-tree "$T"
expect "unknown argument" 2 "unknown argument '--frobnicate'" -- "${B[@]}" --frobnicate
expect "gguf fails to load" 1 "could not load $T/bad.gguf" -- "${B[@]}" --llama-bench "$T/llama-bench" --gguf "$T/bad.gguf"
expect "dry run: lock and order" 0 "round 2 recall: flock $T/lock $T/bench_sbs" -- "${B[@]}" --llama-bench "$T/llama-bench" \
    --gguf "$T/q4.gguf" --old-tree . --rounds 2 --dry-run --lock "$T/lock"
# round 2 runs the engines in reverse order: q4 first, recall last
plan=$("$S" "${B[@]}" --llama-bench "$T/llama-bench" --gguf "$T/q4.gguf" --old-tree . --rounds 2 --dry-run 2>&1)
order=$(grep '^round' <<<"$plan" | awk '{ print $2 $3 }' | tr '\n' ' ')
[ "$order" = "1recall: 1old: 1q4: 2q4: 2old: 2recall: " ] && ok "dry run: order $order" || no "dry run order: $order"
grep -qF "make -C $(pwd) -j2 BUILD=build-sbs build-sbs/librecall.a" <<<"$plan" && ok "dry run: old tree build" ||
    no "dry run: old tree build line missing: $plan"
[ ! -e "$T/count" ] && ok "dry run ran nothing" || no "dry run ran an engine"

# a whole run: recall 25.6/16/8 then 51.2/32/16; llama 51.2/32/16 both rounds
out=$("$S" "${B[@]}" --llama-bench "$T/llama-bench" --gguf "$T/q4.gguf" --rounds 2 --reps 2 --raw "$T/raw" 2>&1)
st=$?
[ $st = 0 ] && ok "fake run exits 0" || no "fake run exit $st: $out"
want_rows=(
    "| test | recall | q4 | recall/q4 |"
    "| pp512 | 38.40 [25.60-51.20] | 51.20 [51.20-51.20] | 0.750 [0.500-1.000] |"
    "| tg64 | 24.00 [16.00-32.00] | 32.00 [32.00-32.00] | 0.750 [0.500-1.000] |"
    "| tg64@512 | 12.00 [8.00-16.00] | 16.00 [16.00-16.00] | 0.750 [0.500-1.000] |"
)
for row in "${want_rows[@]}"; do
    grep -qxF -- "$row" <<<"$out" && ok "table: $row" || no "table row missing: $row
$out"
done
grep -q "bge128 |" <<<"$out" && no "bge128 row without a BERT GGUF" || ok "no bge128 row without a BERT GGUF"
grep -qE '^1 +q4 +51\.20 ± 0\.50 +32\.00 ± 0\.25 +16\.00 ± 0\.00' <<<"$out" && ok "raw row of llama (derived tg64@512)" ||
    no "raw llama row: $out"
grep -q "^host    : " <<<"$out" && ok "host line" || no "no host line: $out"
[ -f "$T/raw/round2-q4.jsonl" ] && ok "--raw keeps the jsonl" || no "--raw: no round2-q4.jsonl"

: >"$T/stall.gguf"
rm -f "$T/count"
out=$("$S" "${B[@]}" --llama-bench "$T/llama-bench" --gguf "$T/stall.gguf" --rounds 1 --reps 1 2>&1)
st=$?
[ $st = 0 ] && grep -qF "no tg64@512 this round" <<<"$out" && grep -qxF "| tg64@512 | 8.00 [8.00-8.00] | - | - |" <<<"$out" &&
    ok "a stalled pp512 leaves tg64@512 out of that round" || no "stalled pp512 (exit $st): $out"

# two recall engines (exact and q8): q8's runs carry --numerics q8 and --lm-screen; the ratio columns
# put every recall engine against llama, and exact against q8 (the fake's counter runs on: recall
# 25.6/16/8, recall-q8 51.2/32/16)
expect "bad numerics" 2 "--numerics: 'q4' is not exact or q8" -- "${B[@]}" --old-tree . --numerics exact,q4
plan=$("$S" "${B[@]}" --llama-bench "$T/llama-bench" --gguf "$T/q4.gguf" --numerics exact,q8 --lm-screen --dry-run 2>&1)
grep -qF "round 1 recall-q8: $T/bench_sbs $T/model.blob --threads 2 --reps 3 --tag recall-q8 --lm-screen --numerics q8" \
    <<<"$plan" && ok "dry run: the q8 engine's command" || no "dry run q8 engine: $plan"
rm -f "$T/count"
out=$("$S" "${B[@]}" --llama-bench "$T/llama-bench" --gguf "$T/q4.gguf" --numerics exact,q8 --rounds 1 --reps 1 2>&1)
row="| pp512 | 25.60 [25.60-25.60] | 51.20 [51.20-51.20] | 51.20 [51.20-51.20] | 0.500 [0.500-0.500] | 0.500 [0.500-0.500] | 1.000 [1.000-1.000] |"
grep -qxF "| test | recall | recall-q8 | q4 | recall/recall-q8 | recall/q4 | recall-q8/q4 |" <<<"$out" && grep -qxF "$row" <<<"$out" &&
    ok "table with exact and q8 engines" || no "table with exact and q8 engines: $out"

echo "test_side_by_side: $fails failure(s)"
[ "$fails" = 0 ]

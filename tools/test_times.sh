#!/bin/sh
# test_times.sh - where `make test`'s time goes: every Criterion suite run on its own under
# /usr/bin/time (wall, user, sys; the suite's forked test processes included) with Criterion's
# per-test wall times (--verbose: "[PASS] suite::test: (12.34s)"), then two sorted summaries.
#
# usage: tools/test_times.sh RUN_TESTS OUTDIR [criterion options, e.g. -j2]
# Run from the repository root after `make recall build/run_tests`. Fixture blobs are converted
# by the first suite that needs them (remove build/fixture_*.blob first to time a fresh run).
set -eu
RT=$1 OUT=$2
shift 2
mkdir -p "$OUT"
: >"$OUT/suites.tsv"
for s in $("$RT" --list | sed -n 's/^\([A-Za-z0-9_]*\): [0-9]* tests*$/\1/p'); do
    /usr/bin/time -f "%e %U %S" -o "$OUT/$s.time" "$RT" --filter "$s/*" --verbose "$@" \
        >"$OUT/$s.log" 2>&1 || echo "FAIL $s" >>"$OUT/failures"
    printf '%s\t%s\n' "$s" "$(cat "$OUT/$s.time")" >>"$OUT/suites.tsv"
done
# suite, wall, user, sys sorted by user + sys
awk -F'\t' '{split($2, t, " "); printf "%-22s %8.1f s wall %8.1f s cpu\n", $1, t[1], t[2] + t[3]}' "$OUT/suites.tsv" |
    sort -k5 -n -r >"$OUT/suites.sorted"
# every test's wall time as Criterion reports it, slowest first
cat "$OUT"/*.log | sed -n 's/^\[\(PASS\|FAIL\)\] \([^:]*\)::\([^:]*\): (\([0-9.]*\)s)$/\4 \2\/\3/p' |
    sort -n -r >"$OUT/tests.sorted"
cat "$OUT/suites.sorted"

#!/usr/bin/env bash
# slurm_check.sh - tools/slurm/ against a real Slurm (make test-slurm, part of make test-full).
#
# usage: tests/slurm_check.sh RECALL BLOB
#
# Starts a one-node cluster on this machine (tools/slurm/local_cluster.sh: munged, slurmctld and
# slurmd on loopback, everything in a temporary folder) and submits through tools/slurm/submit.sh an
# eval of worldA (problems 0-2 x arms SP, RC_bge@-3:r-30: 6 jobs) as an array of 4 shards, one CPU
# each. While shard 1/4 runs, its recall gets SIGKILL: the task must requeue itself, leave nothing
# under the shard's final name, and write, when it runs again, the shard file an undisturbed
# `recall eval --shard 1/4` writes; the merge job (afterok) must then write the table and JSON of
# one unsharded `recall eval` run, byte for byte once the per-problem "seconds" are blanked.
# progress.sh must count 4 shards and 6 jobs done. A task run a second time must not run its shard
# again, and the merge still takes each shard once. Then merge.sh must refuse, naming them, a
# deleted shard (with the array task that should have written it) and a shard of another run (in
# the shard's place, and beside the run's own). Every daemon it started is stopped, also on failure
# (then the daemons' and the tasks' logs are printed).
set -eu
if [ $# -ne 2 ]; then
    echo "usage: $0 RECALL BLOB" >&2
    exit 2
fi
RECALL=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
BLOB=$2
BENCH=tests/golden/recall_bench.json
# shellcheck disable=SC2054 # the commas are the arm list's
EVAL=(--bench "$BENCH" --problems 0-2 --arms SP,RC_bge@-3:r-30)
T0=$(date +%s)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/slurm_check.XXXXXX")
run=$tmp/run
ok=0
cleanup() {
    sh tools/slurm/local_cluster.sh stop "$tmp/cluster" || true
    if [ $ok = 0 ]; then
        for f in "$tmp"/cluster/*.log "$run"/logs/*.log; do
            [ -e "$f" ] || continue
            echo "---- $f (last 40 lines)"
            tail -40 "$f"
        done
        echo "slurm_check: FAILED (kept $tmp)"
    else
        rm -rf "$tmp"
    fi
}
trap cleanup EXIT
trap 'exit 1' INT TERM
fail() { echo "slurm_check: $*" >&2; exit 1; }
# wait_for SECONDS WHAT COMMAND...: polls COMMAND every 0.2 s until it succeeds.
wait_for() {
    local limit=$1 what=$2 i=0
    shift 2
    until "$@"; do
        i=$((i + 1))
        [ $i -lt $((limit * 5)) ] || fail "timed out after $limit s waiting for $what"
        sleep 0.2
    done
}
blank() { sed 's/"seconds": [0-9.]*/"seconds": _/g' "$1"; }
same_doc() { # same_doc A B WHAT
    cmp -s <(blank "$1") <(blank "$2") || { diff <(blank "$1") <(blank "$2") | head -20; fail "$3: $1 differs from $2"; }
}

[ "$(id -u)" = 0 ] || fail "needs root: slurmd starts the jobs (as root: make test-slurm)"
eval "$(sh tools/slurm/local_cluster.sh start "$tmp/cluster" 2)"
echo "slurm_check: cluster up in $(($(date +%s) - T0)) s ($(slurmd -V))"
# shellcheck source=tools/slurm/lib.sh
. tools/slurm/lib.sh

tools/slurm/submit.sh --shards 4 --results "$run" --cpus-per-task 1 --recall "$RECALL" "$BLOB" "${EVAL[@]}"
load_run "$run"
shard1="$run/shard-1-of-4.json"

# SIGKILL shard 1's recall once it is computing (its OUT.tmp.PID is open).
recall_pid() { pgrep -f -- "--json $shard1\$" | head -1; }
recall_running() { pid=$(recall_pid) && [ -n "$pid" ] && [ -e "$shard1.tmp.$pid" ]; }
wait_for 120 "shard 1's recall to start and open its temporary file" recall_running
sleep 1
kill -0 "$pid" 2>/dev/null || fail "shard 1's recall ended before it could be killed (the test's world is too small)"
kill -KILL "$pid"
echo "slurm_check: SIGKILL to shard 1/4's recall (pid $pid) at $(($(date +%s) - T0)) s"
task_log=$run/logs/task-0.log
wait_for 60 "task ${ARRAY_JOB}_0 to requeue itself" grep -q ': requeued$' "$task_log"
[ ! -e "$shard1" ] || fail "$shard1 exists after its recall was killed"
requeued() { [ "$(squeue -h -j "${ARRAY_JOB}_0" -o %T 2>/dev/null)" = PENDING ]; }
wait_for 60 "task ${ARRAY_JOB}_0 to be pending again" requeued
scontrol show job "${ARRAY_JOB}_0" | grep -q 'Restarts=1' || fail "task ${ARRAY_JOB}_0 was not requeued"
# Slurm holds a requeued job back for a while (its BeginTime); released now to keep the test short.
scontrol update jobid="${ARRAY_JOB}_0" StartTime=now

# Meanwhile, the references: one unsharded run and an undisturbed shard 1/4.
"$RECALL" eval "$BLOB" "${EVAL[@]}" --threads 1 --json "$tmp/whole.json" >"$tmp/whole.txt" 2>/dev/null
"$RECALL" eval "$BLOB" "${EVAL[@]}" --threads 1 --shard 1/4 --json "$tmp/shard1.json" >/dev/null 2>&1

merged() { [ -s "$run/merged.json" ] || { slurm_states; case $MERGE_STATE in PENDING* | RUNNING* | COMPLETING* | CONFIGURING*) return 1 ;; *) fail "merge job $MERGE_JOB: $MERGE_STATE" ;; esac; }; }
wait_for 600 "the merge job" merged
echo "slurm_check: merged at $(($(date +%s) - T0)) s"
grep -q 'restart 1, .*: done: wrote' "$task_log" || fail "task ${ARRAY_JOB}_0's rerun did not write its shard ($task_log)"
same_doc "$shard1" "$tmp/shard1.json" "the killed and requeued shard 1/4"
same_doc "$run/merged.json" "$tmp/whole.json" "the merged run"
cmp -s "$run/merged.txt" "$tmp/whole.txt" || { diff "$run/merged.txt" "$tmp/whole.txt"; fail "merged.txt is not the unsharded table"; }
ls "$run"/shard-1-of-4.json.tmp.* >/dev/null 2>&1 && fail "the killed run's temporary file was left"
p=$(tools/slurm/progress.sh "$run")
echo "$p"
case $p in *"shards: 4 done, 0 running, 0 failed, 0 pending"*"jobs: 6 of 6 done"*) ;; *) fail "progress.sh: not 4 shards and 6 jobs done" ;; esac
echo "slurm_check: killed shard 1/4 requeued; its file and the merged JSON equal the undisturbed runs' (seconds aside)"

# A task that runs again finds its shard written and does not run it twice.
scontrol requeue "${ARRAY_JOB}_1"
scontrol update jobid="${ARRAY_JOB}_1" StartTime=now
wait_for 120 "task ${ARRAY_JOB}_1's second run" grep -q 'is already written (not run again)' "$run/logs/task-1.log"
tools/slurm/merge.sh "$run" >"$tmp/merge2.txt" 2>&1 || { cat "$tmp/merge2.txt"; fail "merge.sh after a task ran twice"; }
same_doc "$run/merged.json" "$tmp/whole.json" "the merge after a task ran twice"
echo "slurm_check: a task run twice wrote its shard once; the merge is unchanged"

# refused: merge.sh exit 2, one line naming what is wrong
refused() { # refused WHAT PATTERN...
    local what=$1 out st=0
    shift
    out=$(tools/slurm/merge.sh "$run" 2>&1 >/dev/null) || st=$?
    [ $st = 2 ] || fail "$what: merge.sh exit $st, not 2: $out"
    for p in "$@"; do case $out in *"$p"*) ;; *) fail "$what: '$p' not in: $out" ;; esac; done
    echo "slurm_check: $what refused: $(echo "$out" | head -1)"
}
rm -f "$run/merged.json"
mv "$run/shard-3-of-4.json" "$tmp/shard3.json"
refused "a deleted shard" "shard 3/4 is missing" "array task ${ARRAY_JOB}_2 should have written $run/shard-3-of-4.json"
[ ! -e "$run/merged.json" ] || fail "merged.json written with a shard missing"
# another run's shard (problem 0 alone; shard 3/4 of it holds no job, so it costs nothing)
"$RECALL" eval "$BLOB" --bench "$BENCH" --problems 0 --arms SP,RC_bge@-3:r-30 --shard 3/4 --threads 1 \
    --json "$run/shard-3-of-4.json" >/dev/null 2>&1
refused "another run's shard in the shard's place" "$run/shard-3-of-4.json" "not the same run"
mv "$run/shard-3-of-4.json" "$run/shard-3-of-8.json"
mv "$tmp/shard3.json" "$run/shard-3-of-4.json"
refused "another run's shard beside the run's" "$run/shard-3-of-8.json" "not the same run"
[ ! -e "$run/merged.json" ] || fail "merged.json written from a foreign shard"
rm "$run/shard-3-of-8.json"
tools/slurm/merge.sh "$run" >/dev/null 2>&1 || fail "merge.sh with the run's own shards back"

ok=1
echo "slurm_check: passed in $(($(date +%s) - T0)) s"

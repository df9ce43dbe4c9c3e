#!/usr/bin/env bash
# task.sh - one array task of a tools/slurm/submit.sh run: shard SLURM_ARRAY_TASK_ID+1 of the run
# in RECALL_SLURM_DIR. Writes DIR/shard-K-of-N.json through recall's own OUT.tmp.PID-then-rename,
# so the final name only ever holds a whole shard. A task that finds that file already written
# for shard K/N (it ran before: requeued after it finished, or run twice) does nothing. When
# recall dies of a signal (SIGKILL, the OOM killer, a node going away under it), the task asks
# Slurm to requeue it (up to MAX_REQUEUE times), which keeps the merge job's afterok dependency
# alive; the rerun starts the shard from scratch and writes the same file.
set -eu
dir=${RECALL_SLURM_DIR:?task.sh: RECALL_SLURM_DIR is not set (submit.sh sets it)}
: "${SLURM_ARRAY_TASK_ID:?task.sh: not a Slurm array task (submit.sh submits it)}"
# shellcheck source=/dev/null
. "$dir/run.env"
k=$((SLURM_ARRAY_TASK_ID + 1)) n=$SHARDS
out="$dir/shard-$k-of-$n.json"
task="${SLURM_ARRAY_JOB_ID:-?}_$SLURM_ARRAY_TASK_ID"
say() { echo "task.sh $(date -u +%FT%TZ) task $task (shard $k/$n, restart ${SLURM_RESTART_COUNT:-0}, $(hostname -s)): $*"; }
if [ -s "$out" ] && grep -q "\"shard\": {\"k\": $k, \"n\": $n," "$out"; then
    say "done: $out is already written (not run again)"
    exit 0
fi
# A requeued task's earlier instance has ended (Slurm requeues a task once it is gone): its
# half-written OUT.tmp.PID, if recall was killed, is litter.
if [ "${SLURM_RESTART_COUNT:-0}" -gt 0 ]; then rm -f "$out".tmp.*; fi
mapfile -d '' args <"$dir/args.0"
threads=${SLURM_CPUS_PER_TASK:-1}
say "start: $RECALL eval ${args[*]} --shard $k/$n --threads $threads --json $out"
set +e
"$RECALL" eval "${args[@]}" --shard "$k/$n" --threads "$threads" --json "$out"
st=$?
set -e
if [ $st -gt 128 ] && [ "${SLURM_RESTART_COUNT:-0}" -lt "${MAX_REQUEUE:-0}" ]; then
    say "recall died of signal $((st - 128)): requeued"
    scontrol requeue "$task" || say "scontrol requeue $task failed: requeue it with tools/slurm/requeue.sh $dir"
    # Slurm ends this instance now; exit with the status should it not.
    sleep 60
    exit $st
fi
if [ $st -eq 0 ]; then
    say "done: wrote $out"
else
    say "failed: recall exit $st (tools/slurm/requeue.sh $dir reruns it)"
fi
exit $st

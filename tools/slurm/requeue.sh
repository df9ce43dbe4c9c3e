#!/usr/bin/env bash
# requeue.sh DIR [K...] - reruns the failed shards of a tools/slurm/submit.sh run (or shards K...)
# and re-arms its merge job. Each task is requeued in place (scontrol requeue, released at once);
# one Slurm no longer knows is submitted again as a task of a new array (recorded in run.env). The
# merge job's dependency becomes afterok on each task's current job (a failed task leaves an
# array-wide afterok unsatisfiable even after its rerun succeeds); a merge job that is gone is
# submitted again. A shard whose file is already written is never rerun (merge.sh merges it once).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib.sh
. "$here/lib.sh"
usage_or_run "tools/slurm/requeue.sh DIR [K...] (shards K = 1..N; default: the failed ones)" 1 100000 "$@"
shift
slurm_states
want=()
if [ $# -gt 0 ]; then
    for k in "$@"; do
        case $k in '' | *[!0-9]*) echo "requeue.sh: '$k' is not a shard number" >&2; exit 2 ;; esac
        if [ "$k" -lt 1 ] || [ "$k" -gt "$SHARDS" ]; then echo "requeue.sh: shard $k is not in 1..$SHARDS" >&2; exit 2; fi
        want+=("$k")
    done
else
    for ((k = 1; k <= SHARDS; k++)); do [ "$(shard_class "$k")" = failed ] && want+=("$k"); done
fi
resubmit=()
for k in ${want[@]+"${want[@]}"}; do
    t=$((k - 1)) j=$(task_job $((k - 1)))
    if shard_written "$k"; then echo "requeue.sh: shard $k/$SHARDS is written; not rerun"; continue; fi
    case $(shard_class "$k") in running | pending) echo "requeue.sh: shard $k/$SHARDS ($j) is ${STATE[t]:-pending}; left alone"; continue ;; esac
    if scontrol requeue "$j" 2>/dev/null; then
        scontrol update jobid="$j" StartTime=now 2>/dev/null || true
        echo "requeue.sh: shard $k/$SHARDS: task $j requeued"
    else
        resubmit+=("$t")
    fi
done
if [ ${#resubmit[@]} -gt 0 ]; then
    mapfile -d '' cmd <"$RUN_DIR/sbatch-task.0"
    list=$(IFS=,; echo "${resubmit[*]}")
    id=$("${cmd[@]}" --array="$list" "$here/task.sh")
    id=${id%%;*}
    for t in "${resubmit[@]}"; do echo "TASK_JOB_$t=${id}_$t" >>"$RUN_DIR/run.env"; done
    echo "requeue.sh: tasks $list unknown to Slurm: submitted again as array job $id"
    load_run "$RUN_DIR"
fi
[ ! -s "$RUN_DIR/merged.json" ] || { echo "requeue.sh: $RUN_DIR is merged already"; exit 0; }
dep=afterok
for ((t = 0; t < SHARDS; t++)); do dep="$dep:$(task_job "$t")"; done
slurm_states
case $MERGE_STATE in
PENDING*)
    scontrol update jobid="$MERGE_JOB" dependency="$dep"
    echo "requeue.sh: merge job $MERGE_JOB now waits for each task's success"
    ;;
RUNNING* | COMPLETING*) echo "requeue.sh: merge job $MERGE_JOB is running" ;;
*)
    mapfile -d '' cmd <"$RUN_DIR/sbatch-merge.0"
    id=$("${cmd[@]}" --dependency="$dep" "$here/merge.sh" "$RUN_DIR")
    id=${id%%;*}
    echo "MERGE_JOB=$id" >>"$RUN_DIR/run.env"
    echo "requeue.sh: merge job ${MERGE_JOB:-?} is ${MERGE_STATE:-gone}: submitted merge job $id"
    ;;
esac

# shellcheck shell=bash
# lib.sh - what progress.sh, requeue.sh and the test share (bash, sourced): a run's folder and the
# state of each of its shards, from the shard files, squeue, sacct when it answers, and the tasks' logs.

# usage_or_run USAGE MIN MAX ARGS...: --help prints USAGE (exit 0), ARGS fewer than MIN or more
# than MAX print it to stderr (exit 2); otherwise the run of ARGS' first, the folder, is loaded.
usage_or_run() {
    local usage=$1 min=$2 max=$3
    shift 3
    if [ "${1:-}" = --help ]; then echo "usage: $usage"; exit 0; fi
    if [ $# -lt "$min" ] || [ $# -gt "$max" ]; then echo "usage: $usage" >&2; exit 2; fi
    load_run "$1"
}

# load_run DIR: the run's variables (RECALL, SHARDS, JOBS, ARRAY_JOB, MERGE_JOB, ...) and RUN_DIR.
load_run() {
    RUN_DIR=$1
    if [ ! -r "$RUN_DIR/run.env" ]; then
        echo "${0##*/}: $RUN_DIR/run.env missing: not a tools/slurm/submit.sh results folder" >&2
        exit 2
    fi
    # shellcheck source=/dev/null
    . "$RUN_DIR/run.env"
}

# shard_written K: the final shard file of shard K is there, whole (renamed into place) and holds no
# failed job.
shard_written() {
    local f="$RUN_DIR/shard-$1-of-$SHARDS.json"
    [ -s "$f" ] && grep -q "\"shard\": {\"k\": $1, \"n\": $SHARDS," "$f" && ! grep -q '"failed": \[' "$f"
}

# task_job T: the Slurm job id that runs array task T (a task requeue.sh resubmitted has its own).
task_job() {
    local v="TASK_JOB_$1"
    echo "${!v:-${ARRAY_JOB}_$1}"
}

# slurm_states: fills STATE[T] for every array task Slurm still knows (squeue -t all keeps finished
# tasks for MinJobAge; sacct adds older ones when the cluster keeps accounting) and MERGE_STATE.
slurm_states() {
    STATE=() MERGE_STATE=""
    local ids="$ARRAY_JOB" id t st v
    for v in ${!TASK_JOB_*}; do ids="$ids,${!v%_*}"; done
    if command -v sacct >/dev/null 2>&1; then
        while IFS='|' read -r id st; do
            case $id in *_[0-9]*) t=${id##*_}; [ "$(task_job "$t")" = "$id" ] && STATE[t]=${st%% *} ;; esac
        done < <(sacct -n -X -P -j "$ids" -o JobID,State 2>/dev/null || true)
    fi
    while IFS='|' read -r id st; do
        case $id in *_[0-9]*) t=${id##*_}; [ "$(task_job "$t")" = "$id" ] && STATE[t]=$st ;; esac
    done < <(squeue -h -r -t all -j "$ids" -o '%i|%T' 2>/dev/null || true)
    if [ -n "${MERGE_JOB:-}" ]; then
        MERGE_STATE=$(squeue -h -t all -j "$MERGE_JOB" -o '%T (%r)' 2>/dev/null || true)
        [ -n "$MERGE_STATE" ] || MERGE_STATE=$(sacct -n -X -P -j "$MERGE_JOB" -o State 2>/dev/null | head -1 || true)
    fi
}

# shard_class K: done, running, failed or pending (call slurm_states first). A task Slurm no longer
# knows is judged by its log's last task.sh line.
shard_class() {
    local k=$1 t=$(($1 - 1)) st last
    if shard_written "$k"; then echo "done"; return; fi
    st=${STATE[t]:-}
    case $st in
    RUNNING | COMPLETING | CONFIGURING | STAGE_OUT | RESIZING | SIGNALING) echo running ;;
    PENDING | REQUEUED | REQUEUE_FED | REQUEUE_HOLD | SUSPENDED | RESV_DEL_HOLD | SPECIAL_EXIT) echo pending ;;
    "")
        last=$(grep '^task.sh ' "$RUN_DIR/logs/task-$t.log" 2>/dev/null | tail -1 || true)
        case $last in "" | *": requeued"*) echo pending ;; *) echo failed ;; esac ;;
    *) echo failed ;; # FAILED, CANCELLED, TIMEOUT, NODE_FAIL, OUT_OF_MEMORY, BOOT_FAIL, DEADLINE, PREEMPTED, COMPLETED without the file
    esac
}

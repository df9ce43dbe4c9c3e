#!/usr/bin/env bash
# progress.sh DIR - where a tools/slurm/submit.sh run stands: shards done / running / failed /
# pending, eval jobs done of all, and an ETA from the finished jobs' times (the per-problem
# "seconds" of the shard files). From the shard files, squeue (and sacct when the cluster keeps
# accounting) and the tasks' logs; nothing runs in the background.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib.sh
. "$here/lib.sh"
usage_or_run "tools/slurm/progress.sh DIR (the --results folder of submit.sh)" 1 1 "$@"
slurm_states
done_n=0 run_n=0 fail_n=0 pend_n=0 jobs_done=0 secs=0 failed_lines=""
for ((k = 1; k <= SHARDS; k++)); do
    c=$(shard_class "$k")
    case $c in
    done)
        done_n=$((done_n + 1))
        f="$RUN_DIR/shard-$k-of-$SHARDS.json"
        # one "seconds" per job of the shard
        s=$(grep -o '"seconds": [0-9.]*' "$f" | awk '{n++; t += $2} END {printf "%d %.3f", n, t}')
        jobs_done=$((jobs_done + ${s%% *}))
        secs=$(awk -v a="$secs" -v b="${s#* }" 'BEGIN {printf "%.3f", a + b}')
        ;;
    running) run_n=$((run_n + 1)) ;;
    pending) pend_n=$((pend_n + 1)) ;;
    failed)
        fail_n=$((fail_n + 1))
        t=$((k - 1))
        why=${STATE[t]:-unknown to Slurm}
        [ -s "$RUN_DIR/shard-$k-of-$SHARDS.json" ] && why="$why, its shard file records failed jobs"
        last=$(grep '^task.sh ' "$RUN_DIR/logs/task-$t.log" 2>/dev/null | tail -1 || true)
        last=${last#*): }
        case $last in start:*) last="started, no end recorded (killed?)" ;; esac
        failed_lines="$failed_lines  failed: shard $k/$SHARDS, task $(task_job "$t"): $why; $RUN_DIR/logs/task-$t.log${last:+: $last}"$'\n'
        ;;
    esac
done
echo "run $RUN_DIR: $SHARDS shards, array job $ARRAY_JOB, merge job ${MERGE_JOB:-?}: ${MERGE_STATE:-unknown to Slurm}"
echo "shards: $done_n done, $run_n running, $fail_n failed, $pend_n pending"
printf '%s' "$failed_lines"
echo "jobs: $jobs_done of $JOBS done"
if [ -s "$RUN_DIR/merged.json" ]; then
    echo "merged: $RUN_DIR/merged.json, $RUN_DIR/merged.txt"
elif [ "$jobs_done" -gt 0 ]; then
    awk -v s="$secs" -v n="$jobs_done" -v left=$((JOBS - jobs_done)) -v r="$run_n" -v p="$pend_n" 'BEGIN {
        m = s / n; par = r > 0 ? r : 1
        printf "ETA: about %d s%s (%d jobs left at %.1f s a job, the mean of %d finished, over %d running)\n",
            left * m / par + 0.5, r == 0 && p > 0 ? " once tasks run" : "", left, m, n, r }'
else
    echo "ETA: none yet (no job finished)"
fi
[ "$fail_n" = 0 ] || echo "failed tasks: tools/slurm/requeue.sh $RUN_DIR reruns them and re-arms the merge"

#!/usr/bin/env bash
# submit.sh - a `recall eval` run on Slurm: a job array of N shards and a merge job after it.
# `submit.sh --help` (below) is the reference; docs/SCALE.md the guide.
set -eu
here=$(cd "$(dirname "$0")" && pwd)

usage() {
    cat <<'USAGE'
usage: tools/slurm/submit.sh --shards N --results DIR [options] BLOB --bench FILE [recall eval options]

Submits one Slurm job array, one task per shard (task T runs `recall eval ... --shard T+1/N
--json DIR/shard-(T+1)-of-N.json --threads $SLURM_CPUS_PER_TASK`), and one merge job that starts
when every task has succeeded (--dependency=afterok) and writes DIR/merged.json and DIR/merged.txt
(the table), as one unsharded `recall eval --json` run writes them (the per-problem "seconds"
aside). Every argument that is not one of the options below goes to `recall eval` unchanged
(BLOB, --bench, --problems, --arms, --mode, --numerics, ...); the blob is read where it lies, so it
must be on storage every node sees (each task maps it, nothing is copied). Prints the two job ids.

options:
  --shards N          the number of shards (array tasks), 1..100000 (required)
  --results DIR       the run's folder on shared storage (required): shard files, logs, run.env;
                      refused when it already holds a run (one folder per run)
  --cpus-per-task C   CPUs per task, also the task's --threads (default 2)
  --partition P       the partition (default: the cluster's default)
  --time T            the time limit per task, in sbatch's format (default: the partition's)
  --mem M             memory per task, in sbatch's format (default: the partition's)
  --max-parallel M    at most M tasks running at once (sbatch --array=...%M)
  --max-requeue R     a task whose recall is killed by a signal requeues itself up to R times
                      (default 3; 0 = never)
  --recall PATH       the recall binary (default: ./recall of this repository); shared storage
  --sbatch-arg ARG    one more argument for both sbatch calls (repeatable), e.g. --sbatch-arg=--account=X
  --dry-run           print the two sbatch commands instead of running them
  --help              this text

refused: --shard, --json, --merge and --threads among recall's options (the recipe sets them).
Then: tools/slurm/progress.sh DIR (done / running / failed / pending, jobs, ETA);
tools/slurm/requeue.sh DIR (requeue failed tasks, re-arm the merge); tools/slurm/merge.sh DIR
(the merge job's script, also by hand).
USAGE
}

die() { echo "submit.sh: $*" >&2; exit 2; }

shards="" results="" cpus=2 partition="" time_limit="" mem="" maxpar="" maxrq=3 dry=0
recall="$here/../../recall"
sb_extra=() eval_args=()
while [ $# -gt 0 ]; do
    a=$1
    case $a in
    --*=*) opt=${a%%=*} val=${a#*=} has=1 ;;
    *) opt=$a val="" has=0 ;;
    esac
    need_val() {
        if [ $has = 0 ]; then
            [ $# -ge 2 ] || die "$opt needs a value"
            val=$2
            shift_n=2
        else
            shift_n=1
        fi
    }
    shift_n=1
    case $opt in
    --help | -h) usage; exit 0 ;;
    --shards) need_val "$@"; shards=$val ;;
    --results) need_val "$@"; results=$val ;;
    --cpus-per-task) need_val "$@"; cpus=$val ;;
    --partition) need_val "$@"; partition=$val ;;
    --time) need_val "$@"; time_limit=$val ;;
    --mem) need_val "$@"; mem=$val ;;
    --max-parallel) need_val "$@"; maxpar=$val ;;
    --max-requeue) need_val "$@"; maxrq=$val ;;
    --recall) need_val "$@"; recall=$val ;;
    --sbatch-arg) need_val "$@"; sb_extra+=("$val") ;;
    --dry-run) dry=1 ;;
    --shard | --json | --merge | --threads)
        die "$opt is set by the recipe (shards: --shards N; threads: --cpus-per-task C; output: --results DIR)" ;;
    *) eval_args+=("$a") ;;
    esac
    shift "$shift_n"
done

int() { case $2 in '' | *[!0-9]*) die "$1 must be a positive integer, not '$2'" ;; esac; [ "$2" -ge "$3" ] || die "$1 must be at least $3"; }
[ -n "$shards" ] || die "--shards N is required (--help)"
[ -n "$results" ] || die "--results DIR is required (--help)"
int --shards "$shards" 1
[ "$shards" -le 100000 ] || die "--shards must be at most 100000"
int --cpus-per-task "$cpus" 1
int --max-requeue "$maxrq" 0
[ -z "$maxpar" ] || int --max-parallel "$maxpar" 1
[ ${#eval_args[@]} -gt 0 ] || die "no recall eval arguments (BLOB --bench FILE ...)"
case ${eval_args[0]} in -*) die "the first recall eval argument must be the BLOB, not ${eval_args[0]}" ;; esac
[ -x "$recall" ] || die "$recall is not an executable recall (build it with make, or give --recall PATH)"
recall=$(cd "$(dirname "$recall")" && pwd)/$(basename "$recall")
blob=${eval_args[0]}
[ -r "$blob" ] || die "$blob: cannot read the blob (it must be on storage every node sees)"
command -v sbatch >/dev/null 2>&1 || [ $dry = 1 ] || die "sbatch not found (is this a Slurm login node?)"

# The run's job count, arms x problems, as recall eval counts them (for progress before any shard).
problems=0-7 arms=SP,RC_bge
for ((i = 1; i < ${#eval_args[@]}; i++)); do
    case ${eval_args[i]} in
    --problems) problems=${eval_args[i + 1]:-} ;;
    --arms) arms=${eval_args[i + 1]:-} ;;
    esac
done
n_problems=0
IFS=, read -r -a parts <<<"$problems"
for p in "${parts[@]}"; do
    if [[ $p =~ ^([0-9]+)-([0-9]+)$ ]]; then
        n_problems=$((n_problems + 10#${BASH_REMATCH[2]} - 10#${BASH_REMATCH[1]} + 1))
    elif [[ $p =~ ^[0-9]+$ ]]; then
        n_problems=$((n_problems + 1))
    fi
done
IFS=, read -r -a parts <<<"$arms"
jobs=$((n_problems * ${#parts[@]}))

if [ $dry = 0 ]; then
    if [ -e "$results/run.env" ]; then
        die "$results already holds a run (run.env): one folder per run (progress.sh $results shows it)"
    fi
    mkdir -p "$results/logs"
    results=$(cd "$results" && pwd)
    printf '%s\0' "${eval_args[@]}" >"$results/args.0"
fi

array_spec="0-$((shards - 1))${maxpar:+%$maxpar}"
common=(--parsable --chdir "$(pwd)" ${partition:+--partition="$partition"} ${time_limit:+--time="$time_limit"}
    ${mem:+--mem="$mem"} ${sb_extra[@]+"${sb_extra[@]}"})
# shellcheck disable=SC2054 # the commas are sbatch's
task_sbatch=(sbatch "${common[@]}" --job-name=recall-eval --cpus-per-task="$cpus" --requeue --open-mode=append
    --output="$results/logs/task-%a.log" --export=ALL,RECALL_SLURM_DIR="$results")
array_cmd=("${task_sbatch[@]}" --array="$array_spec" "$here/task.sh")
# shellcheck disable=SC2054
merge_cmd=(sbatch "${common[@]}" --job-name=recall-merge --cpus-per-task=1 --kill-on-invalid-dep=no
    --open-mode=append --output="$results/logs/merge.log" --export=ALL,RECALL_SLURM_DIR="$results")
if [ $dry = 1 ]; then
    printf '%q ' "${array_cmd[@]}"; echo
    printf '%q ' "${merge_cmd[@]}" --dependency=afterok:ARRAY_JOB "$here/merge.sh" "$results"; echo
    exit 0
fi
# what requeue.sh needs to submit a task or the merge again
printf '%s\0' "${task_sbatch[@]}" >"$results/sbatch-task.0"
printf '%s\0' "${merge_cmd[@]}" >"$results/sbatch-merge.0"
{
    echo "RECALL=$(printf %q "$recall")"
    echo "SHARDS=$shards"
    echo "JOBS=$jobs"
    echo "CPUS=$cpus"
    echo "MAX_REQUEUE=$maxrq"
    echo "SUBMITTED=$(date +%s)"
} >"$results/run.env"
array_id=$("${array_cmd[@]}") || die "sbatch of the array failed"
array_id=${array_id%%;*}
echo "ARRAY_JOB=$array_id" >>"$results/run.env"
merge_id=$("${merge_cmd[@]}" --dependency=afterok:"$array_id" "$here/merge.sh" "$results") ||
    die "sbatch of the merge job failed (the array $array_id runs; submit the merge with requeue.sh $results)"
merge_id=${merge_id%%;*}
echo "MERGE_JOB=$merge_id" >>"$results/run.env"
echo "array job $array_id ($shards tasks, $jobs eval jobs), merge job $merge_id; results in $results"
echo "progress: $here/progress.sh $results"

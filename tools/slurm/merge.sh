#!/usr/bin/env bash
# merge.sh DIR - the merge job of a tools/slurm/submit.sh run (also by hand): every shard file in
# DIR into DIR/merged.json and DIR/merged.txt (the table), through `recall eval --merge`.
# A shard file that is missing is named with the array task that should have written it (exit 2);
# every shard-*.json in DIR goes to the merge, so a file of another run in the folder is refused by
# recall, naming the file and what differs (exit 2). Written through NAME.tmp.PID and a rename.
# It runs as a batch script, from Slurm's spool: it cannot source lib.sh beside it.
set -eu
if [ $# -ne 1 ] || [ "${1:-}" = --help ]; then
    echo "usage: tools/slurm/merge.sh DIR (the --results folder of submit.sh)"
    [ "${1:-}" = --help ] && exit 0
    exit 2
fi
dir=$1
[ -r "$dir/run.env" ] || { echo "merge.sh: $dir/run.env missing: not a submit.sh results folder" >&2; exit 2; }
# shellcheck source=/dev/null
. "$dir/run.env"
n=$SHARDS
missing=0
for ((k = 1; k <= n; k++)); do
    f="$dir/shard-$k-of-$n.json"
    if [ ! -s "$f" ]; then
        echo "merge.sh: shard $k/$n is missing: array task ${ARRAY_JOB:-?}_$((k - 1)) should have written $f (its log: $dir/logs/task-$((k - 1)).log)" >&2
        missing=$((missing + 1))
    fi
done
[ $missing = 0 ] || { echo "merge.sh: $missing of $n shards missing; nothing merged (tools/slurm/requeue.sh $dir)" >&2; exit 2; }
shopt -s nullglob
files=("$dir"/shard-*.json)
tmp="$dir/merged.txt.tmp.$$"
if ! "$RECALL" eval --merge "${files[@]}" --json "$dir/merged.json" >"$tmp"; then
    rm -f "$tmp"
    echo "merge.sh: recall eval --merge refused the shards in $dir (its line above names the file); nothing merged" >&2
    exit 2
fi
mv "$tmp" "$dir/merged.txt"
cat "$dir/merged.txt"
echo "merge.sh: ${#files[@]} shards merged into $dir/merged.json and $dir/merged.txt"

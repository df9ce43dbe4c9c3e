#!/usr/bin/env bash
# web_vs_native.sh RECALL SITE BLOB BENCH PROBLEM [RUNS] - the demo world's replay (every turn of
# one bench problem through the recall loop) under wasm and natively, side by side in one run:
# RUNS rounds (default 3), each a native `recall replay --simd scalar --threads 1` and the same
# replay inside build/web's recall.wasm under node (bench/web_replay.mjs, the page's own glue),
# once on the wasm SIMD128 kernels and once on the scalar ones. Every trace must be byte-identical
# to native's before a time counts. Prints each round and the minimum / median per engine, and the
# ratio of the medians. Wasm times are of the replay alone (module compiled, blob in memory);
# "process" adds node's start, the module's compilation and reading the blob. With NODE_MODULES
# (a folder holding puppeteer-core, as make test-web installs it), the same replay also runs in
# the page itself in headless Chromium, RUNS times after the rounds (bench/web_replay_browser.mjs).
set -euo pipefail
recall=$1 site=$2 blob=$3 bench=$4 problem=$5 runs=${6:-3} node_modules=${7:-}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
here=$(cd "$(dirname "$0")" && pwd)
now() { date +%s.%N; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", b - a }'; }
echo "host: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "node $(node --version), $(du -k "$site/recall.wasm" | cut -f1) KiB module; $(date -u '+%Y-%m-%d %H:%M UTC')"
native=() wasm=() wscalar=() wproc=() ratio=()
for i in $(seq 1 "$runs"); do
  t0=$(now)
  "$recall" replay "$blob" --bench "$bench" --problem "$problem" --simd scalar --threads 1 --trace "$dir/native.json" 2>/dev/null
  t1=$(now)
  n=$(secs "$t0" "$t1")
  w=$(node "$here/web_replay.mjs" "$site" "$blob" "$bench" "$problem" "$dir/wasm.json" 2>/dev/null | awk '{print $3}')
  t2=$(now)
  cmp -s "$dir/native.json" "$dir/wasm.json" || { echo "round $i: the wasm trace differs from native's"; exit 1; }
  s=$(node "$here/web_replay.mjs" "$site" "$blob" "$bench" "$problem" "$dir/scalar.json" --simd scalar 2>/dev/null | awk '{print $3}')
  cmp -s "$dir/native.json" "$dir/scalar.json" || { echo "round $i: the wasm scalar trace differs from native's"; exit 1; }
  r=$(awk -v w="$w" -v n="$n" 'BEGIN { printf "%.2f", w / n }')
  native+=("$n") wasm+=("$w") wscalar+=("$s") wproc+=("$(secs "$t1" "$t2")") ratio+=("$r")
  echo "round $i: native scalar $n s | wasm SIMD128 $w s (process $(secs "$t1" "$t2") s) | wasm scalar $s s | traces identical | wasm / native $r"
done
stats() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { printf "min %.3f s, median %.3f s", v[1], v[int((NR + 1) / 2)] }'; }
med() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
browser=()
if [ -n "$node_modules" ] && [ -e "$node_modules/puppeteer-core/package.json" ]; then
  while read -r line; do
    case $line in
      "browser replay: "*" s") echo "$line"; browser+=("$(echo "$line" | awk '{print $3}')") ;;
      "status 0") ;;
      *) echo "$line"; exit 1 ;;
    esac
  done < <(node "$here/web_replay_browser.mjs" "$site" "$problem" "$dir/native.json" "$runs" "$node_modules"; echo "status $?")
fi
echo "native scalar:  $(stats "${native[@]}")"
echo "wasm SIMD128:   $(stats "${wasm[@]}") (process: $(stats "${wproc[@]}"))"
echo "wasm scalar:    $(stats "${wscalar[@]}")"
# the host's speed drifts between minutes: each round's own ratio (native and wasm seconds apart)
echo "wasm SIMD128 / native scalar per round: median $(med "${ratio[@]}")x (rounds: ${ratio[*]})"
awk -v w="$(med "${wasm[@]}")" -v s="$(med "${wscalar[@]}")" -v n="$(med "${native[@]}")" \
  'BEGIN { printf "ratio of medians: wasm SIMD128 / native scalar %.2fx, wasm scalar / native scalar %.2fx\n", w / n, s / n }'
if [ ${#browser[@]} -gt 0 ]; then
  echo "in Chromium:    $(stats "${browser[@]}")"
  awk -v b="$(med "${browser[@]}")" -v n="$(med "${native[@]}")" \
    'BEGIN { printf "ratio of medians: wasm SIMD128 in Chromium / native scalar %.2fx\n", b / n }'
fi

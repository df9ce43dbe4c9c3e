#!/usr/bin/env bash
# web_vs_native.sh RECALL SITE BLOB BENCH PROBLEM [RUNS] [NODE_MODULES] - the demo world's replay
# (every turn of one bench problem through the recall loop) under wasm and natively, side by side in
# one run: RUNS rounds (default 3), each a native `recall replay --simd scalar --threads 1` and the
# same replay inside build/web's modules under node (bench/web_replay.mjs, the page's own glue):
# recall-relaxed.wasm (its wasm kernels on relaxed-simd's multiply-add where the module proved it
# fused at load; each line says which ran), recall.wasm (the exact fmaf emulated in double: the
# page's fallback), and recall.wasm's scalar path. Every trace must be byte-identical to native's
# before a time counts. Prints each round and the minimum / median per engine, and the ratios.
# Wasm times are of the replay alone (module compiled, blob in memory); "process" adds node's
# start, the module's compilation and reading the blob. With NODE_MODULES (a folder holding
# puppeteer-core, as make test-web installs it), the same replay also runs in the page itself in
# headless Chromium, RUNS times per module after the rounds (bench/web_replay_browser.mjs).
set -euo pipefail
recall=$1 site=$2 blob=$3 bench=$4 problem=$5 runs=${6:-3} node_modules=${7:-}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
here=$(cd "$(dirname "$0")" && pwd)
now() { date +%s.%N; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", b - a }'; }
# node 20's engine has relaxed-simd behind a flag (later ones ship it, and may not know the flag)
relaxed_flag=$(node --v8-options 2>/dev/null | grep -q -e '--experimental-wasm-relaxed-simd ' && echo --experimental-wasm-relaxed-simd || true)
echo "host: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "node $(node --version) ${relaxed_flag}, modules: recall-relaxed.wasm $(du -k "$site/recall-relaxed.wasm" | cut -f1) KiB, recall.wasm $(du -k "$site/recall.wasm" | cut -f1) KiB; $(date -u '+%Y-%m-%d %H:%M UTC')"
replay() { # MODULE TRACE [options]: prints "SECONDS KERNELS..."
  local m=$1 t=$2
  shift 2
  node $relaxed_flag "$here/web_replay.mjs" "$site" "$blob" "$bench" "$problem" "$t" --module "$m" "$@" 2>/dev/null |
    sed -n 's/^wasm replay: \([0-9.]*\) s; [^:]*: /\1 /p'
}
native=() fused=() exact=() wscalar=() fproc=() ratio=() eratio=()
for i in $(seq 1 "$runs"); do
  t0=$(now)
  "$recall" replay "$blob" --bench "$bench" --problem "$problem" --simd scalar --threads 1 --trace "$dir/native.json" 2>/dev/null
  t1=$(now)
  n=$(secs "$t0" "$t1")
  out=$(replay recall-relaxed.wasm "$dir/fused.json")
  t2=$(now)
  f=${out%% *} fk=${out#* }
  cmp -s "$dir/native.json" "$dir/fused.json" || { echo "round $i: recall-relaxed.wasm's trace differs from native's"; exit 1; }
  out=$(replay recall.wasm "$dir/exact.json")
  e=${out%% *}
  cmp -s "$dir/native.json" "$dir/exact.json" || { echo "round $i: recall.wasm's trace differs from native's"; exit 1; }
  out=$(replay recall.wasm "$dir/scalar.json" --simd scalar)
  s=${out%% *}
  cmp -s "$dir/native.json" "$dir/scalar.json" || { echo "round $i: the wasm scalar trace differs from native's"; exit 1; }
  r=$(awk -v w="$f" -v n="$n" 'BEGIN { printf "%.2f", w / n }')
  re=$(awk -v w="$e" -v n="$n" 'BEGIN { printf "%.2f", w / n }')
  native+=("$n") fused+=("$f") exact+=("$e") wscalar+=("$s") fproc+=("$(secs "$t1" "$t2")") ratio+=("$r") eratio+=("$re")
  echo "round $i: native scalar $n s | relaxed module $f s (process $(secs "$t1" "$t2") s) | exact module $e s | wasm scalar $s s | traces identical | / native: $r, $re"
  [ "$i" = 1 ] && echo "  relaxed module: $fk"
done
stats() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { printf "min %.3f s, median %.3f s", v[1], v[int((NR + 1) / 2)] }'; }
med() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
browser=() bexact=() bnative=()
if [ -n "$node_modules" ] && [ -e "$node_modules/puppeteer-core/package.json" ]; then
  for query in "" "?wasm=exact"; do
    # native again beside each batch of browser rounds: the Chromium ratios are to these
    for i in $(seq 1 "$runs"); do
      t0=$(now)
      "$recall" replay "$blob" --bench "$bench" --problem "$problem" --simd scalar --threads 1 --trace "$dir/native.json" 2>/dev/null
      bnative+=("$(secs "$t0" "$(now)")")
    done
    while read -r line; do
      case $line in
        "browser replay: "*)
          echo "browser${query:+ $query}: ${line#browser replay: }"
          if [ -z "$query" ]; then browser+=("$(echo "$line" | awk '{print $3}')"); else bexact+=("$(echo "$line" | awk '{print $3}')"); fi ;;
        "status 0") ;;
        *) echo "$line"; exit 1 ;;
      esac
    done < <(node "$here/web_replay_browser.mjs" "$site" "$problem" "$dir/native.json" "$runs" "$node_modules" --query "$query"; echo "status $?")
  done
fi
echo "native scalar:           $(stats "${native[@]}")"
echo "wasm, relaxed module:    $(stats "${fused[@]}") (process: $(stats "${fproc[@]}"))"
echo "wasm, exact module:      $(stats "${exact[@]}")"
echo "wasm scalar:             $(stats "${wscalar[@]}")"
# the host's speed drifts between minutes: each round's own ratio (native and wasm seconds apart)
echo "relaxed module / native scalar per round: median $(med "${ratio[@]}")x (rounds: ${ratio[*]})"
echo "exact module / native scalar per round: median $(med "${eratio[@]}")x (rounds: ${eratio[*]})"
awk -v f="$(med "${fused[@]}")" -v e="$(med "${exact[@]}")" -v s="$(med "${wscalar[@]}")" -v n="$(med "${native[@]}")" \
  'BEGIN { printf "ratio of medians / native scalar: relaxed module %.2fx, exact module %.2fx, wasm scalar %.2fx\n", f / n, e / n, s / n }'
if [ ${#browser[@]} -gt 0 ]; then
  echo "in Chromium, relaxed module: $(stats "${browser[@]}"); exact module (?wasm=exact): $(stats "${bexact[@]}")"
  echo "native scalar beside them: $(stats "${bnative[@]}")"
  awk -v b="$(med "${browser[@]}")" -v e="$(med "${bexact[@]}")" -v n="$(med "${bnative[@]}")" \
    'BEGIN { printf "ratio of medians / native scalar in Chromium: relaxed module %.2fx, exact module %.2fx\n", b / n, e / n }'
fi

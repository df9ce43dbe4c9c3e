#!/bin/sh
# tools/layers.sh - the folders are layers: every #include "..." of the engine's sources must name a
# file of its own layer or of a lower one, never a higher one (docs/README.md, "Layers").
#
#   0 base     src/ (its own files only): errors as values, the public declarations, memory,
#              names, bytes, checksums, atomic files
#   1 formats  src/formats/: the blob and the readers used at run time (json, safetensors, npy/npz,
#              zip/inflate, pickle, session files)
#   2 kernels  simd/: the reference arithmetic (ops, nf4, q8, top-k) and its SIMD paths
#   3 engine   src/engine/: tokenizers, decoder, pooler, heads, BERT, retriever, the loop, the API
#   4 harness  src/harness/: the benchmark problems, eval, longctx, farfact, compare, calibrate
#   5 convert  weights/: artifacts -> blob
#   6 cli      src/cli/, web/: the command line and the browser module
#
# An include is resolved as the compiler does (the including file's folder, then the -I folders of
# the Makefile in their order); one that names no file of the tree is an error too. Prints every
# include that goes up and exits 1, else one line. tests/, bench/ and fuzz/ stand on top: not checked.
# Usage: sh tools/layers.sh [REPO_ROOT]
set -eu
cd "${1:-$(dirname "$0")/..}"

# folder rank name, lowest first; the -I order of the Makefile (INC) follows the list below
LAYERS='src 0 base
src/formats 1 formats
simd 2 kernels
src/engine 3 engine
src/harness 4 harness
weights 5 convert
src/cli 6 cli
web 6 cli'
INC_DIRS='src src/formats simd src/engine src/harness weights'

files=$(echo "$LAYERS" | while read -r d r n; do
    find "$d" -maxdepth 1 -type f \( -name '*.c' -o -name '*.h' \) | sort
done)

# layer_of FILE -> "rank name" (the folder that holds it directly)
layer_of() {
    echo "$LAYERS" | awk -v d="$(dirname "$1")" '$1 == d {print $2, $3; exit}'
}

tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
n=0
for f in $files; do
    fl=$(layer_of "$f")
    fr=${fl% *}
    grep -n '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$f" | sed 's/^\([0-9]*\):.*"\([^"]*\)".*/\1 \2/' |
        while read -r line inc; do
            target=
            for d in "$(dirname "$f")" $INC_DIRS; do
                if [ -f "$d/$inc" ]; then target="$d/$inc"; break; fi
            done
            if [ -z "$target" ]; then
                echo "$f:$line: #include \"$inc\" names no file of the tree"; echo x >&3; continue
            fi
            tl=$(layer_of "$target")
            if [ -z "$tl" ]; then
                echo "$f:$line: #include \"$inc\" -> $target, which is in no layer"; echo x >&3; continue
            fi
            if [ "${tl% *}" -gt "$fr" ]; then
                echo "$f:$line: #include \"$inc\" goes up: ${fl#* } ($fr) -> ${tl#* } (${tl% *}) $target"; echo x >&3
            fi
        done
    n=$((n + 1))
done 3>"$tmp"
bad=$(wc -l <"$tmp")
if [ "$bad" -gt 0 ]; then
    echo "layers: $bad include(s) go up or name nothing (tools/layers.sh states the order)"
    exit 1
fi
echo "layers: $n files, every include goes down or sideways (base < formats < kernels < engine < harness < convert < cli)"

#!/bin/sh
# The longest C functions in the tree: "lines file:first-last name", longest first.
#   sh tools/long_functions.sh [N] [files...]   (N rows, default 20; files default: every tracked .c)
# A function is a body that opens at brace depth 0 and closes with its matching brace; its first
# line is the line that names it. Strings, character literals and comments are blanked before
# braces are counted, so a brace inside them does not count. Generated tables (data, not
# functions) never open a body after a ')' and are not listed.
n=${1:-20}
[ $# -gt 0 ] && shift
if [ $# -eq 0 ]; then
    set -- $(git ls-files '*.c')
fi
awk '
FNR == 1 { depth = 0; incomment = 0; start = 0; sig = 0; name = "" }
{
    line = $0; out = ""; i = 1; L = length(line)
    while (i <= L) {
        c = substr(line, i, 1); c2 = substr(line, i, 2)
        if (incomment) {
            if (c2 == "*/") { incomment = 0; i += 2 } else i++
            continue
        }
        if (c2 == "/*") { incomment = 1; i += 2; continue }
        if (c2 == "//") break
        if (c == "\"" || c == "\047") {
            q = c; i++
            while (i <= L && substr(line, i, 1) != q) { if (substr(line, i, 1) == "\\") i++; i++ }
            i++; out = out " "; continue
        }
        out = out c; i++
    }
    if (depth == 0 && out ~ /^[A-Za-z_][^=]*\(/) {
        sig = FNR; name = out
        sub(/\(.*/, "", name); sub(/.*[ *]/, "", name)
    }
    for (j = 1; j <= length(out); j++) {
        ch = substr(out, j, 1)
        if (ch == "{") {
            if (depth == 0) start = sig
            depth++
        } else if (ch == "}") {
            depth--
            if (depth == 0 && start) {
                printf "%d %s:%d-%d %s\n", FNR - start + 1, FILENAME, start, FNR, name
                start = 0; sig = 0
            }
        }
    }
    if (depth == 0 && out ~ /[;}][ \t]*$/) sig = 0
}' "$@" | sort -rn | head -n "$n"

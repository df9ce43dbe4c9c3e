# demo_answers.awk - make demo's last table: for each question turn of two `recall replay` outputs
# (SP first, RC_bge second), the keyword asked, whether RC_bge's gate fired, and each arm's answer
# (the reply's text after its last </think>).
#   awk -f tools/train_world/demo_answers.awk SP.txt RC.txt
FNR == 1 { arm++; q = 0 }
/^turn [0-9]+ \(q\)/ { inq = 1; q++; if (arm == 2) fired[q] = "no" }
inq && /^  user:/ {
    kw[q] = $0
    sub(/.*[Ww]hat was (the|my) /, "", kw[q])
    sub(/ (I mentioned|again).*/, "", kw[q])
}
inq && /^  gate fired/ { fired[q] = "yes" }
inq && /^  reply:/ {
    a = $0
    sub(/^  reply: "/, "", a)
    sub(/"$/, "", a)
    n = split(a, parts, "</think>")
    ans[arm, q] = parts[n]
    inq = 0
    nq = q > nq ? q : nq
}
END {
    printf "%-20s %-8s %-24s %s\n", "question", "fired", "SP (no recall)", "RC_bge (recall)"
    for (i = 1; i <= nq; i++)
        printf "%-20s %-8s %-24s %s\n", kw[i], fired[i], "\"" ans[1, i] "\"", "\"" ans[2, i] "\""
}

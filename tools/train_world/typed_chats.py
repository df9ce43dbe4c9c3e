"""typed_chats.py - a world on chats as people type them, through `recall chat`:

    /usr/bin/python3 tools/train_world/typed_chats.py CHATS.json [--blob B] [--recall ./recall]
        [--jobs N] [--markdown] [-- CHAT OPTIONS...]

CHATS.json holds {"chats": [{"id", "kind", "value", "fact", "small_talk": [4 lines], "question"}]}
(tests/blind/typed40.json, the blind set; tools/train_world/dev_typed.json, the set the wide wording
was tuned on). Each chat is run three times: "in view" (the fact, then the question), "one line"
(the fact, the first small-talk line, the question: the fact is at the window's edge) and "evicted"
(the fact, three small-talk lines, the question: the fact has left the window and only recall can
bring it back). The answer is the text after the reply's last </think>; it counts when it equals the
value (spaces and a final full stop stripped). A false fire is a small-talk turn in which the gate
fired (`--trace`'s "turn done" line); they are counted over every small-talk turn of the three runs
(with how many of them the gate checked at all: it checks only once history has been evicted), and
over the evicted runs' alone. Prints one line per chat (or a Markdown table), then the totals.

A chat that also has "week_question" (a small-talk question sent right after the fact) and
"absent_question" (a question about a fact the chat never stated; tests/blind/plain40.json) is run
three more times: "week" (the fact, then that small-talk question: kept small talk when the reply is
neither the value nor "I don't know."), "absent, in view" (the fact, then the absent question) and
"absent, evicted" (the fact, three small-talk lines, the absent question): right when the reply
is "I don't know." (the others are listed; those giving the chat's own value are counted).
"""
import argparse
import json
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

RUNS = (("in view", 0), ("one line", 1), ("evicted", 3))
# the extra runs of a chat with "week_question" and "absent_question": (name, small-talk lines, field)
EXTRA = (("week", 0, "week_question"), ("absent, in view", 0, "absent_question"),
         ("absent, evicted", 3, "absent_question"))
DONT_KNOW = "I don't know"


def run_chat(recall, blob, opts, lines):
    """(reply after the last </think> of the last turn, [fires per turn])"""
    p = subprocess.run([recall, "chat", blob, "--trace"] + opts, input="\n".join(lines) + "\n",
                       capture_output=True, text=True, timeout=300)
    if p.returncode != 0:
        raise SystemExit("typed_chats: recall chat failed (%d): %s" % (p.returncode, p.stderr.strip()[-400:]))
    fires = [(int(c), int(f)) for c, f in re.findall(r"\[trace\] turn done: .* (\d+) gate checks?, (\d+) fires", p.stderr)]
    out = p.stdout.rstrip("\n").split("\n")
    last = out[-1] if out else ""
    return last.split("</think>")[-1], fires


def norm(s):
    return s.strip().rstrip(".").strip()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("chats")
    ap.add_argument("--blob", default="build/trained-f32.blob")
    ap.add_argument("--recall", default="./recall")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--markdown", action="store_true")
    argv = sys.argv[1:]
    opts = argv[argv.index("--") + 1:] if "--" in argv else []
    a = ap.parse_args(argv[:argv.index("--")] if "--" in argv else argv)
    a.opts = opts
    chats = json.load(open(a.chats, encoding="utf-8"))["chats"]
    jobs = []
    for c in chats:
        for name, n in RUNS:
            jobs.append((c, name, n, [c["fact"]] + c["small_talk"][:n] + [c["question"]]))
    extra = [(c, name, n, [c["fact"]] + c["small_talk"][:n] + [c[field]])
             for c in chats if all(f in c for _, _, f in EXTRA) for name, n, field in EXTRA]
    with ThreadPoolExecutor(a.jobs) as ex:
        res = list(ex.map(lambda j: run_chat(a.recall, a.blob, a.opts, j[3]), jobs + extra))
    res, extra_res = res[:len(jobs)], res[len(jobs):]
    ok = {name: 0 for name, _ in RUNS}
    st_turns = st_checked = st_fires = ev_turns = ev_fires = 0
    by_chat = {}
    for (c, name, n, _), (ans, fires) in zip(jobs, res):
        good = norm(ans) == norm(c["value"])
        ok[name] += good
        st = fires[1:1 + n]  # the small-talk turns' (gate checks, fires)
        st_turns += len(st)
        st_checked += sum(1 for ch, _ in st if ch > 0)
        st_fires += sum(1 for _, f in st if f > 0)
        if name == "evicted":
            ev_turns += len(st)
            ev_fires += sum(1 for _, f in st if f > 0)
        by_chat.setdefault(c["id"], []).append((ans.strip()[:40], good, sum(1 for _, f in st if f > 0)))
    if a.markdown:
        print("| # | kind | value | in view | one line | evicted (3 lines) |")
        print("|---|---|---|---|---|---|")
    for c in chats:
        r = by_chat[c["id"]]
        if a.markdown:
            print("| %s | %s | `%s` | %s |" % (c["id"], c["kind"], c["value"], " | ".join(
                "`%s` %s" % (ans.replace("|", "/"), "yes" if g else "no") for ans, g, _ in r)))
        else:
            print("%3s %-7s %-18s %s" % (c["id"], c["kind"], c["value"][:18], "  ".join(
                "%-3s %-22s" % ("ok" if g else "--", ans[:22]) for ans, g, _ in r)))
    n = len(chats)
    print()
    print("value answered exactly: in view %d/%d, one line %d/%d, evicted %d/%d; small-talk turns that fired "
          "%d/%d (%d of them with a gate check; evicted runs %d/%d); blob %s, options %s" % (
              ok["in view"], n, ok["one line"], n, ok["evicted"], n, st_fires, st_turns, st_checked, ev_fires,
              ev_turns, a.blob, " ".join(a.opts) or "(none)"))
    if extra:
        report_extra(extra, extra_res)


def report_extra(extra, res):
    """The week and absent runs: per chat the replies that went wrong, then the totals."""
    tally = {name: [0, 0] for name, _, _ in EXTRA}  # name -> [right, of]
    own_value = 0  # absent questions answered with the chat's own value
    wrong = []
    for (c, name, _, _), (ans, fires) in zip(extra, res):
        a = norm(ans)
        if name == "week":
            right = a != norm(c["value"]) and norm(c["value"]) not in a and a != DONT_KNOW
        else:
            right = a == DONT_KNOW
            own_value += norm(c["value"]) in a
        tally[name][0] += right
        tally[name][1] += 1
        if not right:
            wrong.append("%3s %-16s %-40s (fires %d)" % (c["id"], name, ans.strip()[:40], fires[-1][1] if fires else 0))
    print()
    print("\n".join(wrong))
    print("small-talk question right after the fact kept small talk %d/%d; question about a fact never told "
          "answered \"I don't know.\": in view %d/%d, evicted %d/%d (%d of the others gave the chat's own value)" % (
              tally["week"][0], tally["week"][1], tally["absent, in view"][0], tally["absent, in view"][1],
              tally["absent, evicted"][0], tally["absent, evicted"][1], own_value))


if __name__ == "__main__":
    sys.exit(main())

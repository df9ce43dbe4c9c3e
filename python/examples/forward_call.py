#!/usr/bin/python3
"""forward_call.py - the Python side of the overhead figure (docs/PYTHON.md): the median time of
one Model.logits call (recall_forward through the bindings) and of Model.forward with every
capture on N ids, R calls each after a warm-up; forward_call.c is the same call from C.
    PYTHONPATH=python /usr/bin/python3 python/examples/forward_call.py build/worldA-f32.blob N R"""
import statistics
import sys
import time

import recall


def median_us(fn, reps):
    for _ in range(3):
        fn()
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        ts.append((time.perf_counter() - t0) * 1e6)
    return statistics.median(ts)


def main():
    blob, n, reps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    m = recall.open(blob)
    ids = [(i * 7919) % m.vocab for i in range(n)]
    print("Python Model.logits, %d ids: median %.1f us over %d calls" % (n, median_us(lambda: m.logits(ids), reps), reps))
    print("Python Model.forward (logits, hidden, q_proj), %d ids: median %.1f us over %d calls"
          % (n, median_us(lambda: m.forward(ids, capture=["logits", "hidden", "q_proj"]), reps), reps))


if __name__ == "__main__":
    main()

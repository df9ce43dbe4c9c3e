#!/usr/bin/python3
"""manifest.py - MANIFEST.xxh64 of a trained-world folder: one line per file, `XXH64  size  path`
(XXH64 with seed 0, the project's checksum: src/checksum.h), sorted by path. train.py writes it
last; tests/test_trained.c checks the committed files against it, so CI never retrains.

    /usr/bin/python3 tools/train_world/manifest.py DIR
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from xxh64 import xxh64  # noqa: E402  (tools/xxh64.py: the project's checksum, seed 0)


def write(d):
    files = sorted(os.path.relpath(os.path.join(r, f), d) for r, _, fs in os.walk(d) for f in fs
                   if not f.startswith("MANIFEST"))
    lines = []
    for f in files:
        b = open(os.path.join(d, f), "rb").read()
        lines.append("%016x  %d  %s\n" % (xxh64(b), len(b), f))
    with open(os.path.join(d, "MANIFEST.xxh64"), "w") as out:
        out.write("".join(lines))
    return len(files)


if __name__ == "__main__":
    print("MANIFEST.xxh64: %d files" % write(sys.argv[1]))

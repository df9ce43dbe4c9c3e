#!/usr/bin/python3
"""manifest.py - MANIFEST.xxh64 of a trained-world folder: one line per file, `XXH64  size  path`
(XXH64 with seed 0, the project's checksum: src/checksum.h), sorted by path. train.py writes it
last; tests/test_trained.c checks the committed files against it, so CI never retrains.

    /usr/bin/python3 tools/train_world/manifest.py DIR
"""
import os
import struct
import sys

M = (1 << 64) - 1
P1, P2, P3, P4, P5 = (0x9E3779B185EBCA87, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9, 0x85EBCA77C2B2AE63,
                      0x27D4EB2F165667C5)


def _rotl(x, r):
    return ((x << r) | (x >> (64 - r))) & M


def _round(acc, v):
    return (_rotl((acc + v * P2) & M, 31) * P1) & M


def _merge(h, v):
    return ((h ^ _round(0, v)) * P1 + P4) & M


def xxh64(data, seed=0):
    n = len(data)
    i = 0
    if n >= 32:
        v = [(seed + P1 + P2) & M, (seed + P2) & M, seed & M, (seed - P1) & M]
        lanes = struct.unpack_from("<%dQ" % ((n // 32) * 4), data, 0)
        for j in range(0, len(lanes), 4):
            v[0] = _round(v[0], lanes[j])
            v[1] = _round(v[1], lanes[j + 1])
            v[2] = _round(v[2], lanes[j + 2])
            v[3] = _round(v[3], lanes[j + 3])
        i = (n // 32) * 32
        h = (_rotl(v[0], 1) + _rotl(v[1], 7) + _rotl(v[2], 12) + _rotl(v[3], 18)) & M
        for x in v:
            h = _merge(h, x)
    else:
        h = (seed + P5) & M
    h = (h + n) & M
    while i + 8 <= n:
        k = struct.unpack_from("<Q", data, i)[0]
        h ^= _round(0, k)
        h = (_rotl(h, 27) * P1 + P4) & M
        i += 8
    if i + 4 <= n:
        h ^= (struct.unpack_from("<I", data, i)[0] * P1) & M
        h = (_rotl(h, 23) * P2 + P3) & M
        i += 4
    while i < n:
        h ^= (data[i] * P5) & M
        h = (_rotl(h, 11) * P1) & M
        i += 1
    h ^= h >> 33
    h = (h * P2) & M
    h ^= h >> 29
    h = (h * P3) & M
    h ^= h >> 32
    return h


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

#!/usr/bin/python3
"""Writes the small malformed npz fixtures in tests/golden/bad/ used by tests/test_convert.c.

Run with Debian's python3 (needs numpy):  /usr/bin/python3 tools/make_bad_inputs.py
The outputs are committed, so the test suite itself needs no Python.
"""
import io
import os
import zipfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.join(HERE, "..", "tests", "golden", "worldA", "gate.npz")
OUT = os.path.join(HERE, "..", "tests", "golden", "bad")
os.makedirs(OUT, exist_ok=True)

gate = dict(np.load(SRC))

# 1. A stored member whose data no longer matches its CRC-32.
raw = bytearray(open(SRC, "rb").read())
with zipfile.ZipFile(io.BytesIO(bytes(raw))) as z:
    info = z.getinfo("coef.npy")
    # local header: 30 bytes + name + extra, then the .npy bytes; flip one byte near the end
    name_len = int.from_bytes(raw[info.header_offset + 26:info.header_offset + 28], "little")
    extra_len = int.from_bytes(raw[info.header_offset + 28:info.header_offset + 30], "little")
    data_start = info.header_offset + 30 + name_len + extra_len
    raw[data_start + info.compress_size - 5] ^= 0x40
open(os.path.join(OUT, "gate_badcrc.npz"), "wb").write(bytes(raw))

# 2. Big-endian float32 and 3. complex64: valid npy files whose dtype we refuse.
be = dict(gate)
be["coef"] = gate["coef"].astype(">f4")
np.savez(os.path.join(OUT, "gate_bigendian.npz"), **be)
cx = dict(gate)
cx["coef"] = gate["coef"].astype(np.complex64)
np.savez(os.path.join(OUT, "gate_complex.npz"), **cx)
print("wrote", sorted(os.listdir(OUT)))

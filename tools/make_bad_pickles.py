#!/usr/bin/python3
"""make_bad_pickles.py - fixtures for tests/test_pickle.c and seeds for fuzz/fuzz_pickle.c.

Standard library only (no torch): torch.save's format is a zip of stored members
  archive/data.pkl  archive/byteorder  archive/version  archive/data/<key>
where data.pkl is a protocol-2 pickle whose tensors are
  torch._utils._rebuild_tensor_v2(<BINPERSID ('storage', torch.FloatStorage, key, 'cpu', numel)>,
                                  offset, size, stride, requires_grad, OrderedDict())
We reproduce exactly that opcode shape by registering stand-in `torch` / `torch._utils` modules
that only exist inside this script, so pickle emits GLOBAL 'torch._utils _rebuild_tensor_v2' etc.
NOTHING here ever unpickles: the malicious pickles are only written (pickletools can show them).

Writes (all small):
  tests/golden/pickle/tiny_p2.pt, tiny_p4.pt   valid: every dtype, 0-d, shared storage, Parameter,
                                               empty tensor, argparse.Namespace args, misc values
  tests/golden/pickle/<bad>.pt                 one refusal each (see BAD below)
  tests/golden/pickle/pooler_expect.txt        per-tensor name/dtype/shape/nbytes/XXH64 of
                                               worldA/pooler.safetensors (the bitwise reference)
  tests/golden/worldA/pooler.pt                copy of the golden checkpoint (from WORLDA_DIR)
  fuzz/corpus/fuzz_pickle/*.pkl                raw data.pkl seeds

usage: /usr/bin/python3 tools/make_bad_pickles.py [WORLDA_DIR]   (from the repo root)
WORLDA_DIR holds the golden pooler.pt and pooler.safetensors (default tests/golden/worldA).
"""
import argparse
import collections
import io
import json
import os
import pickle
import shutil
import struct
import sys
import types

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from xxh64 import xxh64  # noqa: E402
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "golden", "pickle")
CORPUS = os.path.join(ROOT, "fuzz", "corpus", "fuzz_pickle")

# ---- stand-in torch modules (only for pickling names) -----------------------------------------
torch_mod = types.ModuleType("torch")
utils_mod = types.ModuleType("torch._utils")
torch_mod._utils = utils_mod
sys.modules["torch"] = torch_mod
sys.modules["torch._utils"] = utils_mod


def _stub(module, name):
    def f(*args):
        raise RuntimeError("stand-in, never called")
    f.__module__, f.__name__, f.__qualname__ = module.__name__, name, name
    setattr(module, name, f)
    return f


_rebuild_tensor_v2 = _stub(utils_mod, "_rebuild_tensor_v2")
_rebuild_parameter = _stub(utils_mod, "_rebuild_parameter")
STORAGE_TYPES = {}
for tname in ("FloatStorage", "HalfStorage", "BFloat16Storage", "DoubleStorage", "LongStorage"):
    cls = type(tname, (), {})
    cls.__module__ = "torch"
    setattr(torch_mod, tname, cls)
    STORAGE_TYPES[tname] = cls
ELSIZE = {"FloatStorage": 4, "HalfStorage": 2, "BFloat16Storage": 2, "DoubleStorage": 8, "LongStorage": 8}


class Storage:
    def __init__(self, tname, key, data):
        self.tname, self.key, self.data = tname, key, data
        self.numel = len(data) // ELSIZE[tname]


class Tensor:
    def __init__(self, storage, offset, size, stride=None):
        if stride is None:  # contiguous row-major
            stride, acc = [], 1
            for s in reversed(size):
                stride.insert(0, acc)
                acc *= s
        self.args = (storage, offset, tuple(size), tuple(stride), False, collections.OrderedDict())

    def __reduce_ex__(self, proto):
        return (_rebuild_tensor_v2, self.args)


class Parameter:
    def __init__(self, t):
        self.t = t

    def __reduce_ex__(self, proto):
        return (_rebuild_parameter, (self.t, True, collections.OrderedDict()))


class TorchPickler(pickle.Pickler):
    def persistent_id(self, obj):
        if isinstance(obj, Storage):
            return ("storage", STORAGE_TYPES[obj.tname], obj.key, "cpu", obj.numel)
        return None


def dumps(obj, protocol=2):
    bio = io.BytesIO()
    TorchPickler(bio, protocol=protocol).dump(obj)
    return bio.getvalue()


def storages_in(obj, acc):
    if isinstance(obj, Storage):
        acc[obj.key] = obj
    elif isinstance(obj, Tensor):
        storages_in(obj.args[0], acc)
    elif isinstance(obj, Parameter):
        storages_in(obj.t, acc)
    elif isinstance(obj, dict):
        for v in obj.values():
            storages_in(v, acc)
    elif isinstance(obj, argparse.Namespace):
        storages_in(vars(obj), acc)
    return acc


def write_zip(path, members):
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as z:
        for name, data in members:
            z.writestr(zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0)), data)


def pt_members(pkl, storages, byteorder=b"little", skip_keys=()):
    m = [("archive/data.pkl", pkl), ("archive/byteorder", byteorder)]
    for key, st in storages.items():
        if key not in skip_keys:
            m.append(("archive/data/" + key, st.data))
    m.append(("archive/version", b"3\n"))
    return m


# ---- the valid tiny checkpoint ------------------------------------------------------------------
def bf16(x):
    return struct.pack("<f", x)[2:]


def tiny():
    s0 = Storage("FloatStorage", "0", struct.pack("<6f", *[1.5 * i for i in range(6)]))
    s1 = Storage("HalfStorage", "1", struct.pack("<4e", 1.0, -2.0, 65504.0, 2.0 ** -24))
    s2 = Storage("BFloat16Storage", "2", b"".join(bf16(x) for x in (1.0, -3.5, 0.15625, 256.0)))
    s3 = Storage("DoubleStorage", "3", struct.pack("<3d", 0.1, 2.5, -7.0))
    s4 = Storage("LongStorage", "4", struct.pack("<2q", -1, 2 ** 40))
    s5 = Storage("FloatStorage", "5", struct.pack("<f", -1.25))
    s6 = Storage("FloatStorage", "6", b"")
    s7 = Storage("FloatStorage", "7", struct.pack("<2f", 0.5, -0.5))
    model = collections.OrderedDict()
    model["w32"] = Tensor(s0, 0, [2, 3])
    model["h16"] = Tensor(s1, 0, [4])
    model["b16"] = Tensor(s2, 0, [2, 2])
    model["f64"] = Tensor(s3, 0, [3])
    model["i64"] = Tensor(s4, 0, [2])
    model["scalar"] = Tensor(s5, 0, [])
    model["view"] = Tensor(s0, 2, [2])          # shares storage 0: elements 2, 3
    model["empty"] = Tensor(s6, 0, [0, 4])
    model["param"] = Parameter(Tensor(s7, 0, [1, 2], [7, 1]))  # size-1 dim, arbitrary stride
    args = argparse.Namespace(heads=8, name="tiny", lr=0.5)
    return {"model": model, "args": args,
            "meta": [1, 2.5, None, True, b"xy", (1, 2), {"k": -3}],
            "big": 2 ** 40, "neg": -5}


# ---- malicious / broken pickles ------------------------------------------------------------------
def os_system_p2():
    return b"\x80\x02cos\nsystem\nq\x00X\x02\x00\x00\x00idq\x01\x85q\x02Rq\x03."


def os_system_p4():
    body = (b"\x8c\x02os\x94\x8c\x06system\x94\x93\x94\x8c\x02id\x94\x85\x94R\x94.")
    return b"\x80\x04\x95" + struct.pack("<Q", len(body)) + body


class EvalPayload:
    def __reduce__(self):
        return (eval, ("__import__('os').system('id')",))


def builtins_eval():
    # protocol 2 without fix_imports: GLOBAL 'builtins eval', exactly what an attacker gets
    return pickle.dumps(EvalPayload(), protocol=2, fix_imports=False)


def main():
    worlda = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "tests", "golden", "worldA")
    os.makedirs(OUT, exist_ok=True)
    os.makedirs(CORPUS, exist_ok=True)
    os.makedirs(os.path.join(ROOT, "tests", "golden", "worldA"), exist_ok=True)

    t = tiny()
    st = storages_in(t, {})
    p2, p4 = dumps(t, 2), dumps(t, 4)
    write_zip(os.path.join(OUT, "tiny_p2.pt"), pt_members(p2, st))
    write_zip(os.path.join(OUT, "tiny_p4.pt"), pt_members(p4, st))

    bad = {}
    bad["os_system_p2"] = (os_system_p2(), st)
    bad["os_system_p4"] = (os_system_p4(), st)
    bad["builtins_eval"] = (builtins_eval(), st)
    # the payload hidden after valid tensors in a state dict
    hidden = tiny()
    hidden["model"]["zzz"] = EvalPayload()
    bad["hidden_eval"] = (dumps(hidden, 2), st)
    s = Storage("FloatStorage", "0", struct.pack("<6f", *range(6)))
    bad["bad_offset"] = (dumps({"w": Tensor(s, 5, [4])}), {"0": s})
    bad["noncontig"] = (dumps({"w": Tensor(s, 0, [2, 3], [1, 2])}), {"0": s})
    bad["truncated"] = (p2[: len(p2) // 2], st)
    short = Storage("FloatStorage", "0", struct.pack("<2f", 1, 2))
    short.numel = 6  # persistent id claims more elements than the member holds
    bad["short_storage"] = (dumps({"w": Tensor(short, 0, [2])}), {"0": short})
    for name, (pkl, sts) in bad.items():
        write_zip(os.path.join(OUT, name + ".pt"), pt_members(pkl, sts))
    write_zip(os.path.join(OUT, "missing_storage.pt"), pt_members(p2, st, skip_keys=("3",)))
    write_zip(os.path.join(OUT, "big_endian.pt"), pt_members(p2, st, byteorder=b"big"))

    # fuzz seeds: raw data.pkl streams
    for name, data in (("tiny_p2", p2), ("tiny_p4", p4), ("os_system_p2", os_system_p2()),
                       ("os_system_p4", os_system_p4()), ("builtins_eval", builtins_eval())):
        with open(os.path.join(CORPUS, name + ".pkl"), "wb") as f:
            f.write(data)

    # the golden checkpoint and its bitwise reference
    dst = os.path.join(ROOT, "tests", "golden", "worldA", "pooler.pt")
    if os.path.realpath(os.path.join(worlda, "pooler.pt")) != os.path.realpath(dst):
        shutil.copyfile(os.path.join(worlda, "pooler.pt"), dst)
    with zipfile.ZipFile(os.path.join(worlda, "pooler.pt")) as z:
        names = [n for n in z.namelist() if n.endswith("/data.pkl")]
        with open(os.path.join(CORPUS, "pooler.pkl"), "wb") as f:
            f.write(z.read(names[0]))
    with open(os.path.join(worlda, "pooler.safetensors"), "rb") as f:
        raw = f.read()
    (hlen,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + hlen])
    body = raw[8 + hlen:]
    lines = ["# from worldA/pooler.safetensors by tools/make_bad_pickles.py",
             "# name dtype ndim dims... nbytes xxh64(hex, seed 0)"]
    for name, info in header.items():
        if name == "__metadata__":
            continue
        a, b = info["data_offsets"]
        data = body[a:b]
        lines.append(" ".join([name, info["dtype"], str(len(info["shape"]))] + [str(d) for d in info["shape"]]
                              + [str(len(data)), "%016x" % xxh64(data)]))
    with open(os.path.join(OUT, "pooler_expect.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()

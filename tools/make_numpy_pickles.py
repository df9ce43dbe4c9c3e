#!/usr/bin/python3
"""make_numpy_pickles.py - .pt fixtures with numpy values and training state, for tests/test_pickle.c.

Real training scripts save more than the state dict: an argparse Namespace whose values are numpy
scalars (a learning rate from np.float64 arithmetic, np.int64 head counts), numpy arrays, an
optimizer's state_dict, RNG states. These files are written by the real torch.save (Debian's
python3-torch 1.13 with numpy 1.24, which spells the numpy 1 names numpy.core.multiarray.*);
numpy 2's numpy._core.multiarray.* names are made by renaming those GLOBAL lines in data.pkl
(protocol 2 spells a global as the text line "c<module>\\n<name>\\n", and nothing in a pickle
refers to byte positions, so the rename keeps the stream valid). NOTHING here unpickles a
malicious file: those are only written.

Writes into tests/golden/pickle/:
  pooler_np_args.pt    worldA's pooler state dict + args Namespace of numpy values (ARGS below)
  pooler_optim.pt      worldA's pooler state dict + Adam state_dict (query and out_scale trained:
                       the optimizer of the full pooler would triple the file for no extra coverage),
                       epoch np.int64, numpy and torch RNG states, args dict with heads np.int64
  np_args_p4.pt        ARGS and a tiny tensor, pickle protocol 4 (STACK_GLOBAL, MEMOIZE, FRAME)
  np2_args.pt          ARGS and a tiny tensor, numpy 2 names (numpy._core.multiarray.*)
  np_heads_float.pt    a minimal pooler (query, blocks.0.lnq1.weight, blocks.0.ffn.0.weight, zeros) whose
                       args.heads is np.float64(4.0): convert refuses it unless given the head count
  np_load.pt           args.data = numpy.load('evil.npy', allow_pickle=True)      (refused)
  np_runstring.pt      numpy.testing._private.utils.runstring('import os', {})    (refused)
  np_reconstruct_cls.pt  numpy.core.multiarray._reconstruct(collections.OrderedDict, (0,), b'b')
                       (an allowlisted class that is not numpy.ndarray: refused)
  np_object_eval.pt    an object array whose second element is builtins.eval('1+1')  (refused)

and fuzz/corpus/fuzz_pickle/np*.pkl: the data.pkl of the valid ones, as fuzzing seeds.

usage: /usr/bin/python3 tools/make_numpy_pickles.py   (from the repo root; needs python3-torch)
"""
import argparse
import collections
import io
import os
import zipfile

import numpy as np
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "golden", "pickle")
CORPUS = os.path.join(ROOT, "fuzz", "corpus", "fuzz_pickle")
POOLER = os.path.join(ROOT, "tests", "golden", "worldA", "pooler.pt")


def numpy_args():
    """The values tests/test_pickle.c checks one by one (keep both in step)."""
    return argparse.Namespace(
        heads=np.int64(4), n_sp=np.int32(8), ffn=96,
        lr=np.float64(3e-4), wd=np.float32(0.01), warm=np.float16(1.5),
        neg=np.int8(-3), big=np.uint64(2**64 - 1), flag=np.bool_(True),
        betas=np.array([0.9, 0.999]),
        mask=np.array([[1, 2, 3], [4, 5, 6]], dtype=">i4"),
        fmask=np.asfortranarray(np.arange(6, dtype=np.int16).reshape(2, 3)),
        objs=np.array(["a", 1, None], dtype=object),
        name=np.str_("worldA"),
        empty=np.zeros((0, 3), dtype=np.float32),
        zero_d=np.array(2.5),
    )


class Reduce:
    """An object that pickles as fn(*args): the shape of a malicious payload (never called here)."""

    def __init__(self, fn, args):
        self.fn, self.args = fn, args

    def __reduce__(self):
        return (self.fn, self.args)


def save(obj, name, protocol=2):
    torch.save(obj, os.path.join(OUT, name), pickle_protocol=protocol)


def rename_numpy2(src, dst):
    """Rewrites data.pkl's numpy 1 GLOBAL lines to numpy 2 names; other members are copied."""
    with zipfile.ZipFile(os.path.join(OUT, src)) as zin, \
            zipfile.ZipFile(os.path.join(OUT, dst), "w", zipfile.ZIP_STORED) as zout:
        for info in zin.infolist():
            data = zin.read(info.filename)
            if info.filename.endswith("/data.pkl"):
                n = data.count(b"cnumpy.core.multiarray\n")
                assert n >= 2, "expected numpy 1 GLOBAL lines"
                data = data.replace(b"cnumpy.core.multiarray\n", b"cnumpy._core.multiarray\n")
                assert b"numpy.core" not in data
            zout.writestr(zipfile.ZipInfo(info.filename, date_time=(1980, 1, 1, 0, 0, 0)), data)


def main():
    sd = torch.load(POOLER)["pooler"]
    tiny = {"w": torch.arange(6, dtype=torch.float32).reshape(2, 3)}

    save({"pooler": sd, "args": numpy_args()}, "pooler_np_args.pt")

    trained = [sd["query"].clone().requires_grad_(True), sd["out_scale"].clone().requires_grad_(True)]
    opt = torch.optim.Adam(trained, lr=float(np.float64(3e-4)), betas=(0.9, 0.999))
    for _ in range(2):
        opt.zero_grad()
        (trained[0].square().sum() + trained[1].square()).backward()
        opt.step()
    osd = opt.state_dict()
    osd["param_groups"][0]["lr"] = np.float64(1.5e-4)  # as a numpy-based scheduler leaves it
    np.random.seed(7)
    torch.manual_seed(7)
    save({"epoch": np.int64(3), "pooler": sd, "optimizer": osd,
          "rng": np.random.get_state(), "torch_rng": torch.get_rng_state(),
          "args": {"heads": np.int64(4), "n_sp": 8, "ffn": 96}}, "pooler_optim.pt")

    save({"model": tiny, "args": numpy_args()}, "np_args_p4.pt", protocol=4)
    save({"model": tiny, "args": numpy_args()}, "np_args_p2.tmp")
    rename_numpy2("np_args_p2.tmp", "np2_args.pt")
    os.unlink(os.path.join(OUT, "np_args_p2.tmp"))

    stub = {"query": torch.zeros(8, 64), "blocks.0.lnq1.weight": torch.zeros(64),
            "blocks.0.ffn.0.weight": torch.zeros(96, 64)}
    save({"pooler": stub, "args": {"heads": np.float64(4.0)}}, "np_heads_float.pt")

    save({"model": tiny, "args": {"heads": 4, "data": Reduce(np.load, ("evil.npy", None, True))}}, "np_load.pt")
    from numpy.testing._private import utils as npt_utils
    save({"model": tiny, "args": {"hook": Reduce(npt_utils.runstring, ("import os", {}))}}, "np_runstring.pt")
    save({"model": tiny, "args": {"x": Reduce(np.core.multiarray._reconstruct,
                                              (collections.OrderedDict, (0,), b"b"))}}, "np_reconstruct_cls.pt")
    save({"model": tiny, "args": {"objs": np.array([1, Reduce(eval, ("1+1",))], dtype=object)}}, "np_object_eval.pt")

    seeds = {"pooler_np_args": "np_args_p2", "pooler_optim": "np_optim", "np_args_p4": "np_args_p4",
             "np2_args": "np2_args"}
    for name, seed in seeds.items():
        with zipfile.ZipFile(os.path.join(OUT, name + ".pt")) as z:
            pkl = [n for n in z.namelist() if n.endswith("/data.pkl")][0]
            with open(os.path.join(CORPUS, seed + ".pkl"), "wb") as f:
                f.write(z.read(pkl))


if __name__ == "__main__":
    main()

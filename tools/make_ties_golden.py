#!/usr/bin/python3
"""make_ties_golden.py - torch's own picks for the recall loop's tied retrieval fires.

tests/test_recall_ties.c runs the recall loop on worldA with dialogues of identical one-block turns,
so that several sealed blocks get bitwise equal bridge scores, and every gate check fires. The loop
must pick the candidates torch.topk picks (the reference's retrieval is
torch.topk(bridge, min(2, n)) on CPU, then sorted). This script asks torch 1.13 for those picks:

  1. RECALL_TIES_DUMP=build/ties ./build/run_tests --filter 'recall_ties/*'
     (the test writes each layout's fires - c0 and the fp32 bridge scores - to build/ties/LAYOUT.json)
  2. /usr/bin/python3 tools/make_ties_golden.py build/ties tests/golden/ties/recall_ties_torch.json

For every fire the golden keeps c0, the scores as fp32 bit patterns (the test checks that the loop
still computes exactly these inputs), torch.topk's indices in its own order, and them sorted (the
order the loop injects in). Needs Debian's python3-torch (/usr/bin/python3).
"""
import glob
import json
import os
import struct
import sys

import torch


def f32_bits(x):
    return "%08x" % struct.unpack("<I", struct.pack("<f", x))[0]


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: make_ties_golden.py DUMP_DIR OUT.json")
    dump_dir, out = sys.argv[1], sys.argv[2]
    layouts = {}
    for path in sorted(glob.glob(os.path.join(dump_dir, "*.json"))):
        with open(path) as f:
            d = json.load(f)
        fires = []
        for fire in d["fires"]:
            # the dump prints each fp32 score to 9 significant digits: it parses back to the same float
            scores = torch.tensor(fire["bridge"], dtype=torch.float32)
            k = min(2, scores.numel())
            idx = torch.topk(scores, k).indices.tolist()
            fires.append({
                "c0": fire["c0"],
                "bridge_bits": [f32_bits(v) for v in scores.tolist()],
                "torch_topk": idx,
                "top": sorted(idx),
            })
        layouts[d["layout"]] = fires
    if not layouts:
        sys.exit("no LAYOUT.json in %s (run the test with RECALL_TIES_DUMP first)" % dump_dir)
    doc = {"made_by": "torch.topk on CPU, torch %s (tools/make_ties_golden.py)" % torch.__version__,
           "layouts": layouts}
    tmp = out + ".tmp"
    with open(tmp, "w") as f:  # one fire per line
        f.write('{"made_by": %s,\n "layouts": {' % json.dumps(doc["made_by"]))
        for i, (name, fires) in enumerate(sorted(layouts.items())):
            f.write('%s\n  %s: [' % ("," if i else "", json.dumps(name)))
            f.write(",".join("\n   " + json.dumps(fire, sort_keys=True) for fire in fires))
            f.write("]")
        f.write("}}\n")
    os.replace(tmp, out)
    print("%s: %d layouts, %d fires" % (out, len(layouts), sum(len(v) for v in layouts.values())))


if __name__ == "__main__":
    main()

"""Fixtures of the bindings' tests: the command line, the blobs, the library (make test-python
sets RECALL_LIB, RECALL_BIN and BUILD; run alone from the repository root it finds them under
build/). A blob or a binary that is missing fails the test: nothing is skipped."""
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "python"))
BUILD = os.path.join(ROOT, os.environ.get("BUILD", "build"))
if not os.environ.get("RECALL_LIB"):
    os.environ["RECALL_LIB"] = os.path.join(BUILD, "librecall.so")
RECALL_BIN = os.path.join(ROOT, os.environ.get("RECALL_BIN", "recall"))
FULL = bool(os.environ.get("RECALL_FULL"))

# world: blob, benchmark, a text of the world's own
WORLDS = {
    "worldA": (os.path.join(BUILD, "worldA-f32.blob"), os.path.join(ROOT, "tests/golden/recall_bench.json")),
    "trained": (os.path.join(BUILD, "trained-f32.blob"), os.path.join(ROOT, "tests/golden/trained/replay/bench.json")),
}


def pytest_configure(config):
    config.addinivalue_line("markers", "full: run by make test-full only (RECALL_FULL=1)")


def pytest_collection_modifyitems(config, items):
    if FULL:
        return
    skip = pytest.mark.skip(reason="the full tier (make test-full, RECALL_FULL=1)")
    for it in items:
        if "full" in it.keywords:
            it.add_marker(skip)


def cli(*args, check=True):
    """./recall ARGS; its stdout (stderr shown when it fails)."""
    p = subprocess.run([RECALL_BIN] + [str(a) for a in args], cwd=ROOT, capture_output=True, text=True, errors="surrogateescape")
    if check and p.returncode != 0:
        raise AssertionError("recall %s: exit %d\n%s" % (" ".join(map(str, args)), p.returncode, p.stderr))
    return p


@pytest.fixture(scope="session")
def recall():
    import recall as r
    assert os.path.realpath(r.lib_path) == os.path.realpath(os.environ["RECALL_LIB"]), r.lib_path
    return r


@pytest.fixture(scope="session", params=sorted(WORLDS))
def world(request, recall):
    blob, bench = WORLDS[request.param]
    assert os.path.exists(blob), "%s is missing (make %s)" % (blob, os.path.relpath(blob, ROOT))
    m = recall.open(blob)
    yield request.param, blob, bench, m
    m.close()


@pytest.fixture(scope="session")
def worldA(recall):
    blob, bench = WORLDS["worldA"]
    assert os.path.exists(blob), "%s is missing" % blob
    m = recall.open(blob)
    yield blob, bench, m
    m.close()

"""The verification example (python/examples/verify_worldA.py): the engine and the torch replay
agree at every stage. Full tier only (torch, about 30 s)."""
import importlib.util
import os
import subprocess
import sys

import pytest

from conftest import ROOT


@pytest.mark.full
@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="needs torch (Debian: python3-torch)")
def test_verify_example_agrees():
    p = subprocess.run([sys.executable, os.path.join(ROOT, "python/examples/verify_worldA.py")], cwd=ROOT,
                       capture_output=True, text=True, errors="replace")
    assert p.returncode == 0, p.stdout + p.stderr
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith("  ")]
    assert len(lines) == 14 and all(ln.endswith("AGREE") for ln in lines), p.stdout
    assert "loop: fires            1 fires" in p.stdout  # the turn compared has a fire

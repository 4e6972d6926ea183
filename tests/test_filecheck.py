"""Runs the lit/filecheck suite in tests/filecheck through our own ziggurat-opt."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

SUITE = Path(__file__).parent / "filecheck"


def test_filecheck_suite(tmp_path) -> None:
    bindir = str(Path(sys.executable).parent)
    env = {**os.environ, "PATH": bindir + os.pathsep + os.environ.get("PATH", "")}
    lit = shutil.which("lit", path=env["PATH"])
    if lit is None or shutil.which("ziggurat-opt", path=env["PATH"]) is None:
        pytest.fail("lit and ziggurat-opt must be installed: pip install -e '.[dev]'")
    # the Output/ folders go to a temporary folder, not into the source tree
    proc = subprocess.run([lit, "-v", "--param", f"exec_root={tmp_path}", str(SUITE)], capture_output=True, text=True,
                          env=env, timeout=900)
    assert proc.returncode == 0, proc.stdout[-8000:] + proc.stderr[-2000:]
    assert "Passed" in proc.stdout
    assert any(tmp_path.rglob("Output")), "lit wrote its Output/ folders elsewhere"

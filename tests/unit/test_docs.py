"""docs/ must match the code: generated parts are fresh and every pass is documented."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from ziggurat.transforms import get_all_passes

DOCS = Path(__file__).resolve().parents[2] / "docs"


def test_generated_docs_are_fresh() -> None:
    proc = subprocess.run([sys.executable, str(DOCS / "generate.py"), "--check"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


def test_every_pass_has_a_reference_section() -> None:
    text = (DOCS / "pass-reference.md").read_text()
    for name in get_all_passes():
        assert f"\n## {name}\n" in text, name

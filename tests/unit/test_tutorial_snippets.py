"""The Python blocks of docs/tutorial.md run as written: in order, as one program, in a fresh
process in a temporary folder (with docs/examples/ copied there). A block right after the line
`<!-- not run -->` is skipped."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parents[2] / "docs"
BLOCK = re.compile(r"(<!-- not run -->\n)?```python\n(.*?)```", re.S)


def snippets(page: str) -> list[str]:
    """The runnable ```python blocks of `page`, in order."""
    return [m.group(2) for m in BLOCK.finditer((DOCS / page).read_text()) if not m.group(1)]


def test_tutorial_snippets_run(tmp_path: Path) -> None:
    blocks = snippets("tutorial.md")
    assert len(blocks) >= 5
    shutil.copytree(DOCS / "examples", tmp_path / "docs" / "examples")
    script = tmp_path / "tutorial.py"
    script.write_text("\n\n".join(blocks))
    proc = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert (tmp_path / "silu.onnx").exists()

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


def test_the_plugin_is_the_tutorials_code_in_at_most_60_lines() -> None:
    """Issue 24's acceptance: the plugin (a dialect with one op, a pass that reads a constant, a lowering)
    is the tutorial's Python blocks before the one that uses it, at most 60 non-blank lines, and
    docs/examples/act_plugin.py (which the CLI examples and the other plugin tests load) is exactly them."""
    blocks = snippets("tutorial.md")
    end = next(i for i, b in enumerate(blocks) if b.startswith("import numpy as np\nimport onnx"))
    lines = [line for block in blocks[:end] for line in block.splitlines() if line.strip()]
    assert len(lines) <= 60, len(lines)
    assert any("weights_of(" in line for line in lines) and "needs_weights = True" in "\n".join(lines)
    module = (DOCS / "examples" / "act_plugin.py").read_text()
    body = module[module.index('"""', 3) + 3:]  # after the module docstring
    assert [line for line in body.splitlines() if line.strip()] == lines

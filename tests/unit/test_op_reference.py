"""Every example of docs/op-reference.md (generated from the ops' docstrings by docs/generate.py)
parses with ziggurat's dialects. Values an example uses but does not define are allowed: an
example shows one op, not a whole function. A block whose first line is `// fragment` is skipped."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from xdsl.parser import Parser
from xdsl.utils.exceptions import ParseError

from ziggurat.dialects import get_all_dialects
from ziggurat.registry import make_context

DOCS = Path(__file__).resolve().parents[2] / "docs"
BLOCK = re.compile(r"^### (\S+)$|```mlir[^\n]*\n(.*?)```", re.S | re.M)


def _examples() -> list[tuple[str, str]]:
    text = (DOCS / "op-reference.md").read_text()
    out, op = [], "?"
    for m in BLOCK.finditer(text):
        if m.group(1):
            op = m.group(1)
        elif not m.group(2).lstrip().startswith("// fragment"):
            out.append((op, m.group(2)))
    return out


EXAMPLES = _examples()


def test_every_op_has_a_section() -> None:
    text = (DOCS / "op-reference.md").read_text()
    for factory in get_all_dialects().values():
        for op in factory().operations:
            assert f"\n### {op.name}\n" in text, op.name


@pytest.mark.parametrize("op,example", EXAMPLES, ids=[f"{op}-{i}" for i, (op, _) in enumerate(EXAMPLES)])
def test_example_parses(op: str, example: str) -> None:
    try:
        Parser(make_context(), example).parse_module()
    except ParseError as err:
        if "values used but not defined" not in str(err):
            raise

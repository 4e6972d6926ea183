"""`ziggurat-opt --verify-diagnostics`: `expected-error` annotations checked as mlir-opt checks them.

A chunk of the input (the whole file, or one `// -----` split of it) that holds annotations

    // expected-error@+1 {{contracting dims differ: 8 vs 7}}
    %c = graph.matmul %a, %b : tensor<4x8xf32>, tensor<7x5xf32> -> tensor<4x5xf32>

passes when the error it produces contains each expected text and is reported at the annotated
line: `expected-error {{...}}` names its own line, `@+N`/`@-N` a line below/above it, `@above` and
`@below` the lines next to it, and `@unknown` an error that names no op (a pass that fails before
it reaches one, e.g. a pass that needs weight values none are bound for). An error at another line,
an error nobody expected and an expected error that did not come are each reported as
`FILE:LINE: ...` and make the run fail (exit 1); a chunk that fails as expected prints no IR.

Where an error is: parsed ops get the location `loc("FILE":LINE:COL)` (unless the text gives them
one), and the rewrites carry it onto the ops that replace them, as in MLIR; the op of a verifier
failure (`lowering/locations.invalid_op`), or the op a lowering error names
(`lowering/locations.name_source`), gives the line.

A chunk without annotations keeps xDSL's meaning of the flag: a verifier or parse error is printed
on stdout (for FileCheck) and the run goes on.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from xdsl.dialects.builtin import FileLineColLoc, IntAttr, StringAttr, UnknownLoc
from xdsl.ir import Operation
from xdsl.parser import Parser

EXPECTED = re.compile(r"expected-error(?:@(?P<at>[+-]\d+|above|below|unknown))?\s*\{\{(?P<text>.*?)\}\}")


@dataclass(frozen=True)
class Expected:
    line: int | None  # the file line the error must be reported at; None: `@unknown`
    text: str
    written_at: int  # the file line of the annotation


def expectations(text: str, first_line: int = 1) -> list[Expected]:
    """The `expected-error` annotations of a chunk whose first line is file line `first_line`."""
    found = []
    for i, line in enumerate(text.splitlines()):
        here = first_line + i
        for m in EXPECTED.finditer(line):
            at = m.group("at")
            if at in (None, "above", "below", "unknown"):
                target = {None: here, "above": here - 1, "below": here + 1, "unknown": None}[at]
            else:
                target = here + int(at)
            found.append(Expected(target, m.group("text").strip(), here))
    return found


class LocatingParser(Parser):
    """A parser that gives each op it parses without a location `loc("FILE":LINE:COL)`, its
    position in the file (lines counted from `first_line`)."""

    def __init__(self, ctx, text: str, name: str, first_line: int = 1):
        super().__init__(ctx, text, name)
        self.first_line = first_line

    def parse_operation(self) -> Operation:
        start = self._current_token.span.get_location()
        op = super().parse_operation()
        if isinstance(op.location, UnknownLoc):
            op.location = FileLineColLoc(StringAttr(start.file), IntAttr(start.line + self.first_line - 1),
                                         IntAttr(start.col))
        return op


def error_line(err: BaseException, module: Operation | None) -> int | None:
    """The file line an error is reported at: its parse position, the op that fails to verify, or
    the op a lowering error names; None when it names no op."""
    from xdsl.utils.exceptions import ParseError

    from ziggurat.lowering.locations import invalid_op

    if isinstance(err, ParseError):  # its span's line_offset set to the chunk's
        return err.span.get_location().line
    op = getattr(err, "ziggurat_op", None)
    if op is None and module is not None:
        found = invalid_op(module)
        op = found[0] if found else None
    while op is not None:
        if isinstance(op.location, FileLineColLoc):
            return op.location.line.data
        op = op.parent_op()
    return None


def check(expected: list[Expected], produced: tuple[int | None, str] | None, filename: str) -> list[str]:
    """What does not match: an expected error not produced (or at another line), an error not expected."""
    problems = []
    matched = False
    for e in expected:
        if produced is not None and not matched and e.text in produced[1] and e.line == produced[0]:
            matched = True
            continue
        where = "at an unknown location" if e.line is None else f"at line {e.line}"
        problems.append(f"{filename}:{e.written_at}: expected error \"{e.text}\" {where} was not produced")
    if produced is not None and not matched:
        line = "unknown location" if produced[0] is None else str(produced[0])
        problems.append(f"{filename}:{line}: unexpected error: {produced[1].splitlines()[0]}")
    return problems

"""The `%buffer[%i, %j]` syntax shared by the element and vector accesses of
the te, loop and hw dialects (`te.read`, `loop.load/store`, `hw.vload/vstore`)."""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import IndexType
from xdsl.ir import SSAValue
from xdsl.parser import Parser, UnresolvedOperand
from xdsl.printer import Printer


def print_access(printer: Printer, buffer: SSAValue, indices: Sequence[SSAValue]) -> None:
    """Prints `%buffer[%i, %j]`."""
    printer.print_ssa_value(buffer)
    with printer.in_square_brackets():
        printer.print_list(indices, printer.print_ssa_value)


def parse_access(parser: Parser) -> tuple[UnresolvedOperand, list[UnresolvedOperand]]:
    """Parses `%buffer[%i, %j]`; resolve the indices with `resolve_indices`."""
    buffer = parser.parse_unresolved_operand()
    indices = parser.parse_comma_separated_list(Parser.Delimiter.SQUARE, parser.parse_unresolved_operand)
    return buffer, indices


def resolve_indices(parser: Parser, indices: Sequence[UnresolvedOperand]) -> list[SSAValue]:
    return [parser.resolve_operand(i, IndexType()) for i in indices]

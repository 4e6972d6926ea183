"""The shared vocabulary of the compute definitions (TOPI): what a definition is
(`Define`: a graph op, a builder and a lookup of its operands' te values, to
the te value of its result) and the small helpers every `topi*.py` module uses.
`topi.py` and its family modules (`topi_layout.py`, `topi_quant.py`, ...)
import from here, so none of them imports `topi.py` back.
"""

from __future__ import annotations

from collections.abc import Callable

from xdsl.builder import Builder
from xdsl.ir import Operation, SSAValue

Lookup = Callable[[SSAValue], SSAValue]
Define = Callable[[Operation, Builder, Lookup], SSAValue]

NEG_INF = float("-inf")


def shape_of(v: SSAValue) -> tuple:
    """The shape of a tensor value: ints, and a `Sym` for each symbolic dim (dialects/sym.py)."""
    from ziggurat.dialects.sym import shape_of as type_shape

    return type_shape(v.type)


def ints_of(attr) -> tuple[int, ...]:
    return tuple(attr.get_values())

"""Symbolic extents in the LLVM backend: the values of `#sym.dims` expressions.

A function over symbolic buffers names its trailing `index` arguments in
`sym.symbols` (dialects/sym.py `symbol_args`). While it is translated, `Translator.symbols`
maps each name to that argument; an expression (an address's stride, an
allocation's size, a copy's length) is computed from them once per function, in
its entry block, and an outlined parallel body captures the arguments as it
captures any other value.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from llvmlite import ir

from ziggurat.backends.llvm.lltypes import I64
from ziggurat.dialects.sym import SYMBOLS_ATTR, is_symbolic_type, shape_of
from ziggurat.errors import CompileError
from ziggurat.symbolic import Dim, Sym, prod, row_major_strides

if TYPE_CHECKING:
    from ziggurat.backends.llvm.translate import FuncState, Translator


def value(t: Translator, f: FuncState, d: Dim) -> ir.Value:
    """The i64 value of an extent: a constant, or its polynomial over the symbols' arguments,
    computed once per function in its entry block (so it dominates every use)."""
    if not isinstance(d, Sym):
        return I64(int(d))
    hit = f.extents.get(d)
    if hit is not None:
        return hit
    b = f.entry_b
    total: ir.Value | None = None
    for monomial, coef in d.terms.items():
        term: ir.Value | None = None
        for s in monomial:
            arg = t.symbols.get(s)
            if arg is None:
                raise CompileError(f"llvm backend: the extent '{d}' in @{f.root.fn.name} needs symbol '{s}', "
                                   f"which the function is not given (list it in {SYMBOLS_ATTR})")
            x = f.get(arg)
            term = x if term is None else b.mul(term, x, flags=("nsw",))
        if term is None:
            term = I64(coef)
        elif coef != 1:
            term = b.mul(term, I64(coef), flags=("nsw",))
        total = term if total is None else b.add(total, term, flags=("nsw",))
    f.extents[d] = total if total is not None else I64(0)
    return f.extents[d]


def strides(memref) -> tuple[Dim, ...]:
    """Row-major element strides of a memref type, ints or expressions."""
    return row_major_strides(shape_of(memref))


def element_count(memref) -> Dim:
    return prod(shape_of(memref)) if is_symbolic_type(memref) else memref.element_count()

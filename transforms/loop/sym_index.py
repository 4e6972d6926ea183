"""Index arithmetic over a kernel's symbols: the loop-level passes' view of run-time extents.

A kernel over `#sym.dims` buffers ends with one `index` argument per symbol, named in its
`sym.symbols` attribute (dialects/sym.py `symbol_args` maps the names to the arguments);
`symbol_dims` maps the arguments to their `Sym`s; `dim_of` reads a loop bound or an extent built
from those and constants by `+`, `-` and `*` as a `Dim`, and `index_of` writes a `Dim` back as
index arithmetic on the arguments (loop-simplify-index, pad_dynamic.py)."""

from __future__ import annotations

from functools import lru_cache

from xdsl.builder import Builder
from xdsl.dialects import arith, func
from xdsl.dialects.builtin import IndexType, IntegerAttr
from xdsl.ir import Operation, SSAValue

from ziggurat.dialects.sym import symbol_args
from ziggurat.symbolic import Dim, Sym


@lru_cache(maxsize=1024)
def _parsed(name: str) -> Dim:
    return Sym.parse(name)


def symbol_dims(fn: func.FuncOp | None) -> dict[SSAValue, Dim]:
    """Each symbol argument of `fn` (None: none) as its `Sym` (each name parsed once: loop-simplify-index
    asks for them per block)."""
    return {a: _parsed(name) for name, a in symbol_args(fn).items()} if fn is not None else {}


def enclosing_function(op: Operation) -> func.FuncOp | None:
    p = op.parent_op()
    while p is not None and not isinstance(p, func.FuncOp):
        p = p.parent_op()
    return p


def dim_of(v: SSAValue | int, syms: dict[SSAValue, Dim]) -> Dim | None:
    """A loop bound or an extent as a Dim: a constant, a symbol argument, or +, -, * of those."""
    if isinstance(v, int):
        return v
    if v in syms:
        return syms[v]
    op = v.owner
    if isinstance(op, arith.ConstantOp) and isinstance(op.value, IntegerAttr):
        return op.value.value.data
    if isinstance(op, (arith.AddiOp, arith.SubiOp, arith.MuliOp)):
        a, b = dim_of(op.lhs, syms), dim_of(op.rhs, syms)
        if a is None or b is None:
            return None
        return a + b if isinstance(op, arith.AddiOp) else a - b if isinstance(op, arith.SubiOp) else a * b
    return None


def index_of(b: Builder, d: Dim, args: dict[str, SSAValue]) -> int | SSAValue:
    """`d` as a loop bound: a constant, or index arithmetic on the symbol arguments `args`."""
    if not isinstance(d, Sym):
        return int(d)
    total: SSAValue | None = None
    for monomial, c in d.terms.items():
        term: SSAValue | None = None
        for s in monomial:
            x = args[s]
            term = x if term is None else b.insert(arith.MuliOp(term, x)).result
        k = b.insert(arith.ConstantOp(IntegerAttr(c, IndexType()))).result if term is None or c != 1 else None
        term = k if term is None else term if k is None else b.insert(arith.MuliOp(term, k)).result
        total = term if total is None else b.insert(arith.AddiOp(total, term)).result
    assert total is not None
    return total


__all__ = ["dim_of", "enclosing_function", "index_of", "symbol_dims"]

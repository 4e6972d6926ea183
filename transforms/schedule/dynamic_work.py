"""The work of a loop nest over run-time extents, as an expression of the kernel's symbols.

loop-parallelize-outer keeps a static nest serial when its work (ops executed in its blocks,
each loop multiplying by its trip count, a `vectorized` one by its trips over `WORK_LANES`) is
below `min-work`: forking costs more than it saves. Over symbolic extents the work is known only
at run time, so loop-dynamic-schedule writes it on the parallel loop as an expression
(`dyn.work = "96*n"`), and the LLVM backend runs the loop on threads only where its value at the
call reaches `MIN_WORK` (backends/llvm/loops.py). A loop bound that is no expression of the
symbols (a register block's row count `n - n % 6`) counts as the expression it trims (`n`), a
masked vector's lane count `min(n - j, 16)` as its constant; a nest whose bounds are none of
these gets no estimate and always forks.
"""

from __future__ import annotations

from xdsl.dialects import arith
from xdsl.ir import Operation, SSAValue

from ziggurat.dialects import loop
from ziggurat.symbolic import Dim, Sym
from ziggurat.transforms.loop.sym_index import dim_of
from ziggurat.transforms.schedule.loop_parallelize_outer import WORK_LANES

WORK = loop.WORK_ATTR  # attribute of a parallel loop: its work as a #sym.dims-style expression
MIN_WORK = loop.MIN_WORK


def _bound(v: SSAValue | int, syms: dict[SSAValue, Dim]) -> Dim | None:
    d = dim_of(v, syms)
    if d is None and isinstance(v, SSAValue) and isinstance(v.owner, arith.SubiOp) \
            and isinstance(v.owner.rhs.owner, arith.RemSIOp):
        return _bound(v.owner.lhs, syms)  # `hi - (hi - lo) % k`: at most hi
    if d is None and isinstance(v, SSAValue) and isinstance(v.owner, arith.MinSIOp):
        for side in (v.owner.lhs, v.owner.rhs):  # a masked vector's lanes: at most the constant
            if isinstance(k := dim_of(side, syms), int):
                return k
    return d


def _per(d: Dim, k: int) -> Dim:
    """`d / k`, each coefficient rounded up (an estimate: no floor quotient the kernel lacks)."""
    if k == 1:
        return d
    if not isinstance(d, Sym):
        return -(-int(d) // k)
    return Sym({m: -(-c // k) for m, c in d.terms.items()}).simplify()


def work(op: Operation, syms: dict[SSAValue, Dim], lanes: int) -> Dim | None:
    """Ops executed in the blocks under `op` (None where a loop bound is unknown)."""
    if isinstance(op, loop.BlockOp):
        return max(1, len(list(op.body.block.ops)))
    if not isinstance(op, loop.ForOp):
        return 0
    lo, hi = _bound(op.lower, syms), _bound(op.upper, syms)
    if lo is None or hi is None:
        return None
    inner: Dim = 0
    for o in op.body.block.ops:
        w = work(o, syms, lanes)
        if w is None:
            return None
        inner = inner + w
    div = op.step.value.data * (min(lanes, WORK_LANES) if op.kind.data == "vectorized" else 1)
    return _per((hi - lo) * inner, div)


__all__ = ["MIN_WORK", "WORK", "work"]

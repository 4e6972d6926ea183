"""split: one loop -> an outer and an inner loop.

```mlir
loop.for %i = 0 to 32 serial { loop.block "b" [S %v = %i] {...} }
```
split by 16 becomes
```mlir
loop.for %i_o = 0 to 2 serial {
  loop.for %i_i = 0 to 16 serial {
    %c = arith.constant 16 : index
    %t = arith.muli %i_o, %c : index
    %i = arith.addi %t, %i_i : index
    loop.block "b" [S %v = %i] {...}
  }
}
```
"""

from __future__ import annotations

from xdsl.builder import Builder
from xdsl.dialects import arith
from xdsl.dialects.builtin import IndexType, IntegerAttr
from xdsl.rewriter import InsertPoint

from ziggurat.dialects import loop
from ziggurat.errors import ScheduleError
from ziggurat.transforms.loop.primitives.loops import describe, require_plain


def split(f: loop.ForOp, factor: int) -> tuple[loop.ForOp, loop.ForOp]:
    """Splits `f` into (outer, inner) with `factor` iterations inside; the factor must divide the trip count."""
    require_plain(f, "split")
    n = f.trip_count
    if factor < 1 or n % factor:
        divisors = [d for d in range(2, n) if n % d == 0]
        raise ScheduleError(f"split: factor {factor} does not divide the trip count {n} of {describe(f)}; "
                            f"use one of {divisors}")
    return split_loop(f, n // factor, factor, ("_o", "_i"))


def split_loop(f: loop.ForOp, outer_trips: int, factor: int, suffixes: tuple[str, str],
               start: int = 0) -> tuple[loop.ForOp, loop.ForOp]:
    """`f` (step 1) as `outer_trips` x `factor` nested loops from 0 whose variables give `f`'s as
    `outer * factor + inner` (`+ start`, `f`'s lower bound when it is not 0), named with `suffixes`;
    no check that they cover `f` exactly (bind_threads guards a tail)."""
    name = f.iv.name_hint or "i"
    outer = Builder(InsertPoint.before(f)).insert(loop.ForOp(0, outer_trips))
    outer.iv.name_hint = f"{name}{suffixes[0]}"
    inner = Builder(InsertPoint.at_end(outer.body.block)).insert(loop.ForOp(0, factor))
    inner.iv.name_hint = f"{name}{suffixes[1]}"
    b = Builder(InsertPoint.at_end(inner.body.block))
    c = b.insert(arith.ConstantOp(IntegerAttr(factor, IndexType()))).result
    t = b.insert(arith.MuliOp(outer.iv, c)).result
    iv = b.insert(arith.AddiOp(t, inner.iv)).result
    if start:
        iv = b.insert(arith.AddiOp(iv, b.insert(arith.ConstantOp(IntegerAttr(start, IndexType()))).result)).result
    iv.name_hint = name
    for op in list(f.body.block.ops):
        op.detach()
        inner.body.block.add_op(op)
    f.iv.replace_all_uses_with(iv)
    f.detach()
    f.erase()
    return outer, inner

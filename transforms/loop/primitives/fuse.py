"""fuse: two directly nested loops -> one loop over their product.

```mlir
loop.for %i = 0 to 4 serial { loop.for %j = 0 to 8 serial { loop.block "b" [S %a = %i, S %b = %j] {...} } }
```
becomes
```mlir
loop.for %i_j = 0 to 32 serial {
  %c = arith.constant 8 : index
  %i = arith.divui %i_j, %c : index
  %j = arith.remui %i_j, %c : index
  loop.block "b" [S %a = %i, S %b = %j] {...}
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
from ziggurat.transforms.loop.primitives.loops import describe, hoist_index_ops, require_plain, single_child_loop


def fuse(outer: loop.ForOp, inner: loop.ForOp) -> loop.ForOp:
    """Fuses `inner`, which must be the only loop directly inside `outer`."""
    require_plain(outer, "fuse")
    require_plain(inner, "fuse")
    if single_child_loop(outer) is not inner:
        raise ScheduleError(f"fuse: {describe(inner)} is not directly nested in {describe(outer)}")
    hoist_index_ops(outer, inner, "fuse")
    n2 = inner.trip_count
    fused = Builder(InsertPoint.before(outer)).insert(loop.ForOp(0, outer.trip_count * n2))
    fused.iv.name_hint = f"{outer.iv.name_hint or 'i'}_{inner.iv.name_hint or 'j'}"
    b = Builder(InsertPoint.at_end(fused.body.block))
    c = b.insert(arith.ConstantOp(IntegerAttr(n2, IndexType()))).result
    i = b.insert(arith.DivUIOp(fused.iv, c)).result
    j = b.insert(arith.RemUIOp(fused.iv, c)).result
    i.name_hint, j.name_hint = outer.iv.name_hint, inner.iv.name_hint
    for op in list(inner.body.block.ops):
        op.detach()
        fused.body.block.add_op(op)
    inner.iv.replace_all_uses_with(j)
    outer.iv.replace_all_uses_with(i)
    outer.detach()
    outer.erase()
    return fused

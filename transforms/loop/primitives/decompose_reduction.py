"""decompose_reduction: move a reduction's init block into its own loop nest.

convert-te-to-loop puts the init block `<name>_init` between the spatial and
the reduction loops, which keeps the nest imperfect (reorder refuses it).
Decomposing at loop `%j` (TensorIR semantics) places the init block before
`%j`, in copies of the loops from `%j` down to the init block:
```mlir
loop.for %i = 0 to 4 serial {
  loop.for %j = 0 to 8 serial {
    loop.block "mm_init" [S %a = %i, S %b = %j] {...}
    loop.for %k = 0 to 16 serial { loop.block "mm" [S %c = %i, S %d = %j, R %e = %k] {...} }
  }
}
```
decompose_reduction("mm", %j) becomes
```mlir
loop.for %i = 0 to 4 serial {
  loop.for %j2 = 0 to 8 serial { loop.block "mm_init" [S %a = %i, S %b = %j2] {...} }
  loop.for %j = 0 to 8 serial {
    loop.for %k = 0 to 16 serial { loop.block "mm" [S %c = %i, S %d = %j, R %e = %k] {...} }
  }
}
```
after which `%j` and `%k` form a perfect nest. The loop must enclose the
init block (or be the loop right after it) and every copied loop must be
spatial, else ScheduleError.
"""

from __future__ import annotations

from xdsl.builder import Builder
from xdsl.ir import SSAValue
from xdsl.rewriter import InsertPoint

from ziggurat.dialects import loop
from ziggurat.errors import ScheduleError
from ziggurat.transforms.loop.primitives.loops import INDEX_OPS, bound_kinds, describe, get_loops


def decompose_reduction(update: loop.BlockOp, init: loop.BlockOp | None, f: loop.ForOp) -> loop.BlockOp:
    """Moves `init` (the init block of reduction block `update`) into a new nest before `f`; returns it."""
    name = update.block_name.data
    if "R" not in update.iter_kinds.data:
        raise ScheduleError(f"decompose_reduction: block '{name}' is not a reduction (no R variable)")
    if init is None:
        raise ScheduleError(f"decompose_reduction: reduction block '{name}' has no init block '{name}_init' "
                            "(already decomposed at an outer loop, or lowered without one)")
    loops = get_loops(update)
    if not any(g is f for g in loops):
        raise ScheduleError(f"decompose_reduction: {describe(f)} is not a loop around block '{name}'")
    init_loops = get_loops(init)
    p = next(n for n, g in enumerate(loops) if g is f)
    q = len(init_loops)
    if q >= len(loops) or init_loops != loops[:q] or init.parent_op() is not loops[q].parent_op() \
            or init.parent_block() is not loops[q].parent_block():
        raise ScheduleError(f"decompose_reduction: init block '{name}_init' is not beside the loops of block "
                            f"'{name}' (already decomposed?)")
    if p > q:
        raise ScheduleError(f"decompose_reduction: {describe(f)} lies inside the loop(s) the init block "
                            f"'{name}_init' sits beside; pick one of the {q + 1} outer loops of '{name}'")
    for g in loops[p:q]:
        if "R" in bound_kinds(g):
            raise ScheduleError(f"decompose_reduction: {describe(g)} carries a reduction; "
                                f"the init block '{name}_init' cannot be copied out of it")
    mapping: dict[SSAValue, SSAValue] = {}
    b = Builder(InsertPoint.before(f))
    for g in loops[p:q]:
        h = b.insert(loop.ForOp(*g.bounds, g.kind.data))
        h.iv.name_hint = g.iv.name_hint
        h.attributes |= g.attributes
        mapping[g.iv] = h.iv
        b = Builder(InsertPoint.at_end(h.body.block))
        for o in g.body.block.ops:
            if isinstance(o, INDEX_OPS):
                b.insert(o.clone(value_mapper=mapping))
    moved = init.clone(value_mapper=mapping)
    b.insert(moved)
    init.detach()
    init.erase()
    return moved

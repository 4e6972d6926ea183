"""reorder: permute the loops of a perfect nest.

```mlir
loop.for %i = 0 to 4 serial { loop.for %j = 0 to 8 serial { loop.block "b" [S %a = %i, S %b = %j] {...} } }
```
reorder(%j, %i) becomes
```mlir
loop.for %j = 0 to 8 serial { loop.for %i = 0 to 4 serial { loop.block "b" [S %a = %i, S %b = %j] {...} } }
```
Index arithmetic between the loops (from split or fuse) moves into the
innermost loop. A loop whose body holds anything else (an init block beside
the reduction loops) is not perfectly nested: ScheduleError.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.builder import Builder
from xdsl.rewriter import InsertPoint

from ziggurat.dialects import loop
from ziggurat.errors import ScheduleError
from ziggurat.transforms.loop.primitives.loops import check_perfect, describe, hoist_index_ops, require_plain, single_child_loop


def reorder(order: Sequence[loop.ForOp]) -> list[loop.ForOp]:
    """Places the given loops, outermost first, in the positions they occupy together."""
    if len(set(map(id, order))) != len(order):
        raise ScheduleError("reorder: a loop is given twice")
    given = set(map(id, order))
    top = next((f for f in order if not any(g.is_ancestor(f) and g is not f for g in order)), None)
    chain = [top]
    while len([f for f in chain if id(f) in given]) < len(order):
        nxt = single_child_loop(chain[-1])
        if nxt is None:
            missing = [describe(f) for f in order if f not in chain]
            raise ScheduleError(f"reorder: {missing[0]} is not in the perfect nest under {describe(chain[-1])}")
        chain.append(nxt)
    for f in chain:
        require_plain(f, "reorder")
    for outer, inner in zip(chain, chain[1:]):
        check_perfect(outer, inner, "reorder")
    for outer, inner in zip(chain, chain[1:]):
        hoist_index_ops(outer, inner, "reorder")  # all index ops end up at the top of the innermost loop
    innermost = chain[-1]
    slots = iter(order)
    new_order = [next(slots) if id(f) in given else f for f in chain]
    new = []
    b = Builder(InsertPoint.before(chain[0]))
    for f in new_order:
        g = b.insert(loop.ForOp(*f.bounds, f.kind.data))
        g.iv.name_hint = f.iv.name_hint
        g.attributes |= f.attributes
        new.append(g)
        b = Builder(InsertPoint.at_end(g.body.block))
    for op in list(innermost.body.block.ops):
        op.detach()
        new[-1].body.block.add_op(op)
    for f, g in zip(new_order, new):
        f.iv.replace_all_uses_with(g.iv)
    chain[0].detach()
    chain[0].erase()
    return [new[new_order.index(f)] for f in order]

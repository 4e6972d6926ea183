"""The elementwise epilogue of a register-blocked reduction nest, moved under its first parallel-sized loop.

te keeps a fused kernel's reduction (matmul, conv) and its epilogue (bias, activation, a GELU) as
two nests joined by a local buffer: the reduction writes the whole buffer, then the epilogue reads it
back. For bert's 128x1024 FFN that buffer is 512 KiB, so the epilogue re-reads it from L3. After
`loop-default-schedule` has blocked the reduction, `attach_epilogue` moves the epilogue under the
outermost loop of the blocked nest with more than one trip (a matmul's row blocks, a conv's output
channel blocks), with the `reverse_compute_at` primitive: each iteration applies the epilogue to the
rows it has just finished, while they are still in L1/L2, and that loop stays the parallel one.

```mlir
loop.for %i0 = 0 to 128 step 4 serial { ... loop.block "matmul_store" [...] {... store %t ...} }
loop.for %j0 = 0 to 128 serial { loop.for %j1 = 0 to 1024 serial { loop.block "add" [...] {... load %t ...} } }
```
becomes
```mlir
loop.for %i0 = 0 to 128 step 4 serial {
  ... loop.block "matmul_store" [...] {...}
  loop.for %add_ax0 = 0 to 4 serial { loop.for %add_ax1 = 0 to 1024 serial { loop.block "add" [...] {...} } }
}
```
Where the move is not legal (a k-blocked reduction: the loop carries the reduction; a consumer sharing
its nest; other readers), nothing changes.
"""

from __future__ import annotations

from xdsl.dialects import func

from ziggurat.dialects import loop
from ziggurat.errors import ScheduleError
from ziggurat.transforms.schedule.regions import root
from ziggurat.transforms.schedule.reverse_compute_at import reverse_compute_at


def attach_epilogue(fn: func.FuncOp, inside: loop.ForOp) -> bool:
    """Moves the nest right after the scheduled nest holding `inside` (its single block) under that
    nest's outermost loop with more than one trip; True when it moved."""
    if inside.parent_op() is None:  # the blocked nest replaced it (a nest with one spatial loop)
        return False
    top = root(inside)
    if not isinstance(top, loop.ForOp):
        return False
    ops = list(fn.body.block.ops)
    consumer = next((o for o in ops[ops.index(top) + 1:] if isinstance(o, loop.ForOp)), None)
    if consumer is None:
        return False
    blocks = [b for b in consumer.walk() if isinstance(b, loop.BlockOp)]
    if len(blocks) != 1:
        return False
    at = top
    while at.trip_count == 1:
        inner = list(at.body.block.ops)
        if len(inner) != 1 or not isinstance(inner[0], loop.ForOp):
            return False
        at = inner[0]
    between = ops[ops.index(top) + 1:ops.index(consumer)]
    if any(not isinstance(o, loop.AllocOp) for o in between):
        return False
    for o in between:  # the buffers the epilogue writes (te's next intermediate) are defined before the nest
        o.detach()
        fn.body.block.insert_op_before(o, top)
    try:
        reverse_compute_at(fn, blocks[0], at, covered=True)  # the tile's store blocks write every element
    except ScheduleError:
        return False
    return True

"""vectorize: mark a loop for vector code (convert-loop-to-hw emits it).

```mlir
loop.for %j = 0 to 64 serial { loop.block "b" [S %v = %j] {...} }
```
becomes
```mlir
loop.for %j = 0 to 64 vectorized { loop.block "b" [S %v = %j] {...} }
```
An innermost loop may carry a reduction (it accumulates in vector lanes); a
loop with loops inside is vectorized as a whole, so it must be spatial for
every block under it. Reads and writes that convert-loop-to-hw cannot
vectorize leave the loop serial with the reason in `hw.not_vectorized`.
"""

from __future__ import annotations

from xdsl.dialects.builtin import StringAttr

from ziggurat.dialects import loop
from ziggurat.errors import ScheduleError
from ziggurat.transforms.loop.primitives.loops import bound_kinds, describe


def vectorize(f: loop.ForOp) -> None:
    if f.kind.data != "serial" or f.bounds[2] != 1:
        raise ScheduleError(f"vectorize: {describe(f)} is {f.kind.data} with step {f.bounds[2]}; "
                            "only serial loops with step 1 can be vectorized")
    inner = [o for o in f.body.walk() if isinstance(o, loop.ForOp) and o is not f]
    if inner and "R" in bound_kinds(f):
        raise ScheduleError(f"vectorize: {describe(f)} has loops inside and carries a reduction; "
                            "vectorize the innermost loop instead")
    if any(o.kind.data != "serial" for o in inner):
        raise ScheduleError(f"vectorize: {describe(f)} contains a loop that is not serial")
    p = f.parent_op()
    while p is not None:
        if isinstance(p, loop.ForOp) and p.kind.data == "vectorized":
            raise ScheduleError(f"vectorize: {describe(f)} is nested in a vectorized loop")
        p = p.parent_op()
    f.properties["kind"] = StringAttr("vectorized")

"""parallel: mark a loop to run its iterations on threads.

```mlir
loop.for %i = 0 to 64 serial { loop.block "b" [S %v = %i] {...} }
```
becomes
```mlir
loop.for %i = 0 to 64 parallel { loop.block "b" [S %v = %i] {...} }
```
Legal only when every block under the loop binds its variable (or an index
computed from it) as spatial, and no parallel loop encloses it.
"""

from __future__ import annotations

from xdsl.dialects.builtin import StringAttr

from ziggurat.dialects import loop
from ziggurat.errors import ScheduleError
from ziggurat.transforms.loop.primitives.loops import bound_kinds, describe


def parallel(f: loop.ForOp) -> None:
    if f.kind.data != "serial":
        raise ScheduleError(f"parallel: {describe(f)} is already {f.kind.data}")
    if "R" in bound_kinds(f):
        raise ScheduleError(f"parallel: {describe(f)} carries a reduction (a block binds it as R); "
                            "threads would race on the accumulator")
    p = f.parent_op()
    while p is not None:
        if isinstance(p, loop.ForOp) and p.kind.data in ("parallel", "vectorized"):
            raise ScheduleError(f"parallel: {describe(f)} is nested in a {p.kind.data} loop")
        p = p.parent_op()
    if any(isinstance(o, loop.ForOp) and o.kind.data == "parallel" for o in f.body.walk()):
        raise ScheduleError(f"parallel: {describe(f)} contains a parallel loop; only one level runs on threads")
    f.properties["kind"] = StringAttr("parallel")

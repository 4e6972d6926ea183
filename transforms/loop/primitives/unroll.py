"""unroll: mark a loop for full unrolling (the backend's `llvm.loop.unroll.full`).

```mlir
loop.for %k = 0 to 3 serial { loop.block "b" [R %v = %k] {...} }
```
becomes
```mlir
loop.for %k = 0 to 3 unrolled { loop.block "b" [R %v = %k] {...} }
```
The IR is not unrolled (it stays compact); loops of more than `MAX_UNROLL`
iterations are refused.
"""

from __future__ import annotations

from xdsl.dialects.builtin import StringAttr

from ziggurat.dialects import loop
from ziggurat.errors import ScheduleError
from ziggurat.transforms.loop.primitives.loops import describe

MAX_UNROLL = 64


def unroll(f: loop.ForOp) -> None:
    if f.kind.data != "serial":
        raise ScheduleError(f"unroll: {describe(f)} is {f.kind.data}; only serial loops can be unrolled")
    if f.trip_count > MAX_UNROLL:
        raise ScheduleError(f"unroll: {describe(f)} has {f.trip_count} iterations; at most {MAX_UNROLL} are "
                            "unrolled (split it first)")
    f.properties["kind"] = StringAttr("unrolled")

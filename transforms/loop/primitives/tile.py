"""tile: split several loops of a perfect nest and put all outer parts
before all inner parts (split + reorder, recorded as one step).

```mlir
loop.for %i = 0 to 8 serial { loop.for %j = 0 to 16 serial { loop.block "b" [S %a = %i, S %c = %j] {...} } }
```
tile([%i, %j], [4, 8]) becomes
```mlir
loop.for %i_o = 0 to 2 serial { loop.for %j_o = 0 to 2 serial {
  loop.for %i_i = 0 to 4 serial { loop.for %j_i = 0 to 8 serial {
    %i = ... %i_o * 4 + %i_i ...   %j = ... %j_o * 8 + %j_i ...
    loop.block "b" [S %a = %i, S %c = %j] {...} } } } }
```
Every factor must divide its loop's trip count and the loops must form a
perfect nest of serial loops (else the ScheduleError of split or reorder).
"""

from __future__ import annotations

from collections.abc import Sequence

from ziggurat.dialects import loop
from ziggurat.errors import ScheduleError
from ziggurat.transforms.loop.primitives.reorder import reorder
from ziggurat.transforms.loop.primitives.split import split


def tile(loops: Sequence[loop.ForOp], factors: Sequence[int]) -> list[loop.ForOp]:
    """Returns the outer loops then the inner loops, in the order given."""
    if len(loops) != len(factors) or not loops:
        raise ScheduleError(f"tile: needs one factor per loop, got {len(loops)} loops and {len(factors)} factors")
    parts = [split(f, k) for f, k in zip(loops, factors)]
    return reorder([o for o, _ in parts] + [i for _, i in parts])

"""loop-tile: the tile schedule primitive as a pass."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import builtin
from xdsl.passes import ModulePass

from ziggurat.transforms.loop.primitives.pass_base import apply_step


@dataclass(frozen=True)
class LoopTilePass(ModulePass):
    """Tiles the loops numbered `loops` (0 = outermost) around block `block` by `factors`.

    **Input:** loop-level kernels; the loops must form a perfect nest of serial
    loops from 0 with step 1 and each factor must divide its loop's trip count,
    else ScheduleError (nothing changes then).

    **Output:** each loop split into outer and inner (`factor` iterations), all
    outer loops placed before all inner loops; one `tile` step in a trace.

    **Options:** `block`, `loops` and `factors` (comma-separated), `kernel`
    (default: all kernels).

    Example (`loop-tile{block=b loops=0,1 factors=4,8}`):
    ```mlir
    loop.for %i = 0 to 8 serial { loop.for %j = 0 to 16 serial { loop.block "b" [S %a = %i, S %c = %j] {...} } }
    ```
    becomes
    ```mlir
    loop.for %i_o = 0 to 2 serial { loop.for %j_o = 0 to 2 serial {
      loop.for %i_i = 0 to 4 serial { loop.for %j_i = 0 to 8 serial {
        ... %i = %i_o * 4 + %i_i, %j = %j_o * 8 + %j_i ...
        loop.block "b" [S %a = %i, S %c = %j] {...} } } } }
    ```
    """

    name = "loop-tile"
    block: str = ""
    loops: tuple[int, ...] = ()
    factors: tuple[int, ...] = ()
    kernel: str = ""

    def apply(self, ctx: Context, op: builtin.ModuleOp) -> None:
        apply_step(op, self.kernel, {"prim": "tile", "block": self.block, "loops": list(self.loops), "factors": list(self.factors)})

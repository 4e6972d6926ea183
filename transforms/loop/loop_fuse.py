"""loop-fuse: the fuse schedule primitive as a pass."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import builtin
from xdsl.passes import ModulePass

from ziggurat.transforms.loop.primitives.pass_base import apply_step


@dataclass(frozen=True)
class LoopFusePass(ModulePass):
    """Fuses loop number `loop` around block `block` with the loop directly inside it.

    **Input:** loop-level kernels; both loops serial from 0 with step 1, the
    inner one the only loop in the outer one (index arithmetic aside), else
    ScheduleError.

    **Output:** one loop over the product of the trip counts; the old
    variables become `fused / n_inner` and `fused % n_inner`.

    **Options:** `block`, `loop`, `kernel` (default: all kernels).

    Example (`loop-fuse{block=b loop=0}`):
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

    name = "loop-fuse"
    block: str = ""
    loop: int = 0
    kernel: str = ""

    def apply(self, ctx: Context, op: builtin.ModuleOp) -> None:
        apply_step(op, self.kernel, {"prim": "fuse", "block": self.block, "loop": self.loop, "inner": self.loop + 1})

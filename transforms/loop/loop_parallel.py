"""loop-parallel: the parallel schedule primitive as a pass."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import builtin
from xdsl.passes import ModulePass

from ziggurat.transforms.loop.primitives.pass_base import apply_step


@dataclass(frozen=True)
class LoopParallelPass(ModulePass):
    """Marks loop number `loop` around block `block` parallel (threads).

    **Input:** loop-level kernels; every block under the loop must bind its variable as spatial, and no parallel or vectorized loop may enclose it or parallel loop lie inside, else ScheduleError.

    **Output:** the loop with kind `parallel`; nothing else changes.

    **Options:** `block`, `loop` (0 = outermost), `kernel` (default: all kernels).

    Example (`loop-parallel{block=b loop=0}`):
    ```mlir
    loop.for %i = 0 to 64 serial { loop.block "b" [S %v = %i] {...} }
    ```
    becomes
    ```mlir
    loop.for %i = 0 to 64 parallel { loop.block "b" [S %v = %i] {...} }
    ```
    """

    name = "loop-parallel"
    block: str = ""
    loop: int = 0
    kernel: str = ""

    def apply(self, ctx: Context, op: builtin.ModuleOp) -> None:
        apply_step(op, self.kernel, {"prim": "parallel", "block": self.block, "loop": self.loop})

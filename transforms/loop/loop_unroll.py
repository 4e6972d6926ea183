"""loop-unroll: the unroll schedule primitive as a pass."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import builtin
from xdsl.passes import ModulePass

from ziggurat.transforms.loop.primitives.pass_base import apply_step


@dataclass(frozen=True)
class LoopUnrollPass(ModulePass):
    """Marks loop number `loop` around block `block` for full unrolling.

    **Input:** loop-level kernels; the loop must be serial with at most 64 iterations, else ScheduleError. The IR stays compact: the backend attaches `llvm.loop.unroll.full`.

    **Output:** the loop with kind `unrolled`; nothing else changes.

    **Options:** `block`, `loop` (0 = outermost), `kernel` (default: all kernels).

    Example (`loop-unroll{block=b loop=0}`):
    ```mlir
    loop.for %k = 0 to 3 serial { loop.block "b" [R %v = %k] {...} }
    ```
    becomes
    ```mlir
    loop.for %k = 0 to 3 unrolled { loop.block "b" [R %v = %k] {...} }
    ```
    """

    name = "loop-unroll"
    block: str = ""
    loop: int = 0
    kernel: str = ""

    def apply(self, ctx: Context, op: builtin.ModuleOp) -> None:
        apply_step(op, self.kernel, {"prim": "unroll", "block": self.block, "loop": self.loop})

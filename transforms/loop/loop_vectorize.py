"""loop-vectorize: the vectorize schedule primitive as a pass."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import builtin
from xdsl.passes import ModulePass

from ziggurat.transforms.loop.primitives.pass_base import apply_step


@dataclass(frozen=True)
class LoopVectorizePass(ModulePass):
    """Marks loop number `loop` around block `block` for vector code.

    **Input:** loop-level kernels; the loop must be serial with step 1 and not inside a vectorized loop; a loop with loops inside must be spatial for every block (it is vectorized as a whole), else ScheduleError. convert-loop-to-hw emits the vector code.

    **Output:** the loop with kind `vectorized`; nothing else changes.

    **Options:** `block`, `loop` (0 = outermost), `kernel` (default: all kernels).

    Example (`loop-vectorize{block=b loop=1}`):
    ```mlir
    loop.for %i = 0 to 4 serial { loop.for %j = 0 to 64 serial { loop.block "b" [S %a = %i, S %v = %j] {...} } }
    ```
    becomes
    ```mlir
    loop.for %i = 0 to 4 serial { loop.for %j = 0 to 64 vectorized { loop.block "b" [S %a = %i, S %v = %j] {...} } }
    ```
    """

    name = "loop-vectorize"
    block: str = ""
    loop: int = 0
    kernel: str = ""

    def apply(self, ctx: Context, op: builtin.ModuleOp) -> None:
        apply_step(op, self.kernel, {"prim": "vectorize", "block": self.block, "loop": self.loop})

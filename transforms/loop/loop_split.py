"""loop-split: the split schedule primitive as a pass."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import builtin
from xdsl.passes import ModulePass

from ziggurat.transforms.loop.primitives.pass_base import apply_step


@dataclass(frozen=True)
class LoopSplitPass(ModulePass):
    """Splits loop number `loop` (0 = outermost) around block `block` by `factor`.

    **Input:** loop-level kernels; the block is found by name in every kernel
    (or only in `kernel`). The loop must be serial from 0 with step 1 and
    `factor` must divide its trip count, else ScheduleError.

    **Output:** an outer loop of trip count / `factor` around an inner loop of
    `factor`; the old variable becomes `outer * factor + inner`.

    **Options:** `block`, `loop`, `factor`, `kernel` (default: all kernels).

    Example (`loop-split{block=b loop=0 factor=16}`):
    ```mlir
    loop.for %i = 0 to 32 serial { loop.block "b" [S %v = %i] {...} }
    ```
    becomes
    ```mlir
    loop.for %i_o = 0 to 2 serial {
      loop.for %i_i = 0 to 16 serial {
        %c = arith.constant 16 : index
        %t = arith.muli %i_o, %c : index
        %i = arith.addi %t, %i_i : index
        loop.block "b" [S %v = %i] {...}
      }
    }
    ```
    """

    name = "loop-split"
    block: str = ""
    loop: int = 0
    factor: int = 1
    kernel: str = ""

    def apply(self, ctx: Context, op: builtin.ModuleOp) -> None:
        apply_step(op, self.kernel, {"prim": "split", "block": self.block, "loop": self.loop, "factor": self.factor})

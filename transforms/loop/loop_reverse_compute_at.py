"""loop-reverse-compute-at: the reverse_compute_at schedule primitive as a pass."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import builtin
from xdsl.passes import ModulePass

from ziggurat.transforms.loop.primitives.pass_base import apply_step


@dataclass(frozen=True)
class LoopReverseComputeAtPass(ModulePass):
    """Moves consumer block `block` under loop `loop` of block `at` (its producer).

    **Input:** loop-level kernels. `block` must be a spatial block with a loop
    nest of its own that reads one buffer written under the loop, only at its
    own variables, which cover that buffer; the writers under the loop store
    at affine indices and no loop at or outside it carries their reduction;
    other writers come earlier; no block between touches what `block` writes.
    Otherwise ScheduleError.

    **Output:** the consumer at the end of the loop's body, in new loops over
    the region one iteration of the loop has finished; its old nest is gone.

    **Options:** `block`, `at`, `loop` (0 = outermost around `at`), `kernel`.

    Example (`loop-reverse-compute-at{block=relu at=mm loop=0}`):
    ```mlir
    loop.for %i = 0 to 8 serial { ... loop.block "mm" [S %a = %i, S %b = %j, R %c = %k] {...%t...} ... }
    loop.for %i2 = 0 to 8 serial { loop.for %j2 = 0 to 16 serial { loop.block "relu" [S %x = %i2, S %y = %j2] {...} } }
    ```
    becomes
    ```mlir
    loop.for %i = 0 to 8 serial {
      ... loop.block "mm" ...
      loop.for %relu_ax0 = 0 to 1 serial { loop.for %relu_ax1 = 0 to 16 serial {
        %x0 = arith.addi %i, %relu_ax0 : index
        loop.block "relu" [S %x = %x0, S %y = %relu_ax1] {...} } }
    }
    ```
    """

    name = "loop-reverse-compute-at"
    block: str = ""
    at: str = ""
    loop: int = 0
    kernel: str = ""

    def apply(self, ctx: Context, op: builtin.ModuleOp) -> None:
        apply_step(op, self.kernel, {"prim": "reverse_compute_at", "block": self.block, "at": self.at, "loop": self.loop})

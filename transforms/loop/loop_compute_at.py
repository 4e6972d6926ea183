"""loop-compute-at: the compute_at schedule primitive as a pass."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import builtin
from xdsl.passes import ModulePass

from ziggurat.transforms.loop.primitives.pass_base import apply_step


@dataclass(frozen=True)
class LoopComputeAtPass(ModulePass):
    """Moves producer block `block` under loop `loop` of block `at` (its consumer).

    **Input:** loop-level kernels. `block` must be a spatial block with a loop
    nest of its own, the only writer of a kernel-local buffer that it stores
    once at its own variables covering the whole buffer; every reader of that
    buffer must sit under the loop and read it at affine indices; no block it
    would now run after may write what it reads. Otherwise ScheduleError.

    **Output:** the producer under the loop, in new loops over the bounding
    box of what one iteration of the loop reads (recomputing overlaps); its
    old nest is gone.

    **Options:** `block`, `at`, `loop` (0 = outermost around `at`), `kernel`.

    Example (`loop-compute-at{block=p at=c loop=0}`):
    ```mlir
    loop.for %i = 0 to 8 serial { loop.for %j = 0 to 16 serial { loop.block "p" [S %a = %i, S %b = %j] {...%t...} } }
    loop.for %i2 = 0 to 8 serial { loop.for %j2 = 0 to 16 serial { loop.block "c" [S %c = %i2, S %d = %j2] {...} } }
    ```
    becomes
    ```mlir
    loop.for %i2 = 0 to 8 serial {
      loop.for %p_ax0 = 0 to 1 serial { loop.for %p_ax1 = 0 to 16 serial {
        %a0 = arith.addi %i2, %p_ax0 : index
        loop.block "p" [S %a = %a0, S %b = %p_ax1] {...} } }
      loop.for %j2 = 0 to 16 serial { loop.block "c" [S %c = %i2, S %d = %j2] {...} }
    }
    ```
    """

    name = "loop-compute-at"
    block: str = ""
    at: str = ""
    loop: int = 0
    kernel: str = ""

    def apply(self, ctx: Context, op: builtin.ModuleOp) -> None:
        apply_step(op, self.kernel, {"prim": "compute_at", "block": self.block, "at": self.at, "loop": self.loop})

"""loop-rfactor: the rfactor schedule primitive as a pass."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import builtin
from xdsl.passes import ModulePass

from ziggurat.transforms.loop.primitives.pass_base import apply_step


@dataclass(frozen=True)
class LoopRfactorPass(ModulePass):
    """Factors reduction loop `loop` of block `block` out into a partial-result buffer.

    **Input:** loop-level kernels. The loop must bind only reduction variables
    of the block; the block must be `out = out <op> value` (op: addf, mulf,
    maximumf, minimumf) storing at spatial variables covering `out`, with an
    init block `<block>_init`. Otherwise ScheduleError.

    **Output:** a local buffer `out` x trip count; block `<block>_rf` (where
    the loop is now spatial, so it can be parallelized or vectorized)
    accumulates into it after `<block>_rf_init` initialized it; a new nest
    with `<block>_init` and `<block>` reduces the partial results into `out`.

    **Options:** `block`, `loop` (0 = outermost around the block), `kernel`.

    Example (`loop-rfactor{block=s loop=1}`):
    ```mlir
    loop.for %i = 0 to 4 serial {
      loop.block "s_init" [S %a = %i] {...}
      loop.for %k = 0 to 32 serial { loop.block "s" [S %b = %i, R %c = %k] {... %y[%b] ...} } }
    ```
    becomes
    ```mlir
    %rf = loop.alloc "local" : memref<4x32xf32>
    loop.for ... { loop.for ... { loop.block "s_rf_init" [S .., S ..] {... %rf ...} } }
    loop.for %i = 0 to 4 serial { loop.for %k = 0 to 32 serial {
      loop.block "s_rf" [S %b = %i, S %l = %k] {... %rf[%b, %l] ...} } }
    loop.for %s_ax0 = 0 to 4 serial {
      loop.block "s_init" [S %a = %s_ax0] {...}
      loop.for %s_r = 0 to 32 serial { loop.block "s" [S %u = %s_ax0, R %w = %s_r] {... %rf[%u, %w] ... %y[%u] ...} } }
    ```
    """

    name = "loop-rfactor"
    block: str = ""
    loop: int = 0
    kernel: str = ""

    def apply(self, ctx: Context, op: builtin.ModuleOp) -> None:
        apply_step(op, self.kernel, {"prim": "rfactor", "block": self.block, "loop": self.loop})

"""loop-reorder: the reorder schedule primitive as a pass."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import builtin
from xdsl.passes import ModulePass

from ziggurat.transforms.loop.primitives.pass_base import apply_step


@dataclass(frozen=True)
class LoopReorderPass(ModulePass):
    """Puts the loops around block `block` numbered in `loops` in that order.

    **Input:** loop-level kernels; the named loops (0 = outermost) must form a
    perfect nest (nothing but index arithmetic between them) of serial loops,
    else ScheduleError. An init block beside a reduction loop makes the nest
    imperfect.

    **Output:** the same loops, the given ones permuted among their positions
    (outermost first); index arithmetic moves into the innermost of them.

    **Options:** `block`, `loops` (comma-separated), `kernel` (default: all kernels).

    Example (`loop-reorder{block=b loops=1,0}`):
    ```mlir
    loop.for %i = 0 to 4 serial { loop.for %j = 0 to 8 serial { loop.block "b" [S %a = %i, S %b = %j] {...} } }
    ```
    becomes
    ```mlir
    loop.for %j = 0 to 8 serial { loop.for %i = 0 to 4 serial { loop.block "b" [S %a = %i, S %b = %j] {...} } }
    ```
    """

    name = "loop-reorder"
    block: str = ""
    loops: tuple[int, ...] = ()
    kernel: str = ""

    def apply(self, ctx: Context, op: builtin.ModuleOp) -> None:
        apply_step(op, self.kernel, {"prim": "reorder", "block": self.block, "loops": list(self.loops)})

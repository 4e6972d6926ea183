"""loop-decompose-reduction: the decompose_reduction schedule primitive as a pass."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import builtin
from xdsl.passes import ModulePass

from ziggurat.transforms.loop.primitives.pass_base import apply_step


@dataclass(frozen=True)
class LoopDecomposeReductionPass(ModulePass):
    """Moves the init block of reduction block `block` into its own loop nest before loop `loop`.

    **Input:** loop-level kernels with a reduction block `block` (some `R`
    variable) and its init block `<block>_init` beside the reduction loops.
    Loop `loop` (0 = outermost around `block`) must enclose the init block or
    be the loop right after it, else ScheduleError (also when the block is no
    reduction or has no init block).

    **Output:** the init block in copies of the spatial loops from `loop` down
    to it, placed just before `loop`; the update nest under `loop` is then
    perfect, so loop-reorder can move reduction loops outward.

    **Options:** `block`, `loop`, `kernel` (default: all kernels).

    Example (`loop-decompose-reduction{block=s loop=0}`):
    ```mlir
    loop.for %i = 0 to 4 serial {
      loop.block "s_init" [S %a = %i] {...}
      loop.for %k = 0 to 32 serial { loop.block "s" [S %b = %i, R %c = %k] {...} }
    }
    ```
    becomes
    ```mlir
    loop.for %i = 0 to 4 serial { loop.block "s_init" [S %a = %i] {...} }
    loop.for %i_1 = 0 to 4 serial {
      loop.for %k = 0 to 32 serial { loop.block "s" [S %b = %i_1, R %c = %k] {...} }
    }
    ```
    """

    name = "loop-decompose-reduction"
    block: str = ""
    loop: int = 0
    kernel: str = ""

    def apply(self, ctx: Context, op: builtin.ModuleOp) -> None:
        apply_step(op, self.kernel, {"prim": "decompose_reduction", "block": self.block, "loop": self.loop})

"""loop-compute-inline: the compute_inline schedule primitive as a pass."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import builtin
from xdsl.passes import ModulePass

from ziggurat.transforms.loop.primitives.pass_base import apply_step


@dataclass(frozen=True)
class LoopComputeInlinePass(ModulePass):
    """Inlines spatial block `block` into every block that reads its buffer.

    **Input:** loop-level kernels. `block` must be a spatial block with a loop
    nest of its own, holding only loads and scalar arithmetic, the only writer
    of a kernel-local buffer that it stores once at its own variables covering
    the buffer; no block up to its last reader may write what it reads.
    Otherwise ScheduleError.

    **Output:** each load of the buffer replaced by the producer's computation
    at the load's indices; the producer's nest (and the buffer, once unused) is
    gone.

    **Options:** `block`, `kernel`.

    Example (`loop-compute-inline{block=p}`):
    ```mlir
    loop.for %i = 0 to 16 serial { loop.block "p" [S %a = %i] {
      %x = loop.load %in[%a] : memref<16xf32>
      %y = arith.mulf %x, %x : f32
      loop.store %y, %t[%a] : memref<16xf32> } }
    loop.for %j = 0 to 16 serial { loop.block "c" [S %b = %j] {
      %v = loop.load %t[%b] : memref<16xf32>
      loop.store %v, %out[%b] : memref<16xf32> } }
    ```
    becomes
    ```mlir
    loop.for %j = 0 to 16 serial { loop.block "c" [S %b = %j] {
      %x = loop.load %in[%b] : memref<16xf32>
      %y = arith.mulf %x, %x : f32
      loop.store %y, %out[%b] : memref<16xf32> } }
    ```
    """

    name = "loop-compute-inline"
    block: str = ""
    kernel: str = ""

    def apply(self, ctx: Context, op: builtin.ModuleOp) -> None:
        apply_step(op, self.kernel, {"prim": "compute_inline", "block": self.block})

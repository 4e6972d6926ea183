"""loop-storage-align: the storage_align schedule primitive as a pass."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import builtin
from xdsl.passes import ModulePass

from ziggurat.transforms.loop.primitives.pass_base import apply_step


@dataclass(frozen=True)
class LoopStorageAlignPass(ModulePass):
    """Pads the `buffer`-th buffer block `block` stores so that the stride of `axis` is `offset` mod `factor`.

    **Input:** loop-level kernels; the buffer must be a `loop.alloc` of the
    kernel used only by loads and stores, `axis` below its last dimension and
    0 <= `offset` < `factor`, else ScheduleError.

    **Output:** dimension `axis + 1` of the allocation grows by the least
    padding that gives the stride the residue (the unpadded shape is kept in
    `logical_shape`); all indices stay the same.

    **Options:** `block`, `buffer`, `axis`, `factor`, `offset`, `kernel`.

    Example (`loop-storage-align{block=p buffer=0 axis=0 factor=16 offset=1}`):
    ```mlir
    %t = loop.alloc "local" : memref<64x64xf32>
    ```
    becomes
    ```mlir
    %t = loop.alloc "local" {logical_shape = [64 : i64, 64 : i64]} : memref<64x65xf32>
    ```
    """

    name = "loop-storage-align"
    block: str = ""
    buffer: int = 0
    axis: int = 0
    factor: int = 16
    offset: int = 0
    kernel: str = ""

    def apply(self, ctx: Context, op: builtin.ModuleOp) -> None:
        apply_step(op, self.kernel, {"prim": "storage_align", "block": self.block, "buffer": self.buffer, "axis": self.axis,
                                         "factor": self.factor, "offset": self.offset})

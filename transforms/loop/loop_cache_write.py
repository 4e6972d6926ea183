"""loop-cache-write: the cache_write schedule primitive as a pass."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import builtin
from xdsl.passes import ModulePass

from ziggurat.transforms.loop.primitives.pass_base import apply_step


@dataclass(frozen=True)
class LoopCacheWritePass(ModulePass):
    """Makes block `block` (and its init block) write the `buffer`-th buffer it stores into a local copy.

    **Input:** loop-level kernels; `buffer` counts the distinct buffers the
    block stores. The block must store it once at spatial variables covering
    it, read it only after an init block `<block>_init` wrote it, and no other
    block may use it from the init block to the end of the block's nest, else
    ScheduleError.

    **Output:** a `loop.alloc "local"` that the block and its init block use
    instead, and a write-back nest with block `<block>_write<buffer>` right
    after the block's nest. reverse_compute_at can move the write-back under
    the block's loops.

    **Options:** `block`, `buffer`, `kernel`.

    Example (`loop-cache-write{block=b buffer=0}`):
    ```mlir
    loop.for %i = 0 to 4 serial { loop.block "b" [S %a = %i] { ... loop.store %v, %y[%a] : memref<4xf32> } }
    ```
    becomes
    ```mlir
    %c = loop.alloc "local" : memref<4xf32>
    loop.for %i = 0 to 4 serial { loop.block "b" [S %a = %i] { ... loop.store %v, %c[%a] : memref<4xf32> } }
    loop.for %b_write0_ax0 = 0 to 4 serial { loop.block "b_write0" [S %p = %b_write0_ax0] {
      %e = loop.load %c[%p] : memref<4xf32>
      loop.store %e, %y[%p] : memref<4xf32> } }
    ```
    """

    name = "loop-cache-write"
    block: str = ""
    buffer: int = 0
    kernel: str = ""

    def apply(self, ctx: Context, op: builtin.ModuleOp) -> None:
        apply_step(op, self.kernel, {"prim": "cache_write", "block": self.block, "buffer": self.buffer})

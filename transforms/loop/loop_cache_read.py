"""loop-cache-read: the cache_read schedule primitive as a pass."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import builtin
from xdsl.passes import ModulePass

from ziggurat.transforms.loop.primitives.pass_base import apply_step


@dataclass(frozen=True)
class LoopCacheReadPass(ModulePass):
    """Makes block `block` read a kernel-local copy of the `buffer`-th buffer it loads.

    **Input:** loop-level kernels; `buffer` counts the distinct buffers the
    block loads, in order of first load. ScheduleError when there is no such
    buffer, the block also writes it, or another block of its nest writes it.

    **Output:** a `loop.alloc "local"` copy, a copy nest with block
    `<block>_read<buffer>` just before the block's nest, and the block's loads
    redirected to the copy. compute_at can then move the copy next to its use.

    **Options:** `block`, `buffer`, `kernel`.

    Example (`loop-cache-read{block=b buffer=0}`):
    ```mlir
    loop.for %i = 0 to 4 serial { loop.block "b" [S %a = %i] { %v = loop.load %x[%a] : memref<4xf32> ... } }
    ```
    becomes
    ```mlir
    %c = loop.alloc "local" : memref<4xf32>
    loop.for %b_read0_ax0 = 0 to 4 serial { loop.block "b_read0" [S %p = %b_read0_ax0] {
      %e = loop.load %x[%p] : memref<4xf32>
      loop.store %e, %c[%p] : memref<4xf32> } }
    loop.for %i = 0 to 4 serial { loop.block "b" [S %a = %i] { %v = loop.load %c[%a] : memref<4xf32> ... } }
    ```
    """

    name = "loop-cache-read"
    block: str = ""
    buffer: int = 0
    kernel: str = ""

    def apply(self, ctx: Context, op: builtin.ModuleOp) -> None:
        apply_step(op, self.kernel, {"prim": "cache_read", "block": self.block, "buffer": self.buffer})

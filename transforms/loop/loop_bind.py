"""loop-bind: the GPU bind primitive as a pass (transforms/loop/primitives/bind.py)."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import builtin, func
from xdsl.passes import ModulePass

from ziggurat.dialects import loop
from ziggurat.errors import ScheduleError
from ziggurat.transforms.loop.primitives.bind import MAX_THREADS, bind, bind_threads
from ziggurat.transforms.loop.primitives.loops import get_block, get_loops

# `axis=blockIdx` is `axis="blockIdx.x"` (a pipeline option value with a dot must be quoted)
_AXES = {**{a: a for a in loop.GPU_LOOP_KINDS}, **{a.split(".")[0]: a for a in loop.GPU_LOOP_KINDS}}


@dataclass(frozen=True)
class LoopBindPass(ModulePass):
    """Binds loop number `loop` around block `block` to a GPU thread axis (blocks or threads).

    **Input:** loop-level kernels; every block under the loop must bind its variable as spatial
    (a reduction would race on its accumulator), the loop must run from 0 with step 1, a
    `threadIdx.x` loop must lie inside a `blockIdx.x` loop and no axis may be bound twice in a
    nest, else ScheduleError.

    **Output:** with `axis`, the loop's kind becomes that axis (`blockIdx.x` or `threadIdx.x`);
    with `threads` instead, the loop is split into a `blockIdx.x` loop of ceil(n / threads)
    blocks around a `threadIdx.x` loop of `threads` threads, the block loop carrying
    `gpu.limit = n` when `threads` does not divide n (the CUDA backend skips the tail).

    **Options:** `block`, `loop` (0 = outermost), `axis` (`"blockIdx.x"` or `"threadIdx.x"`,
    quoted; `blockIdx` and `threadIdx` unquoted), `threads` (1 to 1024; instead of `axis`),
    `kernel` (default: all kernels).

    Example (`loop-bind{block=b loop=0 threads=256}`):
    ```mlir
    loop.for %i = 0 to 1000 serial { loop.block "b" [S %v = %i] {...} }
    ```
    becomes
    ```mlir
    loop.for %i_b = 0 to 4 blockIdx.x {
      loop.for %i_t = 0 to 256 threadIdx.x {
        %c = arith.constant 256 : index
        %t = arith.muli %i_b, %c : index
        %i = arith.addi %t, %i_t : index
        loop.block "b" [S %v = %i] {...}
      }
    } {gpu.limit = 1000 : i64}
    ```
    """

    name = "loop-bind"
    block: str = ""
    loop: int = 0
    axis: str = ""
    threads: int = 0
    kernel: str = ""

    def apply(self, ctx: Context, op: builtin.ModuleOp) -> None:
        if bool(self.axis) == bool(self.threads):
            raise ScheduleError("loop-bind: give either axis (\"blockIdx.x\" or \"threadIdx.x\") or threads=N "
                                "(split into blocks of N threads), not both and not neither")
        axis = _AXES.get(self.axis) if self.axis else None
        if self.axis and axis is None:
            raise ScheduleError(f"loop-bind: unknown thread axis '{self.axis}'; use one of "
                                f"{', '.join(loop.GPU_LOOP_KINDS)} (quoted: axis=\"blockIdx.x\")")
        if self.threads and not 1 <= self.threads <= MAX_THREADS:
            raise ScheduleError(f"loop-bind: threads={self.threads}; a CUDA block has 1 to {MAX_THREADS} threads")
        hits = 0
        for fn in [f for f in op.ops if isinstance(f, func.FuncOp) and f.sym_name.data != "main"]:
            if self.kernel and fn.sym_name.data != self.kernel:
                continue
            if not any(isinstance(b, loop.BlockOp) and b.block_name.data == self.block for b in fn.walk()):
                continue
            loops = get_loops(get_block(fn, self.block))
            if not 0 <= self.loop < len(loops):
                raise ScheduleError(f"bind: block '{self.block}' has {len(loops)} loops, there is no loop {self.loop}")
            if axis is not None:
                bind(loops[self.loop], axis)
            else:
                bind_threads(loops[self.loop], self.threads)
            hits += 1
        if not hits:
            where = f"kernel @{self.kernel}" if self.kernel else "any kernel"
            raise ScheduleError(f"bind: no block '{self.block}' in {where}")

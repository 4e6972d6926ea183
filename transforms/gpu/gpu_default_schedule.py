"""gpu-default-schedule: blocks and threads for every kernel launch.

Each kernel (after gpu-split-stages: one loop nest) gets its leading spatial
loops fused into one loop over all their iterations, which `bind_threads`
splits into `blockIdx.x` x `threadIdx.x`: one GPU thread per point of the
spatial iteration space, its reduction loops serial in that thread. The
innermost spatial loop varies fastest across a warp, so neighbouring threads
touch neighbouring elements of a row-major output (coalesced stores). A nest
whose outermost loop carries a reduction (a full reduction to one element)
runs on one thread.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import builtin, func
from xdsl.passes import ModulePass

from ziggurat.dialects import loop
from ziggurat.errors import CompileError, ScheduleError
from ziggurat.transforms.gpu.gpu_gemm import GEMM_ATTR
from ziggurat.transforms.gpu.implicit_gemm import IGEMM_ATTR
from ziggurat.transforms.loop.primitives.bind import MAX_THREADS, bind_threads
from ziggurat.transforms.loop.primitives.fuse import fuse
from ziggurat.transforms.loop.primitives.loops import bound_kinds, check_perfect, single_child_loop

ENTRY = "main"


@dataclass(frozen=True)
class GpuDefaultSchedulePass(ModulePass):
    """Binds every kernel's spatial iteration space to GPU blocks and threads.

    **Input:** loop-level kernels of one top-level loop nest each (gpu-split-stages).

    **Output:** the leading spatial loops of each nest fused and split into a `blockIdx.x`
    loop around a `threadIdx.x` loop of `threads` threads (`gpu.limit` guards a tail);
    kernels that already have GPU loops are left alone.

    **Options:** `threads` (per block, 1 to 1024; default 256).

    Example (`gpu-default-schedule{threads=256}`):
    ```mlir
    loop.for %i = 0 to 8 serial { loop.for %j = 0 to 32 serial { loop.block "relu" [S %a = %i, S %b = %j] {...} } }
    ```
    becomes
    ```mlir
    loop.for %i_j_b = 0 to 1 blockIdx.x {
      loop.for %i_j_t = 0 to 256 threadIdx.x {
        ... %i_j = %i_j_b * 256 + %i_j_t; %i = %i_j / 32; %j = %i_j % 32 ...
        loop.block "relu" [S %a = %i, S %b = %j] {...}
      }
    }
    ```
    """

    name = "gpu-default-schedule"
    threads: int = 256

    def apply(self, ctx: Context, op: builtin.ModuleOp) -> None:
        if not 1 <= self.threads <= MAX_THREADS:
            raise ScheduleError(f"gpu-default-schedule: threads={self.threads}; a CUDA block has 1 to {MAX_THREADS}")
        for f in op.ops:
            if isinstance(f, func.FuncOp) and f.sym_name.data != ENTRY and f.body.blocks:
                schedule_kernel(f, self.threads)


def schedule_kernel(f: func.FuncOp, threads: int) -> None:
    """Binds the leading spatial loops of `f`'s one loop nest (see the module docstring)."""
    if any(isinstance(o, loop.ForOp) and o.kind.data in loop.GPU_LOOP_KINDS for o in f.walk()):
        return
    nests = [o for o in f.body.block.ops if isinstance(o, (loop.ForOp, loop.BlockOp, loop.CopyOp))]
    if len(nests) != 1:
        raise CompileError(f"gpu-default-schedule: @{f.sym_name.data} has {len(nests)} top-level stages; "
                           "run gpu-split-stages first (one launch per stage)")
    if GEMM_ATTR in nests[0].attributes or IGEMM_ATTR in nests[0].attributes:
        return  # the GEMM template's (gpu-gemm)
    chain = _spatial_chain(nests[0])
    if not chain:
        return
    fused = chain[0]
    for inner in chain[1:]:
        fused = fuse(fused, inner)
    if fused.trip_count > 0:
        bind_threads(fused, threads)


def _spatial_chain(top: object) -> list[loop.ForOp]:
    """The perfectly nested serial loops from `top` inward that no block binds as a reduction."""
    chain: list[loop.ForOp] = []
    cur = top
    while isinstance(cur, loop.ForOp) and cur.kind.data == "serial" and cur.bounds[0] == 0 \
            and cur.bounds[2] == 1 and "R" not in bound_kinds(cur):
        if chain:
            try:
                check_perfect(chain[-1], cur, "gpu-default-schedule")
            except ScheduleError:
                break
        chain.append(cur)
        cur = single_child_loop(cur)
    return chain

"""bind: run a loop's iterations on GPU blocks or threads (TVM's `bind` to a thread axis).

```mlir
loop.for %i = 0 to 1000 serial { loop.block "b" [S %v = %i] {...} }
```
`bind_threads(loop, 256)` splits it by 256 and binds both halves:
```mlir
loop.for %i_b = 0 to 4 blockIdx.x {
  loop.for %i_t = 0 to 256 threadIdx.x {
    %c = arith.constant 256 : index
    %t = arith.muli %i_b, %c : index
    %i = arith.addi %t, %i_t : index
    loop.block "b" [S %v = %i] {...}
  }
} {gpu.limit = 1000}
```
When the threads do not divide the trip count, the blockIdx loop carries
`gpu.limit` (the original trip count): the CUDA backend skips the iterations
whose index `%i_b * 256 + %i_t` reaches it, as TVM's predicated split does.
`bind(loop, axis)` alone marks one loop `blockIdx.x` or `threadIdx.x`; a
thread loop must lie inside a block loop, and each axis is bound once per
nest. Both are legal only for loops that every block under them binds as
spatial: GPU threads have no order, so a reduction carried by the loop would
race on its accumulator.
"""

from __future__ import annotations

from xdsl.dialects.builtin import IntegerAttr, StringAttr, i64

from ziggurat.dialects import loop
from ziggurat.errors import ScheduleError
from ziggurat.transforms.loop.primitives.loops import bound_kinds, describe, require_plain
from ziggurat.transforms.loop.primitives.split import split_loop

BLOCK_AXIS, THREAD_AXIS = loop.GPU_LOOP_KINDS
LIMIT_ATTR = "gpu.limit"
MAX_THREADS = 1024  # threads of one CUDA block (every compute capability since 2.0)


def bind(f: loop.ForOp, axis: str) -> None:
    """Marks `f` as the GPU axis `axis` (`blockIdx.x` or `threadIdx.x`)."""
    _check(f, axis)
    f.properties["kind"] = StringAttr(axis)


def _check(f: loop.ForOp, axis: str) -> None:
    """Raises ScheduleError unless `f` may become `axis`."""
    if axis not in loop.GPU_LOOP_KINDS:
        raise ScheduleError(f"bind: unknown thread axis '{axis}'; use one of {loop.GPU_LOOP_KINDS}")
    require_plain(f, "bind")
    if "R" in bound_kinds(f):
        raise ScheduleError(f"bind: {describe(f)} carries a reduction (a block binds it as R); "
                            "GPU threads would race on the accumulator: bind a spatial loop")
    enclosing = []
    p = f.parent_op()
    while p is not None:
        if isinstance(p, loop.ForOp) and p.kind.data != "serial":
            enclosing.append(p.kind.data)
        p = p.parent_op()
    inside = {o.kind.data for o in f.body.walk() if isinstance(o, loop.ForOp)} - {"serial"}
    if axis in enclosing or axis in inside:
        raise ScheduleError(f"bind: {describe(f)} is nested with another '{axis}' loop; bind each axis once")
    if axis == THREAD_AXIS:
        if enclosing != [BLOCK_AXIS]:
            raise ScheduleError(f"bind: {describe(f)} must lie inside a '{BLOCK_AXIS}' loop (and no other kind "
                                f"of loop) to become '{THREAD_AXIS}'; found {enclosing or 'none'}")
        if f.trip_count > MAX_THREADS:
            raise ScheduleError(f"bind: {describe(f)} has {f.trip_count} iterations; a CUDA block has at most "
                                f"{MAX_THREADS} threads: split it first")
    elif enclosing or inside - {THREAD_AXIS}:
        raise ScheduleError(f"bind: {describe(f)} must be outside every parallel, vectorized or unrolled loop "
                            f"to become '{BLOCK_AXIS}'")
    f.properties["kind"] = StringAttr(axis)


def bind_threads(f: loop.ForOp, threads: int) -> tuple[loop.ForOp, loop.ForOp]:
    """Splits `f` into a `blockIdx.x` loop of ceil(n / threads) blocks around a `threadIdx.x` loop of
    `threads` threads; returns both. A tail (threads not dividing n) is guarded by `gpu.limit`."""
    _check(f, BLOCK_AXIS)
    n = f.trip_count
    if not 1 <= threads <= MAX_THREADS:
        raise ScheduleError(f"bind: {threads} threads per block; a CUDA block has 1 to {MAX_THREADS}")
    threads = min(threads, n)
    blocks, inner = split_loop(f, -(-n // threads), threads, ("_b", "_t"))
    if n % threads:
        blocks.attributes[LIMIT_ATTR] = IntegerAttr(n, i64)
    blocks.properties["kind"] = StringAttr(BLOCK_AXIS)
    inner.properties["kind"] = StringAttr(THREAD_AXIS)
    return blocks, inner

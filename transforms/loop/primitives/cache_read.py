"""cache_read: copy a buffer a block reads into a kernel-local buffer first,
and make the block read the copy.

```mlir
loop.for %i = 0 to 4 serial { loop.for %j = 0 to 8 serial {
  loop.block "b" [S %a = %i, S %c = %j] { %v = loop.load %x[%a, %c] : memref<4x8xf32> ... } } }
```
cache_read("b", 0) becomes
```mlir
%x2 = loop.alloc "local" : memref<4x8xf32>
loop.for %b_read0_0 = 0 to 4 serial { loop.for %b_read0_1 = 0 to 8 serial {
  loop.block "b_read0" [S %p = %b_read0_0, S %q = %b_read0_1] {
    %e = loop.load %x[%p, %q] : memref<4x8xf32>
    loop.store %e, %x2[%p, %q] : memref<4x8xf32> } } }
loop.for %i = 0 to 4 serial { loop.for %j = 0 to 8 serial {
  loop.block "b" [S %a = %i, S %c = %j] { %v = loop.load %x2[%a, %c] : memref<4x8xf32> ... } } }
```
The copy block `<block>_read<n>` is an ordinary spatial producer: compute_at
moves it next to its use (packing) and compute_inline undoes it. Buffer `n`
counts the distinct buffers the block loads, in order of their first load.
Illegal when the block also writes that buffer or another block of its loop
nest does.
"""

from __future__ import annotations

from xdsl.builder import Builder
from xdsl.dialects import func
from xdsl.dialects.builtin import MemRefType
from xdsl.rewriter import InsertPoint

from ziggurat.dialects import loop
from ziggurat.errors import ScheduleError
from ziggurat.transforms.loop.primitives.regions import (
    blocks_in, buffer_name, full_nest, has, insert_alloc, loads, logical_shape, new_block, reads, root, unique_name, writes,
)

W = "cache_read"


def pick(bufs: list, n: int, what: str, name: str, verb: str):
    if not 0 <= n < len(bufs):
        raise ScheduleError(f"{what}: block '{name}' {verb} {len(bufs)} buffer(s) "
                            f"({', '.join(str(b.type) for b in bufs)}); there is no buffer {n}")
    return bufs[n]


def copy_nest(b: Builder, fn: func.FuncOp, src, dst, name: str) -> loop.BlockOp:
    shape = logical_shape(src)
    b, ivs = full_nest(b, shape, name, name)
    blk, bb = new_block(b, name, "S" * len(shape), ivs)
    args = list(blk.body.block.args)
    v = bb.insert(loop.LoadOp(src, args)).result
    bb.insert(loop.StoreOp(v, dst, args))
    return blk


def cache_read(fn: func.FuncOp, blk: loop.BlockOp, n: int) -> loop.BlockOp:
    name = blk.block_name.data
    buf = pick(reads(blk), n, W, name, "reads")
    if has(writes(blk), buf):
        raise ScheduleError(f"{W}: block '{name}' also writes {buffer_name(buf)}; use cache_write")
    r = root(blk)
    for d in blocks_in([r]):
        if d is not blk and has(writes(d), buf):
            raise ScheduleError(f"{W}: block '{d.block_name.data}' in the loop nest of block '{name}' writes "
                                f"{buffer_name(buf)}; a copy made before the nest would be stale")
    t = buf.type
    cache = insert_alloc(fn, MemRefType(t.element_type, logical_shape(buf)))  # type: ignore[attr-defined]
    copy = copy_nest(Builder(InsertPoint.before(r)), fn, buf, cache, unique_name(fn, f"{name}_read{n}"))
    for ld in loads(blk, buf):
        ld.operands[0] = cache
    return copy

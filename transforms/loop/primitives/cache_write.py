"""cache_write: a block (and its init block) writes a kernel-local buffer,
copied to the real one right after the block's loop nest.

```mlir
loop.for %i = 0 to 4 serial {
  loop.block "s_init" [S %a = %i] { loop.store %z, %y[%a] : memref<4xf32> }
  loop.for %k = 0 to 32 serial { loop.block "s" [S %b = %i, R %c = %k] {
    %o = loop.load %y[%b] : memref<4xf32> ... loop.store %n, %y[%b] : memref<4xf32> } } }
```
cache_write("s", 0) becomes
```mlir
%y2 = loop.alloc "local" : memref<4xf32>
loop.for %i = 0 to 4 serial {
  loop.block "s_init" [S %a = %i] { loop.store %z, %y2[%a] : memref<4xf32> }
  loop.for %k = 0 to 32 serial { loop.block "s" [S %b = %i, R %c = %k] {
    %o = loop.load %y2[%b] : memref<4xf32> ... loop.store %n, %y2[%b] : memref<4xf32> } } }
loop.for %s_write0_0 = 0 to 4 serial {
  loop.block "s_write0" [S %p = %s_write0_0] {
    %e = loop.load %y2[%p] : memref<4xf32>
    loop.store %e, %y[%p] : memref<4xf32> } }
```
The copy block `<block>_write<n>` is a spatial consumer that
reverse_compute_at can move under the block's loops (write-back per tile).
Legal when the block stores the buffer once at spatial variables covering
all of it, reads it only if an init block `<block>_init` writes it first,
and no other block touches it from the init block to the end of the nest.
"""

from __future__ import annotations

from xdsl.builder import Builder
from xdsl.dialects import func
from xdsl.dialects.builtin import MemRefType
from xdsl.rewriter import InsertPoint

from ziggurat.dialects import loop
from ziggurat.errors import ScheduleError
from ziggurat.transforms.loop.primitives.cache_read import copy_nest, pick
from ziggurat.transforms.loop.primitives.regions import (
    buffer_name, find_block, has, identity_store, insert_alloc, loads, logical_shape, reads, root, span, stores, top_ops,
    unique_name, writes,
)

W = "cache_write"


def cache_write(fn: func.FuncOp, blk: loop.BlockOp, n: int) -> loop.BlockOp:
    name = blk.block_name.data
    buf = pick(writes(blk), n, W, name, "writes")
    identity_store(blk, buf, W)
    init = find_block(fn, f"{name}_init")
    if init is not None and not has(writes(init), buf):
        init = None
    if init is not None:
        identity_store(init, buf, W)
        if has(reads(init), buf):
            raise ScheduleError(f"{W}: init block '{name}_init' reads {buffer_name(buf)}")
    elif has(reads(blk), buf):
        raise ScheduleError(f"{W}: block '{name}' reads {buffer_name(buf)} before writing it and has no init "
                            f"block '{name}_init'; the cache would start uninitialized")
    r = root(blk)
    first = root(init) if init is not None else r
    ops = top_ops(fn)
    if ops.index(first) > ops.index(r):
        raise ScheduleError(f"{W}: init block '{name}_init' comes after block '{name}'")
    for d in span(fn, first, r):
        if d is not blk and d is not init and (has(writes(d), buf) or has(reads(d), buf)):
            raise ScheduleError(f"{W}: block '{d.block_name.data}' also uses {buffer_name(buf)} between "
                                f"'{name}' and its init block")
    t = buf.type
    cache = insert_alloc(fn, MemRefType(t.element_type, logical_shape(buf)))  # type: ignore[attr-defined]
    for b in [blk] + ([init] if init is not None else []):
        for o in loads(b, buf):
            o.operands[0] = cache
        for o in stores(b, buf):
            o.operands[1] = cache
    return copy_nest(Builder(InsertPoint.after(r)), fn, cache, buf, unique_name(fn, f"{name}_write{n}"))

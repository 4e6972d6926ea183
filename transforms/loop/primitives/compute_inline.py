"""compute_inline: replace every read of a producer's buffer by the producer's
computation, and drop the producer.

```mlir
%t = loop.alloc "local" : memref<16xf32>
loop.for %i = 0 to 16 serial { loop.block "p" [S %a = %i] {
  %x = loop.load %in[%a] : memref<16xf32>
  %y = arith.mulf %x, %x : f32
  loop.store %y, %t[%a] : memref<16xf32> } }
loop.for %j = 0 to 16 serial { loop.block "c" [S %b = %j] {
  %v = loop.load %t[%b] : memref<16xf32>
  loop.store %v, %out[%b] : memref<16xf32> } }
```
compute_inline("p") becomes
```mlir
loop.for %j = 0 to 16 serial { loop.block "c" [S %b = %j] {
  %x = loop.load %in[%b] : memref<16xf32>
  %y = arith.mulf %x, %x : f32
  loop.store %y, %out[%b] : memref<16xf32> } }
```
Legal when the producer is a spatial block with a nest of its own that alone
writes a kernel-local buffer, stores it once at its own variables covering
all of it, holds nothing but loads and arithmetic, and no block between it
and its last reader writes a buffer it reads.
"""

from __future__ import annotations

from xdsl.dialects import func

from ziggurat.dialects import loop
from ziggurat.errors import ScheduleError
from ziggurat.transforms.loop.primitives.regions import (
    all_blocks, blocks_in, buffer_name, has, identity_store, loads, local_alloc, only_block_in_nest, reads, root,
    stores, top_ops, writes,
)

W = "compute_inline"


def compute_inline(fn: func.FuncOp, blk: loop.BlockOp) -> None:
    name = blk.block_name.data
    if "R" in blk.iter_kinds.data:
        raise ScheduleError(f"{W}: block '{name}' is a reduction; only spatial blocks can be inlined")
    ws = writes(blk)
    if len(ws) != 1:
        raise ScheduleError(f"{W}: block '{name}' writes {len(ws)} buffers; it must write exactly one")
    buf = ws[0]
    alloc = local_alloc(fn, buf, name, W)
    if has(reads(blk), buf):
        raise ScheduleError(f"{W}: block '{name}' reads the buffer it writes")
    dims = identity_store(blk, buf, W)
    if len(dims) != len(blk.bindings):
        raise ScheduleError(f"{W}: block '{name}' has variables that index no dimension of its buffer")
    bad = [o.name for o in blk.body.block.ops
           if o.regions or (o.name.startswith("loop.") and not isinstance(o, (loop.LoadOp, loop.StoreOp)))]
    if bad:
        raise ScheduleError(f"{W}: block '{name}' holds '{bad[0]}'; only loads and scalar arithmetic can be inlined")
    others = [b.block_name.data for b in all_blocks(fn) if b is not blk and has(writes(b), buf)]
    if others:
        raise ScheduleError(f"{W}: block(s) {others} also write the buffer of block '{name}'")
    r_blk = only_block_in_nest(blk, W)
    readers = [b for b in all_blocks(fn) if b is not blk and has(reads(b), buf)]
    if not readers:
        raise ScheduleError(f"{W}: no block reads the buffer of block '{name}'")
    ops = top_ops(fn)
    last = max(ops.index(root(b)) for b in readers)
    if min(ops.index(root(b)) for b in readers) < ops.index(r_blk):
        raise ScheduleError(f"{W}: a block reads the buffer of block '{name}' before it is computed")
    src = reads(blk)
    for d in blocks_in(ops[ops.index(r_blk) + 1:last + 1]):
        hit = [v for v in writes(d) if has(src, v)]
        if hit:
            raise ScheduleError(f"{W}: block '{d.block_name.data}' writes {buffer_name(hit[0])}, which block "
                                f"'{name}' reads; inlining '{name}' after it would read the new values")
    store = stores(blk, buf)[0]
    args = list(blk.body.block.args)
    body = [o for o in blk.body.block.ops if o is not store]
    for r in readers:
        for ld in loads(r, buf):
            mapping = {args[n]: ld.indices[d] for d, n in enumerate(dims)}
            for o in body:
                ld.parent_block().insert_op_before(o.clone(value_mapper=mapping), ld)
            ld.result.replace_all_uses_with(mapping.get(store.value, store.value))
            ld.detach()
            ld.erase()
    r_blk.detach()
    r_blk.erase()
    if not alloc.result.uses:
        alloc.detach()
        alloc.erase()

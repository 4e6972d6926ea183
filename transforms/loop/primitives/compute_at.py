"""compute_at: move a producer block under a loop of its consumer, computing
only the region that one iteration of that loop reads.

```mlir
%t = loop.alloc "local" : memref<8x16xf32>
loop.for %i = 0 to 8 serial { loop.for %j = 0 to 16 serial {
  loop.block "p" [S %a = %i, S %b = %j] { ... loop.store %v, %t[%a, %b] : memref<8x16xf32> } } }
loop.for %i2 = 0 to 8 serial { loop.for %j2 = 0 to 16 serial {
  loop.block "c" [S %c = %i2, S %d = %j2] { %x = loop.load %t[%c, %d] : memref<8x16xf32> ... } } }
```
compute_at("p", %i2) becomes
```mlir
%t = loop.alloc "local" : memref<8x16xf32>
loop.for %i2 = 0 to 8 serial {
  loop.for %p_ax0 = 0 to 1 serial {
    loop.for %p_ax1 = 0 to 16 serial {
      %a0 = arith.addi %i2, %p_ax0 : index
      loop.block "p" [S %a = %a0, S %b = %p_ax1] { ... }
    }
  }
  loop.for %j2 = 0 to 16 serial { loop.block "c" [S %c = %i2, S %d = %j2] {...} }
}
```
The region is the bounding box of the consumer's (affine) reads of the
buffer over the loops inside the target loop; overlapping regions are
recomputed. Legal when the producer is a spatial block that alone writes a
kernel-local buffer it covers completely, every reader of that buffer sits
under the loop, and no block the producer now runs after writes what it reads.
"""

from __future__ import annotations

from xdsl.builder import Builder
from xdsl.dialects import func
from xdsl.rewriter import InsertPoint

from ziggurat.dialects import loop
from ziggurat.errors import ScheduleError
from ziggurat.transforms.loop.primitives.loops import describe, get_loops
from ziggurat.transforms.loop.primitives.regions import (
    affine, all_blocks, blocks_in, buffer_name, has, identity_store, loads, local_alloc, only_block_in_nest, reads,
    root, split_range, top_ops, writes,
)

W = "compute_at"


def read_region(consumers: list[loop.BlockOp], buf, f: loop.ForOp, what: str, name: str):
    """Per dimension of `buf`: (affine base in the loops down to `f`, lo, hi) of what `consumers` read."""
    base: list | None = None
    lo: list[int] = []
    hi: list[int] = []
    for c in consumers:
        cl = get_loops(c)
        p = next(n for n, g in enumerate(cl) if g is f)
        for ld in loads(c, buf):
            row = []
            for d, idx in enumerate(ld.indices):
                e = affine(idx)
                if e is None:
                    raise ScheduleError(f"{what}: block '{c.block_name.data}' reads dimension {d} of the buffer of "
                                        f"block '{name}' at an index that is not affine in the loops (a fused loop "
                                        "or a clamped index); the region it needs is unknown")
                row.append(split_range(e, cl[:p + 1], cl[p + 1:], what))
            bases = [{k: v for k, v in r[0].items() if v and k != 1} for r in row]
            if base is None:
                base = bases
                lo = [r[1] + r[0].get(1, 0) for r in row]
                hi = [r[2] + r[0].get(1, 0) for r in row]
            else:
                if bases != base:
                    raise ScheduleError(f"{what}: the reads of the buffer of block '{name}' under {describe(f)} "
                                        "move differently with the outer loops; no single region fits them")
                lo = [min(a, r[1] + r[0].get(1, 0)) for a, r in zip(lo, row)]
                hi = [max(a, r[2] + r[0].get(1, 0)) for a, r in zip(hi, row)]
    assert base is not None
    return base, lo, hi


def place_block(blk: loop.BlockOp, b: Builder, base: list, lo: list[int], hi: list[int], var_of_dim: list[int],
                extra: list[tuple[int, int, int]], hint: str) -> None:
    """Rebuilds `blk` under new loops inserted with `b`: dimension d spans lo[d]..hi[d] above base[d];
    `extra` = (variable, lo, hi) for variables bound to no dimension."""
    from ziggurat.transforms.loop.primitives.regions import emit

    bindings: dict[int, tuple] = {}
    ivs = []
    for d, n in enumerate(var_of_dim):
        bindings[n] = (base[d], lo[d], hi[d])
    for n, a, z in extra:
        bindings[n] = ({}, a, z)
    for n in sorted(bindings):
        f = b.insert(loop.ForOp(0, bindings[n][2] - bindings[n][1] + 1))
        f.iv.name_hint = f"{hint}_ax{n}"
        ivs.append((n, f.iv))
        b = Builder(InsertPoint.at_end(f.body.block))
    new = [None] * len(blk.bindings)
    for n, iv in ivs:
        expr, a, _ = bindings[n]
        new[n] = emit(b, expr, a, iv)
    blk.operands = new
    blk.detach()
    b.insert(blk)


def compute_at(fn: func.FuncOp, blk: loop.BlockOp, f: loop.ForOp) -> None:
    name = blk.block_name.data
    if "R" in blk.iter_kinds.data:
        raise ScheduleError(f"{W}: block '{name}' is a reduction; only spatial producers can be moved "
                            "(reverse_compute_at its consumer instead)")
    ws = writes(blk)
    if len(ws) != 1:
        raise ScheduleError(f"{W}: block '{name}' writes {len(ws)} buffers; it must write exactly one")
    buf = ws[0]
    local_alloc(fn, buf, name, W)
    if has(reads(blk), buf):
        raise ScheduleError(f"{W}: block '{name}' reads the buffer it writes")
    dims = identity_store(blk, buf, W)
    if len(dims) != len(blk.bindings):
        raise ScheduleError(f"{W}: block '{name}' has variables that index no dimension of its buffer")
    if f.is_ancestor(blk):
        raise ScheduleError(f"{W}: block '{name}' is already under {describe(f)}")
    others = [b.block_name.data for b in all_blocks(fn) if b is not blk and has(writes(b), buf)]
    if others:
        raise ScheduleError(f"{W}: block(s) {others} also write the buffer of block '{name}'")
    readers = [b for b in all_blocks(fn) if b is not blk and has(reads(b), buf)]
    outside = [b.block_name.data for b in readers if not f.is_ancestor(b)]
    if not readers or outside:
        raise ScheduleError(f"{W}: " + (f"no block reads the buffer of block '{name}'" if not readers else
                            f"block(s) {outside} read the buffer of block '{name}' outside {describe(f)}"))
    r_blk, r_f = only_block_in_nest(blk, W), root(f)
    ops = top_ops(fn)
    if ops.index(r_blk) >= ops.index(r_f):
        raise ScheduleError(f"{W}: block '{name}' does not come before {describe(f)}")
    src = reads(blk)
    for d in blocks_in(ops[ops.index(r_blk) + 1:ops.index(r_f) + 1]):
        hit = [v for v in writes(d) if has(src, v)]
        if hit:
            raise ScheduleError(f"{W}: block '{d.block_name.data}' writes {buffer_name(hit[0])}, which block "
                                f"'{name}' reads, before {describe(f)}; moving '{name}' there would read the new "
                                "values")
    base, lo, hi = read_region(readers, buf, f, W, name)
    place_block(blk, Builder(InsertPoint.at_start(f.body.block)), base, lo, hi, dims, [], name)
    r_blk.detach()
    r_blk.erase()

"""reverse_compute_at: move a consumer block under a loop of its producer,
consuming the region that one iteration of that loop has finished.

```mlir
loop.for %i = 0 to 8 serial { loop.for %j = 0 to 16 serial {
  loop.block "mm_init" [...] {...}
  loop.for %k = 0 to 32 serial { loop.block "mm" [S %a = %i, S %b = %j, R %c = %k] {...store %t[%a, %b]} } } }
loop.for %i2 = 0 to 8 serial { loop.for %j2 = 0 to 16 serial {
  loop.block "relu" [S %x = %i2, S %y = %j2] { %v = loop.load %t[%x, %y] ... } } }
```
reverse_compute_at("relu", %i) becomes
```mlir
loop.for %i = 0 to 8 serial {
  loop.for %j = 0 to 16 serial { ... "mm_init" ... "mm" ... }
  loop.for %relu_ax0 = 0 to 1 serial {
    loop.for %relu_ax1 = 0 to 16 serial {
      %x0 = arith.addi %i, %relu_ax0 : index
      loop.block "relu" [S %x = %x0, S %y = %relu_ax1] {...}
    }
  }
}
```
Legal when the consumer is a spatial block with a nest of its own that reads
the buffer only at its own variables (which cover the buffer), every writer
of the buffer under the loop stores at affine indices with no reduction loop
at or outside the loop (so the region is final), writers elsewhere come
earlier, and no block the consumer now runs before touches what it writes or
writes what it reads.
"""

from __future__ import annotations

from xdsl.builder import Builder
from xdsl.dialects import func
from xdsl.ir import BlockArgument, Operation
from xdsl.rewriter import InsertPoint

from ziggurat.dialects import loop
from ziggurat.errors import ScheduleError
from ziggurat.transforms.loop.primitives.compute_at import place_block
from ziggurat.transforms.loop.primitives.loops import describe, get_loops, uses
from ziggurat.transforms.loop.primitives.regions import (
    affine, all_blocks, blocks_in, buffer_name, has, identity_store, loads, logical_shape, only_block_in_nest, reads, root, split_range, stores,
    top_ops, var_domain, writes,
)

W = "reverse_compute_at"


def written_region(writers: list[loop.BlockOp], buf, f: loop.ForOp, name: str):
    base = None
    lo: list[int] = []
    hi: list[int] = []
    for w in writers:
        wl = get_loops(w)
        p = next(n for n, g in enumerate(wl) if g is f)
        for g in wl[:p + 1]:
            memo: dict = {}
            if any(k == "R" and uses(b, g.iv, memo) for k, b in zip(w.iter_kinds.data, w.bindings)):
                raise ScheduleError(f"{W}: {describe(g)} carries the reduction of block '{w.block_name.data}'; "
                                    f"its results are not final after one iteration of {describe(f)}")
        for st in stores(w, buf):
            row = []
            for d, idx in enumerate(st.indices):
                e = affine(idx)
                if e is None:
                    raise ScheduleError(f"{W}: block '{w.block_name.data}' writes dimension {d} of the buffer "
                                        f"block '{name}' reads at an index that is not affine in the loops")
                row.append(split_range(e, wl[:p + 1], wl[p + 1:], W))
            bases = [{k: v for k, v in r[0].items() if v and k != 1} for r in row]
            cur_lo = [r[1] + r[0].get(1, 0) for r in row]
            cur_hi = [r[2] + r[0].get(1, 0) for r in row]
            if base is None:
                base, lo, hi = bases, cur_lo, cur_hi
            elif bases != base:
                raise ScheduleError(f"{W}: the writes under {describe(f)} move differently with the outer loops")
            else:
                lo = [min(a, b) for a, b in zip(lo, cur_lo)]
                hi = [max(a, b) for a, b in zip(hi, cur_hi)]
    return base, lo, hi


def _covers(w: loop.BlockOp, buf) -> bool:
    try:
        identity_store(w, buf, W)
        return True
    except ScheduleError:
        return False


def _done_before(w: loop.BlockOp, f: loop.ForOp) -> bool:
    """Writer `w` outside `f` finishes its part of the buffer before each iteration of `f` reads it: it runs
    earlier in the body of a common ancestor, and every loop enclosing both binds one of its spatial variables
    (so a later iteration of that loop writes other elements)."""
    chain = []
    p = f.parent_op()
    while p is not None and not isinstance(p, func.FuncOp):
        chain.append(p)
        p = p.parent_op()
    x: Operation = w
    while x.parent_op() is not None and x.parent_op() not in chain and not isinstance(x.parent_op(), func.FuncOp):
        x = x.parent_op()  # type: ignore[assignment]
    y: Operation = f
    while y.parent_op() is not x.parent_op():
        y = y.parent_op()  # type: ignore[assignment]
    ops = list(x.parent_block().ops)
    if ops.index(x) >= ops.index(y):
        return False
    common = [g for g in get_loops(w) if g.is_ancestor(f)]
    return all(any(k == "S" and uses(b, g.iv, {}) for k, b in zip(w.iter_kinds.data, w.bindings)) for g in common)


def reverse_compute_at(fn: func.FuncOp, blk: loop.BlockOp, f: loop.ForOp) -> None:
    name = blk.block_name.data
    if "R" in blk.iter_kinds.data:
        raise ScheduleError(f"{W}: block '{name}' is a reduction; only spatial consumers can be moved")
    if f.is_ancestor(blk):
        raise ScheduleError(f"{W}: block '{name}' is already under {describe(f)}")
    under = [b for b in all_blocks(fn) if f.is_ancestor(b)]
    bufs = [v for v in reads(blk) if any(has(writes(b), v) for b in under)]
    if len(bufs) != 1:
        raise ScheduleError(f"{W}: block '{name}' reads {len(bufs)} buffers written under {describe(f)}; "
                            "it must read exactly one")
    buf = bufs[0]
    if has(writes(blk), buf):
        raise ScheduleError(f"{W}: block '{name}' also writes the buffer it consumes")
    r_blk, r_f = only_block_in_nest(blk, W), root(f)
    ops = top_ops(fn)
    if ops.index(r_blk) <= ops.index(r_f):
        raise ScheduleError(f"{W}: block '{name}' does not come after {describe(f)}")
    writers = [b for b in under if has(writes(b), buf)]
    if not any(_covers(w, buf) for w in writers):
        raise ScheduleError(f"{W}: no block under {describe(f)} writes all of {buffer_name(buf)} at its own spatial "
                            f"variables; block '{name}' would miss part of it")
    base, lo, hi = written_region(writers, buf, f, name)
    for b in all_blocks(fn):
        if has(writes(b), buf) and not f.is_ancestor(b) and not _done_before(b, f):
            raise ScheduleError(f"{W}: block '{b.block_name.data}' writes the buffer block '{name}' reads outside "
                                f"{describe(f)} but not before it")
    args = list(blk.body.block.args)
    var_of_dim: list[int] | None = None
    for ld in loads(blk, buf):
        row = []
        for idx in ld.indices:
            if not (isinstance(idx, BlockArgument) and idx.block is blk.body.block):
                raise ScheduleError(f"{W}: block '{name}' reads {buffer_name(buf)} at a computed index; it must "
                                    "read at its own variables")
            row.append(args.index(idx))
        if var_of_dim not in (None, row) or len(set(row)) != len(row):
            raise ScheduleError(f"{W}: block '{name}' reads {buffer_name(buf)} at different or repeated variables")
        var_of_dim = row
    assert var_of_dim is not None
    for d, (n, size) in enumerate(zip(var_of_dim, logical_shape(buf))):
        if var_domain(blk, n, W) != (0, size - 1):
            raise ScheduleError(f"{W}: block '{name}' does not read all of dimension {d} of {buffer_name(buf)}")
    extra = []
    for n in range(len(args)):
        if n not in var_of_dim:
            dom = var_domain(blk, n, W)
            if dom is None:
                raise ScheduleError(f"{W}: variable {n} of block '{name}' is bound to a non-affine index")
            extra.append((n, *dom))
    src, dst = [v for v in reads(blk) if v is not buf], writes(blk)
    for d in blocks_in(ops[ops.index(r_f):ops.index(r_blk)]):
        clash = [v for v in writes(d) if has(src, v) or has(dst, v)] + [v for v in reads(d) if has(dst, v)]
        if clash:
            raise ScheduleError(f"{W}: block '{d.block_name.data}' also uses {buffer_name(clash[0])}, which block "
                                f"'{name}' writes or reads; moving '{name}' before it changes the result")
    place_block(blk, Builder(InsertPoint.at_end(f.body.block)), base, lo, hi, var_of_dim, extra, name)
    r_blk.detach()
    r_blk.erase()

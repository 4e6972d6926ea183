"""A register block for matmul-like nests over run-time extents (loop-dynamic-schedule).

The static schedules plan a register block from the extents (transforms/schedule/plan.py); over
symbolic rows and columns (an attention matmul: `sequence` rows and columns) this builds the
block that needs no extent at compile time: `U` rows at a time, the column loop cut into
vectors, each vector's `U` accumulators in a local `[U, W]` buffer (LLVM keeps them in registers
across the reduction loop), the rows left over by the generic schedule.

```mlir
loop.for %i = 0 to %n serial {
  loop.for %j = 0 to %m serial {
    loop.block "matmul_init" [S %a = %i, S %b = %j] {...out[%a, %b]...}
    loop.for %k = 0 to %K serial { loop.block "matmul" [S %a = %i, S %b = %j, R %c = %k] {...} }
  }
}
```
becomes (U = 8, W = 16)
```mlir
loop.for %io = 0 to %main step 8 serial {
  %acc = loop.alloc "local" : memref<8x16xf32>
  loop.for %jo = 0 to %m step 16 serial {
    loop.for %jl = 0 to min(%m - %jo, 16) vectorized {
      loop.block "matmul_init" [..] {...acc[u, jl]...}           // x8
      loop.for %k = 0 to %K serial { loop.block "matmul" [..] {...acc[u, jl]...} }   // x8
      loop.block "matmul_store" [..] {...out[io + u, jo + jl] = acc[u, jl]...}       // x8
    }
  }
}
loop.for %i = %main to %n serial { <the original rows' nest> }
```
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.builder import Builder
from xdsl.dialects import arith
from xdsl.dialects.builtin import IndexType, IntegerAttr, StringAttr, UnitAttr, i64
from xdsl.ir import SSAValue
from xdsl.rewriter import InsertPoint

from ziggurat.dialects import loop
from ziggurat.dialects.sym import memref_of_shape
from ziggurat.lowering.convert_loop_to_hw import index_value
from ziggurat.transforms.schedule.nest import chain, depends

BLOCKED = "dyn.blocked"  # attribute of a row-block loop this module built: scheduled already
LEFTOVER = "dyn.leftover"  # and of one over the rows a larger block left: a few trips, serial


@dataclass
class _Nest:
    i: loop.ForOp  # the rows of the block: accumulators per row
    j: loop.ForOp  # the columns: one vector
    init: loop.BlockOp
    reduction: list[loop.ForOp]  # perfectly nested, the update block innermost
    update: loop.BlockOp
    out: SSAValue
    c: loop.ForOp | None = None  # a static loop of column vectors (a conv's output channel blocks)


def block_var(blk: loop.BlockOp, iv: SSAValue) -> SSAValue | None:
    """The block variable bound to loop variable `iv`, else None."""
    for var, bound in zip(blk.vars, blk.bindings):
        if bound is iv:
            return var
    return None


def _own_point(blk: loop.BlockOp, out: SSAValue, i_var: SSAValue, j_var: SSAValue) -> bool:
    """Every access of `out` in the block is at one index list that holds `i_var` and ends in `j_var`."""
    lists = {tuple(op.indices) for op in blk.body.walk() if isinstance(op, (loop.LoadOp, loop.StoreOp)) and op.buffer is out}
    if len(lists) != 1:
        return False
    (idx,) = lists
    return bool(idx) and idx[-1] is j_var and i_var in idx[:-1]


def _rows_loop(loops: list[loop.ForOp], update: loop.BlockOp, width_rows: int, out: SSAValue) -> loop.ForOp | None:
    """The spatial loop to block by rows: one the update's column-varying reads do not use (so
    each vector it loads serves every row of the block) and its output does, static with at
    least `width_rows` trips where there is one, else a run-time one."""
    j = loops[-1]
    jv = block_var(update, j.iv)
    memo: dict = {}
    vector_reads = [op for op in update.body.walk() if isinstance(op, loop.LoadOp) and op.buffer is not out
                    and any(depends(x, jv, memo) for x in op.indices)] if jv is not None else []
    best = None
    for f in loops[:-1]:
        fv = block_var(update, f.iv)
        if fv is None or f.step.value.data != 1:
            continue
        memo2: dict = {}
        if any(depends(x, fv, memo2) for op in vector_reads for x in op.indices):
            continue
        if not f.is_dynamic and f.trip_count >= width_rows:
            best = f  # the innermost such static loop
        elif f.is_dynamic and (best is None or best.is_dynamic):
            best = f
    return best


def _columns_loop(loops: list[loop.ForOp], i: loop.ForOp, update: loop.BlockOp, out: SSAValue) -> loop.ForOp | None:
    """A static spatial loop (not the rows) that only the column-varying reads and the output use:
    a conv's output channel blocks, whose vectors a block can add as more columns (each broadcast
    then serves several vectors). The innermost such loop above the rows (the rows sink past the
    loops below them), else None."""
    jv = block_var(update, loops[-1].iv)
    if jv is None:
        return None
    best = None
    for f in loops[:loops.index(i)]:
        fv = block_var(update, f.iv)
        if f is i or fv is None or f.is_dynamic or f.step.value.data != 1 or f.trip_count < 2:
            continue
        on_f: dict = {}
        on_j: dict = {}  # one memo per variable (`depends` caches by value)
        ok = True
        for op in update.body.walk():
            if isinstance(op, loop.LoadOp) and op.buffer is not out and any(depends(x, fv, on_f) for x in op.indices):
                ok = ok and any(depends(x, jv, on_j) for x in op.indices)
        if ok:
            best = f
    return best


def match(top: loop.ForOp, rows: int = 8) -> _Nest | None:
    """The matmul-like nest under `top`: perfectly nested spatial loops, the last the columns
    `j`, whose body is an init block and perfectly nested reduction loops around an update block,
    both accessing their output at their own point only; the rows `i` one of the other loops
    (`_rows_loop`). At least one loop has run-time bounds."""
    loops = chain(top)
    if len(loops) < 2:
        return None
    j = loops[-1]
    ops = list(j.body.block.ops)
    if len(ops) != 2 or not isinstance(ops[0], loop.BlockOp) or not isinstance(ops[1], loop.ForOp):
        return None
    init = ops[0]
    reduction = chain(ops[1])
    k_ops = list(reduction[-1].body.block.ops)
    if len(k_ops) != 1 or not isinstance(k_ops[0], loop.BlockOp):
        return None
    update = k_ops[0]
    if j.step.value.data != 1 or not any(f.is_dynamic for f in [*loops, *reduction]):
        return None
    stores = [o for o in init.body.walk() if isinstance(o, loop.StoreOp)]
    if len(stores) != 1:
        return None
    out = stores[0].buffer
    i = _rows_loop(loops, update, rows, out)
    if i is None:
        return None
    for blk in (init, update):
        iv, jv = block_var(blk, i.iv), block_var(blk, j.iv)
        if iv is None or jv is None or not _own_point(blk, out, iv, jv):
            return None
        if any(bound in (i.iv, j.iv) and kind != "S" for kind, bound in zip(blk.iter_kinds.data, blk.bindings)):
            return None
    if [o.buffer for o in update.body.walk() if isinstance(o, loop.StoreOp)] != [out]:
        return None
    c = _columns_loop(loops, i, update, out)
    if c is not None and any(block_var(blk, c.iv) is None for blk in (init, update)):
        c = None
    return _Nest(i, j, init, reduction, update, out, c)


def _sink(i: loop.ForOp, j: loop.ForOp) -> loop.ForOp:
    """Swaps `i` inward past the spatial loops between it and `j` (perfectly nested: legal);
    returns the loop that now plays `i`'s role, just above `j`."""
    while True:
        inner = list(i.body.block.ops)[0]
        assert isinstance(inner, loop.ForOp)
        if inner is j:
            return i
        # i { inner { body } } -> inner' { i' { body } }
        outer_new = loop.ForOp(inner.lower, inner.upper, inner.step.value.data, inner.kind.data)
        outer_new.iv.name_hint = inner.iv.name_hint
        i_new = loop.ForOp(i.lower, i.upper, i.step.value.data, i.kind.data)
        i_new.iv.name_hint = i.iv.name_hint
        outer_new.body.block.add_op(i_new)
        for op in list(inner.body.block.ops):
            op.detach()
            i_new.body.block.add_op(op)
        inner.iv.replace_all_uses_with(outer_new.iv)
        i.iv.replace_all_uses_with(i_new.iv)
        parent = i.parent_block()
        assert parent is not None
        parent.insert_op_before(outer_new, i)
        i.detach()
        i.erase()
        i = i_new


def _copy_block(blk: loop.BlockOp, bindings: dict[SSAValue, SSAValue], extra: SSAValue, acc: SSAValue,
                out: SSAValue, u: int) -> loop.BlockOp:
    """`blk` bound to new values (`bindings` by old bound value) plus one extra spatial variable
    bound to `extra`, its accesses of `out` going to `acc[u, <extra>]` (u: the accumulator's row)."""
    new = loop.BlockOp(blk.block_name.data, blk.iter_kinds.data + "S",
                       [bindings.get(v, v) for v in blk.bindings] + [extra])
    new.attributes |= blk.attributes
    body = new.body.block
    mapping: dict[SSAValue, SSAValue] = dict(zip(blk.vars, new.vars))
    lane = new.vars[-1]
    b = Builder(InsertPoint.at_end(body))
    row = b.insert(arith.ConstantOp(IntegerAttr(u, IndexType()))).result
    for op in blk.body.block.ops:
        if isinstance(op, loop.LoadOp) and op.buffer is out:
            mapping[op.result] = b.insert(loop.LoadOp(acc, [row, lane])).result
        elif isinstance(op, loop.StoreOp) and op.buffer is out:
            b.insert(loop.StoreOp(mapping.get(op.value, op.value), acc, [row, lane]))
        else:
            c = b.insert(op.clone(value_mapper=mapping))
            for r_old, r_new in zip(op.results, c.results):
                mapping[r_old] = r_new
    return new


def fits(nest: _Nest, width: int) -> bool:
    """A static column count must hold one vector (a narrower output keeps the generic nest)."""
    j = nest.j
    return j.is_dynamic or j.trip_count >= width


def _emit(nest: _Nest, i: loop.ForOp, lo: SSAValue, hi: SSAValue, rows: int, width: int, cols: int) -> None:
    """The block over rows [lo, hi) (a multiple of `rows` of them) by `cols` column vectors, before
    `i`: `cols` steps of the column block loop (nest.c, stepped by `cols`), or without one `cols`
    consecutive vectors of the columns (the column loop steps by `cols` vectors; run-time columns
    left over go one vector at a time, the last masked)."""
    j = nest.j
    b = Builder(InsertPoint.before(i))
    io = b.insert(loop.ForOp(lo, hi, rows, "serial"))
    io.iv.name_hint = "io"
    io.attributes[BLOCKED] = StringAttr(f"{rows}x{width}" if cols == 1 else f"{rows}x{cols}x{width}")
    ib = Builder(InsertPoint.at_end(io.body.block))
    elt = nest.out.type.element_type  # type: ignore[attr-defined]
    acc = ib.insert(loop.AllocOp(memref_of_shape(elt, [rows * cols, width]), "local")).result
    acc.name_hint = "acc"
    if cols == 1 or nest.c is not None or not j.is_dynamic:
        _column_loop(nest, i, io, acc, j.lower, j.upper, rows, width, cols, across_j=cols > 1 and nest.c is None)
        return
    jlo, jhi = index_value(ib, j.lower), index_value(ib, j.upper)
    n = ib.insert(arith.SubiOp(jhi, jlo)).result
    main = ib.insert(arith.SubiOp(jhi, ib.insert(arith.RemSIOp(n, index_value(ib, width * cols))).result)).result
    # the masked tail gets accumulators of its own: its lane-masked accesses would keep LLVM from
    # holding the main loop's in registers (it did in a parallel loop's outlined body)
    tail = ib.insert(loop.AllocOp(memref_of_shape(elt, [rows * cols, width]), "local")).result
    tail.name_hint = "acc_tail"
    _column_loop(nest, i, io, acc, jlo, main, rows, width, cols, across_j=True)
    _column_loop(nest, i, io, tail, main, jhi, rows, width, cols, across_j=False)


def _column_loop(nest: _Nest, i: loop.ForOp, io: loop.ForOp, acc: SSAValue, jlo: int | SSAValue, jhi: int | SSAValue,
                 rows: int, width: int, cols: int, across_j: bool) -> None:
    """One loop over the columns [jlo, jhi) at the end of the row block `io`: `cols` consecutive
    vectors a step (`across_j`: whole vectors), else one vector a step (the last masked) by
    `cols` steps of nest.c where there is one."""
    j = nest.j
    ib = Builder(InsertPoint.at_end(io.body.block))
    jo = ib.insert(loop.ForOp(jlo, jhi, width * cols if across_j else width, "serial"))
    jo.iv.name_hint = "jo"
    jb = Builder(InsertPoint.at_end(jo.body.block))
    lanes: int | SSAValue = width  # whole vectors
    if not across_j:
        left = jb.insert(arith.SubiOp(index_value(jb, jhi), jo.iv)).result
        lanes = jb.insert(arith.MinSIOp(left, index_value(jb, width))).result
    jl = jb.insert(loop.ForOp(0, lanes, 1, "vectorized"))
    jl.iv.name_hint = "jl"
    lb = Builder(InsertPoint.at_end(jl.body.block))
    col = lb.insert(arith.AddiOp(jo.iv, jl.iv)).result
    row_of = [lb.insert(arith.AddiOp(io.iv, index_value(lb, u))).result if u else io.iv for u in range(rows)]
    points = [({i.iv: row_of[u], j.iv: col}, u * cols) for u in range(rows)]
    if nest.c is not None:
        c_of = [lb.insert(arith.AddiOp(nest.c.iv, index_value(lb, v))).result if v else nest.c.iv for v in range(cols)]
        points = [({i.iv: row_of[u], j.iv: col, nest.c.iv: c_of[v]}, u * cols + v)
                  for u in range(rows) for v in range(cols)]
    elif across_j:
        col_of = [lb.insert(arith.AddiOp(col, index_value(lb, v * width))).result if v else col for v in range(cols)]
        points = [({i.iv: row_of[u], j.iv: col_of[v]}, u * cols + v) for u in range(rows) for v in range(cols)]
    for bind, k in points:
        jl.body.block.add_op(_copy_block(nest.init, bind, jl.iv, acc, nest.out, k))
    host, rebound = jl.body.block, {}
    for red in nest.reduction:  # the reduction loops, rebuilt inside the column vector
        kk = loop.ForOp(red.lower, red.upper, red.step.value.data, "serial")
        kk.iv.name_hint = red.iv.name_hint
        host.add_op(kk)
        rebound[red.iv] = kk.iv
        host = kk.body.block
    for bind, k in points:
        host.add_op(_copy_block(nest.update, {**bind, **rebound}, jl.iv, acc, nest.out, k))
    for bind, k in points:
        jl.body.block.add_op(_store_block(nest, bind, jl.iv, acc, k))


def column_steps(nest: _Nest, width: int) -> int:
    """How many column vectors one block covers: steps of the column block loop, or else
    consecutive vectors of static columns (a whole number of vectors): 4 at 16 lanes, 2 at 8, at
    most what divides their count; run-time columns the same, the columns left over one vector
    at a time."""
    if nest.c is not None:
        t = nest.c.trip_count
    elif nest.j.is_dynamic:
        t = 4  # run-time columns: blocks of 4 vectors (2 at 8 lanes), then single vectors
    elif nest.j.lower == 0 and nest.j.trip_count % width == 0:
        t = nest.j.trip_count // width  # static columns: whole vectors of them
    else:
        return 1
    return next(k for k in ((4, 2, 1) if width >= 16 else (2, 1)) if t % k == 0)


def build(nest: _Nest, rows: int, width: int) -> None:
    """Rewrites `nest` into the row block of the module docstring (`rows` = U, `width` = W): the
    rows in blocks of U, the rows left over in blocks of one; with a column block loop (`nest.c`,
    a conv's output channel blocks) each block also covers `column_steps` of its steps, and
    without one over static columns (attention's P x V: 64 of them) that many consecutive vectors
    (U is then 6 at 16 lanes, 4 at 8, and the rows left over go in blocks of two, then one), so
    each broadcast serves several vectors and a narrow map (7 columns) still has independent
    accumulators. The store blocks are `<init name>_store` blocks in the vectorized lane loop, so
    epilogue.fuse_epilogues moves the elementwise stages that read the product into them, as for
    the static register blocks (loop-dynamic-schedule runs it after the blocks)."""
    i = _sink(nest.i, nest.j)
    cols = column_steps(nest, width)
    sizes = [rows, 1]
    if cols > 1:
        if nest.c is not None:
            nest.c.properties["step"] = IntegerAttr(cols, i64)
        sizes = [6 if width >= 16 else 4, 2, 1]
    b = Builder(InsertPoint.before(i))
    lo, hi = index_value(b, i.lower), index_value(b, i.upper)
    for k, size in enumerate(sizes):
        if k == len(sizes) - 1:
            end = hi
        else:
            n = b.insert(arith.SubiOp(hi, lo)).result
            end = b.insert(arith.SubiOp(hi, b.insert(arith.RemSIOp(n, index_value(b, size))).result)).result
        _emit(nest, i, lo, end, size, width, cols)
        if k:
            i.prev_op.attributes[LEFTOVER] = UnitAttr()  # type: ignore[union-attr]
        lo = end
    i.detach()
    i.erase()


def _store_block(nest: _Nest, bindings: dict[SSAValue, SSAValue], lane: SSAValue, acc: SSAValue, u: int) -> loop.BlockOp:
    """`<init name>_store`: out at the init block's point (rebound) = acc[u, lane] (u: the accumulator's row)."""
    init = nest.init
    store = next(o for o in init.body.walk() if isinstance(o, loop.StoreOp))
    blk = loop.BlockOp(f"{init.block_name.data.removesuffix('_init')}_store", "S" * (len(init.bindings) + 1),
                       [bindings.get(v, v) for v in init.bindings] + [lane])
    var = dict(zip(init.vars, blk.vars))
    b = Builder(InsertPoint.at_end(blk.body.block))
    row = b.insert(arith.ConstantOp(IntegerAttr(u, IndexType()))).result
    v = b.insert(loop.LoadOp(acc, [row, blk.vars[-1]])).result
    b.insert(loop.StoreOp(v, nest.out, [var.get(x, x) for x in store.indices]))
    return blk


def block_rows(width: int) -> int:
    """Rows of the block: accumulators plus the broadcast rows and one column vector fit the
    registers (32 at 16 lanes, 16 at 8 or fewer)."""
    return 8 if width >= 16 else 4


__all__ = ["BLOCKED", "LEFTOVER", "block_rows", "block_var", "build", "column_steps", "fits", "match"]

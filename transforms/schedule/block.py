"""The one builder of register blocks: a naive reduction nest and a `BlockPlan` in, loop IR out.

`build_block(nest, plan, width)` rewrites the nest in place. With the vector
along `L` (the last spatial loop, `plan.vector == "spatial"`):

* the tile's loops step by their factors; `L` moves inside them and outside
  the reduction loops, as a `vectorized` loop (or, with packed panels or
  `nvec` > 1, a panel loop around a `width`-lane `vectorized` loop);
* the accumulators live in `acc[rows, ub(L) + width]`, a `loop.alloc "local"`
  that LLVM keeps in registers across the reduction loops: the init block is
  repeated per tile point into `acc` (`<tag>_load` blocks instead when the
  reduction is k-blocked: the partial sums come back from the output), the
  update block per tile point inside the reduction loops, and `<tag>_store`
  blocks write `acc` to the output;
* `kc` splits the reduction into blocks (`k_block_and_pack`: the init in a
  nest of its own, a k-block loop outside); `pack` copies each k-block of B
  into `[panel][kc][width]` panels (`<tag>_pack`); `pack_a` copies the rows'
  k-block of A into `[depth][rows]` slivers (`<tag>_pack_a`);
* `rorder` / `sorder` permute the reduction / spatial loops; `jouter` moves the
  panel loop outside the spatial loops and `mc` cuts the outermost spatial
  loop into blocks outside it (GotoBLAS's ic / jr / ir loops).

With the vector along the innermost reduction loop (`"reduction"`, a dot
product) the tile's loops step by their factors, the init and update blocks
are repeated per tile point and the reduction loop becomes `vectorized`.

Example (matmul 16x32x8 at 8 lanes, `BlockPlan(tile=[(0, 4)], nvec=2)`: 4 rows x 2 vectors):
```mlir
loop.for %i0 = 0 to 16 step 4 serial {
  %acc = loop.alloc "local" : memref<4x40xf32>
  loop.for %i1p = 0 to 4 step 2 serial {        // two 8-lane panels per step
    loop.for %i1l = 0 to 8 vectorized {
      loop.block "matmul_init" [...] {...}     // x8 (4 rows x 2 panels), into %acc
      loop.for %r0 = 0 to 8 serial { loop.block "matmul" [...] {...} }   // x8
      loop.block "matmul_store" [...] {...}    // x8, %acc -> output
    }
  }
}
```
"""

from __future__ import annotations

from xdsl.builder import Builder
from xdsl.dialects import arith, builtin
from xdsl.dialects.builtin import IndexType, IntegerAttr, MemRefType, StringAttr
from xdsl.ir import SSAValue
from xdsl.rewriter import InsertPoint, Rewriter

from ziggurat.dialects import loop
from ziggurat.errors import ScheduleError
from ziggurat.transforms.schedule.nest import ReduceNest, packable_a, packable_b, prepacked
from ziggurat.transforms.schedule.plan import PACK_SUFFIX, BlockPlan

Packed = tuple[loop.LoadOp, SSAValue]  # (the read, the local buffer it reads instead)


def _index(b: Builder, value: int) -> SSAValue:
    return b.insert(arith.ConstantOp(IntegerAttr(value, IndexType()))).result


def _clone_redirected(blk: loop.BlockOp, b: Builder, bindings, out: SSAValue, acc: SSAValue,
                      row: int, lpos: int, name: str | None = None,
                      packed: Packed | None = None, packed_a: Packed | None = None) -> None:
    """Clones `blk` with new bindings; accesses of `out` go to `acc[row, var]`.

    With `packed` = (read, panel), the three extra trailing bindings are
    (panel, lane, depth) and `read` becomes `panel[panel, depth, lane]`; with
    `packed_a` = (read, sliver), one more (depth) and `read` becomes `sliver[depth, row]`."""
    kinds = blk.iter_kinds.data + ("SSR" if packed else "") + ("R" if packed_a else "")
    new = b.insert(loop.BlockOp(name or blk.block_name.data, kinds, bindings))
    mapping: dict[SSAValue, SSAValue] = dict(zip(blk.vars, new.vars))
    nb = Builder(InsertPoint.at_end(new.body.block))
    c = _index(nb, row)
    idx = [c, new.vars[lpos]]
    for op in blk.body.block.ops:
        if isinstance(op, loop.LoadOp) and op.buffer == out:
            mapping[op.result] = nb.insert(loop.LoadOp(acc, idx)).result
        elif isinstance(op, loop.StoreOp) and op.buffer == out:
            nb.insert(loop.StoreOp(mapping.get(op.value, op.value), acc, idx))
        elif packed_a is not None and op is packed_a[0]:
            mapping[op.result] = nb.insert(loop.LoadOp(packed_a[1], [new.vars[-1], c])).result
        elif packed is not None and op is packed[0]:
            jo, ji, r0 = new.vars[-4:-1] if packed_a else new.vars[-3:]
            if packed[1] is op.buffer:  # B stored in panels already (graph.matmul_panels): the whole k
                r0 = mapping[op.indices[1]]
            mapping[op.result] = nb.insert(loop.LoadOp(packed[1], [jo, r0, ji])).result
        else:
            nb.insert(op.clone(value_mapper=mapping))
    if packed is not None and packed[1] is packed[0].buffer:  # drop the j // w, j % w the panel read used
        for op in reversed(list(new.body.block.ops)):
            if op.dialect_name() == "arith" and op.results and not any(r.uses for r in op.results):
                op.detach()
                op.erase()


def _init_nest(nest: ReduceNest) -> None:
    """A plain spatial nest with the init block, before the reduction nest."""
    b = Builder(InsertPoint.before(nest.spatial[0]))
    ivs = []
    for f in nest.spatial:
        g = b.insert(loop.ForOp(*f.bounds, "serial"))
        g.iv.name_hint = f.iv.name_hint
        ivs.append(g.iv)
        b = Builder(InsertPoint.at_end(g.body.block))
    b.insert(nest.init.clone()).operands = ivs  # type: ignore[misc]


def k_block_and_pack(nest: ReduceNest, read: loop.LoadOp | None, kc: int, width: int
                     ) -> tuple[loop.ForOp | None, Packed | None]:
    """With `kc`, splits the init off (`_init_nest`) and wraps the spatial nest
    in a serial k-block loop of step `kc`; with `read` (a `packable_b` B read)
    too, packs each k-block of B into panels [n_panels, kc, width] before the
    nest. Returns (the k-block loop or None, (read, panel) or None).

    A `kc` that covers the whole reduction is one block: B is packed once
    before the nest, and there is no k-block loop and no init nest (returns
    None for the loop), so the accumulators start from the init value and
    the output is written once, instead of zeroed, reloaded and rewritten."""
    kb = None
    if kc and kc < nest.reduction[0].trip_count:
        _init_nest(nest)
        top = nest.spatial[0]
        kb = Builder(InsertPoint.before(top)).insert(loop.ForOp(0, nest.reduction[0].bounds[1], kc, "serial"))
        kb.iv.name_hint = nest.reduction[0].iv.name_hint + "o"
        top.detach()
        kb.body.block.add_op(top)
    if read is not None and len(read.indices) == 3:  # B in panels already (`prepacked`): nothing to pack
        return kb, (read, read.buffer)
    if read is None or not kc:
        return kb, None
    n_panels = nest.spatial[-1].trip_count // width
    elt = read.buffer.type.element_type  # type: ignore[attr-defined]
    b = Builder(InsertPoint.before(nest.spatial[0]))
    start = kb.iv if kb is not None else _index(b, 0)
    panel = b.insert(loop.AllocOp(MemRefType(elt, [n_panels, kc, width]), "local")).result
    _pack_nest(b, start, read.buffer, panel, kc, n_panels, width, nest.update.block_name.data)
    return kb, (read, panel)


def _pack_nest(b: Builder, start: SSAValue, src: SSAValue, panel: SSAValue, kc: int, n_panels: int,
               width: int, tag: str) -> None:
    """panel[p, r, l] = src[start + r, p * width + l], vectorized along l (`start`: the k-block's first row)."""
    po = b.insert(loop.ForOp(0, n_panels))
    po.iv.name_hint = "p"
    r = Builder(InsertPoint.at_end(po.body.block)).insert(loop.ForOp(0, kc))
    r.iv.name_hint = "pk"
    lane = Builder(InsertPoint.at_end(r.body.block)).insert(loop.ForOp(0, width, 1, "vectorized"))
    lane.iv.name_hint = "pl"
    blk = Builder(InsertPoint.at_end(lane.body.block)).insert(
        loop.BlockOp(f"{tag}{PACK_SUFFIX}", "SSSS", [start, r.iv, po.iv, lane.iv]))
    a, k, p, l = blk.vars
    bb = Builder(InsertPoint.at_end(blk.body.block))
    row = bb.insert(arith.AddiOp(a, k)).result
    w = _index(bb, width)
    col = bb.insert(arith.AddiOp(bb.insert(arith.MuliOp(p, w)).result, l)).result
    v = bb.insert(loop.LoadOp(src, [row, col])).result
    bb.insert(loop.StoreOp(v, panel, [p, k, l]))


def pack_a_slivers(b: Builder, nest: ReduceNest, read: loop.LoadOp, rows: int, depth: int, kb: loop.ForOp | None,
                   whole: bool) -> SSAValue:
    """Copies rows of A (`read` = `A[i, k]`) into contiguous `[depth, rows]` slivers; returns them.

    `whole=False`: at `b` (inside the row loop, before the column loop) the
    register block's rows of this k-block, `sliver[q, r] = A[i + r, kb + q]`
    (GotoBLAS/BLIS's packed A, one MR-row sliver per row block). `whole=True`:
    before the spatial nest (inside the k-block loop) every row block `ib`'s,
    `a[ib * depth + q, r] = A[ib * rows + r, kb + q]` (for the panel loop
    outside the rows). The rows loop is innermost (a few trips, unrolled by LLVM)."""
    elt = read.buffer.type.element_type  # type: ignore[attr-defined]
    m = nest.spatial[0].bounds[1]
    if whole:
        b = Builder(InsertPoint.before(nest.spatial[0]))
    sliver = b.insert(loop.AllocOp(MemRefType(elt, [m // rows * depth if whole else depth, rows]), "local")).result
    outer = b.insert(loop.ForOp(0, m // rows)) if whole else None
    q = (Builder(InsertPoint.at_end(outer.body.block)) if outer else b).insert(loop.ForOp(0, depth))
    r = Builder(InsertPoint.at_end(q.body.block)).insert(loop.ForOp(0, rows))
    if not whole:
        q.iv.name_hint, r.iv.name_hint = "aq", "ar"
    binds = [outer.iv if outer else nest.spatial[0].iv, r.iv, q.iv] + ([kb.iv] if kb is not None else [])
    blk = Builder(InsertPoint.at_end(r.body.block)).insert(
        loop.BlockOp(f"{nest.update.block_name.data}_pack_a", "S" * len(binds), binds))
    i, rr, qq = blk.vars[:3]
    bb = Builder(InsertPoint.at_end(blk.body.block))
    if whole:
        rows_c, depth_c = _index(bb, rows), _index(bb, depth)
        row = bb.insert(arith.AddiOp(bb.insert(arith.MuliOp(i, rows_c)).result, rr)).result
    else:
        row = bb.insert(arith.AddiOp(i, rr)).result
    col = bb.insert(arith.AddiOp(blk.vars[3], qq)).result if kb is not None else qq
    at = bb.insert(arith.AddiOp(bb.insert(arith.MuliOp(i, depth_c)).result, qq)).result if whole else qq
    v = bb.insert(loop.LoadOp(read.buffer, [row, col])).result
    bb.insert(loop.StoreOp(v, sliver, [at, rr]))
    return sliver


def _offsets(b: Builder, base: SSAValue, count: int) -> list[SSAValue]:
    """`base`, `base + 1`, ..., `base + count - 1` (the constants and adds inserted at `b`)."""
    out = [base]
    for c in range(1, count):
        out.append(b.insert(arith.AddiOp(base, _index(b, c))).result)
    return out


def _tile_points(b: Builder, base: list[SSAValue], tile: list[tuple[int, int]]) -> list[list[SSAValue]]:
    """The spatial indices of every tile point, the first loop of `tile` slowest."""
    points: list[list[SSAValue]] = [list(base)]
    for d, u in tile:
        points = [p[:d] + [off] + p[d + 1:] for off in _offsets(b, base[d], u) for p in points]
    return points


def _column_loops(before: Builder, last: loop.ForOp, width: int, nvec: int, panels: bool
                  ) -> tuple[loop.ForOp | None, loop.ForOp, list[SSAValue], list[SSAValue | None]]:
    """The loops that replace `L` (`last`), inserted at `before`: (panel loop or None, vectorized
    loop, `L`'s value per vector of a tile point, the panel index per vector or None).

    Without `panels`, one `vectorized` loop over all of `L` (one vector per tile point). With
    `panels` (packed B, or `nvec` > 1), a loop over `width`-lane panels, `nvec` of them per step,
    around a `width`-lane `vectorized` loop."""
    if not panels:
        vec = before.insert(loop.ForOp(0, last.bounds[1], 1, "vectorized"))
        vec.iv.name_hint = last.iv.name_hint
        return None, vec, [vec.iv], [None]
    jo = before.insert(loop.ForOp(0, last.bounds[1] // width, nvec))
    jo.iv.name_hint = last.iv.name_hint + "p"
    vec = Builder(InsertPoint.at_end(jo.body.block)).insert(loop.ForOp(0, width, 1, "vectorized"))
    vec.iv.name_hint = last.iv.name_hint + "l"
    b = Builder(InsertPoint.at_end(vec.body.block))
    w = _index(b, width)
    lvals: list[SSAValue] = []
    index: list[SSAValue | None] = []
    for c in range(nvec):
        pj = jo.iv if c == 0 else b.insert(arith.AddiOp(jo.iv, _index(b, c))).result
        index.append(pj)
        lvals.append(b.insert(arith.AddiOp(b.insert(arith.MuliOp(pj, w)).result, vec.iv)).result)
    return jo, vec, lvals, index


MAX_WINDOW = 7  # trips of an innermost reduction loop that build_block marks unrolled


def build_block(nest: ReduceNest, p: BlockPlan, width: int) -> None:
    """Rewrites `nest` in place by plan `p` (see the module docstring); a dot-product plan with an
    empty tile leaves the nest as it is."""
    if p.vector == "reduction":
        if p.tile:
            _build_dot(nest, p)
        return
    n = len(nest.spatial)
    last = nest.spatial[-1]
    tag = nest.update.block_name.data
    kc, nvec = p.kc, p.nvec
    pre = prepacked(nest, width)  # B stored in panels: read as panels whatever `pack` says
    kb, packed = k_block_and_pack(nest, packable_b(nest, kc, width) if p.pack or pre else None, kc, width)
    for d, u in p.tile:
        nest.spatial[d].properties["step"] = IntegerAttr(u, builtin.i64)
    elt = nest.out.type.element_type  # type: ignore[attr-defined]
    ub = last.bounds[1]
    before = Builder(InsertPoint.before(last))
    acc = before.insert(loop.AllocOp(MemRefType(elt, [p.rows, ub + width]), "local")).result
    read_a = packable_a(nest, p.tile) if p.pack_a else None
    whole_a = read_a is not None and p.jouter and (p.pack or nvec > 1)
    depth_a = kc or nest.reduction[0].trip_count
    packed_a = None
    if read_a is not None:
        packed_a = (read_a, pack_a_slivers(before, nest, read_a, p.rows, depth_a, kb, whole_a))
    jo, vec, lvals, panels = _column_loops(before, last, width, nvec, panels=packed is not None or nvec > 1)
    b = Builder(InsertPoint.at_end(vec.body.block))
    rows = _tile_points(b, [f.iv for f in nest.spatial[:-1]], p.tile)
    # Tile points: acc row r holds the nvec vectors of row r side by side.
    points = [(r, rows[r] + [lvals[c]], c) for r in range(len(rows)) for c in range(nvec)]
    for r, ivs, _ in points:
        if kb is None:
            _clone_redirected(nest.init, b, ivs, nest.out, acc, r, n - 1)
        else:
            _copy_block(b, f"{tag}_load", ivs, r, acc, nest.out, to_acc=True)
    if whole_a:
        rows_c, depth_c = _index(b, p.rows), _index(b, depth_a)
        base_a = b.insert(arith.MuliOp(b.insert(arith.DivUIOp(nest.spatial[0].iv, rows_c)).result, depth_c)).result
    rb = b
    red_ivs: list[SSAValue] = [None] * len(nest.reduction)  # type: ignore[list-item]
    order = list(p.rorder or range(len(nest.reduction)))
    for k in order:
        f = nest.reduction[k]
        bounds = (0, kc, 1) if kb is not None and k == 0 else f.bounds
        # the innermost window loop (kw of a conv: 3, 5 or 7 trips) is unrolled by LLVM, which drops its
        # index math; LLVM's own unrolling heuristics are off (backends/llvm/jit.py `optimize`)
        window = k == order[-1] and bounds[0] == 0 and bounds[2] == 1 and 1 < bounds[1] <= MAX_WINDOW
        g = rb.insert(loop.ForOp(*bounds, "unrolled" if window else "serial"))
        g.iv.name_hint = f.iv.name_hint
        red_ivs[k] = g.iv
        rb = Builder(InsertPoint.at_end(g.body.block))
    depth = red_ivs[0]
    extra_a = [depth] if packed_a else []
    if whole_a:  # row block i // rows of the whole k-block: sliver rows (i // rows) * depth + depth
        extra_a = [rb.insert(arith.AddiOp(base_a, depth)).result]
    if kb is not None:
        red_ivs[0] = rb.insert(arith.AddiOp(kb.iv, red_ivs[0])).result
    for r, ivs, c in points:
        panel = [panels[c], vec.iv, depth] if packed is not None else []
        _clone_redirected(nest.update, rb, ivs + red_ivs + panel + extra_a, nest.out, acc, r, n - 1,
                          packed=packed, packed_a=packed_a)
    for r, ivs, _ in points:
        _copy_block(b, f"{tag}_store", ivs, r, acc, nest.out, to_acc=False)
    last.detach()
    last.erase()
    _reorder_outer(nest, p, jo, ub // width)


def _copy_block(b: Builder, name: str, ivs: list[SSAValue], row: int, acc: SSAValue, out: SSAValue,
                to_acc: bool) -> None:
    """A block `name` over `ivs` copying `out[ivs]` to `acc[row, L]` (`to_acc`) or back."""
    blk = b.insert(loop.BlockOp(name, "S" * len(ivs), ivs))
    bb = Builder(InsertPoint.at_end(blk.body.block))
    r = _index(bb, row)
    at_acc, at_out = [r, blk.vars[-1]], list(blk.vars)
    v = bb.insert(loop.LoadOp(out, at_out) if to_acc else loop.LoadOp(acc, at_acc)).result
    bb.insert(loop.StoreOp(v, acc, at_acc) if to_acc else loop.StoreOp(v, out, at_out))


def _reorder_outer(nest: ReduceNest, p: BlockPlan, jo: loop.ForOp | None, n_panels: int) -> None:
    """The plan's spatial order (`sorder`), then with `jouter` the panel loop `jo` hoisted outside
    the spatial loops and, with `mc`, the outermost one cut into blocks of `mc` outside it."""
    if p.sorder is not None and p.sorder != sorted(p.sorder):
        interchange(nest.spatial[:-1], p.sorder)
    if not p.jouter or jo is None:
        return
    top = nest.spatial[0]
    outer = Builder(InsertPoint.before(top)).insert(loop.ForOp(0, n_panels, p.nvec))
    outer.iv.name_hint = jo.iv.name_hint
    top.detach()
    outer.body.block.add_op(top)
    Rewriter.inline_block(jo.body.block, InsertPoint.before(jo), [outer.iv])
    jo.detach()
    jo.erase()
    if p.mc and p.mc < top.bounds[1]:
        _strip_rows(top, outer, p.mc)


def _strip_rows(top: loop.ForOp, outer: loop.ForOp, mc: int) -> None:
    """`outer { top: i = 0 to M step rows }` -> `io = 0 to M step mc { outer { ii = 0 to mc step rows } }`,
    with `io + ii` in place of `i` (the row loop cut into blocks of `mc` outside the panel loop `outer`)."""
    io = Builder(InsertPoint.before(outer)).insert(loop.ForOp(0, top.bounds[1], mc))
    io.iv.name_hint = top.iv.name_hint + "o"
    outer.detach()
    io.body.block.add_op(outer)
    top.properties["ub"] = IntegerAttr(mc, builtin.i64)
    first = top.body.block.first_op
    at = arith.AddiOp(io.iv, top.iv)
    top.body.block.insert_op_before(at, first)
    top.iv.replace_uses_with_if(at.result, lambda u: u.operation is not at)


def interchange(loops: list[loop.ForOp], order: list[int]) -> None:
    """Permutes a perfectly nested chain of constant-bound loops (outermost first): position `p` then
    iterates what `loops[order[p]]` iterated. Each loop keeps its place and takes over another's
    bounds, step and variable uses; the body is unchanged, so this is legal wherever the iterations
    are independent (the spatial loops of an output tile). Not the `reorder` primitive
    (transforms/loop/primitives/reorder.py): that one takes plain step-1 loops and rebuilds them, while here
    the loops are already tiled and `nest.spatial` must keep naming the outermost loop first."""
    for outer, inner in zip(loops, loops[1:]):
        if list(outer.body.block.ops) != [inner]:
            raise ScheduleError(f"template sorder: loop '{outer.iv.name_hint}' is not perfectly nested around "
                                f"'{inner.iv.name_hint}'; leave sorder out for this nest")
    props = [(f.properties["lb"], f.properties["ub"], f.properties["step"], f.iv.name_hint) for f in loops]
    new_iv = {loops[q].iv: loops[p].iv for p, q in enumerate(order)}
    users = {id(u.operation): u.operation for f in loops for u in f.iv.uses}
    for p, q in enumerate(order):
        f = loops[p]
        f.properties["lb"], f.properties["ub"], f.properties["step"], f.iv.name_hint = props[q]
    for op in users.values():
        op.operands = [new_iv.get(v, v) for v in op.operands]


def _build_dot(nest: ReduceNest, p: BlockPlan) -> None:
    """The dot-product tile: the tile's spatial loops step by their factors, the init and update
    blocks are repeated once per tile point and the innermost reduction loop is vectorized, so each
    tile point accumulates in its own vector register."""
    for d, u in p.tile:
        nest.spatial[d].properties["step"] = IntegerAttr(u, builtin.i64)
    n = len(nest.spatial)
    b = Builder(InsertPoint.at_start(nest.spatial[-1].body.block))
    points = _tile_points(b, [f.iv for f in nest.spatial], p.tile)
    ib = Builder(InsertPoint.before(nest.init))
    for pt in points:
        ib.insert(nest.init.clone()).operands = pt  # type: ignore[misc]
    ub = Builder(InsertPoint.before(nest.update))
    red = list(nest.update.bindings[n:])
    for pt in points:
        ub.insert(nest.update.clone()).operands = pt + red  # type: ignore[misc]
    for blk in (nest.init, nest.update):
        blk.detach()
        blk.erase()
    nest.reduction[-1].properties["kind"] = StringAttr("vectorized")

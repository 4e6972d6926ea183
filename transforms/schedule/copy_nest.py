"""Copy nests for loop-default-schedule: layout transforms that LLVM can vectorize.

A layout transform is one loop nest around one block that stores a read of
its input at the loops' own indices. As convert-te-to-loop writes them,
LLVM keeps both of conv3x3's boundary transforms scalar (one load and one
store per element: 96-102 us each for 1x64x56x56 on the Zen 1 host, where
a plain 800 KB copy takes 32 us):

* **Unblocking** (NCHW8c -> NCHW) reads `in[n, c / 8, h, w, c % 8]`. The
  division hides the contiguous lane. `split_divided_loops` strip-mines each
  loop whose variable is divided (`c` into `c_o` x `c_i` of 8, the old
  variable `c_o * 8 + c_i`), gives the block one variable per new loop and
  lets loop-simplify-index drop the division and the remainder.
* **Padded blocking** (NCHW -> NCHW8c with a halo) reads
  `select(in_bounds, in[..., clamp(h' - 1), clamp(w' - 1)], 0.0)`: a test and
  two clamps per element. `peel_padding` narrows the padded loops to the
  interior, where the read is plain, and zeroes the halo in nests of its own
  (`<tag>_pad_zero`, each point once, `pad.halo_boxes`).

What is left is a permutation copy with constant strides, which LLVM
vectorizes with interleaved loads or stores (8 x 8 shuffles). Strip-mining
and narrowing loops to where a test holds change no value.

Example (unblocking, `%1` binds `0 to 64`):
```mlir
loop.block "layout_transform" [S %0 = %i0, S %1 = %i1, S %2 = %i2, S %3 = %i3] {
  %5 = arith.divui %1, %c8 : index
  %7 = arith.remui %1, %c8 : index
  %8 = loop.load %in0[%0, %5, %2, %3, %7] : memref<1x8x56x56x8xf32>
  loop.store %8, %out0[%0, %1, %2, %3] : memref<1x64x56x56xf32>
}
```
becomes, inside `loop.for %i1_o = 0 to 8 { loop.for %i1_i = 0 to 8 {...} }`,
```mlir
loop.block "layout_transform" [S %0 = %i0, S %a = %i1_o, S %b = %i1_i, S %2 = %i2, S %3 = %i3] {
  %8 = loop.load %in0[%0, %a, %2, %3, %b] : memref<1x8x56x56x8xf32>
  loop.store %8, %out0[%0, %1, %2, %3] : memref<1x64x56x56xf32>   // %1 = %a * 8 + %b
}
```
"""

from __future__ import annotations

from xdsl.builder import Builder
from xdsl.dialects import arith, builtin
from xdsl.dialects.builtin import IndexType, IntegerAttr
from xdsl.ir import SSAValue
from xdsl.rewriter import InsertPoint

from ziggurat.dialects import loop
from ziggurat.transforms.loop.loop_simplify_index import INDEX_DIVS, INDEX_REMS, simplify_block
from ziggurat.transforms.loop.primitives.reorder import reorder
from ziggurat.transforms.loop.primitives.split import split
from ziggurat.lowering.convert_loop_to_hw import const_int
from ziggurat.transforms.schedule.nest import chain, stride
from ziggurat.transforms.schedule.split_ranges import split_select_ranges
from ziggurat.transforms.schedule.transpose_tiles import tile_transposed_reads
from ziggurat.transforms.schedule.pad import erase_dead, fill_nest, halo_boxes, index_range, match_clamped_read

MAX_SPLITS = 4  # strip-minings per nest (a transform divides at most one variable per blocked dim)


def match_copy_nest(top: loop.ForOp) -> tuple[list[loop.ForOp], loop.BlockOp, loop.StoreOp] | None:
    """(loops, block, store) when `top` is a perfect nest of serial loops (step 1) around one
    all-spatial block whose variables bind the loops (one each) and whose one store writes at them."""
    loops = chain(top)
    ops = list(loops[-1].body.block.ops)
    if len(ops) != 1 or not isinstance(blk := ops[0], loop.BlockOp):
        return None
    if any(f.kind.data != "serial" or f.step.value.data != 1 for f in loops):  # run-time bounds too
        return None
    if blk.iter_kinds.data != "S" * len(loops) or sorted(map(id, blk.bindings)) != sorted(id(f.iv) for f in loops):
        return None
    if any(isinstance(o, (loop.ForOp, loop.BlockOp)) for o in blk.body.block.ops):
        return None
    stores = [o for o in blk.body.block.ops if isinstance(o, loop.StoreOp)]
    if len(stores) != 1 or list(stores[0].indices) != list(blk.vars):
        return None
    return loops, blk, stores[0]


def _var_loops(blk: loop.BlockOp) -> list[loop.ForOp]:
    """The loop each block variable binds, in variable order."""
    return [b.owner.parent_op() for b in blk.bindings]  # type: ignore[union-attr,misc]


def _split_candidate(blk: loop.BlockOp, loops: list[loop.ForOp]) -> tuple[int, int] | None:
    """(position of a block variable, factor) such that strip-mining its loop by the factor lets
    loop-simplify-index rewrite a division or remainder of the block: `x / c` or `x % c` where `x`
    has stride `k` in `v` with `c / k` (an integer > 1) dividing `v`'s trip count."""
    pos = {v: i for i, v in enumerate(blk.vars)}
    for op in blk.body.block.ops:
        if not isinstance(op, INDEX_DIVS + INDEX_REMS):
            continue
        c = const_int(op.operands[1])
        if c is None or c <= 1:
            continue
        for v in blk.vars:
            k = stride(op.operands[0], v, {})
            if k is None or k <= 0 or c % k:
                continue
            if loops[pos[v]].is_dynamic:  # run-time bounds: no trip count to divide
                continue
            f, n = c // k, loops[pos[v]].trip_count
            if f > 1 and n > f and n % f == 0 and loops[pos[v]].bounds[0] == 0:
                return pos[v], f
    return None


def _rebind(blk: loop.BlockOp, i: int, outer: loop.ForOp, inner: loop.ForOp, factor: int) -> loop.BlockOp:
    """A copy of `blk` whose variable `i` is replaced by two bound to `outer` and `inner`
    (the old variable recomputed as `outer * factor + inner` at the top of the body)."""
    old_bindings = list(blk.bindings)
    bindings = old_bindings[:i] + [outer.iv, inner.iv] + old_bindings[i + 1:]
    kinds = blk.iter_kinds.data
    new = loop.BlockOp(blk.block_name.data, kinds[:i] + "SS" + kinds[i + 1:], bindings)
    nb = new.body.block
    args = list(nb.args)
    b = Builder(InsertPoint.at_end(nb))
    c = b.insert(arith.ConstantOp(IntegerAttr(factor, IndexType()))).result
    t = b.insert(arith.MuliOp(args[i], c)).result
    merged = b.insert(arith.AddiOp(t, args[i + 1])).result
    olds = list(blk.body.block.args)
    for j, a in enumerate(olds):
        a.replace_all_uses_with(merged if j == i else args[j if j < i else j + 1])
    for op in list(blk.body.block.ops):
        op.detach()
        nb.add_op(op)
    Builder(InsertPoint.before(blk)).insert(new)
    blk.detach()
    blk.erase()
    # the index ops split() left at the top of the inner loop computed the old variable for it only
    for op in reversed(list(inner.body.block.ops)):
        if isinstance(op, (arith.ConstantOp, arith.MuliOp, arith.AddiOp)) and not op.results[0].uses:
            op.detach()
            op.erase()
    return new


def _computes(blk: loop.BlockOp) -> bool:
    """Whether `blk` does arithmetic on its values (an int8 model's requantization on the way), not
    only reads, selects (padding) and a store."""
    moves = (loop.LoadOp, arith.SelectOp, arith.ConstantOp, arith.CmpiOp)
    return any(isinstance(r.type, builtin.AnyFloat | builtin.IntegerType) and not isinstance(o, moves)
               for o in blk.body.block.ops for r in o.results)


def split_divided_loops(loops: list[loop.ForOp], blk: loop.BlockOp) -> tuple[list[loop.ForOp], loop.BlockOp]:
    """Strip-mines the loops whose variables the block divides (see the module docstring);
    returns the new loops (outermost first) and block."""
    for _ in range(MAX_SPLITS):
        cand = _split_candidate(blk, _var_loops(blk))
        if cand is None:
            break
        i, f = cand
        target = _var_loops(blk)[i]
        at = loops.index(target)
        outer, inner = split(target, f)
        blk = _rebind(blk, i, outer, inner, f)
        loops = loops[:at] + [outer, inner] + loops[at + 1:]
        simplify_block(blk)
        if inner is not loops[-1] and all(f.lower == 0 and not f.is_dynamic for f in loops[at + 2:]) \
                and not _computes(blk):
            # the block's lane innermost: LLVM interleaves the next loop's accesses (a loop narrowed
            # to a piece of a concatenation, split_ranges.py, starts above 0 and stays where it is);
            # a block that computes keeps its store contiguous for convert-loop-to-hw instead
            reorder(loops[at + 2:] + [inner])
            loops = chain(loops[0])
    return loops, blk


def peel_padding(loops: list[loop.ForOp], blk: loop.BlockOp, store: loop.StoreOp) -> bool:
    """Narrows the loops of a padded copy (the stored value is a clamped read selected against 0.0,
    each clamped index a block variable plus a constant) to the interior, reads there without tests,
    and zeroes the halo in nests in front of the nest. Returns whether it changed anything."""
    reads = [o for o in blk.body.block.ops if isinstance(o, loop.LoadOp)]
    if len(reads) != 1 or (m := match_clamped_read(reads[0])) is None:
        return False
    read = reads[0]
    sel, clamped = m
    if store.value is not sel.result or list(store.indices) != list(blk.vars):
        return False  # out coordinates are the block variables (no strip-mined variable)
    shape = read.buffer.type.get_shape()  # type: ignore[attr-defined]
    bounds: dict[int, tuple[int, int]] = {}
    root, loops = loops[0], _var_loops(blk)  # from here on: the loops in variable (output dim) order
    ranges = {v: (f.bounds[0], f.bounds[1] - 1) for v, f in zip(blk.vars, loops)}
    for d, x in clamped.items():
        r = index_range(x, ranges)
        if r is not None and 0 <= r[0] and r[1] < shape[d]:
            continue  # always in bounds (a channel count that fills its blocks)
        strides = [stride(x, v, {}) for v in blk.vars]
        if strides.count(1) != 1 or any(k != 0 for k in strides if k != 1):
            return False  # not one variable plus a constant
        i = strides.index(1)
        off = index_range(x, dict.fromkeys(blk.vars, (0, 0)))
        if i in bounds or loops[i].bounds[0] != 0 or off is None:
            return False
        off, n = off[0], loops[i].trip_count
        lo, hi = max(0, -off), min(n, shape[d] - off)
        if lo >= hi:
            return False
        bounds[i] = (lo, hi)
    tag = blk.block_name.data
    out = store.buffer
    extents = [f.trip_count for f in loops]
    interior = [bounds[i][1] - bounds[i][0] if i in bounds else n for i, n in enumerate(extents)]
    pads = {i: (lo, extents[i] - hi) for i, (lo, hi) in bounds.items() if lo or hi < extents[i]}
    elt = out.type.element_type  # type: ignore[attr-defined]

    def zero(bb: Builder, ivs: list[SSAValue]) -> None:
        z = bb.insert(arith.ConstantOp(builtin.FloatAttr(0.0, elt))).result  # type: ignore[arg-type]
        bb.insert(loop.StoreOp(z, out, ivs))

    b = Builder(InsertPoint.before(root))
    for box in halo_boxes(interior, pads):
        fill_nest(b, box, f"{tag}_pad_zero", zero)
    for i, (lo, hi) in bounds.items():
        loops[i].lb = IntegerAttr(lo, loops[i].lb.type)
        loops[i].ub = IntegerAttr(hi, loops[i].ub.type)
    rb = Builder(InsertPoint.before(read))
    idx = list(read.indices)
    for d, x in clamped.items():
        idx[d] = x
    new = rb.insert(loop.LoadOp(read.buffer, idx)).result
    sel.result.replace_all_uses_with(new)
    sel.detach()
    sel.erase()
    read.detach()
    read.erase()
    erase_dead(blk)
    return True


def schedule_copy(top: loop.ForOp, width: int = 0) -> None:
    """When `top` is a copy nest: one nest per range of a concatenation's select chain
    (split_ranges.py), then in each the divided loops split and the padding peeled, or a
    transposed read tiled by cache lines (transpose_tiles.py)."""
    parts = match_copy_nest(top)
    if parts is None:
        return
    for nest in split_select_ranges(top, parts[1]):
        parts = match_copy_nest(nest)
        if parts is not None:
            loops, blk, store = parts
            loops, blk = split_divided_loops(loops, blk)
            if not peel_padding(loops, blk, store):
                tile_transposed_reads(loops, blk, width)  # transpose_tiles.py

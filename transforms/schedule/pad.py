"""Explicit zero padding for loop-default-schedule: clamped reads (a padded conv's input) become plain reads.

convert-te-to-loop writes a padded conv's input read as
`select(c, load B[.., select(c_h, h', 0), select(c_w, w', 0), ..], 0.0)` with
`c_d = (x_d >= 0) & (x_d < dim_d)` and `c = c_h & c_w`. In a register block
every row repeats those tests and LLVM turns the selects into branches
around each broadcast. `pad_clamped_reads` gives such a read a zero-padded
copy `P` of `B` (a `loop.alloc "local"` filled by nests in front of the
reduction nest: zeros in the halo only, two nests per padded dimension, then
`B` at offset `lo_d`) and reads `P[.., x_d + lo_d, ..]` unconditionally: the
same values, no tests in the reduction loops. Zeroing the halo rather than
all of `P` saves one write pass over the buffer (a 64x56x56 conv input:
861 KB, more than this host's L2).
`lo_d` / `hi_d` come from the index ranges of `x_d` over the loop bounds.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from xdsl.builder import Builder
from xdsl.dialects import arith, builtin
from xdsl.dialects.builtin import IndexType, IntegerAttr, MemRefType
from xdsl.ir import SSAValue
from xdsl.rewriter import InsertPoint

from ziggurat.dialects import loop
from ziggurat.symbolic import Dim
from ziggurat.transforms.loop.sym_index import dim_of
from ziggurat.transforms.schedule.nest import ReduceNest


def _const(v: SSAValue) -> int | float | None:
    op = v.owner
    if isinstance(op, arith.ConstantOp) and isinstance(op.value, (IntegerAttr, builtin.FloatAttr)):
        return op.value.value.data  # type: ignore[union-attr]
    return None


def index_range(v: SSAValue, ranges: dict, syms: dict | None = None) -> tuple[Dim, Dim] | None:
    """Inclusive [min, max] of an index built from the block variables by +, - and * constant; with
    `syms` (a kernel's symbol arguments as `Sym`s, pad_dynamic.py) the ranges and constants may be
    expressions of the symbols, and a product needs one constant int factor."""
    if v in ranges:
        return ranges[v]
    c = dim_of(v, syms or {})
    if c is not None:  # constants (and symbols) alone
        return c, c
    op = v.owner
    if isinstance(op, (arith.AddiOp, arith.SubiOp, arith.MuliOp)):
        a, b = index_range(op.lhs, ranges, syms), index_range(op.rhs, ranges, syms)
        if a is None or b is None:
            return None
        if isinstance(op, arith.AddiOp):
            return a[0] + b[0], a[1] + b[1]
        if isinstance(op, arith.SubiOp):
            return a[0] - b[1], a[1] - b[0]
        if all(isinstance(x, int) for x in (*a, *b)):
            prods = [x * y for x in a for y in b]
            return min(prods), max(prods)
        k, x = (b, a) if b[0] == b[1] and isinstance(b[0], int) else (a, b)
        if k[0] != k[1] or not isinstance(k[0], int):
            return None
        return (k[0] * x[0], k[0] * x[1]) if k[0] >= 0 else (k[0] * x[1], k[0] * x[0])
    return None


def _in_bounds_test(c: SSAValue, x: SSAValue, dim: int | SSAValue) -> bool:
    """`c` is `(x >= 0) & (x < dim)` (either order); a run-time `dim` is the value compared with."""
    op = c.owner
    if not isinstance(op, arith.AndIOp):
        return False
    preds = set()
    for t in (op.lhs, op.rhs):
        cmp = t.owner
        if not isinstance(cmp, arith.CmpiOp) or cmp.lhs is not x:
            return False
        rhs = _const(cmp.rhs)
        preds.add((arith.CMPI_COMPARISON_OPERATIONS[cmp.predicate.value.data], cmp.rhs if rhs is None else rhs))
    return preds == {("sge", 0), ("slt", dim)}


def _leaves(c: SSAValue) -> set[SSAValue] | None:
    op = c.owner
    if isinstance(op, arith.AndIOp) and not isinstance(op.lhs.owner, arith.CmpiOp):
        a, b = _leaves(op.lhs), _leaves(op.rhs)
        return None if a is None or b is None else a | b
    return {c}


def match_clamped_read(read: loop.LoadOp, dims: list[int | SSAValue] | None = None
                       ) -> tuple[arith.SelectOp, dict[int, SSAValue]] | None:
    """(the value select, {dim: unclamped index}) of a clamped, zero-selected read; `dims` gives
    the buffer's extents where some are run-time values (pad_dynamic.py), else its static shape."""
    uses = list(read.result.uses)
    if len(uses) != 1 or not isinstance(sel := uses[0].operation, arith.SelectOp) or sel.lhs is not read.result:
        return None
    zero = _const(sel.rhs)
    if not isinstance(read.result.type, builtin.AnyFloat) or not isinstance(zero, float) or zero != 0.0 \
            or math.copysign(1.0, zero) < 0:
        return None  # float reads padded with +0.0 only (a quantized conv pads with its zero point)
    shape = dims if dims is not None else read.buffer.type.get_shape()  # type: ignore[attr-defined]
    clamped: dict[int, SSAValue] = {}
    conds = set()
    for d, idx in enumerate(read.indices):
        s = idx.owner
        if isinstance(s, arith.SelectOp) and isinstance(idx.type, IndexType) and _const(s.rhs) == 0:
            if not _in_bounds_test(s.cond, s.lhs, shape[d]):
                return None
            clamped[d] = s.lhs
            conds.add(s.cond)
    if not clamped or _leaves(sel.cond) != conds:
        return None
    return sel, clamped


def fill_nest(b: Builder, ranges, name: str, body) -> None:
    """One nest over `ranges` (an extent, or a (lb, ub) pair, per dimension) around a block `name`."""
    ivs = []
    for d, r in enumerate(ranges):
        lb, ub = r if isinstance(r, tuple) else (0, r)
        f = b.insert(loop.ForOp(lb, ub))
        f.iv.name_hint = f"q{d}"
        ivs.append(f.iv)
        b = Builder(InsertPoint.at_end(f.body.block))
    blk = b.insert(loop.BlockOp(name, "S" * len(ranges), ivs))
    body(Builder(InsertPoint.at_end(blk.body.block)), list(blk.vars))


def pad_clamped_reads(nest: ReduceNest) -> int:
    """Rewrites every clamped, zero-selected read of `nest`'s update block to
    read a zero-padded copy; returns how many reads it rewrote."""
    loops = nest.spatial + nest.reduction
    if any(f.bounds[2] != 1 for f in loops):
        return 0
    ranges = {v: (f.bounds[0], f.bounds[1] - 1) for v, f in zip(nest.update.vars, loops)}
    done = 0
    for read in [o for o in nest.update.body.walk() if isinstance(o, loop.LoadOp) and o.buffer != nest.out]:
        m = match_clamped_read(read)
        if m is None:
            continue
        sel, clamped = m
        src = read.buffer
        shape = list(src.type.get_shape())  # type: ignore[attr-defined]
        pads = {}
        for d, x in clamped.items():
            r = index_range(x, ranges)
            if r is None:
                break
            pads[d] = (max(0, -r[0]), max(0, r[1] - (shape[d] - 1)))
        else:
            elt = src.type.element_type  # type: ignore[attr-defined]
            padded = [s + sum(pads.get(d, (0, 0))) for d, s in enumerate(shape)]
            b = Builder(InsertPoint.before(nest.spatial[0]))
            buf = b.insert(loop.AllocOp(MemRefType(elt, padded), "local")).result
            tag = nest.update.block_name.data

            fill_padded(b, src, buf, shape, pads, tag)
            read_padded(read, sel, clamped, pads, buf, nest.update)
            done += 1
    return done


def fill_padded(b: Builder, src: SSAValue, buf: SSAValue, shape: list, pads: dict[int, tuple[int, int]], tag: str,
                bound: Callable[[Any], Any] = lambda r: r) -> None:
    """Nests at `b` that fill `buf`, `src` (of `shape`) padded by `pads`: zeros in the halo boxes,
    then `src` at offset `lo_d`; `bound` turns an extent or a (lb, ub) pair into loop bounds
    (pad_dynamic.py: expressions of the symbols into index math)."""
    elt = src.type.element_type  # type: ignore[attr-defined]

    def zero(bb: Builder, ivs: list[SSAValue]) -> None:
        z = bb.insert(arith.ConstantOp(builtin.FloatAttr(0.0, elt))).result  # type: ignore[arg-type]
        bb.insert(loop.StoreOp(z, buf, ivs))

    def copy(bb: Builder, ivs: list[SSAValue]) -> None:
        v = bb.insert(loop.LoadOp(src, ivs)).result
        out = list(ivs)
        for d, (lo, _) in pads.items():
            if lo:
                out[d] = bb.insert(arith.AddiOp(ivs[d], bb.insert(arith.ConstantOp(IntegerAttr(lo, IndexType()))).result)).result
        bb.insert(loop.StoreOp(v, buf, out))

    for box in halo_boxes(shape, pads):
        fill_nest(b, [bound(r) for r in box], f"{tag}_pad_zero", zero)
    fill_nest(b, [bound(r) for r in shape], f"{tag}_pad_copy", copy)


def read_padded(read: loop.LoadOp, sel: arith.SelectOp, clamped: dict[int, SSAValue], pads: dict[int, tuple[int, int]],
                buf: SSAValue, update: loop.BlockOp) -> None:
    """The clamped, zero-selected `read` (`sel` its select) becomes a plain read of the padded `buf`
    at the unclamped indices plus `lo_d`; the tests and clamps left unused go."""
    rb = Builder(InsertPoint.before(read))
    idx = list(read.indices)
    for d, x in clamped.items():
        lo = pads[d][0]
        idx[d] = x if not lo else rb.insert(arith.AddiOp(x, rb.insert(arith.ConstantOp(IntegerAttr(lo, IndexType()))).result)).result
    new = rb.insert(loop.LoadOp(buf, idx)).result
    sel.result.replace_all_uses_with(new)
    sel.detach()
    sel.erase()
    read.detach()
    read.erase()
    erase_dead(update)


def halo_boxes(shape: list[int], pads: dict[int, tuple[int, int]]) -> list[list[tuple[int, int]]]:
    """Boxes that tile the zero border of `shape` padded by `pads` ({dim: (lo, hi)}), each point once:
    for each padded dimension d, its low and high slabs, with the padded dimensions before d limited
    to their interior (those points belong to an earlier slab) and the ones after d at full extent.
    For example shape [4, 4] padded (1, 1) on both: rows 0 and 5 over columns 0..5, then columns 0
    and 5 over rows 1..4."""
    padded = [s + sum(pads.get(d, (0, 0))) for d, s in enumerate(shape)]
    boxes = []
    for d, (lo, _) in sorted(pads.items()):
        for part in ((0, lo), (lo + shape[d], padded[d])):
            if part[0] == part[1]:
                continue
            box = []
            for e, s in enumerate(shape):
                if e == d:
                    box.append(part)
                elif e < d and e in pads:
                    box.append((pads[e][0], pads[e][0] + s))
                else:
                    box.append((0, padded[e]))
            boxes.append(box)
    return boxes


def erase_dead(blk: loop.BlockOp) -> None:
    """Drops the now unused index tests, clamps and reads (pure arith ops and `loop.load`) of `blk`."""
    changed = True
    while changed:
        changed = False
        for op in reversed(list(blk.body.block.ops)):
            pure = op.name.startswith("arith.") or isinstance(op, loop.LoadOp)
            if pure and op.results and all(not r.uses for r in op.results):
                op.detach()
                op.erase()
                changed = True


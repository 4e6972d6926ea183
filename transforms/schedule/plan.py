"""Register blocks of loop-default-schedule for 256-bit targets (AVX2: 16 ymm registers).

On AVX-512 (vector width 16, 32 zmm) the default schedule blocks one spatial
loop by up to 8 and keeps one vector per row (`plan` and
`schedule_reduce_nest` in loop_default_schedule.py). With 8 lanes and 16
registers, 8 accumulators of one vector each are FMA-latency bound (two FMA
ports x 4 cycles) and every FMA needs its own broadcast. This module plans a
2-D block instead: `rows` along a loop no streamed read uses (matmul rows,
conv output positions) times two vectors, either two vectors along the
vectorized loop `L` (`nvec = 2`: the 4x16 / 6x16 GEMM micro-kernel) or, when
`L` is a single vector (a conv in NCHW8c), a second loop the streamed read
does use (the outer output-channel block) stepped by 2. At most `MAX_ACC`
accumulators (12 of the 16 registers; the rest hold the streamed vectors
and a broadcast).

`schedule_block` builds that nest; it generalizes `schedule_reduce_nest`
(same init/load, reduction, store structure, the same `acc` scratch that LLVM
keeps in registers, the same packed panels of the streamed operand) to a
list of blocked loops and `nvec` vectors per tile point. `k_block_and_pack`
(shared with both and with the template knobs of autotune/template.py)
splits the reduction into k-blocks and packs B's panels; a block covering
the whole reduction packs once, with no k-block loop and no reload.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from xdsl.builder import Builder
from xdsl.dialects import arith, builtin
from xdsl.dialects.builtin import IndexType, IntegerAttr, MemRefType
from xdsl.ir import SSAValue
from xdsl.rewriter import InsertPoint

from ziggurat.dialects import loop

MAX_ACC = 12  # accumulator vectors of a 16-register target
ROWS = (6, 4, 3, 2)
KC = 256
# Deepest reduction packed as one block (no k-block loop): the output is written once instead of
# reloaded and rewritten per 256-deep block. Matmul 1024^3 on the Zen 1 host: 3-4% faster at 1 thread,
# about 1.5% at 2 (alternating in one process); a 1024-deep pair of 8-lane panels is 64 KiB, in L2.
ONE_BLOCK = 1024
PACK_SUFFIX = "_pack"  # block-name suffix of a pack nest (`_pack_nest`); the cost features price those as a copy phase
# Whether the default copies A's row sliver per (row block, k block) (`pack_a_sliver`). Off: on the Zen 3
# AVX2 host matmul 1024^3 ran 0.96-1.01x the time without it (interleaved A/B, 1 and 2 threads; 512^3
# 0.99-1.01x), within noise; it fires on no matmul of bert_layer, mlp_b64 or the transformer. A template knob.
PACK_A = False


@dataclass
class BlockPlan:
    """tile: [(spatial loop index, factor)], nvec: vectors along `L` per tile
    point, kc: reduction block (0: none), pack: pack the streamed operand,
    pack_a: copy the broadcast operand's rows x depth sliver (`pack_a_sliver`)."""

    tile: list[tuple[int, int]] = field(default_factory=list)
    nvec: int = 1
    kc: int = 0
    pack: bool = False
    pack_a: bool = False

    @property
    def accumulators(self) -> int:
        n = self.nvec
        for _, u in self.tile:
            n *= u
        return n


def plan_narrow(nest, width: int, free: list[int], streamed_dims: list[int], kc: int) -> BlockPlan | None:
    """The 2-D register block for a 16-register target, or None to keep the
    one-vector schedule. `free`: spatial loops (not `L`) no `L`-dependent read
    uses; `streamed_dims`: spatial loops (not `L`) such reads use in a leading
    index (a conv's output-channel block)."""
    from ziggurat.transforms.schedule.loop_default_schedule import _packable, prepacked

    spatial = nest.spatial
    ub = spatial[-1].trip_count
    red = nest.reduction[0].trip_count
    if not kc and red > KC and red % KC == 0:
        kc = KC  # a 256-deep packed slice pays off from k = 512 up with 8 lanes
    second: tuple[int, int] | None = None
    nvec = 1
    if ub % (2 * width) == 0:
        nvec = 2
    else:
        second = next(((d, 2) for d in streamed_dims if spatial[d].trip_count % 2 == 0), None)
        if second is None:
            return None
    vecs = 2
    best: tuple[int, int] | None = None  # (rows, loop)
    for d in free:
        trips = spatial[d].trip_count
        u = next((u for u in ROWS if trips % u == 0 and u * vecs <= MAX_ACC), 1)
        if u > 1 and (best is None or u > best[0]):
            best = (u, d)
    if best is None:
        return None
    tile = sorted([(best[1], best[0])] + ([second] if second else []))
    if not kc and red == KC and spatial[best[1]].trip_count >= 32 and nvec > 1 and _packable(nest, KC, width):
        kc = KC  # k = 256 in one packed block: panels instead of 4 KiB-strided rows of B (bert FFN: -25%)
    if KC <= kc < red <= ONE_BLOCK and nvec > 1 and _packable(nest, red, width) is not None:
        kc = red  # the whole reduction in one packed block (ONE_BLOCK)
    pre = prepacked(nest, width)
    pack = pre is not None or (_packable(nest, kc, width) is not None and nvec > 1)
    pack_a = PACK_A and packable_a(nest, tile) is not None
    return BlockPlan(tile, nvec, kc, pack, pack_a)


def packable_a(nest, tile) -> loop.LoadOp | None:
    """The broadcast read `A[i, k]` of a plain 2-D matmul (`C[i, j] += A[i, k] * B[k, j]`) whose
    register block tiles the row loop `i` only (`tile` = [(0, rows)]), else None."""
    if len(nest.spatial) != 2 or len(nest.reduction) != 1 or len(tile) != 1 or tile[0][0] != 0 or tile[0][1] < 2:
        return None
    ivar, _, kvar = nest.update.vars
    reads = [o for o in nest.update.body.walk() if isinstance(o, loop.LoadOp) and o.buffer != nest.out
             and list(o.indices) == [ivar, kvar]]
    return reads[0] if len(reads) == 1 else None


def pack_a_sliver(b: Builder, nest, read: loop.LoadOp, rows: int, depth: int, kb: loop.ForOp | None) -> SSAValue:
    """Inserts at `b` (inside the row loop, before the column loop) a local `sliver[depth, rows]`
    and the nest `sliver[q, r] = A[i + r, kb + q]`: the register block's rows of this k-block
    of A, one contiguous stream (GotoBLAS/BLIS's packed A, one MR-row sliver per row block).
    The rows loop is innermost (a few trips, unrolled by LLVM); returns the sliver."""
    elt = read.buffer.type.element_type  # type: ignore[attr-defined]
    sliver = b.insert(loop.AllocOp(MemRefType(elt, [depth, rows]), "local")).result
    q = b.insert(loop.ForOp(0, depth))
    q.iv.name_hint = "aq"
    r = Builder(InsertPoint.at_end(q.body.block)).insert(loop.ForOp(0, rows))
    r.iv.name_hint = "ar"
    binds = [nest.spatial[0].iv, r.iv, q.iv] + ([kb.iv] if kb is not None else [])
    blk = Builder(InsertPoint.at_end(r.body.block)).insert(
        loop.BlockOp(f"{nest.update.block_name.data}_pack_a", "S" * len(binds), binds))
    i, rr, qq = blk.vars[:3]
    bb = Builder(InsertPoint.at_end(blk.body.block))
    row = bb.insert(arith.AddiOp(i, rr)).result
    col = bb.insert(arith.AddiOp(blk.vars[3], qq)).result if kb is not None else qq
    v = bb.insert(loop.LoadOp(read.buffer, [row, col])).result
    bb.insert(loop.StoreOp(v, sliver, [qq, rr]))
    return sliver


def schedule_block(nest, p: BlockPlan, width: int) -> None:
    """Rewrites `nest` in place with register block `p` (see the module docstring)."""
    from ziggurat.transforms.schedule.loop_default_schedule import _clone_redirected, _packable

    n = len(nest.spatial)
    last = nest.spatial[-1]
    tag = nest.update.block_name.data
    kc, nvec = p.kc, p.nvec
    kb, packed = k_block_and_pack(nest, _packable(nest, kc, width) if p.pack else None, kc, width)
    for d, u in p.tile:
        nest.spatial[d].properties["step"] = IntegerAttr(u, builtin.i64)
    n_rows = p.accumulators // nvec
    elt = nest.out.type.element_type  # type: ignore[attr-defined]
    ub = last.bounds[1]
    before = Builder(InsertPoint.before(last))
    acc = before.insert(loop.AllocOp(MemRefType(elt, [n_rows, ub + width]), "local")).result
    read_a = packable_a(nest, p.tile) if p.pack_a else None
    packed_a = None
    if read_a is not None:
        sliver = pack_a_sliver(before, nest, read_a, n_rows, kc or nest.reduction[0].trip_count, kb)
        packed_a = (read_a, sliver)
    if packed is None and nvec == 1:
        vec = before.insert(loop.ForOp(0, ub, 1, "vectorized"))
        vec.iv.name_hint = last.iv.name_hint
        b = Builder(InsertPoint.at_end(vec.body.block))
        lvals: list[SSAValue] = [vec.iv]
        panels: list[SSAValue | None] = [None]
    else:  # the column loop walks panels of `width` lanes, nvec of them per step
        jo = before.insert(loop.ForOp(0, ub // width, nvec))
        jo.iv.name_hint = last.iv.name_hint + "p"
        vec = Builder(InsertPoint.at_end(jo.body.block)).insert(loop.ForOp(0, width, 1, "vectorized"))
        vec.iv.name_hint = last.iv.name_hint + "l"
        b = Builder(InsertPoint.at_end(vec.body.block))
        w = b.insert(arith.ConstantOp(IntegerAttr(width, IndexType()))).result
        lvals, panels = [], []
        for c in range(nvec):
            pj = jo.iv
            if c:
                k = b.insert(arith.ConstantOp(IntegerAttr(c, IndexType()))).result
                pj = b.insert(arith.AddiOp(jo.iv, k)).result
            panels.append(pj)
            lvals.append(b.insert(arith.AddiOp(b.insert(arith.MuliOp(pj, w)).result, vec.iv)).result)
    base = [f.iv for f in nest.spatial[:-1]]
    rows: list[list[SSAValue]] = [list(base)]
    for d, u in p.tile:
        grown = []
        for c in range(u):
            off = base[d]
            if c:
                k = b.insert(arith.ConstantOp(IntegerAttr(c, IndexType()))).result
                off = b.insert(arith.AddiOp(base[d], k)).result
            grown += [r[:d] + [off] + r[d + 1:] for r in rows]
        rows = grown
    # Tile points: acc row r holds the nvec vectors of row r side by side.
    points = [(r, rows[r] + [lvals[c]], c) for r in range(len(rows)) for c in range(nvec)]
    for r, ivs, _ in points:
        if kb is None:
            _clone_redirected(nest.init, b, ivs, nest.out, acc, r, n - 1)
            continue
        lb = b.insert(loop.BlockOp(f"{tag}_load", "S" * n, ivs))
        bb = Builder(InsertPoint.at_end(lb.body.block))
        row = bb.insert(arith.ConstantOp(IntegerAttr(r, IndexType()))).result
        v = bb.insert(loop.LoadOp(nest.out, list(lb.vars))).result
        bb.insert(loop.StoreOp(v, acc, [row, lb.vars[-1]]))
    rb = b
    red_ivs: list[SSAValue] = []
    for k, f in enumerate(nest.reduction):
        bounds = (0, kc, 1) if kb is not None and k == 0 else f.bounds
        g = rb.insert(loop.ForOp(*bounds, "serial"))
        g.iv.name_hint = f.iv.name_hint
        red_ivs.append(g.iv)
        rb = Builder(InsertPoint.at_end(g.body.block))
    depth = red_ivs[0]
    if kb is not None:
        red_ivs[0] = rb.insert(arith.AddiOp(kb.iv, red_ivs[0])).result
    extra_a = [depth] if packed_a else []
    for r, ivs, c in points:
        if packed is None:
            _clone_redirected(nest.update, rb, ivs + red_ivs + extra_a, nest.out, acc, r, n - 1, packed_a=packed_a)
        else:
            _clone_redirected(nest.update, rb, ivs + red_ivs + [panels[c], vec.iv, depth] + extra_a, nest.out, acc,
                              r, n - 1, packed=packed, packed_a=packed_a)
    for r, ivs, _ in points:
        wb = b.insert(loop.BlockOp(f"{tag}_store", "S" * n, ivs))
        bb = Builder(InsertPoint.at_end(wb.body.block))
        row = bb.insert(arith.ConstantOp(IntegerAttr(r, IndexType()))).result
        v = bb.insert(loop.LoadOp(acc, [row, wb.vars[-1]])).result
        bb.insert(loop.StoreOp(v, nest.out, list(wb.vars)))
    last.detach()
    last.erase()


def _init_nest(nest) -> None:
    """A plain spatial nest with the init block, before the reduction nest."""
    b = Builder(InsertPoint.before(nest.spatial[0]))
    ivs = []
    for f in nest.spatial:
        g = b.insert(loop.ForOp(*f.bounds, "serial"))
        g.iv.name_hint = f.iv.name_hint
        ivs.append(g.iv)
        b = Builder(InsertPoint.at_end(g.body.block))
    b.insert(nest.init.clone()).operands = ivs  # type: ignore[misc]


def k_block_and_pack(nest, read: loop.LoadOp | None, kc: int, width: int
                     ) -> tuple[loop.ForOp | None, tuple[loop.LoadOp, SSAValue] | None]:
    """With `kc`, splits the init off (`_init_nest`) and wraps the spatial nest
    in a serial k-block loop of step `kc`; with `read` (a `_packable` B read)
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
    start = kb.iv if kb is not None else b.insert(arith.ConstantOp(IntegerAttr(0, IndexType()))).result
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
    w = bb.insert(arith.ConstantOp(IntegerAttr(width, IndexType()))).result
    col = bb.insert(arith.AddiOp(bb.insert(arith.MuliOp(p, w)).result, l)).result
    v = bb.insert(loop.LoadOp(src, [row, col])).result
    bb.insert(loop.StoreOp(v, panel, [p, k, l]))

"""int8 GEMM on AMX tiles: the schedule of a `graph.qgemm` kernel where the target has AMX-INT8.

`C[i, j] (i32) = sum_k A[i, k] (u8) * B[k, j] (s8)` with B packed `[K/4][4 N]` (lowering/qgemm.py's
layout, 4 consecutive k of one column in 4 bytes) is what `tdpbusd` computes on tiles: a C tile of
16 rows x 16 i32, an A tile of 16 rows x 64 bytes (64 k) and a B tile of 16 rows of the packed
layout x 64 bytes (16 columns x 4 k). The kernel's nest (the `qgemm_init` zero fill and the `qgemm`
update) is replaced by

```
for b...                      # batch dims, outermost parallel where the GEMM is large
  for jo < N / (16 nt)        # column panels of nt tiles
    amx.tile_config           # per panel: a thread's tiles are configured where it starts
    for io < M / (16 mt)      # row blocks of mt tiles; C (mt x nt tiles) stays in tiles over all of K
      amx.tile_zero C..
      for kt < K / 64: tile_load A.. (mt), B.. (nt); amx.tdp "busd" C, A, B (mt x nt)
      [one step over the last K % 64 k: tiles of K % 64 bytes of A, (K % 64) / 4 rows of B]
      amx.tile_store C..
    [a block of 16 rows (mt = 1) and a block of M % 16 rows: tiles of fewer rows, configured again]
    amx.tile_release
```

Eight tiles: mt x nt C tiles, mt A and nt B tiles, and where K has both full 64-k steps and a
remainder, mt + nt more for the remainder's shorter A and B tiles (so 2 x 2 blocks without a K
remainder, 2 x 1 or 1 x 2 with one). `ldtilecfg` zeroes every tile, so each row region with tiles
of another shape stores its C tiles before the next configuration. The init nest is gone: the tiles
start from zero and cover all of K, so each C element is written once.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.builder import Builder
from xdsl.dialects import arith, func
from xdsl.dialects.builtin import IndexType, IntegerAttr, MemRefType
from xdsl.ir import Operation, SSAValue
from xdsl.rewriter import InsertPoint

from ziggurat.dialects import amx, loop
from ziggurat.errors import ScheduleError

ROWS = 16  # rows of a tile
KB = 64  # bytes (k values) of an A tile row, and of a B tile row (16 columns x 4 k)
COLS = 16  # i32 columns of a C tile


@dataclass(frozen=True)
class AmxPlan:
    """The tile block: `mt` x `nt` C tiles; `parallel`: the outermost loop runs on threads."""

    mt: int
    nt: int
    parallel: bool = False


def amx_plan(m: int, n: int, k: int, parallel: bool = False) -> AmxPlan:
    """The largest block that fits the 8 tiles: 2 x 2 without a K remainder (or with K < 64), else
    2 x 1 (rows first: the A tile of 16 rows is reused by the block's columns)."""
    if n % COLS or k % 4:
        raise ScheduleError(f"AMX int8 GEMM: N = {n} must be a multiple of 16 and K = {k} of 4 (graph.qgemm pads them)")
    mt = 2 if m >= 2 * ROWS else 1
    nt = 2 if n % (2 * COLS) == 0 else 1
    if k % KB and k > KB and mt * nt == 4:
        nt = 1
    return AmxPlan(mt, nt, parallel)


class _Emit:
    """Builds the tiled nest before `at`, given the kernel's buffers."""

    def __init__(self, at: Operation, a: SSAValue, bp: SSAValue, c: SSAValue, plan: AmxPlan):
        self.a, self.bp, self.c, self.plan = a, bp, c, plan
        cshape = c.type.get_shape()  # type: ignore[attr-defined]
        self.batch = list(cshape[:-2])
        self.m, self.n = cshape[-2:]
        self.k = a.type.get_shape()[-1]  # type: ignore[attr-defined]
        self.b_batched = len(bp.type.get_shape()) > 2  # type: ignore[attr-defined]
        self.full, self.rem = divmod(self.k, KB)
        self.b = Builder(InsertPoint.before(at))

    def const(self, b: Builder, v: int) -> SSAValue:
        return b.insert(arith.ConstantOp(IntegerAttr(v, IndexType()))).result

    def affine(self, b: Builder, terms: list[tuple[SSAValue, int]], offset: int = 0) -> SSAValue:
        """sum(v * c) + offset in index arithmetic."""
        acc: SSAValue | None = None
        for v, c in terms:
            t = v if c == 1 else b.insert(arith.MuliOp(v, self.const(b, c))).result
            acc = t if acc is None else b.insert(arith.AddiOp(acc, t)).result
        if acc is None:
            return self.const(b, offset)
        return acc if offset == 0 else b.insert(arith.AddiOp(acc, self.const(b, offset))).result

    def loop(self, b: Builder, trips: int, name: str, kind: str = "serial") -> tuple[Builder, SSAValue]:
        f = b.insert(loop.ForOp(0, trips, 1, kind))
        f.iv.name_hint = name
        return Builder(InsertPoint.at_end(f.body.block)), f.iv

    # tile numbers: C tiles first, then A, B, then the K remainder's A and B
    def tiles(self, mt: int, nt: int) -> tuple[list[list[int]], list[int], list[int], list[int], list[int]]:
        c = [[t * nt + u for u in range(nt)] for t in range(mt)]
        a = [mt * nt + t for t in range(mt)]
        bb = [mt * nt + mt + u for u in range(nt)]
        has_steps = self.full > 0
        base = mt * nt + mt + nt if has_steps else mt * nt
        ar = [base + t for t in range(mt)] if self.rem else []
        br = [base + mt + u for u in range(nt)] if self.rem else []
        if not has_steps:  # K < 64: the remainder tiles are the only A and B tiles
            a, bb = [], []
        return c, a, bb, ar, br

    def config(self, b: Builder, mt: int, nt: int, rows: int) -> None:
        c, a, bb, ar, br = self.tiles(mt, nt)
        shapes = [(0, 0)] * amx.NUM_TILES
        for row in c:
            for t in row:
                shapes[t] = (rows, COLS * 4)
        for t in a:
            shapes[t] = (rows, KB)
        for t in bb:
            shapes[t] = (ROWS, KB)
        for t in ar:
            shapes[t] = (rows, self.rem)
        for t in br:
            shapes[t] = (self.rem // 4, KB)
        b.insert(amx.TileConfigOp(shapes))

    def block(self, b: Builder, lead: list[SSAValue], i0: SSAValue, j0: SSAValue, mt: int, nt: int,
              config_mt: int | None = None) -> None:
        """C[i0 : i0 + 16 mt (or the configured rows), j0 : j0 + 16 nt] = A[i0.., :] @ B[:, j0..], on
        the first `mt` row tiles of the configuration made for `config_mt` (default `mt`) rows."""
        c, a, bb, ar, br = self.tiles(config_mt or mt, nt)
        blead = lead if self.b_batched else []
        rows = [self.affine(b, [(i0, 1)], ROWS * t) for t in range(mt)]
        cols4 = [self.affine(b, [(j0, 4)], 4 * COLS * u) for u in range(nt)]  # byte column of B
        for row in c[:mt]:
            for t in row:
                b.insert(amx.TileZeroOp(t))

        def step(sb: Builder, k0: SSAValue, kq0: SSAValue, at: list[int], bt: list[int]) -> None:
            for t in range(mt):
                sb.insert(amx.TileLoadOp(at[t], self.a, [*lead, rows[t], k0]))
            for u in range(nt):
                sb.insert(amx.TileLoadOp(bt[u], self.bp, [*blead, kq0, cols4[u]]))
            for t in range(mt):
                for u in range(nt):
                    sb.insert(amx.TdpOp("busd", c[t][u], at[t], bt[u]))

        if self.full == 1:
            step(b, self.const(b, 0), self.const(b, 0), a, bb)
        elif self.full:
            kb, kt = self.loop(b, self.full, "kt")
            step(kb, self.affine(kb, [(kt, KB)]), self.affine(kb, [(kt, KB // 4)]), a, bb)
        if self.rem:
            step(b, self.const(b, self.full * KB), self.const(b, self.full * KB // 4), ar, br)
        for t in range(mt):
            for u in range(nt):
                col = self.affine(b, [(j0, 1)], COLS * u)
                b.insert(amx.TileStoreOp(c[t][u], self.c, [*lead, rows[t], col]))

    def build(self) -> None:
        plan, b = self.plan, self.b
        lead: list[SSAValue] = []
        parallel = plan.parallel
        for d, extent in enumerate(self.batch):
            kind = "parallel" if parallel and extent >= 2 else "serial"
            parallel = parallel and kind != "parallel"
            b, iv = self.loop(b, extent, f"b{d}", kind)
            lead.append(iv)
        panels = self.n // (COLS * plan.nt)
        b, jo = self.loop(b, panels, "jo", "parallel" if parallel and panels >= 2 else "serial")
        j0 = self.affine(b, [(jo, COLS * plan.nt)])
        mt = plan.mt
        blocks, left = divmod(self.m, ROWS * mt)
        if blocks or left >= ROWS:
            self.config(b, mt, plan.nt, ROWS)
        if blocks:
            ib, io = self.loop(b, blocks, "io")
            self.block(ib, lead, self.affine(ib, [(io, ROWS * mt)]), j0, mt, plan.nt)
        start = blocks * ROWS * mt
        if left >= ROWS:  # a 2-tile plan's last 16 rows: a subset of the tiles configured above
            self.block(b, lead, self.const(b, start), j0, 1, plan.nt, config_mt=mt)
            start, left = start + ROWS, left - ROWS
        if left:
            self.config(b, 1, plan.nt, left)
            self.block(b, lead, self.const(b, start), j0, 1, plan.nt)
        b.insert(amx.TileReleaseOp())


def _operands(blk: loop.BlockOp) -> tuple[SSAValue, SSAValue, SSAValue]:
    """(A, packed B, C) of a qgemm update block: the loads extended unsigned and signed, the store."""
    a = bp = c = None
    for o in blk.body.block.ops:
        if isinstance(o, (arith.ExtUIOp, arith.ExtSIOp)) and isinstance(o.input.owner, loop.LoadOp):
            buf = o.input.owner.buffer
            if isinstance(o, arith.ExtUIOp):
                a = buf
            else:
                bp = buf
        elif isinstance(o, loop.StoreOp):
            c = o.buffer
    if a is None or bp is None or c is None:
        raise ScheduleError(f"AMX int8 GEMM: block '{blk.block_name.data}' is not a u8 x s8 -> i32 GEMM update")
    return a, bp, c


def schedule_qgemm_amx(fn: func.FuncOp, block: str, parallel_macs: int) -> AmxPlan:
    """Replaces the `block` nest of a lowered `graph.qgemm` kernel (and its init) with the AMX tile
    nest above; returns the plan. The outermost loop of two or more trips runs `parallel` when the GEMM
    has `parallel_macs` multiply-adds or more (lowering/qgemm.py passes its PARALLEL_MACS)."""
    from ziggurat.transforms.loop.primitives.loops import get_block
    from ziggurat.transforms.loop.primitives.regions import find_block, root

    upd = get_block(fn, block)
    a, bp, c = _operands(upd)
    for buf in (a, bp, c):
        if not isinstance(buf.type, MemRefType):
            raise ScheduleError("AMX int8 GEMM: operands must be buffers")
    top = root(upd)
    init = find_block(fn, f"{block}_init")
    tops = {top} if init is None else {top, root(init)}
    cshape = c.type.get_shape()  # type: ignore[attr-defined]
    m, n, k = cshape[-2], cshape[-1], a.type.get_shape()[-1]  # type: ignore[attr-defined]
    batch = 1
    for d in cshape[:-2]:
        batch *= d
    macs = batch * m * n * k
    plan = amx_plan(m, n, k, macs >= parallel_macs)
    _Emit(top, a, bp, c, plan).build()
    for t in tops:
        t.detach()
        t.erase()
    return plan

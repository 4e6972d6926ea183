"""Plans of register blocks for reduction nests: the schedule as a value.

A `BlockPlan` says everything the builder (`block.build_block`) needs to turn a
naive reduction nest (nest.py) into a register-blocked vector kernel: the
register tile, the vectorized axis and vectors per tile point, the k-blocking,
the packing of B into panels and of A into slivers, the order of the
reduction and spatial loops (the outermost spatial loop is the one
loop-parallelize-outer makes parallel) and the GotoBLAS panel loop order.
The default schedule chooses a plan from the shape and the vector width
(`default_plan`); the tuner's template draws one from its knobs
(`BlockPlan.from_knobs`); both call the same builder.

The analytic choice, by vector width:

* 16 lanes (AVX-512, 32 zmm registers): the 2-D block of `plan_narrow`
  below with up to `MAX_ACC_WIDE` (24) accumulators and rows from
  `ROWS_WIDE` (8 down to 2, 7 included for the 7x7 and 14x14 maps of late
  conv stages); a conv's output-channel blocks move innermost of the spatial
  loops where the input map is larger than a core's L2 (`_blocks_inside`:
  read once, not once per pass over the blocks). Where it declines,
  `plan_vector`: one spatial loop that no
  streamed read uses is blocked by up to 8 (`BLOCKING`), one vector per
  row; a reduction longer than 512 and a multiple of 256 is k-blocked by 256.
* 8 lanes (AVX2, 16 ymm registers), `plan_narrow`: 8 accumulators of one
  vector each are FMA-latency bound (two FMA ports x 4 cycles) and every FMA
  needs its own broadcast, so the block is 2-D instead: `rows` along a loop no
  streamed read uses (matmul rows, conv output positions) times two vectors,
  either two vectors along the vectorized loop `L` (`nvec = 2`: the 4x16 /
  6x16 GEMM micro-kernel) or, when `L` is a single vector (a conv in
  NCHW8c), a second loop the streamed read does use (the outer output-channel
  block) stepped by 2. At most `MAX_ACC` accumulators (12 of the 16
  registers; the rest hold the streamed vectors and a broadcast). Where the
  map takes fewer rows than a one-vector row block along it (a 14x14 map:
  2 rows x 2 channel blocks against 7 positions of one vector), the longer
  one-vector block (`_row_block`). An odd number of output-channel blocks
  is stepped by 3 or 5 where one of them divides it (3 x 4 rows, 5 x 2
  rows). Between loops of equal row factors the inner one is blocked (a
  conv's output columns: the tile reads one contiguous stretch of the
  input, not one row per tile point), also by the one-vector block. A
  depthwise conv (`plan_shared`) takes 7 columns where 7 divides the map.
  The second vector's loop must leave the broadcast operand alone
  (`plan_parts`' last list: a conv's output-channel blocks, not a batched
  matmul's heads or a grouped conv's one-block groups, where both operands
  walk it and no broadcast is shared); the one-vector block then takes up
  to `MAX_ACC` rows where `BLOCKING` leaves fewer than 8 (500 rows: 10).
  Where it declines, the 16-lane plan.
* 4 lanes with 32 registers (AArch64 NEON): the 16-lane budget (`MAX_ACC_WIDE`,
  `ROWS_WIDE`: the 8x8 NEON GEMM block of 16 accumulators); 4 lanes with 16
  (SSE) the 8-lane one. `register_budget` takes the count from the target.
* A nest whose every spatial loop feeds the streamed reads (a depthwise conv
  in NCHW<b>c), `plan_shared`: the output column blocked, the filter vector
  shared by the tile points.
* A nest whose innermost reduction reads contiguously (dense with a
  transposed weight), `plan_dot`: a dot-product tile, the reduction loop
  vectorized (`vector = "reduction"`).

```python
nest = match_reduce_nest(top)
p = default_plan(nest, width=8)   # BlockPlan(tile=[(0, 6)], nvec=2, kc=256, pack=True, ...)
build_block(nest, p, width=8)
```
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ziggurat.dialects import loop
from ziggurat.transforms.loop.plan_memory import memref_nbytes
from ziggurat.transforms.schedule.nest import ReduceNest, depends, packable_a, packable_b, prepacked, stride

BLOCKING = (8, 7, 6, 4, 3, 2)
DOT_BLOCKING = (4, 3, 2)
KC = 256  # reduction block: a 256-deep slice of a streamed operand stays in L2
MAX_ACC = 12  # accumulator vectors of a 16-register target
IN_FLIGHT = 8  # FMAs a core keeps in flight (2 ports x 4 cycles): fewer accumulators leave it latency bound
ROWS = (6, 4, 3, 2)
# 32 registers (AVX-512): up to 24 accumulators, rows up to 8 of two vectors (the 8x32 GEMM block), 7 for
# the 7x7 and 14x14 maps of late conv stages. A conv 1x256x7x7 -> 256 3x3 in NCHW16c on the Zen 4 host:
# 1.96 ms with one vector per row and no block (7 has no factor in BLOCKING) -> 0.50 ms (onnxruntime 0.48).
MAX_ACC_WIDE = 24
ROWS_WIDE = (8, 7, 6, 5, 4, 3, 2)
# Deepest reduction packed as one block (no k-block loop): the output is written once instead of
# reloaded and rewritten per 256-deep block. Matmul 1024^3 on the Zen 1 host: 3-4% faster at 1 thread,
# about 1.5% at 2 (alternating in one process); a 1024-deep pair of 8-lane panels is 64 KiB, in L2.
ONE_BLOCK = 1024
PACK_SUFFIX = "_pack"  # block-name suffix of a pack nest (block.py); the cost features price those as a copy phase


@dataclass
class BlockPlan:
    """The schedule of one reduction nest.

    `tile`: [(spatial loop index, factor)], the register tile; `vector`: the
    vectorized axis, `spatial` (the last spatial loop `L`, `nvec` vectors per
    tile point) or `reduction` (the innermost reduction loop: a dot-product
    tile, only `tile` applies); `kc`: reduction block (0: none; the whole
    reduction: one packed block); `pack`: pack the streamed operand B into
    `[panel][kc][width]` panels; `pack_a`: copy the broadcast operand's
    rows x depth sliver of A; `rorder`, `sorder`: the reduction loops and the
    spatial loops other than `L`, outermost first (None: as they are);
    `jouter`: the panel loop outside the spatial loops (GotoBLAS order);
    `mc`: with `jouter`, the outermost spatial loop cut into blocks of `mc`
    outside the panel loop (0: no cut)."""

    tile: list[tuple[int, int]] = field(default_factory=list)
    nvec: int = 1
    kc: int = 0
    pack: bool = False
    pack_a: bool = False
    rorder: list[int] | None = None
    sorder: list[int] | None = None
    jouter: bool = False
    mc: int = 0
    vector: str = "spatial"

    @property
    def rows(self) -> int:
        """Tile points along the spatial loops other than `L` (rows of the accumulator buffer)."""
        n = 1
        for _, u in self.tile:
            n *= u
        return n

    @property
    def accumulators(self) -> int:
        return self.rows * self.nvec

    def to_knobs(self, block: str) -> dict[str, Any]:
        """The plan in the tuner's template form (plain JSON; `from_knobs` reads it back)."""
        if self.vector == "reduction":
            return {"block": block, "kind": "dot", "dot": [list(t) for t in self.tile]}
        k: dict[str, Any] = {"block": block, "kind": "vector", "tile": [list(t) for t in self.tile], "nvec": self.nvec,
                             "kc": self.kc, "pack": int(self.pack), "rorder": self.rorder}
        k |= {"pack_a": 1} if self.pack_a else {}
        k |= {"jouter": 1} if self.jouter else {}
        k |= {"sorder": self.sorder} if self.sorder is not None else {}
        return k | ({"mc": self.mc} if self.mc else {})

    @classmethod
    def from_knobs(cls, k: dict[str, Any]) -> BlockPlan:
        """The plan of one nest's template knobs (autotune/template.py names them)."""
        if k["kind"] == "dot":
            return cls([(int(d), int(u)) for d, u in k["dot"]], vector="reduction")
        return cls([(int(d), int(u)) for d, u in k["tile"]], k["nvec"], k["kc"], bool(k["pack"]),
                   bool(k.get("pack_a", 0)), k.get("rorder"), k.get("sorder"), bool(k.get("jouter", 0)),
                   int(k.get("mc", 0)))


def plan_parts(nest: ReduceNest) -> tuple[list[int], list[int], int, list[int]] | None:
    """(spatial loops other than `L` with >= 2 trips that no `L`-dependent read
    uses, those such reads do use, reduction block size or 0, those of the used
    loops that no read broadcast along `L` uses); None when the nest takes no
    vector block along `L`. Only a loop of the last list lets a second vector of
    the 2-D block share the first's broadcasts: a conv's output-channel blocks
    (the input is broadcast, the weight streamed), not a batched matmul's heads
    or a grouped conv's one-block groups (both operands walk them)."""
    n = len(nest.spatial)
    lvar = nest.update.vars[n - 1]
    if nest.spatial[-1].trip_count < 8:
        return None
    streamed, broadcast = [], []
    memo: dict = {}
    dmemo: dict = {}
    pre = prepacked(nest)
    for o in nest.update.body.walk():
        if not isinstance(o, loop.LoadOp) or o.buffer == nest.out:
            continue
        if not any(depends(i, lvar, dmemo) for i in o.indices):
            broadcast.append(o)
            continue
        if o is pre:
            streamed.append(o)
            continue
        last = _lane_index(o)  # the index L walks: the last, or one followed by 1-extent dims only
        step = stride(o.indices[last], lvar, memo)
        if step is None or step < 1 or any(depends(i, lvar, dmemo) for i in o.indices[:last]):
            return None
        streamed.append(o)
    free, used, paired = [], [], []
    for d in range(n - 1):
        var, trips = nest.update.vars[d], nest.spatial[d].trip_count
        if trips < 2:
            continue
        vmemo: dict = {}
        if any(depends(i, var, vmemo) for o in streamed for i in o.indices):
            used.append(d)
            if not any(depends(i, var, vmemo) for o in broadcast for i in o.indices):
                paired.append(d)
        else:
            free.append(d)
    red = nest.reduction[0].trip_count
    kc = KC if red > 2 * KC and red % KC == 0 else 0
    return free, used, kc, paired


def _lane_index(load: loop.LoadOp) -> int:
    """The position of the index that the vector loop may walk in `load`: the last, moved left past
    dims of extent 1 (a per-channel [C, 1, 1] constant read at [c, 0, 0] walks C with stride 1)."""
    shape = load.buffer.type.get_shape()  # type: ignore[attr-defined]
    last = len(load.indices) - 1
    while last > 0 and shape[last] == 1:
        last -= 1
    return last


def register_budget(width: int, registers: int = 0) -> tuple[int, tuple[int, ...]]:
    """(most accumulators, row factors) of a register block: 16 registers (AVX2, SSE: `MAX_ACC`, `ROWS`),
    32 (AVX-512, AArch64 NEON: `MAX_ACC_WIDE`, `ROWS_WIDE`). `registers`: the target's vector registers
    (`Target.vector_registers`); 0 takes x86's, which the width implies (32 at 16 lanes, else 16)."""
    return (MAX_ACC_WIDE, ROWS_WIDE) if _wide(width, registers) else (MAX_ACC, ROWS)


def _wide(width: int, registers: int) -> bool:
    """Whether the target has 32 vector registers (see `register_budget`)."""
    return registers >= 32 if registers else width >= 16


def plan_vector(nest: ReduceNest, width: int, free: list[int], kc: int, few: bool = False) -> BlockPlan:
    """The one-vector block along `free` (`_row_block`; `few`: a 16-register target), B packed where
    it is a plain matmul's k-blocked operand."""
    rows = _row_block(nest, free, few)
    tile = [rows] if rows else []
    pack = packable_b(nest, kc, width) is not None
    return BlockPlan(tile, 1, kc, pack, rorder=list(range(len(nest.reduction))))


def plan_narrow(nest: ReduceNest, width: int, free: list[int], streamed_dims: list[int], kc: int,
                pack_a: bool = False, max_acc: int = MAX_ACC, rows: tuple[int, ...] = ROWS) -> BlockPlan | None:
    """The 2-D register block (16 registers: at most `max_acc` = 12 accumulators; 32 registers:
    `MAX_ACC_WIDE` and `ROWS_WIDE`), or None to keep the one-vector block.
    `free`: spatial loops (not `L`) no `L`-dependent read uses; `streamed_dims`:
    spatial loops (not `L`) such reads use in a leading index (a conv's output-channel block); `pack_a`: copy A's slivers where
    the nest allows it (`packable_a`)."""
    spatial = nest.spatial
    ub = spatial[-1].trip_count
    red = nest.reduction[0].trip_count
    if not kc and red > KC and red % KC == 0:
        kc = KC  # a 256-deep packed slice pays off from k = 512 up with 8 lanes
    second: tuple[int, int] | None = None
    nvec = 1
    few = max_acc <= MAX_ACC  # 16 registers: ties go to the inner loop, odd channel-block counts step by 3 or 5
    if ub % (2 * width) == 0:
        nvec = 2
    else:
        second = next(((d, 2) for d in streamed_dims if spatial[d].trip_count % 2 == 0), None)
        if second is None and few:
            second = next(((d, f) for f in (3, 5) for d in streamed_dims if spatial[d].trip_count % f == 0), None)
        if second is None:
            return None
    vecs = second[1] if second else 2
    best: tuple[int, int] | None = None  # (rows, loop)
    for d in free:
        trips = spatial[d].trip_count
        u = next((u for u in rows if trips % u == 0 and u * vecs <= max_acc), 1)
        if u > 1 and (best is None or u > best[0] or (few and u == best[0])):
            best = (u, d)
    accumulators = vecs * (best[0] if best else 0)
    if second is not None and accumulators < IN_FLIGHT:  # latency bound: a longer one-vector block where there is one
        long_rows = _row_block(nest, free, few)
        if long_rows is not None and long_rows[1] > accumulators:
            return BlockPlan([long_rows], 1, kc, prepacked(nest, width) is not None,
                             rorder=list(range(len(nest.reduction))))
    if best is None:
        return None
    tile = sorted([(best[1], best[0])] + ([second] if second else []))
    if not kc and red == KC and spatial[best[1]].trip_count >= 32 and nvec > 1 and packable_b(nest, KC, width):
        kc = KC  # k = 256 in one packed block: panels instead of 4 KiB-strided rows of B (bert FFN: -25%)
    if KC <= kc < red <= ONE_BLOCK and nvec > 1 and packable_b(nest, red, width) is not None:
        kc = red  # the whole reduction in one packed block (ONE_BLOCK)
    pre = prepacked(nest, width)
    pack = pre is not None or (packable_b(nest, kc, width) is not None and nvec > 1)
    with_a = pack_a and packable_a(nest, tile) is not None
    return BlockPlan(tile, nvec, kc, pack, with_a, rorder=list(range(len(nest.reduction))),
                     sorder=_blocks_inside(nest, second))


def _row_block(nest: ReduceNest, free: list[int], few: bool) -> tuple[int, int] | None:
    """(loop, factor) of the one-vector row block: the loop of `free` with the largest factor of
    `BLOCKING` dividing it, None where none divides any. With 16 registers (`few`) up to `MAX_ACC`
    rows where `BLOCKING` leaves fewer than `IN_FLIGHT` (500 rows: 10, not 4), and the inner loop on a
    tie (a conv's output columns: one contiguous stretch of the input per tile, not one row per point;
    regnet_y_small's 14x14 convs 1.9-2.8x faster with 7 columns than with 2 rows x 2 channel blocks)."""
    best: tuple[int, int] | None = None
    for d in free:
        trips = nest.spatial[d].trip_count
        u = next((u for u in BLOCKING if trips % u == 0), 1)
        if few and u < IN_FLIGHT:
            u = max(v for v in range(u, MAX_ACC + 1) if trips % v == 0)
        if u > 1 and (best is None or u > best[1] or (few and u == best[1])):
            best = (d, u)
    return best


REREAD_BYTES = 1 << 20  # an operand larger than this (a core's L2) is not read again from cache


def _blocks_inside(nest: ReduceNest, second: tuple[int, int] | None) -> list[int] | None:
    """The spatial order with the blocked streamed loop (a conv's output-channel blocks: `second`)
    innermost, where the loops outside it would read an operand it does not index, larger than
    `REREAD_BYTES`, once per step of it: every pass of the output-channel blocks then reads the whole
    input map again from memory. Segformer's 1x1 fuse conv (1024 -> 256 channels over 64x64: a 16 MB
    input read 8 times) ran at 41 GFLOP/s so, 52 of the model's 67 ms. None: as written."""
    if second is None or nest.spatial[second[0]].trip_count // second[1] < 2:
        return None
    d = second[0]
    var = nest.update.vars[d]
    memo: dict = {}
    for o in nest.update.body.walk():
        if isinstance(o, loop.LoadOp) and o.buffer != nest.out and memref_nbytes(o.buffer.type) > REREAD_BYTES \
                and not any(depends(i, var, memo) for i in o.indices):
            return [k for k in range(len(nest.spatial) - 1) if k != d] + [d]
    return None


def plan_shared(nest: ReduceNest, width: int, used: list[int], registers: int = 0) -> BlockPlan | None:
    """A nest whose every spatial loop feeds the streamed reads (a depthwise conv in NCHW<b>c: the input
    vector moves with the output position, the filter vector does not): the innermost such loop (the
    output column) is blocked by the largest row factor that divides it, so each filter vector feeds
    that many FMAs into independent accumulators. None where no factor divides it."""
    if not used:
        return None
    d = max(used)
    max_acc, rows = register_budget(width, registers)
    if not _wide(width, registers):
        rows = (7,) + rows  # one vector a point: 7 of 12 accumulators (the 7x7 to 28x28 maps of late stages)
    trips = nest.spatial[d].trip_count
    u = next((u for u in rows if trips % u == 0 and u <= max_acc), 1)
    if u < 2:
        return None
    return BlockPlan([(d, u)], 1, 0, False, rorder=list(range(len(nest.reduction))))


def plan_dot(nest: ReduceNest, width: int, registers: int = 0) -> BlockPlan | None:
    """Dot-product tile for a reduction along contiguous reads (dense with a
    transposed weight): up to two spatial loops blocked by `DOT_BLOCKING`."""
    rvar = nest.update.vars[-1]
    if nest.reduction[-1].trip_count < width:
        return None
    memo: dict = {}
    dmemo: dict = {}
    streamed = 0
    for o in nest.update.body.walk():
        if not isinstance(o, loop.LoadOp) or o.buffer == nest.out:
            continue
        if not any(depends(i, rvar, dmemo) for i in o.indices):
            continue
        if stride(o.indices[-1], rvar, memo) != 1 or any(depends(i, rvar, dmemo) for i in o.indices[:-1]):
            return None
        streamed += 1
    if not streamed:
        return None
    cands = []
    for d, f in enumerate(nest.spatial):
        u = next((u for u in DOT_BLOCKING if f.trip_count % u == 0), 1)
        if u > 1:
            cands.append((f.trip_count, d, u))
    tile = sorted(sorted(cands, reverse=True)[:2], key=lambda c: c[1])
    if not _wide(width, registers) and len(tile) == 2:  # 16 registers: at most 4 x 2 accumulators (mlp_b64: 1.9 -> 1.2 ms)
        (t0, d0, u0), (t1, d1, _) = tile
        tile = [(t0, d0, u0)] + ([(t1, d1, 2)] if t1 % 2 == 0 else [])
    if not tile:
        return None
    return BlockPlan([(d, u) for _, d, u in tile], vector="reduction")


def default_plan(nest: ReduceNest, width: int, pack_a: bool = False, registers: int = 0) -> BlockPlan | None:
    """The default schedule's plan for `nest` (see the module docstring), or None to leave it alone;
    `registers`: the target's vector registers (0: x86's for `width`, see `register_budget`)."""
    parts = plan_parts(nest)
    if parts is None:
        return plan_dot(nest, width, registers)
    free, used, kc, paired = parts
    few = not _wide(width, registers)  # 32-register plans keep pairing any used loop (unmeasured otherwise)
    narrow = plan_narrow(nest, width, free, paired if few else used, kc, pack_a, *register_budget(width, registers))
    if narrow is not None:
        return narrow
    if not free:
        shared = plan_shared(nest, width, used, registers)
        if shared is not None:
            return shared
    return plan_vector(nest, width, free, kc, few)


def mc_choices(nest: ReduceNest, p: BlockPlan, width: int) -> list[int]:
    """Legal `mc` for plan `p`: multiples of the outermost spatial loop's tile factor that divide
    its extent, below it; none without `jouter` and a panel loop."""
    if not p.jouter or not (p.pack or p.nvec > 1 or prepacked(nest, width) is not None):
        return []
    d0 = (p.sorder or [0])[0]
    ub = nest.spatial[d0].trip_count
    step = dict(p.tile).get(d0, 1)
    return [m for m in range(step, ub, step) if ub % m == 0]

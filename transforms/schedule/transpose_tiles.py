"""Cache tiles for transposing reads in elementwise nests, for loop-default-schedule.

An elementwise kernel that reads its input transposed (an int8 GEMM's rows
`[h w, c]` dequantized back to NCHW, an attention head's transpose) runs its
vector lanes along the output's last dim, so each lane of a read falls on
another row of the input: one cache line per lane, and the next channel reads
the same lines again only after the whole plane has gone through the cache.
In segformer's decode head (`[4096, 256]` i32 rows to `[256, 64, 64]`) that
took 7 ms for 1M elements, 7 ns each.

`tile_transposed_reads` strip-mines the loop that runs along the read's last
(contiguous) dim by one cache line of elements and moves that strip just
outside the lane loop: the channels of one line are read one after another
while the line is in L1. When the lane loop holds several vectors, it is
split into vectors and lanes and the strip runs inside each vector: lines a
power of two apart (channel planes of 16 KB) share one cache set, so the
lines of a whole lane loop do not stay, those of one vector do (segformer's
decode-head concatenation: 7.9 -> 5.6 ms). Values and the order of stores
to distinct elements do not change.

Where the read's last index is the strip's own variable and the lane loop is
whole vectors of `width`, the strip is split once more into vectors: the inner
part, `width` consecutive last indices, is unrolled and the read marked
`hw.transpose_rows`. Its gathers (convert-loop-to-hw: `hw.vgather {rows}`) then
load the lanes' rows once per unrolled strip and transpose them in registers
(backends/llvm/memory.py), instead of `width` scalar loads per vector: int8
segformer's decode-head concatenation 7.2 -> 5.2 ms on Zen 3.

Example (the read's last index is `%1`; 16 i32 per 64-byte line):
```mlir
loop.for %i1 = 0 to 256 { loop.for %i2 = 0 to 64 { loop.for %i3 = 0 to 64 {
  ... loop.load %in0[%0, %2 * 64 + %3, %1] ... loop.store ..., %out0[%0, %1, %2, %3] } } }
```
becomes `%i1_o (16) > %i2 (64) > %i1_i (16) > %i3 (64)` with `%1 = %i1_o * 16 + %i1_i`
(with rows at 8 lanes: `%i1_i_o (2) > %i1_i_i (8, unrolled)` in place of `%i1_i`).
"""

from __future__ import annotations

from xdsl.dialects.builtin import UnitAttr

from ziggurat.dialects import loop
from ziggurat.dialects.hw import ROWS_ATTR
from ziggurat.transforms.loop.primitives.reorder import reorder
from ziggurat.transforms.loop.primitives.split import split, split_loop
from ziggurat.transforms.loop.primitives.unroll import unroll
from ziggurat.transforms.schedule.nest import stride

LINE_BYTES = 64


def _bytes(buffer) -> int:
    elt = buffer.type.element_type
    return max(1, getattr(elt, "bitwidth", 32) // 8)


def _transposed_loop(loops: list[loop.ForOp], blk: loop.BlockOp) -> tuple[loop.ForOp, int, loop.LoadOp] | None:
    """(the loop along a transposed read's last dim, a line of its elements, the read), or None."""
    if any(g.bounds[0] != 0 or g.bounds[2] != 1 or g.kind.data != "serial" for g in loops[:-1]):
        return None  # reorder restructures plain loops only (the lane loop, a concatenation's range, stays)
    lane = loops[-1].iv
    binding = dict(zip(blk.vars, blk.bindings))
    lane_var = next((v for v, b in binding.items() if b is lane), None)
    if lane_var is None:
        return None
    for read in (o for o in blk.body.block.ops if isinstance(o, loop.LoadOp)):
        idx = list(read.indices)
        if not idx or stride(idx[-1], lane_var, {}) != 0 or all(stride(i, lane_var, {}) == 0 for i in idx):
            continue  # contiguous in the lanes, or the same element for every lane
        ks = [stride(idx[-1], v, {}) for v in blk.vars]
        if ks.count(1) != 1 or any(k not in (0, 1) for k in ks):
            continue
        line = LINE_BYTES // _bytes(read.buffer)
        f = next((g for g in loops if g.iv is binding[blk.vars[ks.index(1)]]), None)
        if f is None or f is loops[-1]:
            continue
        if read.buffer.type.get_shape()[-1] < line or f.trip_count < 2 * line or f.trip_count % line:  # type: ignore[attr-defined]
            continue
        return f, line, read
    return None


def tile_transposed_reads(loops: list[loop.ForOp], blk: loop.BlockOp, width: int = 0) -> None:
    """Tiles the first transposed read of `blk` (see the module docstring). With `width`, a lane
    loop of several vectors is split too and the line strip runs inside each vector: the 16 lines
    a vector gathers are reused right away (lines a power of two apart share one cache set, and the
    whole lane loop's lines would not stay)."""
    found = _transposed_loop(loops, blk)
    if found is None:
        return
    f, line, read = found
    rows = width > 1 and line % width == 0 and loops[-1].trip_count % width == 0 and _reads_its_var(blk, read, f)
    at = loops.index(f)
    outer, inner = split(f, line)
    lane = loops[-1]
    order = loops[:at] + [outer] + loops[at + 1:-1]
    if width and lane.trip_count > width and lane.trip_count % width == 0:
        # vectors and lanes, from 0 (the lane loop of a concatenation's range starts above it)
        vectors, _ = split_loop(lane, lane.trip_count // width, width, ("_v", "_l"), lane.bounds[0])
        order.append(vectors)
    reorder(order + [inner])  # the lane loop (or the lanes of one vector) stays innermost
    if rows:
        strip = blk.parent_op().parent_op()  # reorder rebuilt the loops: the one just outside the lanes
        assert isinstance(strip, loop.ForOp) and strip.trip_count == line
        if line != width:
            strip = split(strip, width)[1]
        unroll(strip)  # `width` consecutive last indices: the gathers share their rows' loads
        for other in blk.body.block.ops:
            if isinstance(other, loop.LoadOp) and other.indices and other.indices[-1] is read.indices[-1]:
                other.attributes[ROWS_ATTR] = UnitAttr()


def _reads_its_var(blk: loop.BlockOp, read: loop.LoadOp, f: loop.ForOp) -> bool:
    """Whether `read`'s last index is the block variable bound to `f` itself (no offset), and its
    other indices do not move with it: a strip of `f` then reads aligned blocks of that dim."""
    binding = dict(zip(blk.vars, blk.bindings))
    last = read.indices[-1]
    if binding.get(last) is not f.iv:
        return False
    return all(stride(i, last, {}) == 0 for i in read.indices[:-1])

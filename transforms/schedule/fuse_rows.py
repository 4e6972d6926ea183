"""Row fusion: a kernel of row reductions and the elementwise steps between them runs row by row.

convert-te-to-loop gives each te op of a kernel its own loop nest over the whole tensor, so a
softmax is four passes over it (row max, exp, row sum, divide) through a kernel-local
intermediate as large as the input: `[1, 4, 500, 500]` (whisper's attention) is 4 MB written and
read back, and the kernel runs at memory speed. TVM's schedules for softmax and layer norm
compute the stages at the row loop; here the top-level nests that share their outer loops are
merged under one copy of those loops, and each local buffer that every stage indexes by exactly
those loop variables shrinks to one row, allocated inside the row loop (so per thread when the
row loop runs on threads):

```mlir
%m = loop.alloc "local" : memref<64x1xf32>
%e = loop.alloc "local" : memref<64x500xf32>
loop.for %i = 0 to 64 serial { loop.for %j = 0 to 1 serial { <max init>; loop.for %r = 0 to 500 serial { <max> } } }
loop.for %i2 = 0 to 64 serial { loop.for %j2 = 0 to 500 serial { <exp: reads %m[i2, 0], writes %e[i2, j2]> } }
...
```
becomes
```mlir
loop.for %i = 0 to 64 serial {
  %m = loop.alloc "local" : memref<1x1xf32>
  %e = loop.alloc "local" : memref<1x500xf32>
  loop.for %j = 0 to 1 serial { <max init>; loop.for %r = 0 to 500 serial { <max> } }
  loop.for %j2 = 0 to 500 serial { <exp: reads %m[0, 0], writes %e[0, j2]> }
  ...
}
```

What fuses: two or more consecutive top-level nests whose first `d` loops (serial, the same
bounds) are perfectly nested, each with a loop of several trips below them (a row), with at
least one row reduction (every spatial loop of a reduction nest below depth `d` has one trip,
so a matmul or conv, whose register-block schedule needs its own nest, never fuses) and a tensor of at least `min_bytes` touched per pass. Legal
when every buffer that one of the nests writes and another accesses is indexed in its first `d`
dimensions by exactly the row loops' variables: a row then reads only what earlier stages wrote
for the same row.

A kernel over symbolic extents (dialects/sym.py) fuses the same way: loops with the same run-time
bounds are the same rows, a run-time trip count counts as several, and its buffers as large; a
row buffer of a symbolic length is allocated once per call (per thread) by the backend.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects import arith, func
from xdsl.dialects.builtin import IndexType, IntegerAttr
from xdsl.ir import SSAValue

from ziggurat.dialects import loop
from ziggurat.dialects.sym import is_symbolic_type, memref_of_shape, shape_of
from ziggurat.transforms.loop.plan_memory import memref_nbytes
from ziggurat.transforms.schedule.nest import chain

MIN_BYTES = 1 << 19
"""Fuse where a pass over the kernel's largest buffer moves at least this many bytes (the L2 of one
core, about): below, the intermediates stay in cache and the nests' own schedules (register
blocks of several rows for the reductions) keep them faster."""


def _trips(f: loop.ForOp) -> int | None:
    """The loop's trip count; None for run-time bounds (a kernel over symbolic extents: taken
    as many trips)."""
    return None if f.is_dynamic else f.trip_count


def _several(f: loop.ForOp) -> bool:
    n = _trips(f)
    return n is None or n > 1


def _same_bounds(a: loop.ForOp, b: loop.ForOp) -> bool:
    """Equal constants, or the same run-time values (convert-te-to-loop builds one value per extent)."""
    return a.lower == b.lower and a.upper == b.upper and a.step.value.data == b.step.value.data


def _common_depth(nests: Sequence[list[loop.ForOp]]) -> int:
    d = 0
    while all(len(p) > d for p in nests):
        first = nests[0][d]
        if first.kind.data != "serial" or any(not _same_bounds(p[d], first) or p[d].kind.data != "serial" for p in nests):
            break
        d += 1
    # keep each nest's own work below the row loops
    while d and any(len(p) == d and not list(p[d - 1].body.block.ops) for p in nests):
        d -= 1
    return d


def _row_reduction(prefix: list[loop.ForOp], d: int) -> bool | None:
    """Whether the nest holds a reduction that makes one value per row (True), holds none (False),
    or holds one with spatial loops of several trips below the rows (None: a matmul or conv)."""
    blocks = [o for o in prefix[0].walk() if isinstance(o, loop.BlockOp)]
    if not any("R" in b.iter_kinds.data for b in blocks):
        return False
    below = [o for o in prefix[d - 1].body.walk() if isinstance(o, loop.ForOp)]
    for f in below:
        kinds = set()
        for b in blocks:
            for kind, v in zip(b.iter_kinds.data, b.bindings):
                if v is f.iv:
                    kinds.add(kind)
        if "S" in kinds and _several(f):
            return None
    return True


def _accesses(top: loop.ForOp, d: int) -> tuple[set[SSAValue], set[SSAValue], set[SSAValue]]:
    """(buffers read, buffers written, buffers some access of which does not index its first `d`
    dims by the first `d` loops' variables) under `top`, in one walk. A row loop of one trip takes
    any index there (a broadcast read indexes such a dim by 0)."""
    prefix = chain(top)[:d]
    rows = [f.iv for f in prefix]
    single = [_trips(f) == 1 for f in prefix]
    reads, writes, other = set(), set(), set()
    for blk in (o for o in top.walk() if isinstance(o, loop.BlockOp)):
        var_of = dict(zip(blk.vars, blk.bindings))
        for acc in blk.body.walk():
            if not isinstance(acc, (loop.LoadOp, loop.StoreOp)):
                continue
            (reads if isinstance(acc, loop.LoadOp) else writes).add(acc.buffer)
            idx = list(acc.indices)
            if len(idx) < d or any(var_of.get(idx[p]) is not rows[p] and not single[p] for p in range(d)):
                other.add(acc.buffer)
    return reads, writes, other


def fuse_rows(fn: func.FuncOp, min_bytes: int | None = None) -> bool:
    """Fuses the kernel's top-level nests row by row where the module docstring says (`min_bytes`:
    default `MIN_BYTES`); returns whether it did."""
    min_bytes = MIN_BYTES if min_bytes is None else min_bytes
    tops = [o for o in fn.body.block.ops if isinstance(o, loop.ForOp)]
    if len(tops) < 2:
        return False
    prefixes = [chain(t) for t in tops]
    d = _common_depth(prefixes)
    if d == 0:
        return False
    kinds = [_row_reduction(p, d) for p in prefixes]
    if None in kinds or True not in kinds:
        return False
    # every stage walks a row below the row loops (an epilogue over the same points as a matmul's
    # result has none: the matmul then keeps its nest)
    if any(not any(_several(f) for f in p[d - 1].body.walk() if isinstance(f, loop.ForOp) and f is not p[d - 1])
           for p in prefixes):
        return False
    if all(_trips(f) == 1 for f in prefixes[0][:d]):  # one row in all: nothing to gain
        return False
    access = [_accesses(t, d) for t in tops]
    touched = {b for r, w, _ in access for b in r | w}
    symbolic = any(is_symbolic_type(b.type) for b in touched)  # its size is the shapes': taken as large
    if not symbolic and max((memref_nbytes(b.type) for b in touched), default=0) < min_bytes:  # type: ignore[arg-type]
        return False
    shared = set()
    for i, (_, w, _) in enumerate(access):
        for j, (r2, w2, _) in enumerate(access):
            if i != j:
                shared |= w & (r2 | w2)
    if any(shared & other for _, _, other in access):
        return False
    _merge(fn, tops, prefixes, d)
    _shrink_locals(fn, tops[0], d, shared)
    return True


def _merge(fn: func.FuncOp, tops: list[loop.ForOp], prefixes: list[list[loop.ForOp]], d: int) -> None:
    """Moves the body of each nest's loop `d - 1` to the end of the first nest's."""
    host = prefixes[0][d - 1].body.block
    rows = [f.iv for f in prefixes[0][:d]]
    for top, prefix in zip(tops[1:], prefixes[1:]):
        for f, iv in zip(prefix[:d], rows):
            f.iv.replace_all_uses_with(iv)
        for op in list(prefix[d - 1].body.block.ops):
            op.detach()
            host.add_op(op)
        top.detach()
        top.erase()


def _shrink_locals(fn: func.FuncOp, top: loop.ForOp, d: int, shared: set[SSAValue]) -> None:
    """Each kernel-local buffer the nests share becomes one row, allocated inside the row loops
    (fuse_rows checked that every access indexes the rows by the row loops' variables)."""
    host = chain(top)[d - 1].body.block
    zeros: dict[loop.BlockOp, SSAValue] = {}  # one index 0 per block: its accesses compare indices by identity

    def zero(acc) -> SSAValue:
        blk = acc.parent_op()
        while not isinstance(blk, loop.BlockOp):
            blk = blk.parent_op()
        if blk not in zeros:
            body = blk.body.block
            c = arith.ConstantOp(IntegerAttr(0, IndexType()))
            body.insert_op_before(c, body.first_op)
            zeros[blk] = c.result
        return zeros[blk]

    for alloc in [o for o in fn.body.block.ops if isinstance(o, loop.AllocOp)]:
        buf = alloc.results[0]
        if buf not in shared or any(not isinstance(u.operation, (loop.LoadOp, loop.StoreOp)) for u in buf.uses):
            continue
        shape = list(shape_of(buf.type))
        row = loop.AllocOp(memref_of_shape(buf.type.element_type, [1] * d + shape[d:]), alloc.scope.data)  # type: ignore[attr-defined]
        row.result.name_hint = buf.name_hint
        if host.first_op is not None:
            host.insert_op_before(row, host.first_op)
        else:
            host.add_op(row)
        for use in list(buf.uses):
            acc = use.operation
            assert isinstance(acc, (loop.LoadOp, loop.StoreOp))  # _row_indexed saw every access
            z = zero(acc)
            first = 1 if isinstance(acc, loop.StoreOp) else 0  # a store's value operand comes first
            acc.operands[first] = row.result
            for p in range(d):
                acc.operands[first + 1 + p] = z
        alloc.detach()
        alloc.erase()

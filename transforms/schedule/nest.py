"""The naive reduction nest and the facts the schedule planners read off it.

convert-te-to-loop emits a reduction (conv2d, matmul, dense) as spatial loops
around an init block and reduction loops around one update block:

```mlir
loop.for %i0 = 0 to 16 serial {
  loop.for %i1 = 0 to 32 serial {
    loop.block "matmul_init" [S %0 = %i0, S %1 = %i1] {...}
    loop.for %r0 = 0 to 8 serial {
      loop.block "matmul" [S %2 = %i0, S %3 = %i1, R %4 = %r0] {...}
    }
  }
}
```

`match_reduce_nest` finds those parts (a `ReduceNest`); `stride` and
`depends` read the index math of a block; `prepacked`, `packable_b` and
`packable_a` name the reads a register block can take from packed panels or
slivers. Nothing here changes the IR: the planners (plan.py) decide, the
builder (block.py) rewrites.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.dialects import arith
from xdsl.dialects.builtin import IndexType
from xdsl.ir import BlockArgument, SSAValue

from ziggurat.dialects import loop
from ziggurat.lowering.convert_loop_to_hw import const_int


@dataclass
class ReduceNest:
    """A naive reduction nest as convert-te-to-loop emits it."""

    spatial: list[loop.ForOp]
    init: loop.BlockOp
    reduction: list[loop.ForOp]
    update: loop.BlockOp
    out: SSAValue


def chain(f: loop.ForOp) -> list[loop.ForOp]:
    """`f` and the loops perfectly nested in it."""
    loops = [f]
    while True:
        ops = list(loops[-1].body.block.ops)
        if len(ops) != 1 or not isinstance(ops[0], loop.ForOp):
            return loops
        loops.append(ops[0])


def match_reduce_nest(top: loop.ForOp) -> ReduceNest | None:
    """The parts of `top` when it is a naive serial reduction nest, else None."""
    spatial = chain(top)
    body = list(spatial[-1].body.block.ops)
    if len(body) != 2 or not isinstance(body[0], loop.BlockOp) or not isinstance(body[1], loop.ForOp):
        return None
    init, red_top = body
    reduction = chain(red_top)
    inner = list(reduction[-1].body.block.ops)
    if len(inner) != 1 or not isinstance(inner[0], loop.BlockOp):
        return None
    update = inner[0]
    n, r = len(spatial), len(reduction)
    if any(f.kind.data != "serial" or f.bounds[0] != 0 or f.bounds[2] != 1 for f in spatial + reduction):
        return None
    if update.iter_kinds.data != "S" * n + "R" * r or init.iter_kinds.data != "S" * n:
        return None
    ivs = [f.iv for f in spatial] + [f.iv for f in reduction]
    if list(update.bindings) != ivs or list(init.bindings) != ivs[:n]:
        return None
    stores = [o for o in update.body.walk() if isinstance(o, loop.StoreOp)]
    if len(stores) != 1 or list(stores[0].indices) != list(update.vars[:n]):
        return None
    out = stores[0].buffer
    for blk, nvars in ((update, n), (init, n)):
        for o in blk.body.walk():
            if isinstance(o, (loop.LoadOp, loop.StoreOp)) and o.buffer == out and list(o.indices) != list(blk.vars[:nvars]):
                return None
    return ReduceNest(spatial, init, reduction, update, out)


def stride(v: SSAValue, var: SSAValue, memo: dict) -> int | None:
    """Stride of index `v` in block variable `var` (None: not affine)."""
    if v in memo:
        return memo[v]
    if v is var:
        s: int | None = 1
    elif isinstance(v, BlockArgument):
        s = 0
    else:
        op = v.owner
        subs = [stride(o, var, memo) if isinstance(o.type, IndexType) else 0 for o in op.operands]
        if all(x == 0 for x in subs):
            s = 0
        elif isinstance(op, (arith.AddiOp, arith.SubiOp)) and None not in subs:
            s = subs[0] + subs[1] if isinstance(op, arith.AddiOp) else subs[0] - subs[1]  # type: ignore[operator]
        elif isinstance(op, arith.MuliOp) and None not in subs and 0 in subs:
            const = [o.owner.value.value.data if isinstance(o.owner, arith.ConstantOp) else None for o in op.operands]
            k = const[1] if subs[1] == 0 else const[0]
            s = None if k is None else k * (subs[0] + subs[1])  # type: ignore[operator]
        elif isinstance(op, arith.SelectOp) and subs[2] == 0:
            s = subs[1]  # a clamped index: the vectorizer masks the lanes outside
        else:
            s = None
    memo[v] = s
    return s


def depends(v: SSAValue, var: SSAValue, memo: dict) -> bool:
    """Whether index `v` is computed from block variable `var`."""
    if v in memo:
        return memo[v]
    if v is var:
        d = True
    elif isinstance(v, BlockArgument):
        d = False
    else:
        d = any(depends(o, var, memo) for o in v.owner.operands)
    memo[v] = d
    return d


def prepacked(nest: ReduceNest, width: int | None = None) -> loop.LoadOp | None:
    """The read `wp[j // w, k, j % w]` of B stored in column panels of `w` = `width` lanes (any `w`
    that is the panel buffer's last dim with None) (`graph.matmul_panels`): the schedule reads
    it as it reads the panels it packs, with no pack nest."""
    n = len(nest.spatial)
    if len(nest.reduction) != 1:
        return None
    lvar, kvar = nest.update.vars[n - 1], nest.update.vars[n]

    def of_l(v: SSAValue, kind: type, w: int) -> bool:
        op = v.owner
        return isinstance(op, kind) and op.lhs is lvar and const_int(op.rhs) == w

    for o in nest.update.body.walk():
        if isinstance(o, loop.LoadOp) and o.buffer != nest.out and len(o.indices) == 3 and o.indices[1] is kvar:
            w = o.buffer.type.get_shape()[-1]  # type: ignore[attr-defined]
            if (width is None or w == width) and of_l(o.indices[0], arith.DivUIOp, w) \
                    and of_l(o.indices[2], arith.RemUIOp, w):
                return o
    return None


def packable_b(nest: ReduceNest, kc: int, width: int) -> loop.LoadOp | None:
    """The streamed read `B[k, j]` of a plain 2-D matmul whose k-slices are packed into panels,
    or B already in panels (`prepacked`, whatever `kc`)."""
    n = len(nest.spatial)
    lvar, kvar = nest.update.vars[n - 1], nest.update.vars[n]
    pre = prepacked(nest, width)
    if pre is not None:
        return pre
    if not kc or nest.spatial[-1].trip_count % width:
        return None
    memo: dict = {}
    reads = [o for o in nest.update.body.walk() if isinstance(o, loop.LoadOp) and o.buffer != nest.out
             and any(depends(i, lvar, memo) for i in o.indices)]
    if len(reads) == 1 and list(reads[0].indices) == [kvar, lvar]:
        return reads[0]
    return None


def packable_a(nest: ReduceNest, tile) -> loop.LoadOp | None:
    """The broadcast read `A[i, k]` of a plain 2-D matmul (`C[i, j] += A[i, k] * B[k, j]`) whose
    register block tiles the row loop `i` only (`tile` = [(0, rows)]), else None."""
    if len(nest.spatial) != 2 or len(nest.reduction) != 1 or len(tile) != 1 or tile[0][0] != 0 or tile[0][1] < 2:
        return None
    ivar, _, kvar = nest.update.vars
    reads = [o for o in nest.update.body.walk() if isinstance(o, loop.LoadOp) and o.buffer != nest.out
             and list(o.indices) == [ivar, kvar]]
    return reads[0] if len(reads) == 1 else None

"""Buffer accesses, affine index analysis and the dependence checks that
compute_at, reverse_compute_at, compute_inline, cache_read/write, rfactor and
storage_align share.

An index is *affine* when it is a sum of constants times loop variables,
reached through block variables (their bindings) and `arith.constant`,
`addi`, `subi` and `muli` by a constant. Fused loops (`divui`/`remui`) and
clamped indices (`select`) are not affine; the primitives that need a region
refuse them with ScheduleError.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from xdsl.builder import Builder
from xdsl.dialects import arith, func
from xdsl.dialects.builtin import IndexType, IntegerAttr, MemRefType
from xdsl.ir import Block, BlockArgument, Operation, SSAValue
from xdsl.rewriter import InsertPoint

from ziggurat.dialects import loop
from ziggurat.errors import ScheduleError
from ziggurat.transforms.loop.primitives.loops import get_loops

Affine = dict  # {loop iv (SSAValue) or 1: coefficient}


def affine(v: SSAValue) -> Affine | None:
    """`v` as {iv: coefficient, 1: constant}, or None when it is not affine in loop variables."""
    if isinstance(v, BlockArgument):
        owner = v.block.parent_op()
        if isinstance(owner, loop.ForOp):
            return {v: 1}
        if isinstance(owner, loop.BlockOp):
            return affine(owner.bindings[v.index])
        return None
    op = v.owner
    if isinstance(op, arith.ConstantOp) and isinstance(op.value, IntegerAttr):
        return {1: op.value.value.data}
    if isinstance(op, (arith.AddiOp, arith.SubiOp, arith.MuliOp)):
        a, b = affine(op.lhs), affine(op.rhs)
        if a is None or b is None:
            return None
        if isinstance(op, arith.MuliOp):
            if set(b) <= {1}:
                a, b = b, a
            if not set(a) <= {1}:
                return None
            c = a.get(1, 0)
            return {k: c * x for k, x in b.items()}
        sign = -1 if isinstance(op, arith.SubiOp) else 1
        out = dict(a)
        for k, x in b.items():
            out[k] = out.get(k, 0) + sign * x
        return out
    return None


def iv_range(f: loop.ForOp) -> tuple[int, int]:
    lb, _, step = f.bounds
    return lb, lb + step * max(f.trip_count - 1, 0)


def split_range(expr: Affine, fixed: Sequence[loop.ForOp], varying: Sequence[loop.ForOp],
                what: str) -> tuple[Affine, int, int]:
    """(the part of `expr` in `fixed` loops and constants, min and max of the rest over `varying`)."""
    fixed_ivs = {f.iv for f in fixed}
    vary = {f.iv: f for f in varying}
    base: Affine = {}
    lo = hi = 0
    for k, c in expr.items():
        if k == 1 or k in fixed_ivs:
            base[k] = c
        elif k in vary:
            a, b = iv_range(vary[k])
            lo += min(c * a, c * b)
            hi += max(c * a, c * b)
        else:
            raise ScheduleError(f"{what}: an index depends on a loop variable outside the analysed loops")
    return base, lo, hi


def emit(b: Builder, expr: Affine, offset: int = 0, extra: SSAValue | None = None) -> SSAValue:
    """Inserts index arithmetic computing `expr + offset (+ extra)`."""
    def const(n: int) -> SSAValue:
        return b.insert(arith.ConstantOp(IntegerAttr(n, IndexType()))).result

    acc: SSAValue | None = extra
    for k, c in expr.items():
        if k == 1 or c == 0:
            continue
        term = k if c == 1 else b.insert(arith.MuliOp(k, const(c))).result
        acc = term if acc is None else b.insert(arith.AddiOp(acc, term)).result
    total = expr.get(1, 0) + offset
    if acc is None:
        return const(total)
    return acc if total == 0 else b.insert(arith.AddiOp(acc, const(total))).result


# -- accesses -------------------------------------------------------------------------
def loads(blk: loop.BlockOp, buf: SSAValue | None = None) -> list[loop.LoadOp]:
    return [o for o in blk.body.walk() if isinstance(o, loop.LoadOp) and (buf is None or o.buffer is buf)]


def stores(blk: loop.BlockOp, buf: SSAValue | None = None) -> list[loop.StoreOp]:
    return [o for o in blk.body.walk() if isinstance(o, loop.StoreOp) and (buf is None or o.buffer is buf)]


def distinct(values: Iterable[SSAValue]) -> list[SSAValue]:
    out: list[SSAValue] = []
    for v in values:
        if not any(v is w for w in out):
            out.append(v)
    return out


def reads(blk: loop.BlockOp) -> list[SSAValue]:
    return distinct(o.buffer for o in loads(blk))


def writes(blk: loop.BlockOp) -> list[SSAValue]:
    return distinct(o.buffer for o in stores(blk))


def has(bufs: Sequence[SSAValue], v: SSAValue) -> bool:
    return any(v is w for w in bufs)


def buffer_name(v: SSAValue) -> str:
    return f"%{v.name_hint}" if v.name_hint else f"a {v.type} buffer"


def all_blocks(fn: func.FuncOp) -> list[loop.BlockOp]:
    return [b for b in fn.walk() if isinstance(b, loop.BlockOp)]


def find_block(fn: func.FuncOp, name: str) -> loop.BlockOp | None:
    found = [b for b in all_blocks(fn) if b.block_name.data == name]
    return found[0] if len(found) == 1 else None


def root(op: Operation) -> Operation:
    """The ancestor of `op` directly in its function's body."""
    while not isinstance(op.parent_op(), func.FuncOp):
        op = op.parent_op()  # type: ignore[assignment]
    return op


def top_ops(fn: func.FuncOp) -> list[Operation]:
    return list(fn.body.block.ops)


def blocks_in(ops: Iterable[Operation]) -> list[loop.BlockOp]:
    return [b for o in ops for b in ([o] if isinstance(o, loop.BlockOp) else []) + list(
        x for x in o.walk() if isinstance(x, loop.BlockOp) and x is not o)]


def span(fn: func.FuncOp, first: Operation, last: Operation) -> list[loop.BlockOp]:
    """Blocks in the top-level ops from `first` to `last`, both included."""
    ops = top_ops(fn)
    a, b = ops.index(first), ops.index(last)
    return blocks_in(ops[a:b + 1])


def only_block_in_nest(blk: loop.BlockOp, what: str) -> Operation:
    """The root nest of `blk`, which must hold no other block."""
    r = root(blk)
    others = sorted({b.block_name.data for b in blocks_in([r]) if b is not blk})
    if others:
        raise ScheduleError(f"{what}: block '{blk.block_name.data}' shares its loop nest with block(s) {others}; "
                            "it must have a loop nest of its own")
    return r


def local_alloc(fn: func.FuncOp, buf: SSAValue, blk: str, what: str) -> loop.AllocOp:
    if not isinstance(buf.owner, loop.AllocOp) or root(buf.owner) is not buf.owner:
        raise ScheduleError(f"{what}: block '{blk}' writes {buffer_name(buf)}, which is not a loop.alloc of this "
                            f"kernel (a kernel argument); {what} works on kernel-local buffers only")
    return buf.owner


def var_domain(blk: loop.BlockOp, n: int, what: str) -> tuple[int, int] | None:
    """The [min, max] of block variable `n` over its loops, None when its binding is not affine."""
    e = affine(blk.bindings[n])
    if e is None:
        return None
    _, lo, hi = split_range(e, [], get_loops(blk), what)
    return lo + e.get(1, 0), hi + e.get(1, 0)


def logical_shape(buf: SSAValue) -> list[int]:
    """The shape of `buf` without the padding storage_align added (kept in `logical_shape` on its alloc)."""
    owner = buf.owner
    if isinstance(owner, loop.AllocOp) and "logical_shape" in owner.attributes:
        return [a.value.data for a in owner.attributes["logical_shape"].data]  # type: ignore[attr-defined]
    return list(buf.type.get_shape())  # type: ignore[attr-defined]


def identity_store(blk: loop.BlockOp, buf: SSAValue, what: str) -> list[int]:
    """For a block storing `buf` once at spatial variables covering all of `buf`: the variable of each dimension."""
    name = blk.block_name.data
    sts = stores(blk, buf)
    if len(sts) != 1:
        raise ScheduleError(f"{what}: block '{name}' stores {buffer_name(buf)} {len(sts)} times; expected once")
    args = list(blk.body.block.args)
    dims = []
    for d, (idx, size) in enumerate(zip(sts[0].indices, logical_shape(buf))):
        if not (isinstance(idx, BlockArgument) and idx.block is blk.body.block):
            raise ScheduleError(f"{what}: block '{name}' stores dimension {d} of {buffer_name(buf)} at a computed "
                                "index; it must store at its own variables")
        n = args.index(idx)
        if blk.iter_kinds.data[n] != "S" or n in dims:
            raise ScheduleError(f"{what}: block '{name}' stores {buffer_name(buf)} at a reduction or repeated "
                                "variable")
        if var_domain(blk, n, what) != (0, size - 1):
            raise ScheduleError(f"{what}: block '{name}' does not cover dimension {d} (0 to {size}) of "
                                f"{buffer_name(buf)} with variable {n}")
        dims.append(n)
    return dims


def insert_alloc(fn: func.FuncOp, t: MemRefType) -> SSAValue:
    first = fn.body.block.first_op
    op = loop.AllocOp(t, "local")
    fn.body.block.insert_op_before(op, first) if first is not None else fn.body.block.add_op(op)
    return op.result


def full_nest(b: Builder, shape: Sequence[int], name: str, hint: str) -> tuple[Builder, list[SSAValue]]:
    """Loops over `shape` inserted with `b`; returns a builder inside the innermost and the ivs."""
    ivs = []
    for d, n in enumerate(shape):
        f = b.insert(loop.ForOp(0, n))
        f.iv.name_hint = f"{hint}_ax{d}"
        ivs.append(f.iv)
        b = Builder(InsertPoint.at_end(f.body.block))
    return b, ivs


def new_block(b: Builder, name: str, kinds: str, bindings: Sequence[SSAValue]) -> tuple[loop.BlockOp, Builder]:
    blk = b.insert(loop.BlockOp(name, kinds, bindings))
    return blk, Builder(InsertPoint.at_end(blk.body.block))


def unique_name(fn: func.FuncOp, name: str) -> str:
    taken = {b.block_name.data for b in all_blocks(fn)}
    if name not in taken:
        return name
    n = 1
    while f"{name}_{n}" in taken:
        n += 1
    return f"{name}_{n}"


def erase_nest(r: Operation) -> None:
    r.detach()
    r.erase()


def body_block(blk: loop.BlockOp) -> Block:
    return blk.body.block

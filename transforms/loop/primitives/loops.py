"""Finding blocks and loops, and the checks the primitives share."""

from __future__ import annotations

from xdsl.dialects import arith, func
from xdsl.ir import Operation, SSAValue

from ziggurat.dialects import loop
from ziggurat.errors import ScheduleError

# Ops that may sit between two loops of a nest (index arithmetic from split/fuse).
INDEX_OPS = (arith.ConstantOp, arith.AddiOp, arith.MuliOp, arith.SubiOp, arith.DivUIOp, arith.RemUIOp)


def get_block(fn: func.FuncOp, name: str) -> loop.BlockOp:
    """The one `loop.block "<name>"` of `fn`."""
    found = [b for b in fn.walk() if isinstance(b, loop.BlockOp) and b.block_name.data == name]
    if not found:
        names = sorted({b.block_name.data for b in fn.walk() if isinstance(b, loop.BlockOp)})
        raise ScheduleError(f"no block '{name}' in @{fn.sym_name.data}; its blocks are {names}")
    if len(found) > 1:
        raise ScheduleError(f"block '{name}' occurs {len(found)} times in @{fn.sym_name.data}; schedule it before it is repeated")
    return found[0]


def get_loops(blk: loop.BlockOp) -> list[loop.ForOp]:
    """The loops around `blk`, outermost first."""
    loops = []
    p = blk.parent_op()
    while isinstance(p, loop.ForOp):
        loops.append(p)
        p = p.parent_op()
    return loops[::-1]


def describe(f: loop.ForOp) -> str:
    """`loop %i1 (0 to 32) around block 'matmul'`, for error messages."""
    blocks = sorted({b.block_name.data for b in f.walk() if isinstance(b, loop.BlockOp)})
    lb, ub, _ = f.bounds
    return f"loop %{f.iv.name_hint or '?'} ({lb} to {ub}) around block(s) {blocks}"


def uses(v: SSAValue, iv: SSAValue, memo: dict) -> bool:
    """`v` is `iv` or is computed from it."""
    if v is iv:
        return True
    if v in memo:
        return memo[v]
    memo[v] = False
    owner = v.owner
    memo[v] = isinstance(owner, Operation) and any(uses(o, iv, memo) for o in owner.operands)
    return memo[v]


def bound_kinds(f: loop.ForOp) -> set[str]:
    """Iteration kinds (S/R) with which blocks under `f` bind its variable."""
    memo: dict = {}
    kinds = set()
    for blk in f.body.walk():
        if isinstance(blk, loop.BlockOp):
            kinds |= {k for k, b in zip(blk.iter_kinds.data, blk.bindings) if uses(b, f.iv, memo)}
    return kinds


def require_plain(f: loop.ForOp, what: str) -> None:
    """A serial loop from 0 with step 1 (what split/fuse/reorder work on)."""
    lb, _, step = f.bounds
    if f.kind.data != "serial" or lb != 0 or step != 1:
        raise ScheduleError(f"{what}: {describe(f)} is {f.kind.data} with lb {lb} and step {step}; "
                            "only serial loops from 0 with step 1 can be restructured")


def check_perfect(outer: loop.ForOp, inner: loop.ForOp, what: str) -> None:
    """`inner` is the only op in `outer` besides index arithmetic."""
    bad = [o for o in outer.body.block.ops if o is not inner and not isinstance(o, INDEX_OPS)]
    if bad:
        raise ScheduleError(f"{what}: {describe(outer)} is not perfectly nested around {describe(inner)}: "
                            f"it also holds '{bad[0].name}'"
                            + (f" (block '{bad[0].block_name.data}')" if isinstance(bad[0], loop.BlockOp) else ""))


def hoist_index_ops(outer: loop.ForOp, inner: loop.ForOp, what: str) -> None:
    """Moves the index ops between `outer` and the directly nested `inner` to the top of `inner`."""
    check_perfect(outer, inner, what)
    extra = [o for o in outer.body.block.ops if o is not inner]
    first = inner.body.block.first_op
    for o in extra:
        o.detach()
        if first is None:
            inner.body.block.add_op(o)
        else:
            inner.body.block.insert_op_before(o, first)


def single_child_loop(f: loop.ForOp) -> loop.ForOp | None:
    kids = [o for o in f.body.block.ops if isinstance(o, loop.ForOp)]
    return kids[0] if len(kids) == 1 else None

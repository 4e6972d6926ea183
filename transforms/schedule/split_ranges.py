"""Index-set splitting of copy nests: one nest per range where a select chain picks one input.

A concatenation lowers to a select chain (lowering/topi.py): every output
element tests which input its coordinate falls in, reads all of them at
clamped indices and keeps one. Fused with a layout transform (SegFormer's
decode head: four 256-channel maps concatenated along channels, then blocked
to NCHW16c) that is four loads, a dozen index tests and a `remui` per
element, and the vectorizer gives up (the tests hide the contiguous lane):
14 ms for 16 M floats on Zen 4, where a copy takes 2.

`split_select_ranges` finds a loop whose variable alone decides every index
test that depends on it (each test `x < C` with `x` = `k * v` + the other
variables, their range never straddling `C` inside one piece of `v`'s range),
cuts the loop at the test boundaries into one copy of the nest per piece, and
folds each copy's tests to constants: the selects vanish, as do the reads of
the other inputs, and `divui`/`remui` of an index whose range the piece fixes.
What is left per piece is a plain permutation copy that convert-loop-to-hw
vectorizes (a strided read becomes a gather). The parts may be slices of one
buffer (an int8 conv's im2col windows: masked byte loads, scalar on AVX2,
before), and a piece that still selects along another variable splits again
(a frame concatenated along H, then W), up to MAX_PIECES nests in all. Splitting a loop's range and
resolving tests that are constant on each piece change no value.

Example: `loop.for %c = 0 to 8` around
`%t = arith.cmpi slt, %c, %c4; %a = loop.load %x[min(%c, 3)]; %b = loop.load %y[max(%c - 4, 0)]; select %t, %a, %b`
becomes `loop.for %c = 0 to 4 { ... load %x[%c] }` and `loop.for %c = 4 to 8 { ... load %y[%c - 4] }`.
"""

from __future__ import annotations

from xdsl.dialects import arith, builtin
from xdsl.dialects.builtin import IntegerAttr
from xdsl.ir import Operation, SSAValue

from ziggurat.dialects import loop
from ziggurat.transforms.schedule.nest import chain, depends, stride
from ziggurat.lowering.convert_loop_to_hw import const_int
from ziggurat.transforms.loop.loop_simplify_index import simplify_block
from ziggurat.transforms.schedule.pad import erase_dead, index_range

MAX_PIECES = 16  # a concat of more inputs stays one nest
# predicate -> (offset to the boundary constant, whether the test holds below the boundary)
_BELOW = {"slt": (0, True), "ult": (0, True), "sle": (1, True), "ule": (1, True),
          "sge": (0, False), "uge": (0, False), "sgt": (1, False), "ugt": (1, False)}


def _tests(blk: loop.BlockOp) -> list[tuple[arith.CmpiOp, SSAValue, int, str]]:
    """The block's index tests `x pred C` (C a constant): (op, x, C, predicate)."""
    return [(op, *t) for op in blk.body.block.ops if isinstance(op, arith.CmpiOp) for t in _test_of(op)]


def _test_of(op: arith.CmpiOp) -> list[tuple[SSAValue, int, str]]:
    """`[(x, C, predicate)]` when `op` tests an index against a constant, else []."""
    pred = arith.CMPI_COMPARISON_OPERATIONS[op.predicate.value.data]
    c = const_int(op.rhs)
    return [(op.lhs, c, pred)] if isinstance(op.lhs.type, builtin.IndexType) and c is not None and pred in _BELOW else []


def _decided(x: SSAValue, c: int, pred: str, ranges: dict[SSAValue, tuple[int, int]]) -> bool | None:
    """The value of `x pred c` where it is the same over `ranges`, else None."""
    r = index_range(x, ranges)
    if r is None:
        return None
    shift, below = _BELOW[pred]
    bound = c + shift  # the test holds iff (x < bound) == below
    if r[1] < bound:
        return below
    if r[0] >= bound:
        return not below
    return None


def _pieces(blk: loop.BlockOp, var: SSAValue, ranges: dict[SSAValue, tuple[int, int]]) -> list[tuple[int, int]] | None:
    """`var`'s range cut where the tests that depend on it change, each piece deciding them all;
    None when some test is not decided by `var` alone (or there is nothing to cut)."""
    lo, hi = ranges[var]
    tests = [(x, c, p) for _, x, c, p in _tests(blk) if depends(x, var, {})]
    cuts = set()
    for x, c, pred in tests:
        k = stride(x, var, {})
        rest = index_range(x, {**ranges, var: (0, 0)})
        if k is None or k <= 0 or rest is None:
            return None
        first = -(-(c + _BELOW[pred][0] - rest[0]) // k)  # the smallest v with k * v + min(rest) >= bound
        if lo < first <= hi:
            cuts.add(first)
    if not cuts or len(cuts) >= MAX_PIECES:
        return None
    bounds = [lo, *sorted(cuts), hi + 1]
    pieces = [(a, b - 1) for a, b in zip(bounds, bounds[1:])]
    for a, b in pieces:
        narrowed = {**ranges, var: (a, b)}
        if any(_decided(x, c, p, narrowed) is None for x, c, p in tests):
            return None
    return pieces


def _replace(op: Operation, value: SSAValue) -> None:
    op.results[0].replace_all_uses_with(value)
    op.detach()
    op.erase()


def _constant(before: Operation, value: int, type_: builtin.IndexType | builtin.IntegerType) -> SSAValue:
    new = arith.ConstantOp(IntegerAttr(value, type_))
    before.parent_block().insert_op_before(new, before)  # type: ignore[union-attr]
    return new.result


def fold_decided(blk: loop.BlockOp, ranges: dict[SSAValue, tuple[int, int]]) -> None:
    """Folds what `ranges` decide in `blk`: index tests to constants, `andi`/`ori` of constants,
    selects on a constant condition, and `divui`/`remui` of an index whose range stays inside one
    multiple of the divisor; then drops the ops (and reads) nothing uses any more."""
    changed = True
    while changed:
        changed = False
        for op in list(blk.body.block.ops):
            if isinstance(op, arith.CmpiOp):
                t = _test_of(op)
                if t and (v := _decided(*t[0], ranges)) is not None:
                    _replace(op, _constant(op, int(v), builtin.i1))
                    changed = True
            elif isinstance(op, (arith.AndIOp, arith.OrIOp)) and op.result.type == builtin.i1:
                a, b = const_int(op.lhs), const_int(op.rhs)
                if a is not None and b is not None:
                    v = (a and b) if isinstance(op, arith.AndIOp) else (a or b)
                    _replace(op, _constant(op, int(bool(v)), builtin.i1))
                    changed = True
            elif isinstance(op, arith.SelectOp) and (c := const_int(op.cond)) is not None:
                _replace(op, op.lhs if c else op.rhs)
                changed = True
            elif isinstance(op, (arith.DivUIOp, arith.RemUIOp)) and isinstance(op.lhs.type, builtin.IndexType):
                d, r = const_int(op.rhs), index_range(op.lhs, ranges)
                if isinstance(d, int) and d > 0 and r is not None and r[0] >= 0 and r[0] // d == r[1] // d:
                    q = r[0] // d
                    if isinstance(op, arith.DivUIOp):
                        _replace(op, _constant(op, q, builtin.IndexType()))
                    elif q == 0:
                        _replace(op, op.lhs)
                    else:
                        continue
                    changed = True
    erase_dead(blk)


def split_select_ranges(top: loop.ForOp, blk: loop.BlockOp, budget: int = MAX_PIECES) -> list[loop.ForOp]:
    """Splits the nest `top` (whose innermost body is the one block `blk`) as the module docstring
    says; returns the nests, `top` first (its loop narrowed to the first piece), its copies for the
    other pieces after it. Each piece splits again along another variable while the nests stay within
    `budget` (a concat along H then W: an im2col's padding). A nest with nothing to split comes back
    alone and unchanged."""
    if sum(isinstance(o, loop.LoadOp) for o in blk.body.block.ops) < 2:
        return [top]  # one read: a padded copy (copy_nest.peel_padding), not a concatenation (whose
        # parts may be slices of one buffer: an im2col's windows)
    loops = chain(top)
    var_loop = {v: b.owner.parent_op() for v, b in zip(blk.vars, blk.bindings)}  # type: ignore[union-attr]
    ranges = {v: (f.bounds[0], f.bounds[1] - 1) for v, f in var_loop.items()}
    for v in blk.vars:
        pieces = _pieces(blk, v, ranges)
        if pieces is not None and len(pieces) <= budget:
            break
    else:
        return [top]
    at = loops.index(var_loop[v])  # type: ignore[arg-type]
    position = list(blk.vars).index(v)
    nests = [top] + [top.clone() for _ in pieces[1:]]  # copies of the whole nest, before any narrowing
    for prev, nest in zip(nests, nests[1:]):
        top.parent_block().insert_op_after(nest, prev)  # type: ignore[union-attr]
    inners = []
    for nest, (a, b) in zip(nests, pieces):
        f = chain(nest)[at]
        f.lb = IntegerAttr(a, f.lb.type)
        f.ub = IntegerAttr(b + 1, f.ub.type)
        inner = next(o for o in chain(nest)[-1].body.block.ops if isinstance(o, loop.BlockOp))
        narrowed = {w: ranges[u] for w, u in zip(inner.vars, blk.vars)}
        narrowed[inner.vars[position]] = (a, b)
        fold_decided(inner, narrowed)
        simplify_block(inner)  # the piece's narrower range splits more of its index math
        inners.append(inner)
    share = budget // len(nests)
    if share < 2:
        return nests
    return [piece for nest, inner in zip(nests, inners) for piece in split_select_ranges(nest, inner, share)]

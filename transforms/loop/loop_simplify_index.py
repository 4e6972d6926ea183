"""loop-simplify-index: drops the div/rem pairs that reshapes leave in index math."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import arith, builtin, func
from xdsl.dialects.builtin import IndexType, IntegerAttr
from xdsl.builder import Builder
from xdsl.ir import Block, Operation, SSAValue
from xdsl.rewriter import InsertPoint
from xdsl.passes import ModulePass

from ziggurat.dialects import loop
from ziggurat.lowering.convert_loop_to_hw import const_int as _const
from ziggurat.symbolic import Dim, Sym, SymbolicError
from ziggurat.dialects.sym import symbol_args
from ziggurat.transforms.loop.sym_index import dim_of, enclosing_function, index_of, symbol_dims

INDEX_DIVS = (arith.DivUIOp, arith.DivSIOp, arith.FloorDivSIOp)
INDEX_REMS = (arith.RemUIOp, arith.RemSIOp)
_PURE = (arith.ConstantOp, arith.AddiOp, arith.SubiOp, arith.MuliOp, *INDEX_DIVS, *INDEX_REMS)


def _le(a: Dim, b: Dim) -> bool:
    """`a <= b` at every binding of the symbols (each >= 1)."""
    if not isinstance(a, Sym) and not isinstance(b, Sym):
        return a <= b
    d = b - a
    least = Sym.lift(d).bounds()[0] if isinstance(d, Sym) else d
    return least is not None and least >= 0


def _lt(a: Dim, b: Dim) -> bool:
    return _le(a + 1, b)


def _dmin(a: Dim, b: Dim) -> Dim | None:
    return a if _le(a, b) else b if _le(b, a) else None


def _dmax(a: Dim, b: Dim) -> Dim | None:
    return b if _le(a, b) else a if _le(b, a) else None


def _quotient(k: Dim, c: Dim) -> Dim | None:
    """`k / c` where `c` divides `k` at every binding, else None."""
    if not isinstance(k, Sym) and not isinstance(c, Sym):
        return k // c if k % c == 0 else None
    try:
        return Sym.lift(k).exact_div(c)
    except SymbolicError:
        return None


class _Aff:
    """sum(coef * atom) + const over index values (atoms: block variables or opaque results); the
    coefficients and the constant are ints, or expressions of the kernel's symbols."""

    def __init__(self, terms: dict[SSAValue, Dim] | None = None, const: Dim = 0):
        self.terms = {a: c for a, c in (terms or {}).items() if c}
        self.const = const

    def add(self, other: _Aff, sign: int = 1) -> _Aff:
        terms = dict(self.terms)
        for a, c in other.terms.items():
            terms[a] = terms.get(a, 0) + sign * c
        return _Aff(terms, self.const + sign * other.const)

    def scale(self, k: Dim) -> _Aff:
        return _Aff({a: c * k for a, c in self.terms.items()}, self.const * k)


@dataclass(frozen=True)
class LoopSimplifyIndexPass(ModulePass):
    """Rewrites `x floordiv c` and `x mod c` on index values with known ranges.

    The te lowering of a reshape flattens and unflattens indices with
    divisions and remainders by constants; a chain of reshapes, transposes
    and slices leaves dozens per element, which hides the innermost stride
    from `loop-vectorize-innermost` (the copy stays scalar) and costs a
    multiply-shift sequence each. With `x = c*q + r` where every term of `r`
    has a coefficient that `c` does not divide and `0 <= r < c` over the
    ranges of the block variables (from the bounds of the loops they bind),
    `x / c` is `q` and `x % c` is `r`; where x itself is in [0, c), `x / c` is 0
    and `x % c` is x.

    The clamps of padded reads count too: `select(x >= 0 and x < n, x, 0)` is in
    [0, n - 1] (so a transposed read inlined into a layout transform with a halo
    splits its flat index), and where x's own range is already inside, the clamp
    is x and its test leaves the pad condition (the copy then reads contiguous
    lanes).

    In a kernel over symbols (`sym.symbols`, issue 22) the symbol arguments and
    index math on them alone are constants of the sums, coefficients and
    divisors may be expressions of the symbols, and a loop with run-time bounds
    gives its variable the range [lower, upper - 1]: a transpose's
    `(b * %seq + t) / %seq` is `b` where `t` runs below `%seq` (comparisons hold
    for every binding of the symbols, each at least 1).

    **Input:** loop-level kernel functions, before scheduling (the block
    variables bind loop variables or constants).

    **Output:** the same kernels; each division or remainder by a positive
    constant that splits this way is replaced by adds and multiplies of its
    parts, and index arithmetic left without uses is erased. Others stay.

    Example (`%a` binds `0 to 4`, `%b` binds `0 to 32`):
    ```mlir
    %x = arith.addi %a32, %b : index      // %a32 = %a * 32
    %q = arith.divui %x, %c32 : index
    %r = arith.remui %x, %c32 : index
    %v = loop.load %in0[%q, %r] : memref<4x32xf32>
    ```
    becomes `%v = loop.load %in0[%a, %b]`.
    """

    name = "loop-simplify-index"

    def apply(self, ctx: Context, op: builtin.ModuleOp) -> None:
        for fn in op.ops:
            if isinstance(fn, func.FuncOp) and fn.sym_name.data != "main":
                for blk in fn.walk():
                    if isinstance(blk, loop.BlockOp):
                        simplify_block(blk)


def bound_range(v: SSAValue, syms: dict[SSAValue, Dim]) -> tuple[Dim, Dim] | None:
    """Inclusive [least, greatest] of a block's bound value: a loop variable (run-time bounds as
    expressions of the kernel's symbols `syms`, the greatest then `upper - 1`) or a constant."""
    owner = v.owner
    if isinstance(owner, Block) and isinstance(owner.parent_op(), loop.ForOp):
        f = owner.parent_op()
        if f.is_dynamic:  # type: ignore[union-attr]  # run-time bounds: from the symbols where they are known
            lo, hi = dim_of(f.lower, syms), dim_of(f.upper, syms)  # type: ignore[union-attr]
            return (lo, hi - 1) if lo is not None and hi is not None else None
        lb, _, step = f.bounds  # type: ignore[union-attr]
        n = f.trip_count  # type: ignore[union-attr]
        return (lb, lb + (n - 1) * step) if n else None
    c = _const(v)
    return None if c is None else (c, c)


def simplify_block(blk: loop.BlockOp) -> int:
    """Simplifies the index math of one `loop.block`; returns how many div/rem ops it replaced.
    In a kernel over symbols (`sym.symbols`) the symbol arguments are constants of the index math
    and run-time loop bounds give ranges: `(b * S + s) / S` is b where `s` runs below `S`."""
    fn = enclosing_function(blk)
    syms = symbol_dims(fn)
    args = symbol_args(fn) if fn is not None else {}
    ranges: dict[SSAValue, tuple[Dim, Dim]] = {}
    for var, bound in zip(blk.vars, blk.operands):
        r = bound_range(bound, syms)
        if r is not None:
            ranges[var] = r
    affs: dict[SSAValue, _Aff] = {}

    def aff(v: SSAValue) -> _Aff:
        if v not in affs:
            k = dim_of(v, syms)  # a constant, or index math on the symbols alone
            affs[v] = _Aff({v: 1}) if k is None else _Aff(const=k)
        return affs[v]

    def span(a: _Aff) -> tuple[Dim, Dim] | None:
        lo = hi = a.const
        for atom, c in a.terms.items():
            r = ranges.get(atom)
            if r is None:
                return None
            if _le(0, c):
                lo, hi = lo + c * r[0], hi + c * r[1]
            elif _le(c, 0):
                lo, hi = lo + c * r[1], hi + c * r[0]
            else:
                return None
        return lo, hi

    known: dict[SSAValue, bool] = {}  # i1 values decided by the ranges
    replaced = 0
    for op in list(blk.body.block.ops):
        if isinstance(op, arith.CmpiOp) and isinstance(op.operands[0].type, IndexType):
            decided = _decide(op, span(aff(op.operands[0])), span(aff(op.operands[1])))
            if decided is not None:
                known[op.result] = decided
            continue
        if isinstance(op, arith.AndIOp) and op.result.type == builtin.i1:
            a, b = (known.get(v) for v in op.operands)
            if a is False or b is False:
                known[op.result] = False
            elif a is True and b is True:
                known[op.result] = True
            else:  # and(in_range(x), c) is c where x is always in range; one comparison of a pair stays
                for k in (0, 1):  # put (the in-bounds test of a padded read: pad.match_clamped_read)
                    if known.get(op.operands[k]) and isinstance(op.operands[k].owner, arith.AndIOp):
                        op.result.replace_all_uses_with(op.operands[1 - k])
                        break
            continue
        if isinstance(op, arith.SelectOp) and isinstance(op.result.type, IndexType):
            cond = known.get(op.cond)
            if cond is not None:  # a clamp its value never needs (a padded read's index in range)
                op.result.replace_all_uses_with(op.operands[1] if cond else op.operands[2])
                replaced += 1
                continue
            r = _clamp_range(op, lambda v: span(aff(v)))
            if r is not None:
                ranges[op.result] = r
            continue
        if len(op.results) != 1 or not isinstance(op.results[0].type, IndexType):
            continue
        res = op.results[0]
        if isinstance(op, arith.ConstantOp):
            c = _const(res)
            if c is not None:
                affs[res] = _Aff(const=c)
            continue
        if isinstance(op, (arith.AddiOp, arith.SubiOp)):
            affs[res] = aff(op.operands[0]).add(aff(op.operands[1]), 1 if isinstance(op, arith.AddiOp) else -1)
            continue
        if isinstance(op, arith.MuliOp):
            a0, a1 = aff(op.operands[0]), aff(op.operands[1])
            if not a1.terms or not a0.terms:
                affs[res] = a0.scale(a1.const) if not a1.terms else a1.scale(a0.const)
            continue
        if isinstance(op, INDEX_DIVS + INDEX_REMS):
            divisor = aff(op.operands[1])
            x = aff(op.operands[0])
            c = divisor.const
            if divisor.terms or not _lt(0, c):
                continue
            parts = {a: _quotient(k, c) for a, k in x.terms.items()}
            whole = _quotient(x.const, c) if isinstance(c, Sym) or isinstance(x.const, Sym) else None
            if isinstance(c, Sym) or isinstance(x.const, Sym):  # a symbolic constant splits only when c divides it
                qc, rc = (whole, 0) if whole is not None else (0, x.const)
            else:
                qc, rc = x.const // c, x.const % c
            q = _Aff({a: p for a, p in parts.items() if p is not None}, qc)
            r = _Aff({a: k for a, k in x.terms.items() if parts[a] is None}, rc)
            rs, xs = span(r), span(x)
            if rs is not None and not any(isinstance(d, Sym) for d in (*rs, c)) and rs[0] // c == rs[1] // c != 0:
                # r's constant split off alone leaves it a whole c out of [0, c): `c*q + t - 1` with t in
                # [1, c] is `c*q + (t - 1)`, not `c*(q - 1) + (t + c - 1)`; m c moves from r to q
                m = rs[0] // c
                q, r, rs = _Aff(q.terms, q.const + m), _Aff(r.terms, r.const - m * c), (rs[0] - m * c, rs[1] - m * c)
            # x // c = q and x % c = r when 0 <= r < c: exact for floor division, and for the unsigned and
            # truncating ops while x >= 0; the truncating signed ops need that proved (x's range known)
            signed = isinstance(op, (arith.DivSIOp, arith.RemSIOp))
            if xs is not None and _le(0, xs[0]) and _lt(xs[1], c):  # x itself in [0, c): x / c = 0, x % c = x
                q, r, rs = _Aff(), x, xs
            if rs is not None and _le(0, rs[0]) and _lt(rs[1], c) and (_le(0, xs[0]) if xs is not None else not signed):
                part = q if isinstance(op, INDEX_DIVS) else r
                new = _materialize(op, part, args)
                affs[new] = part
                if new is not res:
                    res.replace_all_uses_with(new)
                    replaced += 1
                continue
            if xs is not None and _le(0, xs[0]):  # an opaque value with a known range
                if not any(isinstance(d, Sym) for d in (*xs, c)):
                    ranges[res] = (xs[0] // c, xs[1] // c) if isinstance(op, INDEX_DIVS) else (0, min(c - 1, xs[1]))
                else:
                    ranges[res] = (0, xs[1]) if isinstance(op, INDEX_DIVS) else (0, c - 1)
            elif isinstance(op, arith.RemUIOp):
                ranges[res] = (0, c - 1)
    if replaced:  # only what the rewrites left without uses
        _erase_dead(blk.body.block)
    return replaced


def _predicate(op: arith.CmpiOp) -> str:
    return arith.CMPI_COMPARISON_OPERATIONS[op.predicate.value.data]


def _decide(op: arith.CmpiOp, a: tuple[Dim, Dim] | None, b: tuple[Dim, Dim] | None) -> bool | None:
    """The signed comparison `a <pred> b` where the ranges decide it, else None."""
    if a is None or b is None:
        return None
    pred = _predicate(op)
    if pred in ("slt", "sge"):
        lt = True if _lt(a[1], b[0]) else False if _le(b[1], a[0]) else None
        return lt if lt is None or pred == "slt" else not lt
    if pred in ("sle", "sgt"):
        le = True if _le(a[1], b[0]) else False if _lt(b[1], a[0]) else None
        return le if le is None or pred == "sle" else not le
    return None


def _clamp_range(op: arith.SelectOp, range_of: Callable[[SSAValue], tuple[Dim, Dim] | None]
                 ) -> tuple[Dim, Dim] | None:
    """The range of `select(cond, x, y)` on indices: x's range narrowed by the bounds that `cond`
    (comparisons of x with constants, joined by `andi`) puts on it, joined with y's range. The clamp
    of a padded read, `select(x >= 0 and x < n, x, 0)`, is in [0, n - 1]."""
    x, y = op.operands[1], op.operands[2]
    rx, ry = range_of(x), range_of(y)
    if rx is None or ry is None:
        return None
    lo, hi = rx
    stack = [op.cond]
    while stack:
        c = stack.pop().owner
        if isinstance(c, arith.AndIOp):
            stack += list(c.operands)
        elif isinstance(c, arith.CmpiOp) and c.operands[0] is x and (kr := range_of(c.operands[1])) is not None \
                and kr[0] == kr[1]:
            k, pred = kr[0], _predicate(c)
            new_lo = _dmax(lo, k if pred == "sge" else k + 1 if pred == "sgt" else lo)
            new_hi = _dmin(hi, k - 1 if pred == "slt" else k if pred == "sle" else hi)
            lo = lo if new_lo is None else new_lo  # unordered: the wider range
            hi = hi if new_hi is None else new_hi
    if _lt(hi, lo):
        return ry
    joined = _dmin(lo, ry[0]), _dmax(hi, ry[1])
    return None if joined[0] is None or joined[1] is None else joined  # type: ignore[return-value]


def _materialize(at: Operation, a: _Aff, args: dict[str, SSAValue]) -> SSAValue:
    """Inserts `a` as arith ops before `at` (a symbolic coefficient as index math on the symbol
    arguments `args`); returns its value."""
    block = at.parent_block()
    assert block is not None

    def put(o: Operation) -> SSAValue:
        block.insert_op_before(o, at)
        return o.results[0]

    def const(k: Dim) -> SSAValue:
        if isinstance(k, Sym):
            v = index_of(Builder(InsertPoint.before(at)), k, args)
            return v if isinstance(v, SSAValue) else const(v)
        return put(arith.ConstantOp(IntegerAttr(k, IndexType())))

    acc: SSAValue | None = None
    for atom, k in a.terms.items():
        neg = not isinstance(k, Sym) and k < 0
        term = atom if not isinstance(k, Sym) and abs(k) == 1 else put(arith.MuliOp(atom, const(-k if neg else k)))
        if acc is None:
            acc = put(arith.SubiOp(const(0), term)) if neg else term
        else:
            acc = put(arith.SubiOp(acc, term) if neg else arith.AddiOp(acc, term))
    if acc is None:
        return const(a.const)
    if isinstance(a.const, Sym):
        acc = put(arith.AddiOp(acc, const(a.const)))
    elif a.const:
        acc = put(arith.AddiOp(acc, const(a.const)) if a.const > 0 else arith.SubiOp(acc, const(-a.const)))
    return acc


def _erase_dead(block: Block) -> None:
    changed = True
    while changed:
        changed = False
        for op in reversed(list(block.ops)):
            if isinstance(op, _PURE) and all(not r.uses for r in op.results):
                op.detach()
                op.erase()
                changed = True

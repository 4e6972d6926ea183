"""A small builder for tensor-expression bodies.

The compute definitions in `lowering/topi.py` describe each output element as
a formula; this module gives them a compact vocabulary (`e.read(x, idx)`,
`e.mul(a, b)`, `e.idx(3)`) that appends `te`, `arith` and `math` ops to the
body block of a `te.compute` or `te.reduce`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from xdsl.builder import Builder
from xdsl.dialects import arith, math
from xdsl.dialects.builtin import FloatAttr, IndexType, IntegerAttr, TensorType, f32, i64
from xdsl.ir import Attribute, Block, Operation, SSAValue
from xdsl.rewriter import InsertPoint

from ziggurat.dialects import te



class Expr:
    """Appends scalar and index ops to one block."""

    def __init__(self, block: Block, elt: Attribute = f32):
        self.builder = Builder(InsertPoint.at_end(block))
        self.elt = elt

    def _add(self, op: Operation) -> SSAValue:
        self.builder.insert(op)
        return op.results[0]

    # index arithmetic -------------------------------------------------------
    def idx(self, value: int) -> SSAValue:
        return self._add(arith.ConstantOp(IntegerAttr(value, IndexType())))

    def iadd(self, a: SSAValue, b: SSAValue | int) -> SSAValue:
        if isinstance(b, int):
            if b == 0:
                return a
            b = self.idx(b)
        return self._add(arith.AddiOp(a, b))

    def imul(self, a: SSAValue, b: int) -> SSAValue:
        if b == 1:
            return a
        return self._add(arith.MuliOp(a, self.idx(b)))

    def idiv(self, a: SSAValue, b: int) -> SSAValue:
        if b == 1:
            return a
        return self._add(arith.DivUIOp(a, self.idx(b)))

    def irem(self, a: SSAValue, b: int) -> SSAValue:
        return self._add(arith.RemUIOp(a, self.idx(b)))

    def affine(self, terms: Sequence[tuple[SSAValue, int]], offset: int = 0) -> SSAValue:
        """sum(var * coeff) + offset, skipping zero terms."""
        acc: SSAValue | None = None
        for var, coeff in terms:
            if coeff == 0:
                continue
            term = self.imul(var, coeff)
            acc = term if acc is None else self._add(arith.AddiOp(acc, term))
        if acc is None:
            return self.idx(offset)
        return self.iadd(acc, offset)

    def in_range(self, value: SSAValue, lo: int, hi: int) -> SSAValue:
        """lo <= value < hi, as i1 (signed compare)."""
        a = self._add(arith.CmpiOp(value, self.idx(lo), "sge"))
        b = self._add(arith.CmpiOp(value, self.idx(hi), "slt"))
        return self.and_(a, b)

    def and_(self, a: SSAValue, b: SSAValue) -> SSAValue:
        return self._add(arith.AndIOp(a, b))

    # reads -------------------------------------------------------------------
    def read(self, tensor: SSAValue, indices: Sequence[SSAValue], pad: float | None = None) -> SSAValue:
        return self._add(te.ReadOp(tensor, indices, pad))

    # scalar float arithmetic -------------------------------------------------
    def const(self, value: float) -> SSAValue:
        return self._add(arith.ConstantOp(FloatAttr(value, self.elt)))  # type: ignore[arg-type]

    def add(self, a: SSAValue, b: SSAValue) -> SSAValue:
        return self._add(arith.AddfOp(a, b))

    def sub(self, a: SSAValue, b: SSAValue) -> SSAValue:
        return self._add(arith.SubfOp(a, b))

    def mul(self, a: SSAValue, b: SSAValue) -> SSAValue:
        return self._add(arith.MulfOp(a, b))

    def div(self, a: SSAValue, b: SSAValue) -> SSAValue:
        return self._add(arith.DivfOp(a, b))

    def max(self, a: SSAValue, b: SSAValue) -> SSAValue:
        return self._add(arith.MaximumfOp(a, b))

    def min(self, a: SSAValue, b: SSAValue) -> SSAValue:
        return self._add(arith.MinimumfOp(a, b))

    def neg(self, a: SSAValue) -> SSAValue:
        return self._add(arith.NegfOp(a))

    def select(self, cond: SSAValue, a: SSAValue, b: SSAValue) -> SSAValue:
        return self._add(arith.SelectOp(cond, a, b))

    def exp(self, a: SSAValue) -> SSAValue:
        return self._add(math.ExpOp(a))

    def tanh(self, a: SSAValue) -> SSAValue:
        return self._add(math.TanhOp(a))

    def sqrt(self, a: SSAValue) -> SSAValue:
        return self._add(math.SqrtOp(a))

    def erf(self, a: SSAValue) -> SSAValue:
        return self._add(math.ErfOp(a))

    def abs(self, a: SSAValue) -> SSAValue:
        return self._add(math.AbsFOp(a))

    def log(self, a: SSAValue) -> SSAValue:
        return self._add(math.LogOp(a))

    def floor(self, a: SSAValue) -> SSAValue:
        return self._add(math.FloorOp(a))

    def ceil(self, a: SSAValue) -> SSAValue:
        return self._add(math.CeilOp(a))

    def to_index(self, a: SSAValue) -> SSAValue:
        """A float holding an exact integer, as an index."""
        as_int = self._add(arith.FPToSIOp(a, i64))
        return self._add(arith.IndexCastOp(as_int, IndexType()))

    def cmpf(self, a: SSAValue, b: SSAValue, predicate: str) -> SSAValue:
        """a `predicate` b (an arith.cmpf predicate such as "olt" or "une"), as i1."""
        return self._add(arith.CmpfOp(a, b, predicate))

    def sin(self, a: SSAValue) -> SSAValue:
        return self._add(math.SinOp(a))

    def cos(self, a: SSAValue) -> SSAValue:
        return self._add(math.CosOp(a))

    def atan(self, a: SSAValue) -> SSAValue:
        return self._add(math.AtanOp(a))

    def roundeven(self, a: SSAValue) -> SSAValue:
        return self._add(math.RoundEvenOp(a))

    def pow(self, a: SSAValue, b: SSAValue) -> SSAValue:
        return self._add(math.PowFOp(a, b))

    def ilt(self, a: SSAValue, bound: int) -> SSAValue:
        """a < bound, as i1 (signed compare)."""
        return self._add(arith.CmpiOp(a, self.idx(bound), "slt"))

    def yield_(self, value: SSAValue) -> None:
        self.builder.insert(te.YieldOp(value))


BodyFn = Callable[[Expr, Sequence[SSAValue]], SSAValue]


def compute(builder: Builder, tag: str, out_type: TensorType, body: BodyFn) -> SSAValue:
    """Inserts `te.compute` whose element at `idx` is `body(expr, idx)`."""
    region, block = te.ComputeOp.make_body(len(out_type.get_shape()))
    e = Expr(block, out_type.element_type)
    e.yield_(body(e, block.args))
    op = builder.insert(te.ComputeOp(tag, out_type, region))
    return op.result


def reduce(
    builder: Builder,
    tag: str,
    combiner: str,
    init: float,
    out_type: TensorType,
    extents: Sequence[int],
    body: Callable[[Expr, Sequence[SSAValue], Sequence[SSAValue]], SSAValue],
) -> SSAValue:
    """Inserts `te.reduce`; `body(expr, out_idx, red_idx)` gives the value to combine."""
    from xdsl.ir import Region

    rank = len(out_type.get_shape())
    block = Block(arg_types=[IndexType()] * (rank + len(extents)))
    e = Expr(block, out_type.element_type)
    e.yield_(body(e, block.args[:rank], block.args[rank:]))
    op = builder.insert(te.ReduceOp(tag, combiner, init, extents, out_type, Region(block)))
    return op.result

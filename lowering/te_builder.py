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
import numpy as np
from xdsl.dialects.builtin import (
    Float16Type,
    Float32Type,
    Float64Type,
    FloatAttr,
    IndexType,
    IntegerAttr,
    IntegerType,
    TensorType,
    f32,
    f64,
    i1,
    i32,
    i64,
)
from xdsl.ir import Attribute, Block, Operation, SSAValue
from xdsl.rewriter import InsertPoint

from ziggurat.dialects import te
from ziggurat.dtypes import int_range, signless_tensor
from ziggurat.symbolic import Sym

FLOAT_PREDICATES = {"lt": "olt", "le": "ole", "gt": "ogt", "ge": "oge", "eq": "oeq", "ne": "une"}


def _is_int(v: SSAValue) -> bool:
    return isinstance(v.type, IntegerType)



class Expr:
    """Appends scalar and index ops to one block."""

    def __init__(self, block: Block, elt: Attribute = f32):
        self.builder = Builder(InsertPoint.at_end(block))
        self.elt = elt

    def _add(self, op: Operation) -> SSAValue:
        self.builder.insert(op)
        return op.results[0]

    # index arithmetic -------------------------------------------------------
    def idx(self, value: int | Sym) -> SSAValue:
        """An index constant; a symbolic extent's value (`te.sym`) for a `Sym`."""
        if isinstance(value, Sym):
            return self._add(te.SymOp(value))
        return self._add(arith.ConstantOp(IntegerAttr(value, IndexType())))

    def extent(self, value: int | Sym) -> SSAValue:
        """An extent as a value of the expression's element type (a float count for a mean): a
        constant, or a symbolic extent's run-time value converted."""
        if not isinstance(value, Sym):
            return self.const(float(value))
        wide = self._add(arith.IndexCastOp(self.idx(value), IntegerType(64)))
        return self.cast(wide, self.elt)

    def iadd(self, a: SSAValue, b: SSAValue | int | Sym) -> SSAValue:
        if isinstance(b, (int, Sym)):
            if b == 0:
                return a
            b = self.idx(b)
        return self._add(arith.AddiOp(a, b))

    def imul(self, a: SSAValue, b: int | Sym) -> SSAValue:
        if b == 1:
            return a
        return self._add(arith.MuliOp(a, self.idx(b)))

    def idiv(self, a: SSAValue, b: int | Sym) -> SSAValue:
        if b == 1:
            return a
        return self._add(arith.DivUIOp(a, self.idx(b)))

    def irem(self, a: SSAValue, b: int | Sym) -> SSAValue:
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

    def in_range(self, value: SSAValue, lo: int | Sym, hi: int | Sym) -> SSAValue:
        """lo <= value < hi, as i1 (signed compare)."""
        a = self._add(arith.CmpiOp(value, self.idx(lo), "sge"))
        b = self._add(arith.CmpiOp(value, self.idx(hi), "slt"))
        return self.and_(a, b)

    def and_(self, a: SSAValue, b: SSAValue) -> SSAValue:
        return self._add(arith.AndIOp(a, b))

    # reads -------------------------------------------------------------------
    def read(self, tensor: SSAValue, indices: Sequence[SSAValue], pad: float | None = None) -> SSAValue:
        return self._add(te.ReadOp(tensor, indices, pad))

    # scalar arithmetic (float or integer, by the operands' type) ------------
    def const(self, value: float, elt: Attribute | None = None) -> SSAValue:
        """A constant of `elt` (default: the body's element type)."""
        elt = elt or self.elt
        if isinstance(elt, IntegerType):
            lo, hi = int_range(elt)
            v = int(value) if abs(value) != float("inf") else (hi if value > 0 else lo)
            return self._add(arith.ConstantOp(IntegerAttr(v, elt)))
        return self._add(arith.ConstantOp(FloatAttr(value, elt)))  # type: ignore[arg-type]

    def add(self, a: SSAValue, b: SSAValue) -> SSAValue:
        return self._add(arith.AddiOp(a, b) if _is_int(a) else arith.AddfOp(a, b))

    def sub(self, a: SSAValue, b: SSAValue) -> SSAValue:
        return self._add(arith.SubiOp(a, b) if _is_int(a) else arith.SubfOp(a, b))

    def mul(self, a: SSAValue, b: SSAValue) -> SSAValue:
        return self._add(arith.MuliOp(a, b) if _is_int(a) else arith.MulfOp(a, b))

    def div(self, a: SSAValue, b: SSAValue, unsigned: bool = False) -> SSAValue:
        """a / b; integers truncate toward zero (ONNX Div). A zero divisor gives
        0 and INT_MIN / -1 wraps, instead of the trap of the bare instruction."""
        if not _is_int(a):
            return self._add(arith.DivfOp(a, b))
        zero, one = self.const(0, a.type), self.const(1, a.type)
        b_zero = self._add(arith.CmpiOp(b, zero, "eq"))
        if unsigned:
            q = self._add(arith.DivUIOp(a, self.select(b_zero, one, b)))
            return self.select(b_zero, zero, q)
        minus_one = self.const(-1, a.type)
        b_m1 = self._add(arith.CmpiOp(b, minus_one, "eq"))
        safe = self.select(self._add(arith.OrIOp(b_zero, b_m1)), one, b)
        q = self._add(arith.DivSIOp(a, safe))
        q = self.select(b_m1, self._add(arith.SubiOp(zero, a)), q)
        return self.select(b_zero, zero, q)

    def rem(self, a: SSAValue, b: SSAValue, unsigned: bool = False, floor: bool = False) -> SSAValue:
        """a mod b. `floor` (ONNX Mod fmod=0 on integers): the result takes the
        divisor's sign, as numpy's `%`; else (fmod=1, C fmod) the dividend's.
        An integer zero divisor gives 0."""
        if not _is_int(a):
            # C fmod: a - b * trunc(a / b), and a itself for an infinite b and finite a
            r = self.sub(a, self.mul(b, self._add(math.TruncOp(self.div(a, b)))))
            inf = self.const(float("inf"), a.type)
            b_inf = self.cmpf(self._add(math.AbsFOp(b)), inf, "oeq")
            a_fin = self.cmpf(self._add(math.AbsFOp(a)), inf, "olt")
            r = self.select(self._add(arith.AndIOp(b_inf, a_fin)), a, r)
            zero = self.const(0.0, a.type)
            if not floor:
                return self.select(self.cmpf(r, zero, "oeq"), self._add(math.CopySignOp(zero, a)), r)
            # numpy mod: a nonzero remainder takes the divisor's sign, a zero one its signed zero
            fix = self._add(arith.AndIOp(self.cmpf(r, zero, "une"),
                                         self._add(arith.XOrIOp(self.cmpf(r, zero, "olt"), self.cmpf(b, zero, "olt")))))
            r = self.select(fix, self.add(r, b), r)
            return self.select(self.cmpf(r, zero, "oeq"), self._add(math.CopySignOp(zero, b)), r)
        zero, one = self.const(0, a.type), self.const(1, a.type)
        b_zero = self._add(arith.CmpiOp(b, zero, "eq"))
        if unsigned:
            r = self._add(arith.RemUIOp(a, self.select(b_zero, one, b)))
            return self.select(b_zero, zero, r)
        b_m1 = self._add(arith.CmpiOp(b, self.const(-1, a.type), "eq"))
        safe = self.select(self._add(arith.OrIOp(b_zero, b_m1)), one, b)
        r = self._add(arith.RemSIOp(a, safe))  # x % 1 == x % -1 == 0
        if floor:
            neg_r = self._add(arith.CmpiOp(r, zero, "slt"))
            neg_b = self._add(arith.CmpiOp(b, zero, "slt"))
            fix = self._add(arith.AndIOp(self._add(arith.CmpiOp(r, zero, "ne")), self._add(arith.XOrIOp(neg_r, neg_b))))
            r = self.select(fix, self._add(arith.AddiOp(r, b)), r)
        return self.select(b_zero, zero, r)

    def max(self, a: SSAValue, b: SSAValue, unsigned: bool = False) -> SSAValue:
        if _is_int(a):
            return self._add(arith.MaxUIOp(a, b) if unsigned else arith.MaxSIOp(a, b))
        return self._add(arith.MaximumfOp(a, b))

    def min(self, a: SSAValue, b: SSAValue, unsigned: bool = False) -> SSAValue:
        if _is_int(a):
            return self._add(arith.MinUIOp(a, b) if unsigned else arith.MinSIOp(a, b))
        return self._add(arith.MinimumfOp(a, b))

    def neg(self, a: SSAValue) -> SSAValue:
        if _is_int(a):
            return self._add(arith.SubiOp(self.const(0, a.type), a))
        return self._add(arith.NegfOp(a))

    def select(self, cond: SSAValue, a: SSAValue, b: SSAValue) -> SSAValue:
        return self._add(arith.SelectOp(cond, a, b))

    def compare(self, a: SSAValue, b: SSAValue, kind: str, unsigned: bool = False) -> SSAValue:
        """a `kind` b (lt, le, gt, ge, eq, ne) as i1: ordered float compares
        (`ne` holds for NaN), signed or unsigned integer compares."""
        if isinstance(a.type, IntegerType):
            pred = kind if kind in ("eq", "ne") else ("u" if unsigned or a.type.width.data == 1 else "s") + kind
            return self._add(arith.CmpiOp(a, b, pred))
        return self.cmpf(a, b, FLOAT_PREDICATES[kind])

    def bitand(self, a: SSAValue, b: SSAValue) -> SSAValue:
        return self._add(arith.AndIOp(a, b))

    def bitor(self, a: SSAValue, b: SSAValue) -> SSAValue:
        return self._add(arith.OrIOp(a, b))

    def bitxor(self, a: SSAValue, b: SSAValue) -> SSAValue:
        return self._add(arith.XOrIOp(a, b))

    def bitnot(self, a: SSAValue) -> SSAValue:
        return self._add(arith.XOrIOp(a, self.const(-1 if a.type.width.data > 1 else 1, a.type)))  # type: ignore[attr-defined]

    def shift(self, a: SSAValue, b: SSAValue, left: bool, signed: bool = False) -> SSAValue:
        """a << b or a >> b (ONNX BitShift): a signed right shift is arithmetic.
        A shift by the bit width or more (or a negative one) leaves only the
        sign fill: -1 for a signed right shift of a negative a, else 0."""
        width = a.type.width.data  # type: ignore[attr-defined]
        zero = self.const(0, a.type)
        too_far = self._add(arith.CmpiOp(b, self.const(width, a.type), "uge"))  # negative b too, as unsigned
        safe = self.select(too_far, zero, b)
        if left:
            shifted = self._add(arith.ShLIOp(a, safe))
        else:
            shifted = self._add(arith.ShRSIOp(a, safe) if signed else arith.ShRUIOp(a, safe))
        fill = zero
        if signed and not left:
            fill = self.select(self._add(arith.CmpiOp(a, zero, "slt")), self.const(-1, a.type), zero)
        return self.select(too_far, fill, shifted)

    def cast(self, a: SSAValue, to: Attribute, src_unsigned: bool = False, dst_unsigned: bool = False) -> SSAValue:
        """`a` converted to the scalar type `to` with ONNX Cast semantics:
        float -> int truncates toward zero (saturating at the type's range; NaN
        gives 0), int -> int wraps (sign- or zero-extends), anything -> bool
        is `!= 0`, bool -> number is 0 or 1."""
        src = a.type
        if src == to:
            return a
        if to == i1:
            if isinstance(src, IntegerType):
                return self._add(arith.CmpiOp(a, self.const(0, src), "ne"))
            return self.cmpf(a, self.const(0.0, src), "une")
        if isinstance(src, IntegerType):
            unsigned = src_unsigned or src.width.data == 1
            if isinstance(to, IntegerType):
                if to.width.data < src.width.data:
                    return self._add(arith.TruncIOp(a, to))
                return self._add(arith.ExtUIOp(a, to) if unsigned else arith.ExtSIOp(a, to))
            return self._add(arith.UIToFPOp(a, to) if unsigned else arith.SIToFPOp(a, to))
        if isinstance(to, IntegerType):
            return self._float_to_int(a, to, dst_unsigned)
        bits = {Float16Type: 16, Float32Type: 32, Float64Type: 64}
        if bits[type(to)] > bits[type(src)]:
            return self._add(arith.ExtFOp(a, to))
        if isinstance(src, Float64Type) and isinstance(to, Float16Type):
            # through f32: the direct f64 -> f16 truncation is a compiler-rt call
            # the JIT cannot resolve (rounding twice can differ in the last f16 bit)
            a = self._add(arith.TruncFOp(a, f32))
        return self._add(arith.TruncFOp(a, to))

    def unpack_bits(self, byte: SSAValue, width: int, unsigned: bool) -> SSAValue:
        """The value of a `width`-bit integer held in the low bits of an i8:
        masked (unsigned) or sign-extended (signed), as an i8."""
        if unsigned:
            return self._add(arith.AndIOp(byte, self.const((1 << width) - 1, byte.type)))
        shift = self.const(8 - width, byte.type)
        return self._add(arith.ShRSIOp(self._add(arith.ShLIOp(byte, shift)), shift))

    def pack_bits(self, byte: SSAValue, width: int) -> SSAValue:
        """An i8 wrapped into `width` bits, stored in the low bits (ml_dtypes' layout)."""
        return self._add(arith.AndIOp(byte, self.const((1 << width) - 1, byte.type)))

    def bf16_to_f32(self, bits: SSAValue) -> SSAValue:
        """The float32 value of bfloat16 bits (an i16): the high half of the f32."""
        wide = self._add(arith.ExtUIOp(bits, i32))
        return self._add(arith.BitcastOp(self._add(arith.ShLIOp(wide, self.const(16, i32))), f32))

    def f32_to_bf16(self, a: SSAValue) -> SSAValue:
        """float32 -> bfloat16 bits (an i16), rounding to nearest even; NaN -> 0x7FC0."""
        bits = self._add(arith.BitcastOp(a, i32))
        sixteen = self.const(16, i32)
        lsb = self._add(arith.AndIOp(self._add(arith.ShRUIOp(bits, sixteen)), self.const(1, i32)))
        rounded = self._add(arith.AddiOp(bits, self._add(arith.AddiOp(lsb, self.const(0x7FFF, i32)))))
        high = self._add(arith.TruncIOp(self._add(arith.ShRUIOp(rounded, sixteen)), IntegerType(16)))
        nan = self.cmpf(a, a, "uno")
        return self.select(nan, self.const(0x7FC0, IntegerType(16)), high)

    def _float_to_int(self, a: SSAValue, to: IntegerType, unsigned: bool) -> SSAValue:
        """Truncation toward zero, clamped into the target range first (the
        bare fptosi/fptoui is poison out of range); NaN becomes 0."""
        src = a.type
        width = to.width.data
        lo, hi = (0, (1 << width) - 1) if unsigned else (-(1 << (width - 1)), (1 << (width - 1)) - 1)
        # Clamped in f32 where its bounds are exact there (<= 16-bit targets: vector lanes stay 32-bit),
        # else in f64.
        ft = f32 if width <= 16 and isinstance(src, Float32Type) else f64
        wide = a if a.type == ft else self._add(arith.ExtFOp(a, ft))
        t = self._add(math.TruncOp(wide))
        t = self._add(arith.MaximumfOp(t, self.const(float(lo), ft)))
        # the largest double not above hi (2^63 - 1 and 2^64 - 1 round up in f64)
        top = float(hi) if float(hi) <= hi else float(np.nextafter(float(hi), 0.0))
        t = self._add(arith.MinimumfOp(t, self.const(top, ft)))
        nan = self.cmpf(wide, wide, "uno")
        t = self.select(nan, self.const(0.0, ft), t)
        return self._add(arith.FPToUIOp(t, to) if unsigned else arith.FPToSIOp(t, to))

    def exp(self, a: SSAValue) -> SSAValue:
        return self._add(math.ExpOp(a))

    def tanh(self, a: SSAValue) -> SSAValue:
        return self._add(math.TanhOp(a))

    def sqrt(self, a: SSAValue) -> SSAValue:
        return self._add(math.SqrtOp(a))

    def erf(self, a: SSAValue) -> SSAValue:
        return self._add(math.ErfOp(a))

    def abs(self, a: SSAValue) -> SSAValue:
        if _is_int(a):
            neg = self._add(arith.CmpiOp(a, self.const(0, a.type), "slt"))
            return self.select(neg, self.neg(a), a)
        return self._add(math.AbsFOp(a))

    def log(self, a: SSAValue) -> SSAValue:
        return self._add(math.LogOp(a))

    def floor(self, a: SSAValue) -> SSAValue:
        return self._add(math.FloorOp(a))

    def ceil(self, a: SSAValue) -> SSAValue:
        return self._add(math.CeilOp(a))

    def to_index(self, a: SSAValue) -> SSAValue:
        """An integer, or a float holding an exact integer, as an index."""
        as_int = a if isinstance(a.type, IntegerType) else self._add(arith.FPToSIOp(a, i64))
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

    def ilt(self, a: SSAValue, bound: int | Sym) -> SSAValue:
        """a < bound, as i1 (signed compare)."""
        return self._add(arith.CmpiOp(a, self.idx(bound), "slt"))

    def yield_(self, value: SSAValue) -> None:
        self.builder.insert(te.YieldOp(value))


BodyFn = Callable[[Expr, Sequence[SSAValue]], SSAValue]


def compute(builder: Builder, tag: str, out_type: TensorType, body: BodyFn) -> SSAValue:
    """Inserts `te.compute` whose element at `idx` is `body(expr, idx)`."""
    out_type = signless_tensor(out_type)  # type: ignore[assignment]
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

    out_type = signless_tensor(out_type)  # type: ignore[assignment]
    rank = len(out_type.get_shape())
    block = Block(arg_types=[IndexType()] * (rank + len(extents)))
    e = Expr(block, out_type.element_type)
    e.yield_(body(e, block.args[:rank], block.args[rank:]))
    op = builder.insert(te.ReduceOp(tag, combiner, init, extents, out_type, Region(block)))
    return op.result

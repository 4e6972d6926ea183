"""`arith` ops on scalars (index, iN, f16/f32/f64) and 1-D vectors.

Every float instruction gets the options' fast-math flags plus the op's own
`fastmath` flags. `maximumf`/`minimumf` keep MLIR's NaN-propagating meaning
(`llvm.maximum`/`llvm.minimum`, with `nsz`: which of two equal zeros wins is
left open, so x86 needs `vmaxps` and a NaN blend, 3 instructions, not 6; the
int8 models' clamps made that 15-20% of their time), `maxnumf`/`minnumf` map to
`llvm.maxnum`/`llvm.minnum`. `index` is i64, so `index_cast` is a sign
extension or truncation.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from llvmlite import ir
from xdsl.dialects.builtin import DenseIntOrFPElementsAttr, FloatAttr, IntegerAttr
from xdsl.ir import Operation

from ziggurat.errors import CompileError

if TYPE_CHECKING:
    from ziggurat.backends.llvm.translate import FuncState, Translator

B = ir.IRBuilder
CMPI = (("s", "=="), ("s", "!="), ("s", "<"), ("s", "<="), ("s", ">"), ("s", ">="),
        ("u", "<"), ("u", "<="), ("u", ">"), ("u", ">="))
CMPF = ("false", "oeq", "ogt", "oge", "olt", "ole", "one", "ord",
        "ueq", "ugt", "uge", "ult", "ule", "une", "uno", "true")


def _int_constant(ty: ir.Type, value: int) -> ir.Constant:
    w = ty.width
    v = value & ((1 << w) - 1)
    if w > 1 and v >= 1 << (w - 1):
        v -= 1 << w
    return ir.Constant(ty, v)


def _scalar_constant(ty: ir.Type, value) -> ir.Constant:
    if isinstance(ty, ir.IntType):
        return _int_constant(ty, int(value))
    return ir.Constant(ty, float(value))


def _constant(t: Translator, f: FuncState, op: Operation) -> None:
    res = op.results[0]
    ty = t.ty(res.type)
    attr = op.properties["value"]
    if isinstance(attr, IntegerAttr):
        c = _int_constant(ty, attr.value.data)
    elif isinstance(attr, FloatAttr):
        c = ir.Constant(ty, attr.value.data)
    elif isinstance(attr, DenseIntOrFPElementsAttr) and isinstance(ty, ir.VectorType):
        vals = attr.get_values()
        lanes = [_scalar_constant(ty.element, v) for v in vals]
        if len(lanes) == 1:
            lanes = lanes * ty.count
        c = ir.Constant(ty, lanes)
    else:
        raise CompileError(f"llvm backend: unsupported arith.constant value {attr} : {res.type}")
    f.vals[res] = c


def _fbinary(method):
    def h(t: Translator, f: FuncState, op: Operation) -> None:
        a, b = op.operands
        f.vals[op.results[0]] = method(f.b, f.get(a), f.get(b), "", t.flags(op))
    return h


def _ibinary(method):
    def h(t: Translator, f: FuncState, op: Operation) -> None:
        a, b = op.operands
        f.vals[op.results[0]] = method(f.b, f.get(a), f.get(b))
    return h


def _binary_intrinsic(base: str, fast: bool, extra: tuple[str, ...] = ()):
    def h(t: Translator, f: FuncState, op: Operation) -> None:
        a, b = op.operands
        x, y = f.get(a), f.get(b)
        fn = t.decl.intrinsic(base, x.type, [x.type, x.type])
        flags = tuple(sorted(set(t.flags(op)) | set(extra))) if fast else ()
        f.vals[op.results[0]] = f.b.call(fn, [x, y], fastmath=flags)
    return h


MAXMIN_FLAGS = ("nsz",)
"""`maximumf`/`minimumf` propagate NaN but need not order -0 below +0 (`nsz`): x86 then needs a
`vmaxps` and a NaN blend instead of six instructions that also sort the signs of zeros."""


def _negf(t: Translator, f: FuncState, op: Operation) -> None:
    f.vals[op.results[0]] = f.b.fneg(f.get(op.operands[0]), "", t.flags(op))


def _splat(ty: ir.Type, v: int) -> ir.Constant:
    if isinstance(ty, ir.VectorType):
        return ir.Constant(ty, [ir.Constant(ty.element, v)] * ty.count)
    return ir.Constant(ty, v)


def _floordivsi(t: Translator, f: FuncState, op: Operation) -> None:
    # q = a / b rounded toward zero; step down when the remainder's sign differs from b's.
    b = f.b
    x, y = f.get(op.operands[0]), f.get(op.operands[1])
    zero, one = _splat(x.type, 0), _splat(x.type, 1)
    q, r = b.sdiv(x, y), b.srem(x, y)
    signs_differ = b.icmp_signed("!=", b.icmp_signed("<", r, zero), b.icmp_signed("<", y, zero))
    adjust = b.and_(b.icmp_signed("!=", r, zero), signs_differ)
    f.vals[op.results[0]] = b.select(adjust, b.sub(q, one), q)


def _ceildivsi(t: Translator, f: FuncState, op: Operation) -> None:
    # q = a / b rounded toward zero; step up when the remainder has b's sign.
    b = f.b
    x, y = f.get(op.operands[0]), f.get(op.operands[1])
    zero, one = _splat(x.type, 0), _splat(x.type, 1)
    q, r = b.sdiv(x, y), b.srem(x, y)
    signs_agree = b.icmp_signed("==", b.icmp_signed("<", r, zero), b.icmp_signed("<", y, zero))
    adjust = b.and_(b.icmp_signed("!=", r, zero), signs_agree)
    f.vals[op.results[0]] = b.select(adjust, b.add(q, one), q)


def _ceildivui(t: Translator, f: FuncState, op: Operation) -> None:
    b = f.b
    x, y = f.get(op.operands[0]), f.get(op.operands[1])
    zero, one = _splat(x.type, 0), _splat(x.type, 1)
    q, r = b.udiv(x, y), b.urem(x, y)
    f.vals[op.results[0]] = b.select(b.icmp_unsigned("!=", r, zero), b.add(q, one), q)


def _cmpi(t: Translator, f: FuncState, op: Operation) -> None:
    sign, cmp = CMPI[op.properties["predicate"].value.data]  # type: ignore[attr-defined]
    a, c = op.operands
    meth = f.b.icmp_signed if sign == "s" else f.b.icmp_unsigned
    f.vals[op.results[0]] = meth(cmp, f.get(a), f.get(c))


def _cmpf(t: Translator, f: FuncState, op: Operation) -> None:
    pred = CMPF[op.properties["predicate"].value.data]  # type: ignore[attr-defined]
    a, c = op.operands
    f.vals[op.results[0]] = f.b.fcmp_ordered(pred, f.get(a), f.get(c), "", t.flags(op))


def _select(t: Translator, f: FuncState, op: Operation) -> None:
    c, x, y = op.operands
    f.vals[op.results[0]] = f.b.select(f.get(c), f.get(x), f.get(y))


def _width(ty: ir.Type) -> int:
    return (ty.element if isinstance(ty, ir.VectorType) else ty).width


def _int_resize(signed: bool):
    """index_cast / extsi / extui / trunci: extend or truncate to the result width."""
    def h(t: Translator, f: FuncState, op: Operation) -> None:
        x = f.get(op.operands[0])
        res = op.results[0]
        to = t.ty(res.type)
        src, dst = _width(x.type), _width(to)
        if src == dst:
            f.vals[res] = x
        elif src > dst:
            f.vals[res] = f.b.trunc(x, to)
        else:
            f.vals[res] = f.b.sext(x, to) if signed else f.b.zext(x, to)
    return h


def _cast(method):
    def h(t: Translator, f: FuncState, op: Operation) -> None:
        res = op.results[0]
        f.vals[res] = method(f.b, f.get(op.operands[0]), t.ty(res.type))
    return h


ARITH_HANDLERS = {
    "arith.constant": _constant,
    "arith.addf": _fbinary(B.fadd),
    "arith.subf": _fbinary(B.fsub),
    "arith.mulf": _fbinary(B.fmul),
    "arith.divf": _fbinary(B.fdiv),
    "arith.remf": _fbinary(B.frem),
    "arith.negf": _negf,
    "arith.maximumf": _binary_intrinsic("maximum", True, MAXMIN_FLAGS),
    "arith.minimumf": _binary_intrinsic("minimum", True, MAXMIN_FLAGS),
    "arith.maxnumf": _binary_intrinsic("maxnum", True),
    "arith.minnumf": _binary_intrinsic("minnum", True),
    "arith.addi": _ibinary(B.add),
    "arith.subi": _ibinary(B.sub),
    "arith.muli": _ibinary(B.mul),
    "arith.divsi": _ibinary(B.sdiv),
    "arith.divui": _ibinary(B.udiv),
    "arith.remsi": _ibinary(B.srem),
    "arith.remui": _ibinary(B.urem),
    "arith.andi": _ibinary(B.and_),
    "arith.ori": _ibinary(B.or_),
    "arith.xori": _ibinary(B.xor),
    "arith.shli": _ibinary(B.shl),
    "arith.shrsi": _ibinary(B.ashr),
    "arith.shrui": _ibinary(B.lshr),
    "arith.minsi": _binary_intrinsic("smin", False),
    "arith.maxsi": _binary_intrinsic("smax", False),
    "arith.minui": _binary_intrinsic("umin", False),
    "arith.maxui": _binary_intrinsic("umax", False),
    "arith.floordivsi": _floordivsi,
    "arith.ceildivsi": _ceildivsi,
    "arith.ceildivui": _ceildivui,
    "arith.cmpi": _cmpi,
    "arith.cmpf": _cmpf,
    "arith.select": _select,
    "arith.index_cast": _int_resize(True),
    "arith.index_castui": _int_resize(False),
    "arith.extsi": _int_resize(True),
    "arith.extui": _int_resize(False),
    "arith.trunci": _int_resize(True),
    "arith.sitofp": _cast(B.sitofp),
    "arith.uitofp": _cast(B.uitofp),
    "arith.fptosi": _cast(B.fptosi),
    "arith.fptoui": _cast(B.fptoui),
    "arith.extf": _cast(B.fpext),
    "arith.truncf": _cast(B.fptrunc),
    "arith.bitcast": _cast(B.bitcast),
}

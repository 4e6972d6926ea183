"""`math` ops and the `hw` register ops (vbroadcast, vfma, vreduce).

A math op maps to an LLVM intrinsic where one exists (`llvm.exp`,
`llvm.tanh`, `llvm.pow`, ...; LLVM scalarizes vector forms into libm calls
when the target has no instruction). Ops without an intrinsic call libm
(`erff`, `log1pf`, ...); on vectors, lane by lane. f16 operands of libm
functions are computed in f32.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from llvmlite import ir
from xdsl.ir import Operation

from ziggurat.backends.llvm.lltypes import F16, F32, F64, I1, I32, is_float
from ziggurat.errors import CompileError

if TYPE_CHECKING:
    from ziggurat.backends.llvm.translate import FuncState, Translator

UNARY_INTRINSICS = {
    "math.exp": "exp", "math.exp2": "exp2", "math.log": "log", "math.log2": "log2",
    "math.log10": "log10", "math.sqrt": "sqrt", "math.absf": "fabs", "math.floor": "floor",
    "math.ceil": "ceil", "math.round": "round", "math.roundeven": "roundeven", "math.trunc": "trunc",
    "math.sin": "sin", "math.cos": "cos", "math.tan": "tan", "math.tanh": "tanh",
    "math.asin": "asin", "math.acos": "acos", "math.atan": "atan", "math.sinh": "sinh",
    "math.cosh": "cosh",
}
BINARY_INTRINSICS = {"math.powf": "pow", "math.copysign": "copysign", "math.atan2": "atan2"}
UNARY_LIBM = {
    "math.erf": "erf", "math.log1p": "log1p", "math.expm1": "expm1", "math.cbrt": "cbrt",
    "math.asinh": "asinh", "math.acosh": "acosh", "math.atanh": "atanh",
}
INT_UNARY_INTRINSICS = {"math.ctlz": "ctlz", "math.cttz": "cttz", "math.ctpop": "ctpop", "math.absi": "abs"}


def _unary_intrinsic(base: str):
    def h(t: Translator, f: FuncState, op: Operation) -> None:
        x = f.get(op.operands[0])
        fn = t.decl.intrinsic(base, x.type, [x.type])
        f.vals[op.results[0]] = f.b.call(fn, [x], fastmath=t.flags(op))
    return h


def _binary_intrinsic(base: str):
    def h(t: Translator, f: FuncState, op: Operation) -> None:
        a, b = op.operands
        x, y = f.get(a), f.get(b)
        fn = t.decl.intrinsic(base, x.type, [x.type, x.type])
        f.vals[op.results[0]] = f.b.call(fn, [x, y], fastmath=t.flags(op))
    return h


def _int_unary_intrinsic(base: str):
    # ctlz/cttz/abs take an i1 "is poison" flag: false keeps them defined on 0 / INT_MIN.
    def h(t: Translator, f: FuncState, op: Operation) -> None:
        x = f.get(op.operands[0])
        if base == "ctpop":
            fn = t.decl.intrinsic(base, x.type, [x.type])
            args = [x]
        else:
            fn = t.decl.intrinsic(base, x.type, [x.type, I1])
            args = [x, I1(0)]
        f.vals[op.results[0]] = f.b.call(fn, args)
    return h


def _libm_scalar(t: Translator, b: ir.IRBuilder, name: str, x: ir.Value) -> ir.Value:
    ty = x.type
    if ty == F32:
        return b.call(t.decl.function(name + "f", F32, [F32]), [x])
    if ty == F64:
        return b.call(t.decl.function(name, F64, [F64]), [x])
    if ty == F16:
        return b.fptrunc(_libm_scalar(t, b, name, b.fpext(x, F32)), F16)
    raise CompileError(f"llvm backend: math.{name} on {ty} is not supported")


def _unary_libm(name: str):
    def h(t: Translator, f: FuncState, op: Operation) -> None:
        x = f.get(op.operands[0])
        b = f.b
        if isinstance(x.type, ir.VectorType):
            r = ir.Constant(x.type, ir.Undefined)
            for i in range(x.type.count):
                lane = _libm_scalar(t, b, name, b.extract_element(x, I32(i)))
                r = b.insert_element(r, lane, I32(i))
        else:
            r = _libm_scalar(t, b, name, x)
        f.vals[op.results[0]] = r
    return h


def _splat_float(ty: ir.Type, v: float) -> ir.Constant:
    if isinstance(ty, ir.VectorType):
        return ir.Constant(ty, [ir.Constant(ty.element, v)] * ty.count)
    return ir.Constant(ty, v)


def _rsqrt(t: Translator, f: FuncState, op: Operation) -> None:
    x = f.get(op.operands[0])
    fm = t.flags(op)
    s = f.b.call(t.decl.intrinsic("sqrt", x.type, [x.type]), [x], fastmath=fm)
    f.vals[op.results[0]] = f.b.fdiv(_splat_float(x.type, 1.0), s, "", fm)


def fma_intrinsic(t: Translator) -> str:
    """`fma`, or `fmuladd` for WebAssembly: wasm has no fused multiply-add (simd128 none, relaxed-simd's
    `relaxed_madd` may or may not fuse), so `llvm.fma` would become a call to the software `fmaf` per
    lane; `llvm.fmuladd` is a multiply and an add there (and an FMA wherever the target has one)."""
    return "fmuladd" if t.options.target.arch == "wasm32" else "fma"


def _fma(t: Translator, f: FuncState, op: Operation) -> None:
    a, b, c = (f.get(v) for v in op.operands)
    fn = t.decl.intrinsic(fma_intrinsic(t), a.type, [a.type] * 3)
    f.vals[op.results[0]] = f.b.call(fn, [a, b, c])


def _fpowi(t: Translator, f: FuncState, op: Operation) -> None:
    x, n = (f.get(v) for v in op.operands)
    if isinstance(n.type, ir.VectorType) or n.type != I32:
        raise CompileError("llvm backend: math.fpowi needs a scalar i32 exponent")
    fn = t.decl.intrinsic("powi", x.type, [x.type, I32], x.type, I32)
    f.vals[op.results[0]] = f.b.call(fn, [x, n], fastmath=t.flags(op))


# -- hw register ops ---------------------------------------------------------------


def _vbroadcast(t: Translator, f: FuncState, op: Operation) -> None:
    x = f.get(op.operands[0])
    vt = t.ty(op.results[0].type)
    undef = ir.Constant(vt, ir.Undefined)
    one = f.b.insert_element(undef, x, I32(0))
    mask = ir.Constant(ir.VectorType(I32, vt.count), [I32(0)] * vt.count)
    f.vals[op.results[0]] = f.b.shuffle_vector(one, undef, mask)


def _vselect(t: Translator, f: FuncState, op: Operation) -> None:
    m, a, b = (f.get(v) for v in op.operands)
    f.vals[op.results[0]] = f.b.select(m, a, b)


def _vcmpf(t: Translator, f: FuncState, op: Operation) -> None:
    pred = op.properties["predicate"].data  # type: ignore[attr-defined]
    a, c = (f.get(v) for v in op.operands)
    f.vals[op.results[0]] = f.b.fcmp_ordered(pred, a, c, "", t.flags(op))


def _vconvert(t: Translator, f: FuncState, op: Operation) -> None:
    kind = op.properties["kind"].data  # type: ignore[attr-defined]
    f.vals[op.results[0]] = getattr(f.b, kind)(f.get(op.operands[0]), t.ty(op.results[0].type))


def _vfma(t: Translator, f: FuncState, op: Operation) -> None:
    _fma(t, f, op)


_FLOAT_REDUCE = {"add": "fadd", "mul": "fmul", "max": "fmax", "min": "fmin"}
_INT_REDUCE = {"add": "add", "mul": "mul", "max": "smax", "min": "smin"}


def _vreduce(t: Translator, f: FuncState, op: Operation) -> None:
    kind = op.properties["kind"].data  # type: ignore[attr-defined]
    v = f.get(op.operands[0])
    vt = v.type
    et = vt.element
    if is_float(vt):
        base = f"vector.reduce.{_FLOAT_REDUCE[kind]}"
        # A horizontal reduction has no fixed order: always allow reassociation.
        fm = tuple(sorted(set(t.flags(op)) | {"reassoc"}))
        if kind in ("add", "mul"):
            start = ir.Constant(et, -0.0 if kind == "add" else 1.0)
            fn = t.decl.intrinsic(base, et, [et, vt], vt)
            r = f.b.call(fn, [start, v], fastmath=fm)
        else:
            r = f.b.call(t.decl.intrinsic(base, et, [vt], vt), [v], fastmath=fm)
    else:
        r = f.b.call(t.decl.intrinsic(f"vector.reduce.{_INT_REDUCE[kind]}", et, [vt], vt), [v])
    f.vals[op.results[0]] = r


MATH_HANDLERS = {
    **{k: _unary_intrinsic(v) for k, v in UNARY_INTRINSICS.items()},
    **{k: _binary_intrinsic(v) for k, v in BINARY_INTRINSICS.items()},
    **{k: _unary_libm(v) for k, v in UNARY_LIBM.items()},
    **{k: _int_unary_intrinsic(v) for k, v in INT_UNARY_INTRINSICS.items()},
    "math.rsqrt": _rsqrt,
    "math.fma": _fma,
    "math.fpowi": _fpowi,
    "hw.vbroadcast": _vbroadcast,
    "hw.vfma": _vfma,
    "hw.vselect": _vselect,
    "hw.vcmpf": _vcmpf,
    "hw.vconvert": _vconvert,
    "hw.vreduce": _vreduce,
}


def _install_fast_math() -> None:
    from ziggurat.backends.llvm.fast_math import fast_or, verf, vexp, vtanh

    for name, emit in (("math.exp", vexp), ("math.tanh", vtanh), ("math.erf", verf)):
        MATH_HANDLERS[name] = fast_or(MATH_HANDLERS[name], emit)


_install_fast_math()

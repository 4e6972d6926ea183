"""The `math` ops on an NVIDIA GPU: what LLVM's NVPTX backend cannot lower by itself.

NVPTX has instructions for sqrt, fabs, floor/ceil/round/trunc, min/max, fma,
copysign and `llvm.exp2` (`ex2.approx.f32`), which the LLVM backend's
handlers emit as they are. `llvm.exp`, `llvm.log`, `llvm.sin`, `llvm.tanh`,
`llvm.pow` and the libm functions have no lowering there (LLVM stops with "no
libcall available"), so f32 gets these instead:

* exp, tanh, erf: the LLVM backend's polynomials (backends/llvm/fast_math.py,
  about 2e-7 relative), on one lane;
* log, log2, log10: `lg2.approx.f32` (2^-22.6 relative) times a constant;
* sin, cos: `sin.approx.f32` / `cos.approx.f32` after reducing the argument
  to [-pi, pi] (about 1e-6 absolute);
* pow: `2^(y * log2|x|)`, with the sign of an odd integer power of a
  negative base and NaN for a fractional one, 1 for y = 0.

Any other math function (on f32 or f64) is a `CompileError` naming it.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from llvmlite import ir
from xdsl.ir import Operation

from ziggurat.backends.llvm.fast_math import _V, verf, vexp, vtanh
from ziggurat.backends.llvm.lltypes import F32, I32
from ziggurat.errors import CompileError

if TYPE_CHECKING:
    from ziggurat.backends.llvm.translate import FuncState, Translator

_VEC1 = ir.VectorType(F32, 1)
TWO_PI_HI, TWO_PI_LO = 6.28125, 0.0019353071795864769  # 2 pi = hi + lo, hi exact in few bits


def _f32(t: Translator, f: FuncState, op: Operation, what: str) -> ir.Value:
    x = f.get(op.operands[0])
    if x.type != F32:
        raise CompileError(f"cuda backend: {op.name} on {x.type} has no GPU lowering yet (f32 only); "
                           f"the kernel @{f.root.fn.name} uses it ({what})")
    return x


def _one_lane(emit):
    """A handler computing `emit` (a fast_math vector function) on a scalar f32 as a 1-lane vector."""

    def h(t: Translator, f: FuncState, op: Operation) -> None:
        x = _f32(t, f, op, "polynomial")
        b = f.b
        v = b.insert_element(ir.Constant(_VEC1, ir.Undefined), x, I32(0))
        flags = tuple(fl for fl in t.flags(op) if fl in ("contract", "reassoc", "arcp", "afn"))
        f.vals[op.results[0]] = b.extract_element(emit(_V(t, b, _VEC1, flags), v), I32(0))

    return h


def _nvvm(t: Translator, b: ir.IRBuilder, name: str, x: ir.Value) -> ir.Value:
    return b.call(t.decl.function(f"llvm.nvvm.{name}", F32, [F32]), [x])


def _log_times(scale: float):
    def h(t: Translator, f: FuncState, op: Operation) -> None:
        x = _f32(t, f, op, "lg2.approx")
        y = _nvvm(t, f.b, "lg2.approx.f", x)
        f.vals[op.results[0]] = y if scale == 1.0 else f.b.fmul(y, ir.Constant(F32, scale))

    return h


def _trig(name: str):
    def h(t: Translator, f: FuncState, op: Operation) -> None:
        x = _f32(t, f, op, f"{name}.approx")
        b = f.b
        k = b.call(t.decl.intrinsic("rint", F32, [F32]), [b.fmul(x, ir.Constant(F32, 1 / (2 * math.pi)))])
        r = b.fsub(b.fsub(x, b.fmul(k, ir.Constant(F32, TWO_PI_HI))), b.fmul(k, ir.Constant(F32, TWO_PI_LO)))
        f.vals[op.results[0]] = _nvvm(t, b, f"{name}.approx.f", r)

    return h


def _pow(t: Translator, f: FuncState, op: Operation) -> None:
    x = _f32(t, f, op, "ex2/lg2")
    y = f.get(op.operands[1])
    b = f.b
    c = lambda v: ir.Constant(F32, v)  # noqa: E731
    ax = b.call(t.decl.intrinsic("fabs", F32, [F32]), [x])
    mag = b.call(t.decl.intrinsic("exp2", F32, [F32]), [b.fmul(y, _nvvm(t, b, "lg2.approx.f", ax))])
    ty = b.call(t.decl.intrinsic("trunc", F32, [F32]), [y])
    integral = b.fcmp_ordered("==", ty, y)
    half = b.fmul(ty, c(0.5))
    odd = b.fcmp_ordered("!=", b.call(t.decl.intrinsic("trunc", F32, [F32]), [half]), half)
    neg = b.fcmp_ordered("<", x, c(0.0))
    signed = b.select(odd, b.fneg(mag), mag)
    r = b.select(neg, b.select(integral, signed, c(float("nan"))), mag)
    f.vals[op.results[0]] = b.select(b.fcmp_ordered("==", y, c(0.0)), c(1.0), r)


def _unsupported(name: str):
    def h(t: Translator, f: FuncState, op: Operation) -> None:
        raise CompileError(f"cuda backend: {name} has no GPU lowering yet (kernel @{f.root.fn.name}); "
                           "NVPTX has no instruction or libm for it: add one in backends/cuda/math.py")

    return h


_UNSUPPORTED = ("math.tan", "math.asin", "math.acos", "math.atan", "math.sinh", "math.cosh", "math.atan2",
                "math.log1p", "math.expm1", "math.cbrt", "math.asinh", "math.acosh", "math.atanh")

GPU_MATH_HANDLERS = {
    "math.exp": _one_lane(vexp),
    "math.tanh": _one_lane(vtanh),
    "math.erf": _one_lane(verf),
    "math.log": _log_times(math.log(2.0)),
    "math.log2": _log_times(1.0),
    "math.log10": _log_times(math.log10(2.0)),
    "math.sin": _trig("sin"),
    "math.cos": _trig("cos"),
    "math.powf": _pow,
    **{name: _unsupported(name) for name in _UNSUPPORTED},
}

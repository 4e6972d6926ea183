"""Inline vector f32 exp, tanh and erf (polynomials instead of libm per lane).

LLVM has no vector instruction for these, so `llvm.exp.v16f32` becomes 16
libm calls; a softmax, tanh or GELU then costs ~20 ns per element. These
handlers emit the Cephes-style approximations as vector IR instead (relative
error about 2e-7 for exp, 1e-7 absolute for tanh, 4e-7 for erf). Scalar and
non-f32 operands keep the intrinsic/libm path.

```python
MATH_HANDLERS["math.exp"] = fast_or(MATH_HANDLERS["math.exp"], vexp)
```
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from llvmlite import ir
from xdsl.ir import Operation

from ziggurat.backends.llvm.lltypes import F32, I32

if TYPE_CHECKING:
    from ziggurat.backends.llvm.translate import FuncState, Translator

EXP_POLY = (1.9875691500e-4, 1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2, 1.6666665459e-1, 5.0000001201e-1)
TANH_POLY = (-5.70498872745e-3, 2.06390887954e-2, -5.37397155531e-2, 1.33314422036e-1, -3.33332819422e-1)
# erf(x) = x * P(x^2) / Q(x^2) on [-4, 4] (clamped outside, where |erf| rounds to 1 in f32): the
# rational approximation Eigen and XLA use for f32 erf; highest-order coefficient first.
ERF_P = (-2.72614225801306e-10, 2.77068142495902e-08, -2.10102402082508e-06, -5.69250639462346e-05,
         -7.34990630326855e-04, -2.95459980854025e-03, -1.60960333262415e-02)
ERF_Q = (-1.45660718464996e-05, -2.13374055278905e-04, -1.68282697438203e-03, -7.37332916720468e-03,
         -1.42647390514189e-02)


class _V:
    """Vector arithmetic helpers on one builder, fast-math flags applied."""

    def __init__(self, t: Translator, b: ir.IRBuilder, ty: ir.VectorType, flags):
        self.t, self.b, self.ty, self.fl = t, b, ty, tuple(flags)

    def c(self, v: float) -> ir.Constant:
        return ir.Constant(self.ty, [ir.Constant(F32, float(v))] * self.ty.count)

    def add(self, x, y):
        return self.b.fadd(x, y, flags=self.fl)

    def sub(self, x, y):
        return self.b.fsub(x, y, flags=self.fl)

    def mul(self, x, y):
        return self.b.fmul(x, y, flags=self.fl)

    def fma(self, x, y, z):
        from ziggurat.backends.llvm.math_ops import fma_intrinsic

        fn = self.t.decl.intrinsic(fma_intrinsic(self.t), self.ty, [self.ty] * 3)
        return self.b.call(fn, [x, y, z])

    def poly(self, x, coeffs):
        acc = self.c(coeffs[0])
        for k in coeffs[1:]:
            acc = self.fma(acc, x, self.c(k))
        return acc

    def call(self, name: str, *args):
        return self.b.call(self.t.decl.intrinsic(name, self.ty, [self.ty] * len(args)), list(args))

    def lt(self, x, y):
        return self.b.fcmp_ordered("<", x, y)


def vexp(v: _V, x):
    xc = v.call("minnum", v.call("maxnum", x, v.c(-87.33)), v.c(88.72))
    fx = v.call("floor", v.add(v.mul(xc, v.c(1.44269504088896341)), v.c(0.5)))
    r = v.sub(v.sub(xc, v.mul(fx, v.c(0.693359375))), v.mul(fx, v.c(-2.12194440e-4)))
    y = v.add(v.add(v.mul(v.poly(r, EXP_POLY), v.mul(r, r)), r), v.c(1.0))
    it = ir.VectorType(I32, v.ty.count)
    n = v.b.fptosi(fx, it)
    scale = v.b.bitcast(v.b.shl(v.b.add(n, ir.Constant(it, [I32(127)] * v.ty.count)),
                                ir.Constant(it, [I32(23)] * v.ty.count)), v.ty)
    y = v.mul(y, scale)
    y = v.b.select(v.lt(x, v.c(-87.33)), v.c(0.0), y)
    y = v.b.select(v.b.fcmp_ordered(">", x, v.c(88.72)), v.c(float("inf")), y)
    return v.b.select(v.b.fcmp_unordered("uno", x, x), x, y)  # NaN stays NaN (the clamps would make it ~1)


def vtanh(v: _V, x):
    ax = v.call("fabs", x)
    z = v.mul(x, x)
    small = v.add(x, v.mul(v.mul(x, z), v.poly(z, TANH_POLY)))
    e = vexp(v, v.mul(v.call("minnum", ax, v.c(20.0)), v.c(2.0)))
    big = v.sub(v.c(1.0), v.b.fdiv(v.c(2.0), v.add(e, v.c(1.0)), flags=v.fl))
    big = v.call("copysign", big, x)
    y = v.b.select(v.lt(ax, v.c(0.625)), small, big)
    return v.b.select(v.b.fcmp_unordered("uno", x, x), x, y)  # NaN stays NaN (minnum would make it +-1)


def verf(v: _V, x):
    """One rational function and one division, no exp and no branch select (about 4e-7 absolute):
    a GELU epilogue's erf costs about half of the former two-branch form (A&S 7.1.26 with an exp).
    NaN stays NaN (the clamp alone would turn it into 1)."""
    xc = v.call("minnum", v.call("maxnum", x, v.c(-4.0)), v.c(4.0))
    x2 = v.mul(xc, xc)
    y = v.b.fdiv(v.mul(xc, v.poly(x2, ERF_P)), v.poly(x2, ERF_Q), flags=v.fl)
    return v.b.select(v.b.fcmp_unordered("uno", x, x), x, y)


def fast_or(fallback, emit):
    """A handler that uses `emit` on f32 vectors and `fallback` otherwise."""

    def h(t: Translator, f: FuncState, op: Operation) -> None:
        x = f.get(op.operands[0])
        if not (isinstance(x.type, ir.VectorType) and x.type.element == F32):
            fallback(t, f, op)
            return
        flags = tuple(fl for fl in t.flags(op) if fl in ("contract", "reassoc", "arcp", "afn"))
        f.vals[op.results[0]] = emit(_V(t, f.b, x.type, flags), x)

    return h

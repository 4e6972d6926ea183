"""Inline vector f32 exp, tanh and erf (polynomials instead of libm per lane).

LLVM has no vector instruction for these, so `llvm.exp.v16f32` becomes 16
libm calls; a softmax, tanh or GELU then costs ~20 ns per element. These
handlers emit the Cephes-style approximations as vector IR instead (relative
error about 2e-7 for exp, 1e-7 absolute for erf and tanh). Scalar and
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
ERF_SMALL = (7.853861353153693e-5, -8.010193625184903e-4, 5.188327685732524e-3, -2.685381193529856e-2,
             1.128358514861418e-1, -3.761262582423300e-1, 1.128379165726710e+0)
ERF_LARGE = (1.061405429, -1.453152027, 1.421413741, -0.284496736, 0.254829592)  # A&S 7.1.26, Horner order


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
        fn = self.t.decl.intrinsic("fma", self.ty, [self.ty] * 3)
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
    return v.b.select(v.b.fcmp_ordered(">", x, v.c(88.72)), v.c(float("inf")), y)


def vtanh(v: _V, x):
    ax = v.call("fabs", x)
    z = v.mul(x, x)
    small = v.add(x, v.mul(v.mul(x, z), v.poly(z, TANH_POLY)))
    e = vexp(v, v.mul(v.call("minnum", ax, v.c(20.0)), v.c(2.0)))
    big = v.sub(v.c(1.0), v.b.fdiv(v.c(2.0), v.add(e, v.c(1.0)), flags=v.fl))
    big = v.call("copysign", big, x)
    return v.b.select(v.lt(ax, v.c(0.625)), small, big)


def verf(v: _V, x):
    ax = v.call("fabs", x)
    small = v.mul(x, v.poly(v.mul(x, x), ERF_SMALL))
    t = v.b.fdiv(v.c(1.0), v.add(v.c(1.0), v.mul(ax, v.c(0.3275911))), flags=v.fl)
    p = v.mul(t, v.poly(t, ERF_LARGE))
    big = v.sub(v.c(1.0), v.mul(p, vexp(v, v.b.fneg(v.mul(ax, ax)))))
    big = v.call("copysign", big, x)
    return v.b.select(v.lt(ax, v.c(1.0)), small, big)


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

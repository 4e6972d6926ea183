"""Addressing of an implicit GEMM (a convolution, transforms/gpu/implicit_gemm.py) for the GEMM template.

`Affine(spec)` has the interface of backends/cuda/gemm.py `Strided`: a tile's
global row, column or k is decomposed into the loop variables of its role
(mixed radix over their extents, the innermost fastest), each index of an
operand is its affine function of those variables, and an element is in
range where every global index is below its size and every guarded index
(the padding) is within its dimension. Out-of-range elements read 0 and are
not stored, as the loop nest's masks say.
"""

from __future__ import annotations

from llvmlite import ir

from ziggurat.backends.llvm.lltypes import I64
from ziggurat.transforms.gpu.implicit_gemm import role_size

FIELDS = 4  # stride, extent, guarded, constant; then one coefficient per variable


def _c64(v: int) -> ir.Constant:
    return ir.Constant(I64, v)


class Affine:
    """See the module docstring; `spec` is a read `gpu.igemm` attribute."""

    def __init__(self, spec: dict):
        self.roles = str(spec["roles"])
        self.extents = [int(x) for x in spec["extents"]]  # type: ignore[union-attr]
        nv = len(self.roles)
        self.dims = {}
        for o in "abc":
            flat = [int(x) for x in spec[f"{o}_dims"]]  # type: ignore[union-attr]
            step = FIELDS + nv
            self.dims[o] = [(flat[i], flat[i + 1], bool(flat[i + 2]), flat[i + 3], flat[i + 4:i + step])
                            for i in range(0, len(flat), step)]
        self.m, self.n, self.k = (role_size(self.roles, self.extents, r) for r in "mnk")
        self.count = 1
        self.a_k_fast = self._innermost("a") == self._last("k")
        self.b_k_fast = self._innermost("b") == self._last("k")

    def _last(self, role: str) -> int:
        return max(i for i, r in enumerate(self.roles) if r == role)

    def _innermost(self, o: str) -> int | None:
        """The variable of the operand's stride-1 dimension when that index is one variable."""
        for stride, _, _, _, coeffs in self.dims[o]:
            if stride == 1 and sum(1 for c in coeffs if c) == 1:
                return next(i for i, c in enumerate(coeffs) if c)
        return None

    def setup(self, b: ir.IRBuilder, bb: ir.Value) -> None:
        """No batch: nothing to read."""

    def _split(self, b: ir.IRBuilder, g: ir.Value, role: str, values: dict) -> None:
        """The variables of `role` from their global index `g` (mixed radix, innermost fastest)."""
        rest = g
        for i in range(len(self.roles) - 1, -1, -1):
            if self.roles[i] == role:
                values[i] = b.urem(rest, _c64(self.extents[i]))
                rest = b.udiv(rest, _c64(self.extents[i]))

    def _at(self, b: ir.IRBuilder, o: str, pairs: list) -> tuple[ir.Value, ir.Value]:
        values: dict = {}
        ok = None
        for g, role, size in pairs:
            self._split(b, g, role, values)
            inside = b.icmp_unsigned("<", g, _c64(size))
            ok = inside if ok is None else b.and_(ok, inside)
        off = _c64(0)
        for stride, extent, guarded, const, coeffs in self.dims[o]:
            idx = _c64(const)
            for i, co in enumerate(coeffs):
                if co:
                    idx = b.add(idx, b.mul(values[i], _c64(co)))
            if guarded:
                inside = b.and_(b.icmp_signed(">=", idx, _c64(0)), b.icmp_signed("<", idx, _c64(extent)))
                ok = b.and_(ok, inside)
            off = b.add(off, b.mul(idx, _c64(stride)))
        return off, ok

    def a(self, b: ir.IRBuilder, gm: ir.Value, gk: ir.Value) -> tuple[ir.Value, ir.Value]:
        return self._at(b, "a", [(gm, "m", self.m), (gk, "k", self.k)])

    def b(self, b: ir.IRBuilder, gk: ir.Value, gn: ir.Value) -> tuple[ir.Value, ir.Value]:
        return self._at(b, "b", [(gk, "k", self.k), (gn, "n", self.n)])

    def c(self, b: ir.IRBuilder, gm: ir.Value, gn: ir.Value) -> tuple[ir.Value, ir.Value]:
        return self._at(b, "c", [(gm, "m", self.m), (gn, "n", self.n)])

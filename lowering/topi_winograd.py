"""Compute definitions of the Winograd F(2x2, 3x3) transform ops (dialects/graph_winograd.py).

`lowering/topi.py` merges `WINOGRAD_COMPUTE_DEFS` into its `COMPUTE_DEFS`.
Both transforms are sums of +-1 multiples, written without multiplies:

* a padded input is first copied into a zero-padded local tensor
  (`winograd_pad`, a copy nest whose halo `loop-default-schedule` zeroes
  apart), so the transform's reads carry no bounds tests;
* `B^T` row `xi` is `d[a(xi)] + s(xi) * d[b(xi)]` with `a = [0, 1, 2, 1]`,
  `b = [2, 2, 1, 3]`, `s = [-1, 1, -1, -1]`: the input transform reads 4
  values per element of V;
* `A^T` row 0 sums rows 0..2, row 1 is `m1 - m2 - m3`: the output transform
  reads the tile's 16 values of M per pixel, which the 2 x 2 loops of a
  tile (innermost after `loop-default-schedule`'s copy-nest schedule, then
  unrolled by LLVM) share.

The index math divides by the tile grid (`t = p / TW`, `xi = k / 4`,
`a = h % 2`); `loop-default-schedule` strip-mines those loops and moves
the small ones (`nu`, `a`, `b`) innermost (`transforms/schedule/copy_nest.py`),
so no division is left at run time.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.builder import Builder
from xdsl.dialects.builtin import TensorType
from xdsl.ir import SSAValue

from ziggurat.dialects import graph_winograd as gw
from ziggurat.lowering.te_builder import Expr, compute
from ziggurat.lowering.topi_base import Define, Lookup, ints_of, shape_of


def _row_parts(e: Expr, xi: SSAValue) -> tuple[SSAValue, SSAValue, SSAValue]:
    """(a(xi), b(xi), s(xi) as f32) of B^T's row `xi` (see the module docstring), by selects on
    `xi`: no division, so `xi`'s loop is not strip-mined further, and once LLVM unrolls it the
    selects fold."""
    def pick(table: Sequence[int]) -> SSAValue:
        v = e.idx(table[3])
        for k in (2, 1, 0):
            v = e.select(e.in_range(xi, k, k + 1), e.idx(table[k]), v)
        return v

    s = e.select(e.in_range(xi, 1, 2), e.const(1.0), e.const(-1.0))
    return pick((0, 1, 2, 1)), pick((2, 2, 1, 3)), s


def define_winograd_input(op: gw.WinogradInputOp, b: Builder, x: Lookup) -> SSAValue:
    inp = x(op.input)
    pt, pl, pb, pr = ints_of(op.pads)
    n_, c_, h_, w_ = shape_of(op.input)
    th, tw = op.tile_grid()
    if any((pt, pl, pb, pr)):  # a zero-padded copy first: the transform then reads without tests
        padded_type = TensorType(op.result.type.element_type, [n_, c_, h_ + pt + pb, w_ + pl + pr])  # type: ignore[attr-defined]

        def pad(e: Expr, i: Sequence[SSAValue]) -> SSAValue:
            n, c, h, w = i
            return e.read(inp, [n, c, e.iadd(h, -pt), e.iadd(w, -pl)], pad=0.0)

        inp = compute(b, "winograd_pad", padded_type, pad)

    def body(e: Expr, i: Sequence[SSAValue]) -> SSAValue:
        k, c, p = i
        n = e.idiv(p, th * tw)
        q = e.irem(p, th * tw)
        t, u = e.idiv(q, tw), e.irem(q, tw)
        xi, nu = e.idiv(k, 4), e.irem(k, 4)
        (ra, rb, rs), (ca, cb, cs) = _row_parts(e, xi), _row_parts(e, nu)

        def d(row: SSAValue, col: SSAValue) -> SSAValue:
            return e.read(inp, [n, c, e.affine([(t, 2), (row, 1)]), e.affine([(u, 2), (col, 1)])])

        top = e.add(d(ra, ca), e.mul(cs, d(ra, cb)))
        bottom = e.add(d(rb, ca), e.mul(cs, d(rb, cb)))
        return e.add(top, e.mul(rs, bottom))

    return compute(b, "winograd_input", op.result.type, body)  # type: ignore[arg-type]


def define_winograd_output(op: gw.WinogradOutputOp, b: Builder, x: Lookup) -> SSAValue:
    m = x(op.input)
    _, _, hh, ww = shape_of(op.result)
    th, tw = gw.tiles(hh, ww)

    def body(e: Expr, i: Sequence[SSAValue]) -> SSAValue:
        n, o, h, w = i
        t, a = e.idiv(h, 2), e.irem(h, 2)
        u, bb = e.idiv(w, 2), e.irem(w, 2)
        p = e.affine([(n, th * tw), (t, tw), (u, 1)])
        v = [[e.read(m, [e.idx(xi * 4 + nu), o, p]) for nu in range(4)] for xi in range(4)]
        first_row = e.ilt(a, 1)
        r = [e.select(first_row, e.add(e.add(v[0][nu], v[1][nu]), v[2][nu]),
                      e.sub(e.sub(v[1][nu], v[2][nu]), v[3][nu])) for nu in range(4)]
        return e.select(e.ilt(bb, 1), e.add(e.add(r[0], r[1]), r[2]), e.sub(e.sub(r[1], r[2]), r[3]))

    return compute(b, "winograd_output", op.result.type, body)  # type: ignore[arg-type]


WINOGRAD_COMPUTE_DEFS: dict[type, Define] = {
    gw.WinogradInputOp: define_winograd_input,  # type: ignore[dict-item]
    gw.WinogradOutputOp: define_winograd_output,  # type: ignore[dict-item]
}

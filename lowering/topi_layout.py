"""Compute definitions of the blocked-layout graph ops (NCHW[x]c).

`lowering/topi.py` merges `LAYOUT_COMPUTE_DEFS` into its `COMPUTE_DEFS`.
The blocked convolution reduces over (input-channel block, ky, kx, lane), so
the innermost reduction walks the weight block `w[ob, ib, ky, kx, i, :]`
contiguously and the output's last dim (the output-channel lane) is what
`loop-default-schedule` vectorizes; it register-blocks a spatial loop (oh or
ow) so that each weight vector feeds several FMAs.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.builder import Builder
from xdsl.ir import SSAValue

from ziggurat.dialects import graph_layout as gl
from ziggurat.lowering.te_builder import Expr, compute, reduce
from ziggurat.lowering.topi_base import Define, Lookup, NEG_INF, ints_of, shape_of


def define_layout_transform(op: gl.LayoutTransformOp, b: Builder, x: Lookup) -> SSAValue:
    inp = x(op.input)
    kind, src = gl.parse_layout(op.src.data)
    _, dst = gl.parse_layout(op.dst.data)
    padding = op.padding()
    pt, pl = padding[0], padding[1]

    def plain_index(e: Expr, i: Sequence[SSAValue]) -> list[SSAValue]:
        """Output indices (in dst) -> plain NCHW/OIHW indices."""
        if not dst:
            return list(i)
        if kind == "NCHW":
            n, cb, h, w, c = i
            return [n, e.affine([(cb, dst[0]), (c, 1)]), h, w]
        ob, ib, h, w, ii, oo = i
        return [e.affine([(ob, dst[1]), (oo, 1)]), e.affine([(ib, dst[0]), (ii, 1)]), h, w]

    plain = shape_of(inp)
    ragged = not src and (len(dst) == 1 and plain[1] % dst[0] or len(dst) == 2 and (plain[0] % dst[1] or plain[1] % dst[0]))

    def body(e: Expr, i: Sequence[SSAValue]) -> SSAValue:
        p = plain_index(e, i)
        if not src and any(padding):  # padded NCHW -> NCHW<b>c: zeros outside the input
            return e.read(inp, [p[0], p[1], e.affine([(p[2], 1)], -pt), e.affine([(p[3], 1)], -pl)], pad=0.0)
        if ragged:  # the block does not divide the channels: zeros beyond them
            return e.read(inp, p, pad=0.0)
        if not src:
            return e.read(inp, p)
        if kind == "NCHW":
            (c,) = src
            return e.read(inp, [p[0], e.idiv(p[1], c), p[2], p[3], e.irem(p[1], c)])
        bi, bo = src
        return e.read(inp, [e.idiv(p[0], bo), e.idiv(p[1], bi), p[2], p[3], e.irem(p[1], bi), e.irem(p[0], bo)])

    return compute(b, "layout_transform", op.result.type, body)  # type: ignore[arg-type]


def _window_read(op, inp: SSAValue):
    """`read(e, n, cb, y, x, ky, kx, c)`: the blocked conv input under output (y, x) and tap (ky, kx),
    strided, dilated and zero-padded as `op` says."""
    sh, sw = ints_of(op.strides)
    pt, pl, _, _ = ints_of(op.pads)
    dh, dw = ints_of(op.dilations)
    pad = 0.0 if any(ints_of(op.pads)) else None

    def read(e: Expr, n, cb, y, xx, ky, kx, c) -> SSAValue:
        hy = e.affine([(y, sh), (ky, dh)], -pt)
        wx = e.affine([(xx, sw), (kx, dw)], -pl)
        return e.read(inp, [n, cb, hy, wx, c], pad=pad)

    return read


def define_conv2d_nchwc(op: gl.Conv2dNchwcOp, b: Builder, x: Lookup) -> SSAValue:
    inp, w = x(op.input), x(op.weight)
    _, icb, kh, kw, bi, _ = shape_of(w)
    window = _window_read(op, inp)

    def body(e: Expr, i: Sequence[SSAValue], r: Sequence[SSAValue]) -> SSAValue:
        n, ob, y, xx, o = i
        ib, ky, kx, c = r
        return e.mul(window(e, n, ib, y, xx, ky, kx, c), e.read(w, [ob, ib, ky, kx, c, o]))

    return reduce(b, "conv2d_nchwc", "add", 0.0, op.result.type, [icb, kh, kw, bi], body)  # type: ignore[arg-type]


def define_block_local_conv(op: gl.BlockLocalConvOp, b: Builder, x: Lookup) -> SSAValue:
    """Depthwise (weight `[cb, ky, kx, c]`, reduces over ky, kx) and grouped (weight
    `[cb, ky, kx, i, o]`, reduces over ky, kx, i) blocked convs: input block = output block."""
    inp, w = x(op.input), x(op.weight)
    wshape = shape_of(w)
    grouped = len(wshape) == 5
    window = _window_read(op, inp)

    def body(e: Expr, i: Sequence[SSAValue], r: Sequence[SSAValue]) -> SSAValue:
        n, cb, y, xx, o = i
        c = r[2] if grouped else o
        v = window(e, n, cb, y, xx, r[0], r[1], c)
        return e.mul(v, e.read(w, [cb, r[0], r[1], c, o] if grouped else [cb, r[0], r[1], o]))

    extents = list(wshape[1:4]) if grouped else list(wshape[1:3])
    return reduce(b, op.name.split(".")[1], "add", 0.0, op.result.type, extents, body)  # type: ignore[arg-type]


def define_max_pool_nchwc(op: gl.MaxPool2dNchwcOp, b: Builder, x: Lookup) -> SSAValue:
    inp = x(op.input)
    sh, sw = ints_of(op.strides)
    pt, pl, _, _ = ints_of(op.pads)
    dh, dw = ints_of(op.dilations)
    pad = NEG_INF if any(ints_of(op.pads)) else None

    def body(e: Expr, i: Sequence[SSAValue], r: Sequence[SSAValue]) -> SSAValue:
        n, cb, y, xx, c = i
        ky, kx = r
        hy = e.affine([(y, sh), (ky, dh)], -pt)
        wx = e.affine([(xx, sw), (kx, dw)], -pl)
        return e.read(inp, [n, cb, hy, wx, c], pad=pad)

    return reduce(b, "max_pool2d_nchwc", "max", NEG_INF, op.result.type, ints_of(op.kernel), body)  # type: ignore[arg-type]


def define_matmul_panels(op: gl.MatmulPanelsOp, b: Builder, x: Lookup) -> SSAValue:
    lhs, rhs = x(op.lhs), x(op.rhs)
    _, k_extent, lanes = shape_of(rhs)

    def body(e: Expr, i: Sequence[SSAValue], r: Sequence[SSAValue]) -> SSAValue:
        (k,) = r
        j = i[-1]
        v = e.read(lhs, [*i[:-1], k])
        return e.mul(v, e.read(rhs, [e.idiv(j, lanes), k, e.irem(j, lanes)]))

    return reduce(b, "matmul", "add", 0.0, op.result.type, [k_extent], body)  # type: ignore[arg-type]


LAYOUT_COMPUTE_DEFS: dict[type, Define] = {
    gl.LayoutTransformOp: define_layout_transform,  # type: ignore[dict-item]
    gl.Conv2dNchwcOp: define_conv2d_nchwc,  # type: ignore[dict-item]
    gl.DepthwiseConv2dNchwcOp: define_block_local_conv,  # type: ignore[dict-item]
    gl.GroupedConv2dNchwcOp: define_block_local_conv,  # type: ignore[dict-item]
    gl.MaxPool2dNchwcOp: define_max_pool_nchwc,  # type: ignore[dict-item]
    gl.MatmulPanelsOp: define_matmul_panels,  # type: ignore[dict-item]
}

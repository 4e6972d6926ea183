"""DeformConv (opset 19+, 2-D) decomposed: bilinear sampling at offset
positions through one run-time-index gather, then a grouped batched matmul.

Every kernel tap (ky, kx) of every output position (i, j) samples X at
(-pad_top + i * stride + ky * dilation + offset_y, likewise for x) with
ONNX's rule (GridSample linear, zeros padding, align_corners: taps outside
the image read 0); the two taps per dim give four corner reads per sample,
all read by ONE `graph.gather_elements` over X viewed as [N, C, H*W], weighted
(times the optional mask) and summed into columns [N, C, KH*KW, OH*OW]. The
convolution is then `graph.matmul` of the weight [G, O/G, C/G*KH*KW] with the
columns [N, G, C/G*KH*KW, OH*OW], plus the bias.

```mlir
%cols = graph.reduce %taps {kind = "sum", axes = array<i64: 3>} : tensor<1x1x2x4x36xf32> -> tensor<1x1x2x36xf32>
%y = graph.matmul %w3, %cols3 : tensor<1x2x18xf32>, tensor<1x1x18x4xf32> -> tensor<1x1x2x4xf32>
```
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import onnx
from xdsl.ir import SSAValue

from ziggurat.dialects import graph
from ziggurat.frontends.onnx.context import ConversionContext, Value, attributes, shape_of
from ziggurat.frontends.onnx.convert_grid_sample import _Ops
from ziggurat.frontends.onnx.convert_index import const, reduce, require_float
from ziggurat.frontends.onnx.convert_window import like, reshape


def _taps(o: _Ops, pos: SSAValue, size: int) -> tuple[SSAValue, SSAValue]:
    """Clamped tap indices [N, OG, 2, M] of positions [N, OG, 1, M] and their
    weights, zero for taps outside [0, size)."""
    ctx = o.ctx
    low = o.floor(pos)
    frac = o.sub(pos, low)
    off = const(ctx, pos, np.array([0.0, 1.0]).reshape(1, 1, 2, 1), "taps")
    index = o.add(low, off)
    weight = o.sub(o.c(1.0), ctx.emit(graph.AbsOp(o.sub(frac, off))))  # 1 - t, t
    inside = o.mul(o.cmp(index, 0.0, "ge"), o.cmp(index, size - 1.0, "le"))
    weight = o.select(inside, weight, 0.0)
    return o.clamp(index, 0.0, size - 1.0), weight


def convert_deform_conv(ctx: ConversionContext, node: onnx.NodeProto) -> Sequence[Value]:
    """DeformConv (opsets 19+), 2-D: group, offset_group, strides, pads,
    dilations, optional bias and mask."""
    attrs = attributes(node)
    x, w, offset = (ctx.value(name) for name in node.input[:3])
    for value, what in ((x, "X"), (w, "W"), (offset, "offset")):
        require_float(ctx, value, what)
    xs, ws, os_ = shape_of(x), shape_of(w), shape_of(offset)
    if len(xs) != 4:
        raise ctx.unsupported(f"only 2-D deformable convolution (4-D input) is supported, got {xs}")
    n, c, h, wd = xs
    o_ch, cg, kh, kw = ws
    group, og = int(attrs.get("group", 1)), int(attrs.get("offset_group", 1))
    sh, sw = attrs.get("strides", [1, 1])
    dh, dw = attrs.get("dilations", [1, 1])
    pt, pl, pb, pr = attrs.get("pads", [0, 0, 0, 0])
    oh = (h + pt + pb - (kh - 1) * dh - 1) // sh + 1
    ow = (wd + pl + pr - (kw - 1) * dw - 1) // sw + 1
    if cg * group != c or o_ch % group or c % og or os_ != (n, og * kh * kw * 2, oh, ow):
        raise ctx.shape_error(f"X {xs}, W {ws}, offset {os_} with group={group}, offset_group={og} do not fit")
    m = kh * kw * oh * ow
    o = _Ops(ctx, offset)
    off6 = reshape(ctx, offset, (n, og, kh * kw, 2, oh * ow))

    def component(k: int) -> SSAValue:
        part = ctx.emit(graph.SliceOp(off6, [0, 0, 0, k, 0], [1] * 5, like(off6, (n, og, kh * kw, 1, oh * ow))))
        return reshape(ctx, part, (n, og, 1, m))

    ky, kx, i, j = np.meshgrid(np.arange(kh), np.arange(kw), np.arange(oh), np.arange(ow), indexing="ij")
    base_y = const(ctx, offset, (ky * dh + i * sh - pt).reshape(1, 1, 1, m), "base_y")
    base_x = const(ctx, offset, (kx * dw + j * sw - pl).reshape(1, 1, 1, m), "base_x")
    iy, wy = _taps(o, o.add(component(0), base_y), h)
    ix, wx = _taps(o, o.add(component(1), base_x), wd)
    flat = o.add(o.mul(reshape(ctx, iy, (n, og, 2, 1, m)), float(wd)), reshape(ctx, ix, (n, og, 1, 2, m)))
    weight = o.mul(reshape(ctx, wy, (n, og, 2, 1, m)), reshape(ctx, wx, (n, og, 1, 2, m)))
    mask_name = ctx.input(node, 4)
    if mask_name is not None:
        mask = ctx.value(mask_name)
        if shape_of(mask) != (n, og * kh * kw, oh, ow):
            raise ctx.shape_error(f"mask shape {shape_of(mask)} should be {(n, og * kh * kw, oh, ow)}")
        weight = o.mul(weight, reshape(ctx, mask, (n, og, 1, 1, m)))
    per = c // og
    table = ctx.emit(graph.BroadcastToOp(reshape(ctx, flat, (n, og, 1, 4 * m)), like(flat, (n, og, per, 4 * m))))
    gathered = ctx.emit(graph.GatherElementsOp(reshape(ctx, x, (n, c, h * wd)), reshape(ctx, table, (n, c, 4 * m)),
                                               2, like(x, (n, c, 4 * m))))
    taps = o.mul(reshape(ctx, gathered, (n, og, per, 4, m)), reshape(ctx, weight, (n, og, 1, 4, m)))
    cols = reshape(ctx, reduce(ctx, taps, "sum", [3], False), (n, group, cg * kh * kw, oh * ow))
    w3 = reshape(ctx, w, (group, o_ch // group, cg * kh * kw))
    y = ctx.emit(graph.MatmulOp(w3, cols, like(cols, (n, group, o_ch // group, oh * ow))))
    y = reshape(ctx, y, (n, o_ch, oh, ow))
    bias = ctx.input(node, 3)
    if bias is None:
        return [y]
    if ctx.shape(bias) != (o_ch,):
        raise ctx.shape_error(f"bias shape {ctx.shape(bias)} should be ({o_ch},)")
    return [ctx.emit(graph.AddOp(y, ctx.reshaped(bias, (o_ch, 1, 1)), y.type))]


DEFORM_CONV_CONVERTERS = {"DeformConv": convert_deform_conv}
"""ONNX op type -> converter, merged into the importer's table."""

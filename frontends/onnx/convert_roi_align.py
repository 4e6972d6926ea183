"""RoiAlign decomposed onto elementwise ops, one run-time-index gather and reduces.

The sample points of every bin are affine in the run-time box coordinates, and
ONNX's bilinear rule (samples beyond [-1, size] weigh 0, coordinates clamped
at 0, the upper tap collapsing at the last row/column) is separable per
spatial dim, so each dim gives two taps [R, 2, samples] with their weights.
The four taps of every sample, for every ROI and channel, are read by ONE
`graph.gather_elements` from X flattened (batch offset from the run-time
batch_indices); avg mode sums the weighted taps and averages the samples of
a bin, max mode takes the max of the weighted taps and then of the samples,
as ONNX's reference and onnxruntime do. An adaptive sampling_ratio (0) would
make the sample count depend on the boxes and is refused.

```mlir
%v = graph.gather_elements %xflat, %table {axis = 0 : i64} : tensor<100xf32>, tensor<3000xf32> -> tensor<3000xf32>
%s = graph.reduce %vw {kind = "sum", axes = array<i64: 2, 3>} : tensor<3x1x2x2x10x10xf32> -> tensor<3x1x10x10xf32>
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
from ziggurat.frontends.onnx.convert_index_runtime import _positions
from ziggurat.frontends.onnx.convert_window import like, reshape


def _dim_taps(o: _Ops, start: SSAValue, length: SSAValue, bins: int, grid: int, size: int):
    """Low/high tap indices [R, 2, bins*grid], their weights and the in-range mask of one dim."""
    ctx = o.ctx
    rel = np.array([p + (i + 0.5) / grid for p in range(bins) for i in range(grid)])
    step = o.div(length, float(bins))  # [R, 1]
    pos = o.add(start, o.mul(step, const(ctx, start, rel.reshape(1, -1), "samples")))  # [R, S]
    valid = o.mul(o.cmp(pos, -1.0, "ge"), o.cmp(pos, float(size), "le"))
    pos = o.max(pos, 0.0)
    low = o.floor(pos)
    last = o.cmp(low, size - 1.0, "ge")
    low = o.select(last, size - 1.0, low)
    high = o.select(last, size - 1.0, o.add(low, 1.0))
    pos = o.select(last, low, pos)
    frac = o.sub(pos, low)
    samples = bins * grid
    r = shape_of(pos)[0]
    index = ctx.emit(graph.ConcatOp([reshape(ctx, low, (r, 1, samples)), reshape(ctx, high, (r, 1, samples))], 1,
                                    like(pos, (r, 2, samples))))
    weight = ctx.emit(graph.ConcatOp([reshape(ctx, o.sub(o.c(1.0), frac), (r, 1, samples)),
                                      reshape(ctx, frac, (r, 1, samples))], 1, like(pos, (r, 2, samples))))
    return index, weight, reshape(ctx, valid, (r, 1, samples))


def convert_roi_align(ctx: ConversionContext, node: onnx.NodeProto) -> Sequence[Value]:
    """RoiAlign (opsets 10+; coordinate_transformation_mode from 16): avg or max,
    a fixed sampling_ratio, spatial_scale."""
    attrs = attributes(node)
    x, rois = ctx.value(node.input[0]), ctx.value(node.input[1])
    require_float(ctx, x)
    require_float(ctx, rois, "rois")
    n, c, h, w = shape_of(x) if len(shape_of(x)) == 4 else (0, 0, 0, 0)
    r = shape_of(rois)[0]
    if not n or shape_of(rois) != (r, 4) or ctx.shape(node.input[2]) != (r,):
        raise ctx.shape_error(f"X {shape_of(x)}, rois {shape_of(rois)} and batch_indices "
                              f"{ctx.shape(node.input[2])} do not fit")
    oh, ow = int(attrs.get("output_height", 1)), int(attrs.get("output_width", 1))
    ratio = int(attrs.get("sampling_ratio", 0))
    if ratio <= 0:
        raise ctx.unsupported("sampling_ratio 0 (adaptive: the sample count depends on the boxes) is not supported")
    mode = attrs.get("mode", "avg")
    if mode not in ("avg", "max"):
        raise ctx.unsupported(f"mode '{mode}' is not avg or max")
    half_pixel = attrs.get("coordinate_transformation_mode", "half_pixel" if ctx.opset >= 16 else
                           "output_half_pixel") == "half_pixel"
    scale = float(attrs.get("spatial_scale", 1.0))
    o = _Ops(ctx, rois)
    offset = 0.5 if half_pixel else 0.0

    def coord(k: int) -> SSAValue:
        part = ctx.emit(graph.SliceOp(rois, [0, k], [1, 1], like(rois, (r, 1))))
        return o.sub(o.mul(part, scale), offset) if offset else o.mul(part, scale)

    x1, y1, x2, y2 = (coord(k) for k in range(4))
    width, height = o.sub(x2, x1), o.sub(y2, y1)
    if not half_pixel:
        width, height = o.max(width, 1.0), o.max(height, 1.0)
    y_idx, y_w, y_ok = _dim_taps(o, y1, height, oh, ratio, h)
    x_idx, x_w, x_ok = _dim_taps(o, x1, width, ow, ratio, w)
    sy, sx = oh * ratio, ow * ratio
    flat = o.add(o.mul(reshape(ctx, y_idx, (r, 1, 2, 1, sy, 1)), float(w)), reshape(ctx, x_idx, (r, 1, 1, 2, 1, sx)))
    weight = o.mul(reshape(ctx, y_w, (r, 1, 2, 1, sy, 1)), reshape(ctx, x_w, (r, 1, 1, 2, 1, sx)))
    valid = o.mul(reshape(ctx, y_ok, (r, 1, 1, 1, sy, 1)), reshape(ctx, x_ok, (r, 1, 1, 1, 1, sx)))
    weight = o.mul(weight, valid)  # out-of-range samples weigh 0, as in the reference
    batch = reshape(ctx, _positions(ctx, node.input[2], [n]), (r, 1, 1, 1, 1, 1))
    channel = const(ctx, flat, np.arange(c).reshape(1, c, 1, 1, 1, 1) * float(h * w), "channels")
    table = o.add(o.add(o.mul(batch, float(c * h * w)), channel), flat)  # [R, C, 2, 2, sy, sx]
    count = r * c * 4 * sy * sx
    gathered = ctx.emit(graph.GatherElementsOp(reshape(ctx, x, (n * c * h * w,)), reshape(ctx, table, (count,)), 0,
                                               like(x, (count,))))
    taps = o.mul(reshape(ctx, gathered, (r, c, 2, 2, sy, sx)), weight)
    if mode == "avg":
        per_sample = reduce(ctx, taps, "sum", [2, 3], False)
        bins = reduce(ctx, reshape(ctx, per_sample, (r, c, oh, ratio, ow, ratio)), "sum", [3, 5], False)
        return [o.mul(bins, 1.0 / (ratio * ratio))]
    per_sample = reduce(ctx, taps, "max", [2, 3], False)
    return [reduce(ctx, reshape(ctx, per_sample, (r, c, oh, ratio, ow, ratio)), "max", [3, 5], False)]


ROI_ALIGN_CONVERTERS = {"RoiAlign": convert_roi_align}
"""ONNX op type -> converter, merged into the importer's table."""

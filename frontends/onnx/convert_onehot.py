"""OneHot (opsets 9+) as a comparison with a constant position range.

depth decides the output shape, so it must be known at import time (a
constant or a bound shape parameter); indices and values are run-time
tensors. As onnx's reference: negative indices count from depth, the hit
mask is arange(depth) == index along the new `axis` (a non-integer float
index hits nothing), and y = hit * (on - off) + off.

```mlir
%hit = graph.compare %idx3, %range {kind = "eq"} : tensor<3x1xi64>, tensor<1x10xi64> -> tensor<3x10xi1>
%m = graph.cast %hit : tensor<3x10xi1> -> tensor<3x10xf32>
```
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import onnx
from xdsl.dialects.builtin import i1

import ziggurat.dtypes as dtypes
from ziggurat.dialects import graph
from ziggurat.dialects.graph_dtype import CastOp
from ziggurat.frontends.onnx.context import ConversionContext, Value, attributes, element_type, shape_of, tensor_type
from ziggurat.frontends.onnx.convert_index import const, norm_axis
from ziggurat.frontends.onnx.convert_window import like, reshape

MAX_DEPTH = 1 << 20


def convert_onehot(ctx: ConversionContext, node: onnx.NodeProto) -> Sequence[Value]:
    """OneHot (opsets 9+): indices of any shape, compile-time depth, values [off, on]."""
    idx = ctx.value(node.input[0])
    depth = ctx.scalar_parameter(node.input[1], "depth", "it decides the output shape and must be known at compile "
                                 "time (a constant, computed from shapes, or bound by value)")
    positions = np.arange(depth)
    n = positions.size
    if not 1 <= n <= MAX_DEPTH:
        raise ctx.unsupported(f"depth {depth} gives {n} positions; 1 to {MAX_DEPTH} are supported")
    values = ctx.value(node.input[2])
    if shape_of(values) != (2,):
        raise ctx.shape_error(f"values must have shape (2,) [off, on], got {shape_of(values)}")
    shape = shape_of(idx)
    rank = len(shape)
    axis = norm_axis(ctx, attributes(node).get("axis", -1), rank + 1)
    elt = element_type(idx)
    np_dtype = dtypes.to_numpy(elt)
    if not (dtypes.is_float(elt) or dtypes.is_int(elt)):
        raise ctx.unsupported(f"indices of element type {dtypes.describe(elt)} are not supported")
    if dtypes.is_int(elt) and np.dtype(np_dtype).kind == "u":
        wrapped = idx  # unsigned: never negative
    else:
        negative = ctx.emit(graph.CompareOp(idx, const(ctx, idx, np.zeros(1), "zero"), "lt",
                                            tensor_type(shape, i1)))
        shifted = ctx.emit(graph.AddOp(idx, const(ctx, idx, np.array([depth]).astype(np_dtype), "depth"), idx.type))
        wrapped = ctx.emit(graph.WhereOp(negative, shifted, idx, idx.type))
    out = (*shape[:axis], n, *shape[axis:])
    column = reshape(ctx, wrapped, (*shape[:axis], 1, *shape[axis:]))
    targets = const(ctx, idx, positions.reshape((1,) * axis + (n,) + (1,) * (rank - axis)), "positions")
    hit = ctx.emit(graph.CompareOp(column, targets, "eq", tensor_type(out, i1)))
    mask = ctx.emit(CastOp(hit, like(values, out)))
    off = ctx.emit(graph.SliceOp(values, [0], [1], like(values, (1,))))
    on = ctx.emit(graph.SliceOp(values, [1], [1], like(values, (1,))))
    span = ctx.emit(graph.SubOp(on, off, off.type))
    scaled = ctx.emit(graph.MulOp(mask, span, mask.type))
    return [ctx.emit(graph.AddOp(scaled, off, mask.type))]


ONEHOT_CONVERTERS = {"OneHot": convert_onehot}
"""ONNX op type -> converter, merged into the importer's table."""

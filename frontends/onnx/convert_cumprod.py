"""CumProd (opset 26) as a masked product over the input position.

Like CumSum (convert_index.py), a constant mask T[i, k] says whether input k
counts for output i (exclusive/reverse only change T); the product scan is
`reduce prod(where(T, x, 1))` over k. There is no log/exp: integer products
are exact (wrapping like the reference's fixed-width arithmetic) and zeros,
signs, inf and NaN stay where they belong.

```mlir
// CumProd along axis 0 of tensor<3xi32>
%w = graph.where %mask, %x2, %one : tensor<1x3x3x1xf32>, tensor<1x1x3x1xi32>, tensor<1xi32> -> tensor<1x3x3x1xi32>
%p = graph.reduce %w {kind = "prod", axes = array<i64: 2>} : tensor<1x3x3x1xi32> -> tensor<1x3x1xi32>
```
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import onnx
from xdsl.ir import SSAValue

from ziggurat.dialects import graph
from ziggurat.frontends.onnx.context import ConversionContext, Value, attributes, shape_of
from ziggurat.frontends.onnx.convert_index import const, const_input, mask, norm_axis, reduce, three_d
from ziggurat.frontends.onnx.convert_window import like, reshape

MAX_MASKED = 1 << 26
"""The masked [pre, n, n, post] product tensor above this many elements is refused."""


def prefix_product(ctx: ConversionContext, x: SSAValue, axis: int, exclusive: bool, reverse: bool) -> SSAValue:
    """CumProd of `x` along `axis` as where(T, x, 1) multiplied over the input position."""
    shape = shape_of(x)
    pre, n, post = three_d(shape, axis)
    if pre * n * n * post > MAX_MASKED:
        raise ctx.unsupported(f"a cumulative product over {n} positions builds {pre * n * n * post} elements, "
                              f"more than {MAX_MASKED}")
    i, k = np.arange(n)[:, None], np.arange(n)[None, :]
    t = (k > i if exclusive else k >= i) if reverse else (k < i if exclusive else k <= i)
    pair = ctx.emit(graph.WhereOp(mask(ctx, t.reshape(1, n, n, 1), "mask"), reshape(ctx, x, (pre, 1, n, post)),
                                  const(ctx, x, np.ones(1), "one"), like(x, (pre, n, n, post))))
    return reshape(ctx, reduce(ctx, pair, "prod", [2], False), shape)


def convert_cumprod(ctx: ConversionContext, node: onnx.NodeProto) -> Sequence[Value]:
    """CumProd (opset 26+) along a compile-time axis; exclusive and reverse."""
    attrs = attributes(node)
    x = ctx.value(node.input[0])
    axis_value = const_input(ctx, node, 1, "axis")
    if axis_value is None:
        raise ctx.shape_error("input 'axis' is required")
    if axis_value.size != 1:
        raise ctx.shape_error(f"axis must hold one value, got {axis_value.reshape(-1).tolist()}")
    shape = shape_of(x)
    if not shape:
        raise ctx.shape_error("input must have rank >= 1")
    axis = norm_axis(ctx, int(axis_value.reshape(-1)[0]), len(shape))
    return [prefix_product(ctx, x, axis, bool(attrs.get("exclusive", 0)), bool(attrs.get("reverse", 0)))]


CUMPROD_CONVERTERS = {"CumProd": convert_cumprod}
"""ONNX op type -> converter, merged into the importer's table."""

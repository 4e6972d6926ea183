"""The Indices output of a 2-D MaxPool (ONNX `MaxPool` output #1).

Each pooled value's flat position in its input tensor, of the first window
element (row-major window order) that equals the window's maximum, as the
ONNX reference scans: `(n * C + c) * H * W + h * W + w`, or with
storage_order = 1 (column-major planes) `(n * C + c) * H * W + h + w * H`.
The windows are constants of the attributes, so the import-time table T[p, k]
holds the in-plane position of window p's element k (or a -inf slot for
padding); at run time:

```
X' = concat(x as [N*C, H*W], -inf)              (N*C, H*W + 1)
V  = gather(X', T, axis 1)                       (N*C, P, K): the windows
E  = (V == y)                                    maxima, 1.0/0.0
S  = E * (K - k); first = (S == max_k S)         the first maximum
I  = sum_k first * D[p, k] + (n*C + c) * H * W   exact in float32, cast to int64
```

with D the window positions in the storage order.
"""

from __future__ import annotations

import numpy as np
import onnx
from xdsl.dialects.builtin import TensorType, f32, i64
from xdsl.ir import SSAValue

from ziggurat.dialects import graph
from ziggurat.dialects.graph_dtype import CastOp, GatherOp
from ziggurat.frontends.onnx.context import ConversionContext, attributes, element_type, shape_of, tensor_type

MAX_EXACT = 1 << 24
"""Positions are carried in float32 and must stay exact."""


def _windows(size: tuple[int, int], out: tuple[int, int], kernel: list[int], strides: list[int],
             pads: list[int], dilations: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """(rows, cols) of every window element, shape (P, K); -1 where it is padding."""
    rows = np.full((out[0] * out[1], kernel[0] * kernel[1]), -1, np.int64)
    cols = rows.copy()
    for ph in range(out[0]):
        for pw in range(out[1]):
            for kh in range(kernel[0]):
                for kw in range(kernel[1]):
                    h = ph * strides[0] - pads[0] + kh * dilations[0]
                    w = pw * strides[1] - pads[1] + kw * dilations[1]
                    if 0 <= h < size[0] and 0 <= w < size[1]:
                        rows[ph * out[1] + pw, kh * kernel[1] + kw] = h
                        cols[ph * out[1] + pw, kh * kernel[1] + kw] = w
    return rows, cols


def max_pool_indices(ctx: ConversionContext, node: onnx.NodeProto, x: SSAValue, y: SSAValue, kernel: list[int],
                     strides: list[int], pads: list[int], dilations: list[int]) -> SSAValue:
    """The int64 Indices of the float32 MaxPool `y` of `x` (NCHW, 2-D window)."""
    n, c, height, width = shape_of(x)
    out = shape_of(y)[2:]
    if element_type(x) != f32:
        raise ctx.unsupported("the Indices output needs a float32 (or float32-computed) input")
    if n * c * height * width >= MAX_EXACT:
        raise ctx.unsupported(f"input {shape_of(x)} has more elements than float32 indexes exactly")
    storage_order = int(attributes(node).get("storage_order", 0))
    rows, cols = _windows((height, width), (out[0], out[1]), kernel, strides, pads, dilations)
    valid = rows >= 0
    table = np.where(valid, rows * width + cols, height * width)  # padding reads the -inf slot
    spots = np.where(valid, rows * width + cols if storage_order == 0 else rows + cols * height, 0)
    planes, p, k = n * c, *table.shape

    def const(array: np.ndarray, label: str, dtype=np.float32) -> SSAValue:
        return ctx.add_constant(np.ascontiguousarray(array, dtype), f"{ctx.node_label}.{label}")

    flat = ctx.reshape(x, (planes, height * width))
    ext = ctx.emit(graph.ConcatOp([flat, const(np.full((planes, 1), -np.inf), "pad_slot")], 1,
                                  tensor_type((planes, height * width + 1))))
    windows = ctx.emit(GatherOp(ext, const(table.reshape(-1), "windows", np.int64), 1, tensor_type((planes, p * k))))
    windows = ctx.reshape(windows, (planes, p, k))
    full = tensor_type((planes, p, k))
    is_max = ctx.emit(graph.CompareOp(windows, ctx.reshape(y, (planes, p, 1)), "eq", full))
    score = ctx.emit(graph.MulOp(is_max, const((k - np.arange(k)).reshape(1, 1, k), "order"), full))
    best = ctx.emit(graph.ReduceOp(score, "max", [2], True, tensor_type((planes, p, 1))))
    first = ctx.emit(graph.MulOp(ctx.emit(graph.CompareOp(score, best, "eq", full)), is_max, full))
    where = ctx.emit(graph.MulOp(first, const(spots.reshape(1, p, k), "spots"), full))
    index = ctx.emit(graph.ReduceOp(where, "sum", [2], False, tensor_type((planes, p))))
    base = const((np.arange(planes) * height * width).reshape(planes, 1), "plane_base")
    index = ctx.emit(graph.AddOp(index, base, index.type))
    index = ctx.reshape(index, shape_of(y))
    return ctx.emit(CastOp(index, TensorType(i64, list(shape_of(y)))))

"""Col2Im (opset 18): sliding-window columns summed back into an image.

The input [N, C * prod(block), L] holds, for each channel, kernel offset k and
block position l, one value that lands on image pixel p(k, l) (or in the
padding). Which (k, l) land on each pixel is worked out at import time from
image_shape, block_shape, dilations, pads and strides (compile-time inputs:
constants or bound shape parameters). At run time each pixel gathers its at
most D contributors, in kernel-offset order as the reference adds them, from
the flattened columns plus one zero slot (`graph.gather_elements`), and
sums them (`graph.reduce`). Exact data movement: no 0/1 matrix product, so
inf and NaN stay on the pixels they belong to.

```mlir
// 1x1x5x5 image from 1x4x16 columns, block 2x2: each pixel has D <= 4 contributors
%z = graph.concat %cols, %zero {axis = 2 : i64} : tensor<1x1x64xf32>, tensor<1x1x1xf32> -> tensor<1x1x65xf32>
%g = graph.gather_elements %z, %table {axis = 2 : i64} : tensor<1x1x65xf32>, tensor<1x1x100xf32> -> tensor<1x1x100xf32>
%s = graph.reduce %g4 {kind = "sum", axes = array<i64: 3>} : tensor<1x1x25x4xf32> -> tensor<1x1x25xf32>
```
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import onnx

from ziggurat.dialects import graph
from ziggurat.frontends.onnx.context import ConversionContext, Value, attributes, shape_of
from ziggurat.frontends.onnx.convert_index import const, const_input, index_table, reduce
from ziggurat.frontends.onnx.convert_window import like, reshape

MAX_TABLE = 1 << 24
"""The gather table (N * C * pixels * D entries) above this size is refused."""


def _ints(ctx: ConversionContext, node: onnx.NodeProto, index: int, what: str) -> list[int]:
    value = const_input(ctx, node, index, what)
    if value is None:
        raise ctx.shape_error(f"input '{what}' is required")
    return [int(v) for v in value.reshape(-1)]


def contributors(image: Sequence[int], block: Sequence[int], dilations: Sequence[int], pads: Sequence[int],
                 strides: Sequence[int]) -> tuple[np.ndarray, int]:
    """For each image pixel (row-major), the column indices k * L + l that land
    on it, in k order, padded with K * L (the zero slot): ([P, D] table, L)."""
    rank = len(image)
    counts = [(image[d] + pads[d] + pads[d + rank] - dilations[d] * (block[d] - 1) - 1) // strides[d] + 1
              for d in range(rank)]
    if any(c < 1 for c in counts):
        return np.zeros((0, 0), np.int64), 0
    blocks, positions = math.prod(block), math.prod(counts)
    k = np.arange(blocks)[:, None]
    l = np.arange(positions)[None, :]
    k_idx = np.unravel_index(np.broadcast_to(k, (blocks, positions)), block)
    l_idx = np.unravel_index(np.broadcast_to(l, (blocks, positions)), counts)
    coords = [l_idx[d] * strides[d] - pads[d] + k_idx[d] * dilations[d] for d in range(rank)]
    valid = np.all([(c >= 0) & (c < image[d]) for d, c in enumerate(coords)], axis=0)
    pixel = np.ravel_multi_index(tuple(np.where(valid, c, 0) for c in coords), image)
    column = k * positions + l + np.zeros_like(pixel)
    lists: list[list[int]] = [[] for _ in range(math.prod(image))]
    for p, col in zip(pixel[valid].tolist(), column[valid].tolist()):  # k-major: reference order
        lists[p].append(col)
    depth = max(1, max(len(v) for v in lists))
    table = np.full((len(lists), depth), blocks * positions, np.int64)
    for p, cols in enumerate(lists):
        table[p, :len(cols)] = cols
    return table, positions


def convert_col2im(ctx: ConversionContext, node: onnx.NodeProto) -> Sequence[Value]:
    """Col2Im (opsets 18+): input [N, C * prod(block_shape), L] -> [N, C, *image_shape]."""
    x = ctx.value(node.input[0])
    image, block = _ints(ctx, node, 1, "image_shape"), _ints(ctx, node, 2, "block_shape")
    rank = len(image)
    attrs = attributes(node)
    dilations = list(attrs.get("dilations", [1] * rank))
    pads = list(attrs.get("pads", [0] * 2 * rank))
    strides = list(attrs.get("strides", [1] * rank))
    if len(block) != rank or len(dilations) != rank or len(strides) != rank or len(pads) != 2 * rank:
        raise ctx.shape_error(f"image_shape {image}, block_shape {block}, dilations {dilations}, strides "
                              f"{strides} and pads {pads} disagree on the number of spatial dims")
    if min(image + block + dilations + strides) < 1 or min(pads, default=0) < 0:
        raise ctx.shape_error("image_shape, block_shape, dilations and strides must be positive, pads >= 0")
    shape = shape_of(x)
    blocks = math.prod(block)
    if len(shape) != 3 or shape[1] % blocks:
        raise ctx.shape_error(f"input shape {shape} must be [N, C * {blocks}, L]")
    table, positions = contributors(image, block, dilations, pads, strides)
    if positions != shape[2]:
        raise ctx.shape_error(f"input has {shape[2]} block positions; image_shape {image}, block_shape {block}, "
                              f"dilations, pads and strides give {positions}")
    n, c = shape[0], shape[1] // blocks
    pixels, depth = table.shape
    if n * c * pixels * depth > MAX_TABLE:
        raise ctx.unsupported(f"its gather table of {n * c * pixels * depth} entries exceeds {MAX_TABLE}")
    flat = reshape(ctx, x, (n, c, blocks * positions))
    zero = const(ctx, x, np.zeros((n, c, 1)), "zero")
    padded = ctx.emit(graph.ConcatOp([flat, zero], 2, like(x, (n, c, blocks * positions + 1))))
    indices = index_table(ctx, np.broadcast_to(table.reshape(1, 1, -1), (n, c, pixels * depth)), "table")
    gathered = ctx.emit(graph.GatherElementsOp(padded, indices, 2, like(x, (n, c, pixels * depth))))
    summed = reduce(ctx, reshape(ctx, gathered, (n, c, pixels, depth)), "sum", [3], False)
    return [reshape(ctx, summed, (n, c, *image))]


COL2IM_CONVERTERS = {"Col2Im": convert_col2im}
"""ONNX op type -> converter, merged into the importer's table."""

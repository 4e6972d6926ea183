"""STFT (opset 17): framed, windowed DFT of a [batch, length, 1 or 2] signal.

The frame step and frame length decide the output shape, so they must be
known at import time (constants or bound shape parameters); the window is a
run-time tensor. The frames are one `graph.gather` with constant positions
(frame f, sample j -> f * step + j) along the signal axis, reshaped to
[batch, frames, frame_length, components] and multiplied by the window; the
DFT along the frame axis is DFT's own conversion (convert_signal.convert_dft:
a matmul with constant matrices), onesided by default.

```mlir
%frames = graph.gather %signal, %positions {axis = 1 : i64} : tensor<1x128x1xf32>, tensor<240xi64> -> tensor<1x240x1xf32>
%w = graph.mul %frames4, %window4 : tensor<1x15x16x1xf32>, tensor<1x1x16x1xf32> -> tensor<1x15x16x1xf32>
```
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import onnx

from ziggurat.dialects import graph
from ziggurat.dialects.graph_dtype import GatherOp
from ziggurat.frontends.onnx.context import ConversionContext, Value, attributes, shape_of
from ziggurat.frontends.onnx.convert_index import const_input, require_float
from ziggurat.frontends.onnx.convert_signal import convert_dft
from ziggurat.frontends.onnx.convert_window import like, reshape


def _scalar(ctx: ConversionContext, node: onnx.NodeProto, index: int, what: str) -> int | None:
    value = const_input(ctx, node, index, what)
    if value is None:
        return None
    if value.size != 1:
        raise ctx.shape_error(f"{what} must hold one value, got shape {list(value.shape)}")
    return int(value.reshape(-1)[0])


def convert_stft(ctx: ConversionContext, node: onnx.NodeProto) -> Sequence[Value]:
    """STFT (opsets 17+): signal [B, L, 1 or 2], compile-time frame_step and
    frame_length, optional run-time window; output [B, frames, bins, 2]."""
    x = ctx.value(node.input[0])
    require_float(ctx, x)
    shape = shape_of(x)
    if len(shape) != 3 or shape[2] not in (1, 2):
        raise ctx.shape_error(f"signal shape {shape} must be [batch, length, 1 or 2]")
    step = _scalar(ctx, node, 1, "frame_step")
    if step is None or step < 1:
        raise ctx.shape_error(f"frame_step must be given and positive, got {step}")
    window_name = ctx.input(node, 2)
    window = ctx.value(window_name) if window_name is not None else None
    length = _scalar(ctx, node, 3, "frame_length")
    if window is not None:
        if len(shape_of(window)) != 1 or (length is not None and shape_of(window)[0] != length):
            raise ctx.shape_error(f"window shape {list(shape_of(window))} must be [frame_length = {length}]")
        length = shape_of(window)[0]
    n = shape[1] if length is None else length
    if not 1 <= n <= shape[1]:
        raise ctx.shape_error(f"frame_length {n} must be in [1, {shape[1]}] for a signal of length {shape[1]}")
    frames = 1 + (shape[1] - n) // step
    positions = (np.arange(frames)[:, None] * step + np.arange(n)[None, :]).reshape(-1).astype(np.int64)
    table = ctx.add_constant(positions, f"{ctx.node_label}.positions")
    picked = ctx.emit(GatherOp(x, table, 1, like(x, (shape[0], frames * n, shape[2]))))
    framed = reshape(ctx, picked, (shape[0], frames, n, shape[2]))
    if window is not None:
        w = reshape(ctx, window, (1, 1, n, 1))
        framed = ctx.emit(graph.MulOp(framed, w, framed.type))
    onesided = int(attributes(node).get("onesided", 1))
    name = f"{ctx.node_label}/frames"
    ctx.bind(name, framed)
    if ctx.opset >= 20:
        axis_name = f"{ctx.node_label}/axis"
        ctx.bind(axis_name, np.array(2, np.int64))
        dft = onnx.helper.make_node("DFT", [name, "", axis_name], ["y"], onesided=onesided)
    else:
        dft = onnx.helper.make_node("DFT", [name], ["y"], axis=2, onesided=onesided)
    return convert_dft(ctx, dft)


STFT_CONVERTERS = {"STFT": convert_stft}
"""ONNX op type -> converter, merged into the importer's table."""

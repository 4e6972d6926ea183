"""Converters for ONNX padding, tiling, block-rearrangement and transposed
convolution, decomposed onto `graph.slice`, `graph.concat`,
`graph.broadcast_to`, `graph.reshape`, `graph.transpose` and `graph.conv2d`."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import onnx
from xdsl.ir import SSAValue

from ziggurat.dialects import graph
import ziggurat.dtypes as dtypes
from ziggurat.frontends.onnx.context import ConversionContext, Value, attributes, element_type, like, shape_of, tensor_type
from ziggurat.frontends.onnx.convert_tensor import _axis, _const_ints, slice_value


def _concat(ctx: ConversionContext, parts: list[SSAValue], axis: int) -> SSAValue:
    if len(parts) == 1:
        return parts[0]
    shape = list(shape_of(parts[0]))
    shape[axis] = sum(shape_of(p)[axis] for p in parts)
    return ctx.emit(graph.ConcatOp(parts, axis, like(parts[0], shape)))


def _along(x: SSAValue, axis: int, start: int, step: int, count: int, ctx: ConversionContext) -> SSAValue:
    shape = shape_of(x)
    starts = [start if d == axis else 0 for d in range(len(shape))]
    steps = [step if d == axis else 1 for d in range(len(shape))]
    sizes = [count if d == axis else n for d, n in enumerate(shape)]
    return slice_value(ctx, x, starts, steps, sizes)


def _pad_part(ctx: ConversionContext, x: SSAValue, axis: int, count: int, before: bool, mode: str,
              value: float | SSAValue) -> SSAValue:
    """The `count` elements that `mode` puts before (or after) `x` along `axis`."""
    n = shape_of(x)[axis]
    shape = [count if d == axis else s for d, s in enumerate(shape_of(x))]
    if mode == "constant" and isinstance(value, SSAValue):
        return ctx.emit(graph.BroadcastToOp(value, like(x, shape)))
    if mode == "constant":
        return ctx.add_constant(np.full(shape, value, dtypes.to_numpy(element_type(x))), f"{ctx.node_label}.pad")
    if mode == "edge":
        edge = _along(x, axis, 0 if before else n - 1, 1, 1, ctx)
        return edge if count == 1 else ctx.emit(graph.BroadcastToOp(edge, like(x, shape)))
    if mode == "reflect":
        if count > n - 1:
            raise ctx.unsupported(f"reflect padding of {count} exceeds the dim size {n} minus 1")
        return _along(x, axis, count, -1, count, ctx) if before else _along(x, axis, n - 2, -1, count, ctx)
    if count > n:  # wrap
        raise ctx.unsupported(f"wrap padding of {count} exceeds the dim size {n}")
    return _along(x, axis, n - count, 1, count, ctx) if before else _along(x, axis, 0, 1, count, ctx)


def convert_pad(ctx: ConversionContext, node: onnx.NodeProto) -> Sequence[Value]:
    """Pad: pads/value attributes before opset 11, inputs from 11 (axes from 18);
    modes constant, reflect, edge and wrap (19+); negative pads crop."""
    attrs = attributes(node)
    shape = ctx.shape(node.input[0])
    rank = len(shape)
    mode = attrs.get("mode", "constant")
    if mode not in ("constant", "reflect", "edge", "wrap"):
        raise ctx.unsupported(f"mode '{mode}' is not constant, reflect, edge or wrap")
    if ctx.opset < 11:
        pads, value, axes = list(attrs.get("pads", attrs.get("paddings", []))), attrs.get("value", 0.0), None
    else:
        pads = _const_ints(ctx, node, 1, "pads") or []
        name = ctx.input(node, 2)
        value_array = ctx.constant(name) if name else np.zeros(1)
        if value_array is None:  # a run-time scalar, broadcast into the pads
            value = ctx.reshape(ctx.value(name), [1] * rank)
        else:
            value = value_array.reshape(-1)[0] if value_array.size else 0.0
        axes = _const_ints(ctx, node, 3, "axes")
    axes = list(range(rank)) if axes is None else [_axis(ctx, a, rank, "axes entry") for a in axes]
    if len(pads) != 2 * len(axes):
        raise ctx.shape_error(f"pads {pads} should hold 2 values per padded axis ({len(axes)})")
    x = ctx.value(node.input[0])
    for k, axis in enumerate(axes):
        before, after = pads[k], pads[k + len(axes)]
        n = shape_of(x)[axis]
        if before < 0 or after < 0:  # crop first
            lo, hi = max(-before, 0), n - max(-after, 0)
            if hi <= lo:
                raise ctx.unsupported("the padded result is empty; zero-size tensors are not supported")
            x = _along(x, axis, lo, 1, hi - lo, ctx)
            before, after = max(before, 0), max(after, 0)
        parts = []
        if before:
            parts.append(_pad_part(ctx, x, axis, before, True, mode, value))
        parts.append(x)
        if after:
            parts.append(_pad_part(ctx, x, axis, after, False, mode, value))
        x = _concat(ctx, parts, axis)
    return [x]


def convert_tile(ctx: ConversionContext, node: onnx.NodeProto) -> Sequence[Value]:
    """Tile (opsets 6+): [d0, d1] tiled [r0, r1] is [1, d0, 1, d1] broadcast to
    [r0, d0, r1, d1] and reshaped to [r0 * d0, r1 * d1]."""
    shape = ctx.shape(node.input[0])
    repeats = _const_ints(ctx, node, 1, "repeats")
    if repeats is None or len(repeats) != len(shape) or min(repeats, default=1) < 1:
        raise ctx.shape_error(f"repeats {repeats} should hold one count >= 1 per dim of {shape}")
    x = ctx.value(node.input[0])
    if all(r == 1 for r in repeats):
        return [x]
    spread = [v for n in shape for v in (1, n)]
    tiled = [v for r, n in zip(repeats, shape) for v in (r, n)]
    y = ctx.emit(graph.BroadcastToOp(ctx.reshape(x, spread), like(x, tiled)))
    return [ctx.reshape(y, [r * n for r, n in zip(repeats, shape)])]


def convert_depth_to_space(ctx: ConversionContext, node: onnx.NodeProto) -> Sequence[Value]:
    """DepthToSpace (DCR, and CRD from opset 11) and SpaceToDepth: reshape,
    transpose, reshape, as the ONNX spec defines them."""
    attrs = attributes(node)
    b = attrs["blocksize"]
    x = ctx.value(node.input[0])
    shape = shape_of(x)
    if len(shape) != 4:
        raise ctx.shape_error(f"input shape {shape} must be 4-D NCHW")
    n, c, h, w = shape
    if node.op_type == "SpaceToDepth":
        if h % b or w % b:
            raise ctx.shape_error(f"H and W of {shape} must be multiples of blocksize {b}")
        tmp, out = (n, c, h // b, b, w // b, b), (n, c * b * b, h // b, w // b)
        perm = (0, 1, 3, 5, 2, 4) if attrs.get("mode", "DCR") == "CRD" else (0, 3, 5, 1, 2, 4)
    else:
        if c % (b * b):
            raise ctx.shape_error(f"C of {shape} must be a multiple of blocksize^2 = {b * b}")
        if attrs.get("mode", "DCR") == "CRD":
            tmp, perm = (n, c // (b * b), b, b, h, w), (0, 1, 4, 2, 5, 3)
        else:
            tmp, perm = (n, b, b, c // (b * b), h, w), (0, 3, 4, 1, 5, 2)
        out = (n, c // (b * b), h * b, w * b)
    y = ctx.reshape(x, tmp)
    y = ctx.emit(graph.TransposeOp(y, perm, like(y, [tmp[p] for p in perm])))
    return [ctx.reshape(y, out)]




def _zero_insert(ctx: ConversionContext, x: SSAValue, axis: int, stride: int) -> SSAValue:
    """`stride - 1` zeros between neighbours along `axis` (n -> (n - 1) * stride + 1)."""
    shape = shape_of(x)
    n = shape[axis]
    if stride == 1 or n == 1:
        return x
    spread = (*shape[:axis + 1], 1, *shape[axis + 1:])
    zeros = ctx.add_constant(np.zeros((*shape[:axis + 1], stride - 1, *shape[axis + 1:]), np.float32),
                             f"{ctx.node_label}.zeros{axis}")
    y = _concat(ctx, [ctx.reshape(x, spread), zeros], axis + 1)
    y = ctx.reshape(y, (*shape[:axis], n * stride, *shape[axis + 1:]))
    return _along(y, axis, 0, 1, (n - 1) * stride + 1, ctx)


def _pad_axis(ctx: ConversionContext, x: SSAValue, axis: int, before: int, after: int) -> SSAValue:
    """Zero padding (negative: cropping) of `axis`."""
    n = shape_of(x)[axis]
    lo, hi = max(-before, 0), n - max(-after, 0)
    if hi <= lo:
        raise ctx.unsupported("the padded input is empty; zero-size tensors are not supported")
    x = _along(x, axis, lo, 1, hi - lo, ctx)
    parts = []
    if before > 0:
        parts.append(_pad_part(ctx, x, axis, before, True, "constant", 0.0))
    parts.append(x)
    if after > 0:
        parts.append(_pad_part(ctx, x, axis, after, False, "constant", 0.0))
    return _concat(ctx, parts, axis)


def convert_conv_transpose(ctx: ConversionContext, node: onnx.NodeProto) -> Sequence[Value]:
    """ConvTranspose (opsets 1+), 2-D: zeros inserted between input pixels
    (strides), padded by dilation * (kernel - 1) - pads (+ output_padding), then a
    stride-1 graph.conv2d with the kernel flipped and its in/out channels
    swapped per group. output_shape and auto_pad set the pads as the ONNX spec
    says (negative pads crop)."""
    attrs = attributes(node)
    x, w = ctx.value(node.input[0]), ctx.value(node.input[1])
    xs, ws = shape_of(x), shape_of(w)
    if len(xs) != 4 or len(ws) != 4:
        raise ctx.unsupported(f"only 2-D transposed convolution (4-D NCHW input) is supported, got input {xs}")
    group = attrs.get("group", 1)
    if ws[0] != xs[1] or xs[1] % group:
        raise ctx.shape_error(f"weight {ws} does not fit input {xs} with group={group}")
    strides = list(attrs.get("strides", [1, 1]))
    dil = list(attrs.get("dilations", [1, 1]))
    k = list(ws[2:])
    out_pad = list(attrs.get("output_padding", [0, 0]))
    auto_pad = attrs.get("auto_pad", "NOTSET")
    if "output_shape" in attrs or (auto_pad in ("SAME_UPPER", "SAME_LOWER") and "pads" not in attrs):
        target = list(attrs.get("output_shape", [xs[2 + i] * strides[i] for i in (0, 1)]))[-2:]
        total = [strides[i] * (xs[2 + i] - 1) + out_pad[i] + (k[i] - 1) * dil[i] + 1 - target[i] for i in (0, 1)]
        first = [t // 2 if auto_pad == "SAME_UPPER" else t - t // 2 for t in total]
        pads = first + [t - f for t, f in zip(total, first)]
    else:
        pads = list(attrs.get("pads", [0, 0, 0, 0]))
    y = x
    for i in (0, 1):
        y = _zero_insert(ctx, y, 2 + i, strides[i])
        reach = dil[i] * (k[i] - 1)
        y = _pad_axis(ctx, y, 2 + i, reach - pads[i], reach - pads[2 + i] + out_pad[i])
    c_in, c_out_g = ws[0], ws[1]
    grouped = ctx.reshape(w, (group, c_in // group, c_out_g, k[0], k[1]))
    swapped = ctx.emit(graph.TransposeOp(grouped, (0, 2, 1, 3, 4),
                                         tensor_type((group, c_out_g, c_in // group, k[0], k[1]))))
    kernel = ctx.reshape(swapped, (group * c_out_g, c_in // group, k[0], k[1]))
    kernel = slice_value(ctx, kernel, [0, 0, k[0] - 1, k[1] - 1], [1, 1, -1, -1], shape_of(kernel))
    ys = shape_of(y)
    oh, ow = ys[2] - dil[0] * (k[0] - 1), ys[3] - dil[1] * (k[1] - 1)
    result = ctx.emit(graph.Conv2dOp(y, kernel, tensor_type((xs[0], group * c_out_g, oh, ow)),
                                     [1, 1], [0, 0, 0, 0], dil, group))
    bias = ctx.input(node, 2)
    if bias is not None:
        result = ctx.emit(graph.AddOp(result, ctx.reshaped(bias, (group * c_out_g, 1, 1)), result.type))
    return [result]


LAYOUT_CONVERTERS = {
    "Pad": convert_pad,
    "Tile": convert_tile,
    "DepthToSpace": convert_depth_to_space,
    "SpaceToDepth": convert_depth_to_space,
    "ConvTranspose": convert_conv_transpose,
}
"""ONNX op type -> converter, merged into the importer's table."""

"""3-D ConvTranspose (input [N, C, D, H, W]) as a stride-1 3-D convolution.

As in the 2-D converter (convert_layout.convert_conv_transpose): along each
spatial axis `stride - 1` zeros go between input pixels, then the axis is
padded by `dilation * (kernel - 1) - pads` (plus output_padding at the end;
negative pads crop). The kernel [C_in, C_out/G, KD, KH, KW] has its in/out
channels swapped per group and is flipped along the three spatial axes; the
result is a stride-1, unpadded, dilated, grouped 3-D convolution, which
convert_window's 3-D Conv maps onto `graph.conv2d`. output_shape and
auto_pad set the pads as the ONNX spec says.

```
x [1, 1, 3, 4, 5], w [1, 2, 3, 3, 3]  ->  pad 2 per side: [1, 1, 7, 8, 9]
  -> Conv (w swapped/flipped [2, 1, 3, 3, 3])  ->  y [1, 2, 5, 6, 7]
```
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import onnx
from onnx import helper
from xdsl.ir import SSAValue

from ziggurat.dialects import graph
from ziggurat.frontends.onnx.context import ConversionContext, Value, attributes, shape_of, tensor_type
from ziggurat.frontends.onnx.convert_layout import _pad_axis, _zero_insert
from ziggurat.frontends.onnx.convert_tensor import slice_value


def _pads(ctx: ConversionContext, attrs: dict, xs: tuple, k: list[int], strides: list[int], dil: list[int],
          out_pad: list[int]) -> list[int]:
    """[begins..., ends...] of the three spatial axes."""
    auto_pad = attrs.get("auto_pad", "NOTSET")
    if "output_shape" in attrs or (auto_pad in ("SAME_UPPER", "SAME_LOWER") and "pads" not in attrs):
        target = list(attrs.get("output_shape", [xs[2 + i] * strides[i] for i in range(3)]))[-3:]
        total = [strides[i] * (xs[2 + i] - 1) + out_pad[i] + (k[i] - 1) * dil[i] + 1 - target[i] for i in range(3)]
        first = [t // 2 if auto_pad == "SAME_UPPER" else t - t // 2 for t in total]
        return first + [t - f for t, f in zip(total, first)]
    pads = list(attrs.get("pads", [0] * 6))
    if len(pads) != 6:
        raise ctx.shape_error(f"pads {pads} must hold 6 values for a 3-D window")
    return pads


def conv_transpose_3d(ctx: ConversionContext, node: onnx.NodeProto,
                      conv_3d: Callable[[ConversionContext, onnx.NodeProto], SSAValue]) -> Sequence[Value]:
    """ConvTranspose on [N, C, D, H, W]; `conv_3d(ctx, node)` converts a 3-D Conv node."""
    attrs = attributes(node)
    x, w = ctx.value(node.input[0]), ctx.value(node.input[1])
    xs, ws = shape_of(x), ctx.shape(node.input[1])
    group = attrs.get("group", 1)
    if len(ws) != 5 or ws[0] != xs[1] or xs[1] % group:
        raise ctx.shape_error(f"weight {ws} does not fit input {xs} with group={group}")
    k = list(ws[2:])
    strides = list(attrs.get("strides", [1, 1, 1]))
    dil = list(attrs.get("dilations", [1, 1, 1]))
    out_pad = list(attrs.get("output_padding", [0, 0, 0]))
    if not len(strides) == len(dil) == len(out_pad) == 3:
        raise ctx.shape_error(f"strides {strides}, dilations {dil} and output_padding {out_pad} must hold 3 values")
    pads = _pads(ctx, attrs, xs, k, strides, dil, out_pad)
    y = x
    for i in range(3):
        y = _zero_insert(ctx, y, 2 + i, strides[i])
        reach = dil[i] * (k[i] - 1)
        y = _pad_axis(ctx, y, 2 + i, reach - pads[i], reach - pads[3 + i] + out_pad[i])
    c_in, c_out_g = ws[0], ws[1]
    swapped_shape = (group * c_out_g, c_in // group, *k)
    weight = ctx.constant(node.input[1])
    if weight is not None:
        kernel: Value = np.ascontiguousarray(
            weight.reshape(group, c_in // group, c_out_g, *k).transpose(0, 2, 1, 3, 4, 5)
            .reshape(swapped_shape)[:, :, ::-1, ::-1, ::-1])
    else:
        grouped = ctx.reshape(w, (group, c_in // group, c_out_g, *k))
        swapped = ctx.emit(graph.TransposeOp(grouped, (0, 2, 1, 3, 4, 5),
                                             tensor_type((group, c_out_g, c_in // group, *k))))
        kernel = slice_value(ctx, ctx.reshape(swapped, swapped_shape), [0, 0, k[0] - 1, k[1] - 1, k[2] - 1],
                             [1, 1, -1, -1, -1], swapped_shape)
    tag = f"{node.output[0]}::transposed"
    ctx.bind(f"{tag}.x", y)
    ctx.bind(f"{tag}.w", kernel)
    inputs = [f"{tag}.x", f"{tag}.w"] + ([node.input[2]] if ctx.input(node, 2) is not None else [])
    conv = helper.make_node("Conv", inputs, list(node.output), name=node.name, group=group, dilations=dil,
                            kernel_shape=k)
    result = conv_3d(ctx, conv)
    assert isinstance(result, SSAValue)
    return [result]

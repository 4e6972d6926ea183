"""Window ops of any spatial rank, decomposed onto the 2-D graph core.

The graph dialect has 2-D window ops only (`graph.conv2d`, `graph.max_pool2d`,
`graph.avg_pool2d`). The other spatial ranks map onto them:

* 1-D (Conv, ConvTranspose, MaxPool, AveragePool, LpPool on [N, C, L]): a unit
  H dimension, [N, C, 1, L], through the 2-D converter with 2-D attributes.
* 3-D pooling (MaxPool, AveragePool, LpPool on [N, C, D, H, W]): max, sum and
  the averaging divisor are separable over a box window, so a 2-D pool over
  (H, W) on [N, C*D, H, W] is followed by a 2-D pool over (D, 1) on
  [N, C, D, H'*W'], each with its own pads, strides, dilations and ceil_mode.
* 3-D Conv: the D window moves into the batch and the channels. For each
  kernel depth kz, the strided depth slab of the zero-padded input is
  [N, D_out, C, H, W]; the KD slabs are stacked group-major as channels
  [N*D_out, G*KD*Cg, H, W] and one grouped `graph.conv2d` with the weight
  rearranged to [O, KD*Cg, KH, KW] computes the whole convolution.
* LpPool (any rank): |x|^p summed over each window by a depthwise
  `graph.conv2d` with a ones kernel (padding adds zeros), then ^(1/p).

```mlir
// MaxPool kernel [2, 2, 2] on tensor<1x3x4x4x4xf32>
%a = graph.reshape %x : tensor<1x3x4x4x4xf32> -> tensor<1x12x4x4xf32>
%b = graph.max_pool2d %a {kernel = array<i64: 2, 2>, ...} : tensor<1x12x4x4xf32> -> tensor<1x12x3x3xf32>
%c = graph.reshape %b : tensor<1x12x3x3xf32> -> tensor<1x3x4x9xf32>
%d = graph.max_pool2d %c {kernel = array<i64: 2, 1>, ...} : tensor<1x3x4x9xf32> -> tensor<1x3x3x9xf32>
%y = graph.reshape %d : tensor<1x3x3x9xf32> -> tensor<1x3x3x3x3xf32>
```
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import onnx
from onnx import helper
from xdsl.dialects.builtin import TensorType
from xdsl.ir import SSAValue

from ziggurat.dialects import graph
from ziggurat.frontends.onnx.context import ConversionContext, Value, attributes, shape_of
from ziggurat.frontends.onnx.convert_layout import convert_conv_transpose
from ziggurat.frontends.onnx.convert_nn import convert_average_pool, convert_conv, convert_max_pool

Converter = Callable[[ConversionContext, onnx.NodeProto], Sequence[Value]]


def like(value: SSAValue, shape: Sequence[int]) -> TensorType:
    """A tensor type of `shape` with the element type of `value`."""
    return TensorType(value.type.element_type, list(shape))  # type: ignore[attr-defined]


def reshape(ctx: ConversionContext, value: SSAValue, shape: Sequence[int]) -> SSAValue:
    if shape_of(value) == tuple(shape):
        return value
    return ctx.emit(graph.ReshapeOp(value, like(value, shape)))


def transpose(ctx: ConversionContext, value: SSAValue, perm: Sequence[int]) -> SSAValue:
    shape = shape_of(value)
    if list(perm) == list(range(len(shape))):
        return value
    return ctx.emit(graph.TransposeOp(value, tuple(perm), like(value, [shape[p] for p in perm])))


def constant_like(ctx: ConversionContext, value: SSAValue, array: np.ndarray, label: str) -> SSAValue:
    """A constant with the element type of `value` (float32 while that is what runs)."""
    return ctx.add_constant(np.ascontiguousarray(array, dtype=np.float32), f"{ctx.node_label}.{label}")


# ---------------------------------------------------------------------------
# Window attributes of any rank
# ---------------------------------------------------------------------------


def window_attrs(ctx: ConversionContext, attrs: dict[str, Any], spatial: Sequence[int],
                 kernel: Sequence[int]) -> tuple[list[int], list[int], list[int]]:
    """(strides, dilations, pads) of an n-D window; pads as [begins..., ends...]
    from `pads` or `auto_pad` (SAME_* give out = ceil(in / stride), the odd
    pad at the end for SAME_UPPER and at the beginning for SAME_LOWER)."""
    n = len(spatial)
    strides = list(attrs.get("strides", [1] * n))
    dilations = list(attrs.get("dilations", [1] * n))
    if len(strides) != n or len(dilations) != n or len(kernel) != n:
        raise ctx.shape_error(f"kernel {list(kernel)}, strides {strides} and dilations {dilations} "
                              f"must hold {n} values for a {n}-D window")
    auto_pad = attrs.get("auto_pad", "NOTSET")
    if auto_pad == "NOTSET":
        pads = list(attrs.get("pads", [0] * 2 * n))
        if len(pads) != 2 * n:
            raise ctx.shape_error(f"pads {pads} must hold {2 * n} values for a {n}-D window")
        if min(pads) < 0:
            raise ctx.unsupported(f"negative pads {pads} are not supported")
        return strides, dilations, pads
    if auto_pad == "VALID":
        return strides, dilations, [0] * 2 * n
    if auto_pad not in ("SAME_UPPER", "SAME_LOWER"):
        raise ctx.unsupported(f"auto_pad '{auto_pad}' is not NOTSET, VALID, SAME_UPPER or SAME_LOWER")
    begins, ends = [], []
    for size, k, s, d in zip(spatial, kernel, strides, dilations, strict=True):
        total = max(0, (-(-size // s) - 1) * s + (k - 1) * d + 1 - size)
        small, large = total // 2, total - total // 2
        begins.append(small if auto_pad == "SAME_UPPER" else large)
        ends.append(large if auto_pad == "SAME_UPPER" else small)
    return strides, dilations, begins + ends


def _node_2d(node: onnx.NodeProto, inputs: Sequence[str], attrs: dict[str, Any]) -> onnx.NodeProto:
    """A copy of `node` with other input names and attributes."""
    return helper.make_node(node.op_type, list(inputs), list(node.output), name=node.name, **attrs)


# ---------------------------------------------------------------------------
# 1-D: a unit H dimension
# ---------------------------------------------------------------------------

_PER_DIM = ("kernel_shape", "strides", "dilations", "output_padding", "output_shape")


def _lift_1d(ctx: ConversionContext, node: onnx.NodeProto, convert: Converter, with_weight: bool) -> Sequence[Value]:
    """Runs the 2-D converter on [N, C, 1, L] (and an [O, I, 1, K] weight)."""
    attrs = attributes(node)
    lifted: dict[str, Any] = {}
    for key, value in attrs.items():
        if key in _PER_DIM:
            if len(value) != 1:
                raise ctx.shape_error(f"{key} {list(value)} must hold 1 value for a 1-D window")
            lifted[key] = [0 if key == "output_padding" else 1, *value]
        elif key == "pads":
            if len(value) != 2:
                raise ctx.shape_error(f"pads {list(value)} must hold 2 values for a 1-D window")
            lifted[key] = [0, value[0], 0, value[1]]
        else:
            lifted[key] = value
    names = list(node.input)
    tag = f"{node.output[0]}::2d"
    x = ctx.value(node.input[0])
    n, c, length = shape_of(x)
    ctx.bind(f"{tag}.x", reshape(ctx, x, (n, c, 1, length)))
    names[0] = f"{tag}.x"
    if with_weight:
        w_shape = ctx.shape(node.input[1])
        if len(w_shape) != 3:
            raise ctx.shape_error(f"weight shape {w_shape} must have rank 3 for a 1-D window")
        weight = ctx.constant(node.input[1])
        if weight is not None:
            ctx.bind(f"{tag}.w", weight.reshape(w_shape[0], w_shape[1], 1, w_shape[2]))
        else:
            ctx.bind(f"{tag}.w", reshape(ctx, ctx.value(node.input[1]), (w_shape[0], w_shape[1], 1, w_shape[2])))
        names[1] = f"{tag}.w"
    results = convert(ctx, _node_2d(node, names, lifted))
    out = []
    for r in results:
        if isinstance(r, np.ndarray):
            out.append(r.reshape(r.shape[0], r.shape[1], r.shape[3]))
        else:
            s = shape_of(r)
            out.append(reshape(ctx, r, (s[0], s[1], s[3])))
    return out


# ---------------------------------------------------------------------------
# 3-D pooling: separable into two 2-D pools
# ---------------------------------------------------------------------------


def _pool_3d(ctx: ConversionContext, node: onnx.NodeProto, convert: Converter, x: SSAValue,
             extra: dict[str, Any]) -> SSAValue:
    """A 3-D max/average pool of `x` as a 2-D pool over (H, W), then over (D, 1)."""
    attrs = attributes(node)
    n, c, d, h, w = shape_of(x)
    kernel = list(attrs["kernel_shape"])
    strides, dilations, pads = window_attrs(ctx, attrs, (d, h, w), kernel)
    common = {k: v for k, v in attrs.items() if k in ("ceil_mode", "count_include_pad")} | extra
    tag = f"{node.output[0]}::3d"
    ctx.bind(f"{tag}.hw", reshape(ctx, x, (n, c * d, h, w)))
    hw_attrs = {"kernel_shape": kernel[1:], "strides": strides[1:], "dilations": dilations[1:],
                "pads": [pads[1], pads[2], pads[4], pads[5]], **common}
    (y,) = convert(ctx, _node_2d(node, [f"{tag}.hw"], hw_attrs))
    _, _, h2, w2 = shape_of(y)  # type: ignore[arg-type]
    ctx.bind(f"{tag}.d", reshape(ctx, y, (n, c, d, h2 * w2)))  # type: ignore[arg-type]
    d_attrs = {"kernel_shape": [kernel[0], 1], "strides": [strides[0], 1], "dilations": [dilations[0], 1],
               "pads": [pads[0], 0, pads[3], 0], **common}
    (z,) = convert(ctx, _node_2d(node, [f"{tag}.d"], d_attrs))
    d2 = shape_of(z)[2]  # type: ignore[arg-type]
    return reshape(ctx, z, (n, c, d2, h2, w2))  # type: ignore[arg-type]


def _check_pool_outputs(ctx: ConversionContext, node: onnx.NodeProto) -> None:
    if len(node.output) > 1 and any(node.output[1:]):
        raise ctx.unsupported(f"output #1 ('{node.output[1]}', the Indices) is supported for 2-D pools only")


def convert_max_pool_nd(ctx: ConversionContext, node: onnx.NodeProto) -> Sequence[Value]:
    """MaxPool, 1-D to 3-D (2-D by convert_nn.convert_max_pool); the Indices
    output in 2-D only (convert_pool_indices.py, which reads storage_order)."""
    rank = len(ctx.shape(node.input[0]))
    if rank == 4 and len(node.output) > 1 and node.output[1]:
        from ziggurat.frontends.onnx.convert_pool_indices import max_pool_indices

        x = ctx.value(node.input[0])
        kernel = list(attributes(node)["kernel_shape"])
        strides, dilations, pads = window_attrs(ctx, attributes(node), shape_of(x)[2:], kernel)
        (y,) = convert_max_pool(ctx, node)
        return [y, max_pool_indices(ctx, node, x, y, kernel, strides, pads, dilations)]  # type: ignore[arg-type]
    _check_pool_outputs(ctx, node)
    if rank == 3:
        return _lift_1d(ctx, node, convert_max_pool, False)
    if rank == 5:
        return [_pool_3d(ctx, node, convert_max_pool, ctx.value(node.input[0]), {})]
    return convert_max_pool(ctx, node)


def convert_average_pool_nd(ctx: ConversionContext, node: onnx.NodeProto) -> Sequence[Value]:
    """AveragePool, 1-D to 3-D (2-D by convert_nn.convert_average_pool). In 3-D
    the divisor (positions inside the input, or inside the padded input with
    count_include_pad) is the product of per-dim counts, so two 2-D averages
    compose exactly."""
    rank = len(ctx.shape(node.input[0]))
    if rank == 3:
        return _lift_1d(ctx, node, convert_average_pool, False)
    if rank == 5:
        return [_pool_3d(ctx, node, convert_average_pool, ctx.value(node.input[0]), {})]
    return convert_average_pool(ctx, node)


# ---------------------------------------------------------------------------
# Convolution: 1-D lifted, 3-D with the depth window in the channels
# ---------------------------------------------------------------------------


def convert_conv_nd(ctx: ConversionContext, node: onnx.NodeProto) -> Sequence[Value]:
    """Conv, 1-D to 3-D (2-D by convert_nn.convert_conv). A QDQ Conv with a window larger than one
    point, 1-D or 2-D, is an int8 GEMM over im2col rows where the target has an int8 dot product
    (convert_qdq_matmul.qdq_conv_im2col)."""
    from ziggurat.frontends.onnx.convert_qdq_matmul import qdq_conv_im2col

    fused = qdq_conv_im2col(ctx, node)
    if fused is not None:
        return [fused]
    rank = len(ctx.shape(node.input[0]))
    if rank == 3:
        return _lift_1d(ctx, node, convert_conv, True)
    if rank == 5:
        return [_conv_3d(ctx, node)]
    return convert_conv(ctx, node)


def convert_conv_transpose_nd(ctx: ConversionContext, node: onnx.NodeProto) -> Sequence[Value]:
    """ConvTranspose, 1-D lifted onto the 2-D converter; 2-D by convert_layout;
    3-D as a stride-1 3-D Conv (convert_conv_transpose_3d.py)."""
    if len(ctx.shape(node.input[0])) == 3:
        return _lift_1d(ctx, node, convert_conv_transpose, True)
    if len(ctx.shape(node.input[0])) == 5:
        from ziggurat.frontends.onnx.convert_conv_transpose_3d import conv_transpose_3d

        return conv_transpose_3d(ctx, node, _conv_3d)
    return convert_conv_transpose(ctx, node)


def _pad_depth(ctx: ConversionContext, x: SSAValue, axis: int, before: int, after: int) -> SSAValue:
    """`x` with zero slabs before and after along `axis`."""
    shape = shape_of(x)
    parts = []
    for size, label in ((before, "pad_before"), (after, "pad_after")):
        slab = [size if a == axis else s for a, s in enumerate(shape)]
        parts.append(constant_like(ctx, x, np.zeros(slab), label) if size > 0 else None)
    chain = [p for p in (parts[0], x, parts[1]) if p is not None]
    if len(chain) == 1:
        return x
    out = [shape[axis] + before + after if a == axis else s for a, s in enumerate(shape)]
    return ctx.emit(graph.ConcatOp(chain, axis, like(x, out)))


def _conv_3d(ctx: ConversionContext, node: onnx.NodeProto) -> SSAValue:
    attrs = attributes(node)
    x, wv = ctx.value(node.input[0]), ctx.value(node.input[1])
    n, c, d, h, w = shape_of(x)
    ws = shape_of(wv)
    group = attrs.get("group", 1)
    if len(ws) != 5 or ws[1] * group != c or ws[0] % group:
        raise ctx.shape_error(f"weight {ws} does not fit input {(n, c, d, h, w)} with group={group}")
    o, cg, kd, kh, kw = ws
    if list(attrs.get("kernel_shape", ws[2:])) != list(ws[2:]):
        raise ctx.shape_error(f"kernel_shape {attrs['kernel_shape']} differs from the weight's {ws[2:]}")
    strides, dilations, pads = window_attrs(ctx, attrs, (d, h, w), ws[2:])
    d_out = (d + pads[0] + pads[3] - dilations[0] * (kd - 1) - 1) // strides[0] + 1
    if d_out <= 0:
        raise ctx.shape_error(f"the kernel {ws[2:]} does not fit the padded input {(n, c, d, h, w)}")
    # [N, Dp, C, H, W], then one strided depth slab per kz, stacked on a new axis
    xt = transpose(ctx, _pad_depth(ctx, x, 2, pads[0], pads[3]), (0, 2, 1, 3, 4))
    dp = shape_of(xt)[1]
    slabs = []
    for kz in range(kd):
        start = kz * dilations[0]
        slab = xt if (start, strides[0], d_out) == (0, 1, dp) else ctx.emit(graph.SliceOp(
            xt, [0, start, 0, 0, 0], [1, strides[0], 1, 1, 1], like(xt, (n, d_out, c, h, w))))
        slabs.append(reshape(ctx, slab, (n * d_out, 1, c, h, w)))
    stacked = slabs[0] if kd == 1 else ctx.emit(graph.ConcatOp(slabs, 1, like(x, (n * d_out, kd, c, h, w))))
    # channels group-major: [N*D_out, G, KD, Cg, H, W] -> [N*D_out, G*KD*Cg, H, W]
    grouped = transpose(ctx, reshape(ctx, stacked, (n * d_out, kd, group, cg, h, w)), (0, 2, 1, 3, 4, 5))
    x2 = reshape(ctx, grouped, (n * d_out, group * kd * cg, h, w))
    weight = ctx.constant(node.input[1])
    if weight is not None:
        w2: Value = np.ascontiguousarray(weight.transpose(0, 2, 1, 3, 4).reshape(o, kd * cg, kh, kw))
    else:
        w2 = reshape(ctx, transpose(ctx, wv, (0, 2, 1, 3, 4)), (o, kd * cg, kh, kw))
    tag = f"{node.output[0]}::3d"
    ctx.bind(f"{tag}.x", x2)
    ctx.bind(f"{tag}.w", w2)
    conv_attrs = {"group": group, "kernel_shape": [kh, kw], "strides": strides[1:], "dilations": dilations[1:],
                  "pads": [pads[1], pads[2], pads[4], pads[5]]}
    (y,) = convert_conv(ctx, _node_2d(node, [f"{tag}.x", f"{tag}.w"], conv_attrs))
    _, _, h2, w2_ = shape_of(y)  # type: ignore[arg-type]
    y = transpose(ctx, reshape(ctx, y, (n, d_out, o, h2, w2_)), (0, 2, 1, 3, 4))  # type: ignore[arg-type]
    bias = ctx.input(node, 2)
    if bias is None:
        return y
    if ctx.shape(bias) != (o,):
        raise ctx.shape_error(f"bias shape {ctx.shape(bias)} should be ({o},)")
    return ctx.emit(graph.AddOp(y, ctx.reshaped(bias, (o, 1, 1, 1)), y.type))


# ---------------------------------------------------------------------------
# LpPool: |x|^p, a window sum (depthwise ones convolution), ^(1/p)
# ---------------------------------------------------------------------------


def window_sum_2d(ctx: ConversionContext, x: SSAValue, kernel: Sequence[int], strides: Sequence[int],
                   dilations: Sequence[int], pads: Sequence[int], ceil: bool, label: str) -> SSAValue:
    """Sum of each 2-D window of [N, C, H, W] (zeros outside): a depthwise conv2d
    with a ones kernel; ceil_mode grows the end pads to reach the ceil output size."""
    n, c, h, w = shape_of(x)
    size = []
    pads = list(pads)
    for i, extent in enumerate((h, w)):
        out = graph.pool_output_size(extent, kernel[i], strides[i], pads[i], pads[2 + i], dilations[i], ceil)
        if out <= 0:
            raise ctx.shape_error(f"the window {list(kernel)} does not fit the padded input {(n, c, h, w)}")
        reach = (out - 1) * strides[i] + dilations[i] * (kernel[i] - 1) + 1
        pads[2 + i] = max(pads[2 + i], reach - extent - pads[i])
        size.append(out)
    ones = constant_like(ctx, x, np.ones((c, 1, *kernel)), label)
    return ctx.emit(graph.Conv2dOp(x, ones, like(x, (n, c, *size)), list(strides), pads, list(dilations), c))


def convert_lp_pool(ctx: ConversionContext, node: onnx.NodeProto) -> Sequence[Value]:
    """LpPool (opsets 2+; dilations and ceil_mode from 18), 1-D to 3-D:
    (sum over the window of |x|^p)^(1/p), padding counting as zeros."""
    attrs = attributes(node)
    x = ctx.value(node.input[0])
    shape = shape_of(x)
    if len(shape) not in (3, 4, 5):
        raise ctx.unsupported(f"only 1-D to 3-D pooling (rank 3 to 5 input) is supported, got shape {shape}")
    p = attrs.get("p", 2)
    if p <= 0:
        raise ctx.unsupported(f"p={p} is not supported; p must be positive")
    kernel = list(attrs["kernel_shape"])
    strides, dilations, pads = window_attrs(ctx, attrs, shape[2:], kernel)
    ceil = bool(attrs.get("ceil_mode", 0))
    if p == 1:
        powered = ctx.emit(graph.AbsOp(x))
    elif p == 2:
        powered = ctx.emit(graph.MulOp(x, x, x.type))
    else:
        exponent = constant_like(ctx, x, np.array([p]), "p")
        powered = ctx.emit(graph.PowOp(ctx.emit(graph.AbsOp(x)), exponent, x.type))
    k = len(kernel)
    if k == 1:
        y = reshape(ctx, powered, (shape[0], shape[1], 1, shape[2]))
        y = window_sum_2d(ctx, y, [1, *kernel], [1, *strides], [1, *dilations], [0, pads[0], 0, pads[1]],
                           ceil, "ones")
        s = shape_of(y)
        total = reshape(ctx, y, (s[0], s[1], s[3]))
    elif k == 2:
        total = window_sum_2d(ctx, powered, kernel, strides, dilations, pads, ceil, "ones")
    else:
        n, c, d, h, w = shape
        y = window_sum_2d(ctx, reshape(ctx, powered, (n, c * d, h, w)), kernel[1:], strides[1:], dilations[1:],
                           [pads[1], pads[2], pads[4], pads[5]], ceil, "ones_hw")
        h2, w2 = shape_of(y)[2:]
        z = window_sum_2d(ctx, reshape(ctx, y, (n, c, d, h2 * w2)), [kernel[0], 1], [strides[0], 1],
                           [dilations[0], 1], [pads[0], 0, pads[3], 0], ceil, "ones_d")
        total = reshape(ctx, z, (n, c, shape_of(z)[2], h2, w2))
    if p == 1:
        return [total]
    if p == 2:
        return [ctx.emit(graph.SqrtOp(total))]
    root = constant_like(ctx, total, np.array([1.0 / p]), "inv_p")
    return [ctx.emit(graph.PowOp(total, root, total.type))]


WINDOW_CONVERTERS: dict[str, Converter] = {
    "Conv": convert_conv_nd,
    "ConvTranspose": convert_conv_transpose_nd,
    "MaxPool": convert_max_pool_nd,
    "AveragePool": convert_average_pool_nd,
    "LpPool": convert_lp_pool,
}
"""ONNX op type -> converter, merged into the importer's table (after the 2-D ones it wraps)."""

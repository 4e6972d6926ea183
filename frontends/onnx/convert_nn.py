"""Converters for ONNX neural-network ops: convolution, pooling, normalization,
dense layers and softmax."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import onnx
from xdsl.dialects.builtin import BoolAttr
from xdsl.ir import SSAValue

from ziggurat.dialects import graph
from ziggurat.symbolic import Sym, SymbolicError, sampled_le
from ziggurat.frontends.onnx.context import (
    ConversionContext,
    element_type,
    Value,
    attributes,
    float32_literal,
    shape_of,
    tensor_type,
)

# ---------------------------------------------------------------------------
# Convolution and pooling
# ---------------------------------------------------------------------------


def _window_pads(
    ctx: ConversionContext, attrs: dict[str, Any], spatial: Sequence[int],
    kernel: Sequence[int], strides: Sequence[int], dilations: Sequence[int],
) -> list[int]:
    """Explicit [top, left, bottom, right] pads from `pads` or `auto_pad`.

    SAME_* pads so that out = ceil(in / stride); the odd pad goes at the end
    for SAME_UPPER and at the beginning for SAME_LOWER.
    """
    auto_pad = attrs.get("auto_pad", "NOTSET")
    if auto_pad == "NOTSET":
        pads = list(attrs.get("pads", [0, 0, 0, 0]))
        if len(pads) != 4:
            raise ctx.shape_error(f"pads {pads} must hold 4 values for a 2-D window")
        return pads
    if auto_pad == "VALID":
        return [0, 0, 0, 0]
    if auto_pad not in ("SAME_UPPER", "SAME_LOWER"):
        raise ctx.unsupported(f"auto_pad '{auto_pad}' is not NOTSET, VALID, SAME_UPPER or SAME_LOWER")
    begins, ends = [], []
    for size, k, s, d in zip(spatial, kernel, strides, dilations, strict=True):
        total = max(0, (-(-size // s) - 1) * s + (k - 1) * d + 1 - size)
        small, large = total // 2, total - total // 2
        begins.append(small if auto_pad == "SAME_UPPER" else large)
        ends.append(large if auto_pad == "SAME_UPPER" else small)
    return begins + ends


def _pair(ctx: ConversionContext, attrs: dict[str, Any], key: str) -> list[int]:
    """A per-spatial-dim attribute (strides, dilations), 1 by default."""
    values = list(attrs.get(key, [1, 1]))
    if len(values) != 2:
        raise ctx.shape_error(f"{key} {values} must hold 2 values for a 2-D window")
    return values


def _require_2d(ctx: ConversionContext, shape: Sequence[int], what: str) -> None:
    if len(shape) != 4:
        raise ctx.unsupported(
            f"only 2-D {what} (4-D NCHW input) is supported, got a {max(len(shape) - 2, 0)}-D {what}"
        )


def convert_conv(ctx: ConversionContext, node: onnx.NodeProto) -> Sequence[Value]:
    """Conv (opsets 1+), 2-D only: group, strides, pads, dilations, auto_pad and
    an optional bias B, added as a [C, 1, 1] tensor. A QDQ pointwise Conv on a target with an
    int8 dot product is an int8 GEMM (convert_qdq_matmul.py)."""
    from ziggurat.frontends.onnx.convert_qdq_matmul import qdq_conv_1x1

    fused = qdq_conv_1x1(ctx, node)
    if fused is not None:
        return [fused]
    attrs = attributes(node)
    x, w = ctx.value(node.input[0]), ctx.value(node.input[1])
    xs, ws = shape_of(x), shape_of(w)
    _require_2d(ctx, xs, "convolution")
    group = attrs.get("group", 1)
    if len(ws) != 4 or ws[1] * group != xs[1] or ws[0] % group:
        raise ctx.shape_error(f"weight {ws} does not fit input {xs} with group={group}")
    if list(attrs.get("kernel_shape", ws[2:])) != list(ws[2:]):
        raise ctx.shape_error(f"kernel_shape {attrs['kernel_shape']} differs from the weight's {ws[2:]}")
    strides, dilations = _pair(ctx, attrs, "strides"), _pair(ctx, attrs, "dilations")
    pads = _window_pads(ctx, attrs, xs[2:], ws[2:], strides, dilations)
    out = [(xs[2 + i] + pads[i] + pads[2 + i] - dilations[i] * (ws[2 + i] - 1) - 1) // strides[i] + 1 for i in (0, 1)]
    ctx.positive(out, f"the kernel {ws[2:]} does not fit the padded input {xs}")
    y = ctx.emit(graph.Conv2dOp(x, w, tensor_type((xs[0], ws[0], *out)), strides, pads, dilations, group))
    bias = ctx.input(node, 2)
    if bias is None:
        return [y]
    if ctx.shape(bias) != (ws[0],):
        raise ctx.shape_error(f"bias shape {ctx.shape(bias)} should be ({ws[0]},)")
    return [ctx.emit(graph.AddOp(y, ctx.reshaped(bias, (ws[0], 1, 1)), y.type))]


def _pool_extent(ctx: ConversionContext, size, k: int, s: int, p0: int, p1: int, d: int, ceil: bool):
    """`graph.pool_output_size`; over a symbolic size in ceil mode, whose last-window rule depends
    on the size's value, the smaller of the two candidates where sampling shows it always is, with
    that recorded as a constraint the calls check."""
    if not isinstance(size, Sym) or not ceil:
        return graph.pool_output_size(size, k, s, p0, p1, d, ceil)
    span = size + p0 + p1 - d * (k - 1) - 1
    by_span, by_start = (span + s - 1) // s + 1, (size + p0 + s - 1) // s  # windows must start inside
    for small, large in ((by_start, by_span), (by_span, by_start)):
        if sampled_le(small, large):
            ctx.require(small, "<=", large)
            return small
    raise SymbolicError(f"{ctx.node.op_type} node '{ctx.node_label}': its ceil-mode extent over '{size}' "  # type: ignore[union-attr]
                        "depends on the size's value")


def _convert_pool(
    ctx: ConversionContext, node: onnx.NodeProto, op: type[graph.Pool2dOp], flags: dict[str, bool]
) -> Sequence[Value]:
    """A 2-D window pool; `flags` are optional boolean properties, set when true."""
    attrs = attributes(node)
    x = ctx.value(node.input[0])
    xs = shape_of(x)
    _require_2d(ctx, xs, "pooling")
    kernel = list(attrs["kernel_shape"])
    if len(kernel) != 2:
        raise ctx.shape_error(f"kernel_shape {kernel} must hold 2 values for a 2-D window")
    strides, dilations = _pair(ctx, attrs, "strides"), _pair(ctx, attrs, "dilations")
    pads = _window_pads(ctx, attrs, xs[2:], kernel, strides, dilations)
    ceil = bool(attrs.get("ceil_mode", 0))
    out = [
        _pool_extent(ctx, xs[2 + i], kernel[i], strides[i], pads[i], pads[2 + i], dilations[i], ceil)
        for i in (0, 1)
    ]
    ctx.positive(out, f"the window {kernel} does not fit the padded input {xs}")
    props = {
        "kernel": graph.int_array(kernel),
        "strides": graph.int_array(strides),
        "pads": graph.int_array(pads),
        "dilations": graph.int_array(dilations),
    } | {key: BoolAttr.from_bool(True) for key, on in {"ceil_mode": ceil, **flags}.items() if on}
    return [ctx.emit(op(operands=[x], properties=props, result_types=[tensor_type((*xs[:2], *out))]))]


def convert_max_pool(ctx: ConversionContext, node: onnx.NodeProto) -> Sequence[Value]:
    """MaxPool (opsets 1+; dilations and ceil_mode from 10), 2-D, without the Indices output."""
    return _convert_pool(ctx, node, graph.MaxPool2dOp, {})


def convert_average_pool(ctx: ConversionContext, node: onnx.NodeProto) -> Sequence[Value]:
    """AveragePool (opsets 7+; ceil_mode from 10, dilations from 19), 2-D, with count_include_pad."""
    include_pad = bool(attributes(node).get("count_include_pad", 0))
    return _convert_pool(ctx, node, graph.AvgPool2dOp, {"count_include_pad": include_pad})


def convert_global_average_pool(ctx: ConversionContext, node: onnx.NodeProto) -> Sequence[Value]:
    """GlobalAveragePool (opsets 1+): mean over all spatial dims, kept as size-1 dims."""
    x = ctx.value(node.input[0])
    xs = shape_of(x)
    if len(xs) < 3:
        raise ctx.shape_error(f"input shape {xs} needs rank >= 3 (N, C, spatial...)")
    out = tensor_type((*xs[:2], *[1] * (len(xs) - 2)))
    return [ctx.emit(graph.GlobalAvgPoolOp(operands=[x], result_types=[out]))]


def convert_batch_norm(ctx: ConversionContext, node: onnx.NodeProto) -> Sequence[Value]:
    """BatchNormalization (opsets 7+), inference form: normalizes axis 1 with the
    running statistics. training_mode=1 (14+) and spatial=0 (7-8) are unsupported."""
    attrs = attributes(node)
    if attrs.get("training_mode", 0):
        return _batch_norm_training(ctx, node, attrs)
    if ctx.opset < 14 and len([o for o in node.output if o]) > 1:
        raise ctx.unsupported("the training outputs of opset < 14 (is_test=0) are not supported; use opset 14+ "
                              "with training_mode=1")
    if not attrs.get("spatial", 1):
        raise ctx.unsupported("spatial=0 (per-element statistics) is not supported")
    x = ctx.value(node.input[0])
    xs = shape_of(x)
    if len(xs) < 2:
        raise ctx.shape_error(f"input shape {xs} needs rank >= 2")
    params = [ctx.value(name) for name in node.input[1:5]]
    if any(shape_of(p) != (xs[1],) for p in params):
        raise ctx.shape_error(f"scale, bias, mean and var must all have shape ({xs[1]},)")
    epsilon = float32_literal(attrs.get("epsilon", 1e-5))
    return [ctx.emit(graph.BatchNormOp(x, *params, epsilon=epsilon))]


def _batch_norm_training(ctx: ConversionContext, node: onnx.NodeProto, attrs: dict[str, Any]) -> Sequence[Value]:
    """BatchNormalization training_mode=1 (opsets 14+): normalizes with the batch
    statistics (mean and population variance over every axis but 1) and returns
    the running statistics updated with `momentum`: r' = r * momentum + b * (1 - momentum)."""
    x = ctx.value(node.input[0])
    xs = shape_of(x)
    if len(xs) < 2:
        raise ctx.shape_error(f"input shape {xs} needs rank >= 2")
    params = [ctx.value(name) for name in node.input[1:5]]
    if any(shape_of(p) != (xs[1],) for p in params):
        raise ctx.shape_error(f"scale, bias, mean and var must all have shape ({xs[1]},)")
    axes = [d for d in range(len(xs)) if d != 1]
    kept = tuple(1 if d != 1 else n for d, n in enumerate(xs))
    mean = ctx.emit(graph.ReduceOp(x, "mean", axes, True, tensor_type(kept, x.type.element_type)))
    centered = ctx.emit(graph.SubOp(x, mean, x.type))
    var = ctx.emit(graph.ReduceOp(ctx.emit(graph.MulOp(centered, centered, x.type)), "mean", axes, True, mean.type))
    batch_mean, batch_var = ctx.reshape(mean, [xs[1]]), ctx.reshape(var, [xs[1]])
    epsilon = float32_literal(attrs.get("epsilon", 1e-5))
    y = ctx.emit(graph.BatchNormOp(x, params[0], params[1], batch_mean, batch_var, epsilon=epsilon))
    momentum = float(attrs.get("momentum", 0.9))
    weights = [np.array([momentum], np.float32), np.array([1.0 - momentum], np.float32)]
    keep, take = (ctx.add_constant(w.astype(_np_dtype(x)), f"{ctx.node_label}.{n}")
                  for w, n in zip(weights, ("momentum", "one_minus_momentum")))
    updated = [ctx.emit(graph.AddOp(ctx.emit(graph.MulOp(running, keep, running.type)),
                                    ctx.emit(graph.MulOp(batch, take, batch.type)), batch.type))
               for running, batch in ((params[2], batch_mean), (params[3], batch_var))]
    return [y, *updated]


def _np_dtype(value: SSAValue) -> np.dtype:
    import ziggurat.dtypes as dtypes

    return dtypes.to_numpy(value.type.element_type)  # type: ignore[attr-defined]


# ---------------------------------------------------------------------------
# Dense layers and softmax
# ---------------------------------------------------------------------------


def convert_gemm(ctx: ConversionContext, node: onnx.NodeProto) -> Sequence[Value]:
    """Gemm (opsets 7+; C optional from 11): alpha * A' @ B' + beta * C, where
    A' and B' are A and B transposed by transA/transB and C broadcasts to the result. A QDQ Gemm
    on a target with an int8 dot product takes the int8 GEMM for A @ B' (convert_qdq_matmul.py)."""
    from ziggurat.frontends.onnx.convert_qdq_matmul import qdq_gemm

    attrs = attributes(node)
    a, b = ctx.value(node.input[0]), ctx.value(node.input[1])
    a_shape, b_shape = shape_of(a), shape_of(b)
    if len(a_shape) != 2 or len(b_shape) != 2:
        raise ctx.shape_error(f"A {a_shape} and B {b_shape} must be 2-D")
    if attrs.get("transA", 0):
        a_shape = a_shape[::-1]
        a = ctx.emit(graph.TransposeOp(a, (1, 0), tensor_type(a_shape)))
    trans_b = bool(attrs.get("transB", 0))
    k, n = b_shape[::-1] if trans_b else b_shape
    if a_shape[1] != k:
        raise ctx.shape_error(f"A' {a_shape} and B' {(k, n)} do not multiply")
    out = (a_shape[0], n)
    y = None if attrs.get("transA", 0) else qdq_gemm(ctx, node, trans_b)
    if y is None:
        y = ctx.emit(graph.MatmulOp(a, b, tensor_type(out), transpose_b=trans_b))
    alpha = float32_literal(attrs.get("alpha", 1.0))
    if alpha != 1.0:
        y = ctx.emit(graph.MulOp(y, ctx.add_constant(np.array([alpha], np.float32), f"{ctx.node_label}.alpha"), y.type))
    c_name, beta = ctx.input(node, 2), float32_literal(attrs.get("beta", 1.0))
    if c_name is None or beta == 0.0:
        return [y]
    if graph.broadcast_shapes(ctx.shape(c_name), out) != out:
        raise ctx.shape_error(f"C {ctx.shape(c_name)} does not broadcast to the result {out}")
    return [ctx.emit(graph.AddOp(y, _scaled(ctx, c_name, beta), y.type))]


def _scaled(ctx: ConversionContext, name: str, factor: float) -> SSAValue:
    """factor * `name`: scaled at import time when `name` is a constant."""
    if factor == 1.0:
        return ctx.value(name)
    array = ctx.constant(name)
    if array is not None:
        return ctx.add_constant(array * np.float32(factor), f"{name}.scaled")
    c = ctx.value(name)
    # as many dims as C (a rank-0 C times a [1] factor would be [1], not C's type)
    factor_value = ctx.add_constant(np.full((1,) * len(shape_of(c)), factor, np.float32), f"{ctx.node_label}.beta")
    return ctx.emit(graph.MulOp(c, factor_value, c.type))


def convert_matmul(ctx: ConversionContext, node: onnx.NodeProto) -> Sequence[Value]:
    """MatMul (opsets 1+): numpy.matmul; a 1-D operand is made 2-D for the product
    and the added dim is removed from the result. A QDQ MatMul on a target with an int8
    dot product is an int8 GEMM (convert_qdq_matmul.py)."""
    from ziggurat.frontends.onnx.convert_qdq_matmul import qdq_matmul

    fused = qdq_matmul(ctx, node)
    if fused is not None:
        return [fused]
    a_name, b_name = node.input[0], node.input[1]
    a_shape, b_shape = ctx.shape(a_name), ctx.shape(b_name)
    if not a_shape or not b_shape:
        raise ctx.shape_error(f"operands {a_shape} and {b_shape} must have rank >= 1")
    a = ctx.reshaped(a_name, (1, *a_shape)) if len(a_shape) == 1 else ctx.value(a_name)
    b = ctx.reshaped(b_name, (*b_shape, 1)) if len(b_shape) == 1 else ctx.value(b_name)
    a2, b2 = shape_of(a), shape_of(b)
    batch = graph.broadcast_shapes(a2[:-2], b2[:-2])
    if a2[-1] != b2[-2] or batch is None:
        raise ctx.shape_error(f"operands {a_shape} and {b_shape} do not multiply")
    y = ctx.emit(graph.MatmulOp(a, b, tensor_type((*batch, a2[-2], b2[-1]), element_type(a))))
    rows = (a2[-2],) if len(a_shape) > 1 else ()
    cols = (b2[-1],) if len(b_shape) > 1 else ()
    return [ctx.reshape(y, (*batch, *rows, *cols))]


def convert_softmax(ctx: ConversionContext, node: onnx.NodeProto) -> Sequence[Value]:
    """Softmax: opsets 1-12 coerce the input to 2-D at `axis` (default 1) and
    normalize each row; opsets 13+ normalize along `axis` (default -1)."""
    x = ctx.value(node.input[0])
    shape = shape_of(x)
    rank = len(shape)
    axis = attributes(node).get("axis", 1 if ctx.opset < 13 else -1)
    if not -rank <= axis < rank:
        raise ctx.shape_error(f"axis {axis} is out of range for rank {rank}")
    axis = axis + rank if axis < 0 else axis
    if ctx.opset >= 13 or axis == rank - 1:
        return [ctx.emit(graph.SoftmaxOp(x, axis))]
    rows = ctx.reshape(x, (math.prod(shape[:axis]), math.prod(shape[axis:])))
    return [ctx.reshape(ctx.emit(graph.SoftmaxOp(rows, 1)), shape)]

"""Converters for ONNX comparison and logic ops on run-time tensors.

At run time a boolean tensor is a float32 mask holding 1.0 or 0.0: comparisons
become `graph.compare`, Where becomes `graph.where`, and the logic ops are mask
arithmetic (and = mul, or = max, not = 1 - m, xor = m1 != m2). Boolean
constants are materialized as such masks where a run-time op needs them.
Boolean graph inputs and outputs stay unsupported (their dtype is not float32).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import onnx
from xdsl.ir import SSAValue

from ziggurat.dialects import graph
from ziggurat.frontends.onnx.context import ConversionContext, Value, attributes, shape_of, tensor_type
from ziggurat.frontends.onnx.convert_tensor import scalar

COMPARISONS = {"Less": "lt", "LessOrEqual": "le", "Greater": "gt", "GreaterOrEqual": "ge", "Equal": "eq"}


def mask(ctx: ConversionContext, name: str) -> SSAValue:
    """`name` as a float32 tensor: a boolean or numeric constant becomes float32."""
    array = ctx.constant(name)
    if array is None:
        return ctx.value(name)
    if array.dtype.kind not in "biuf":
        raise ctx.unsupported(f"input '{name}' has dtype {array.dtype}, which has no float32 form")
    return ctx.add_constant(array.astype(np.float32), f"{name}.f32")


def _broadcast(ctx: ConversionContext, *values: SSAValue) -> tuple[int, ...]:
    shape: tuple[int, ...] | None = ()
    for v in values:
        shape = graph.broadcast_shapes(shape, shape_of(v)) if shape is not None else None
    if shape is None:
        raise ctx.shape_error(f"input shapes {[shape_of(v) for v in values]} do not broadcast")
    return shape


def compare(ctx: ConversionContext, a: SSAValue, b: SSAValue, kind: str) -> SSAValue:
    return ctx.emit(graph.CompareOp(a, b, kind, tensor_type(_broadcast(ctx, a, b))))


def convert_compare(ctx: ConversionContext, node: onnx.NodeProto) -> Sequence[Value]:
    """Less, LessOrEqual, Greater, GreaterOrEqual, Equal (opsets 7+) on float32 tensors."""
    a, b = mask(ctx, node.input[0]), mask(ctx, node.input[1])
    return [compare(ctx, a, b, COMPARISONS[node.op_type])]


def convert_logic(ctx: ConversionContext, node: onnx.NodeProto) -> Sequence[Value]:
    """Not, And, Or, Xor (opsets 1+) on masks."""
    a = mask(ctx, node.input[0])
    if node.op_type == "Not":
        return [ctx.emit(graph.SubOp(scalar(ctx, 1.0, "one"), a, a.type))]
    b = mask(ctx, node.input[1])
    out = tensor_type(_broadcast(ctx, a, b))
    if node.op_type == "And":
        return [ctx.emit(graph.MulOp(a, b, out))]
    if node.op_type == "Or":
        return [ctx.emit(graph.MaxOp(a, b, out))]
    return [compare(ctx, a, b, "ne")]  # Xor


def convert_where(ctx: ConversionContext, node: onnx.NodeProto) -> Sequence[Value]:
    """Where (opsets 9+): cond ? X : Y with broadcasting of all three."""
    cond, a, b = (mask(ctx, name) for name in node.input[:3])
    return [ctx.emit(graph.WhereOp(cond, a, b, tensor_type(_broadcast(ctx, cond, a, b))))]


def convert_predicate(ctx: ConversionContext, node: onnx.NodeProto) -> Sequence[Value]:
    """IsNaN (x != x), IsInf (|x| == inf, with detect_negative/detect_positive),
    Sign (x > 0) - (x < 0), ThresholdedRelu (x > alpha ? x : 0)."""
    x = ctx.value(node.input[0])
    attrs = attributes(node)
    if node.op_type == "IsNaN":
        return [compare(ctx, x, x, "ne")]
    if node.op_type == "Sign":
        zero = scalar(ctx, 0.0, "zero")
        return [ctx.emit(graph.SubOp(compare(ctx, x, zero, "gt"), compare(ctx, x, zero, "lt"), x.type))]
    if node.op_type == "ThresholdedRelu":
        above = compare(ctx, x, scalar(ctx, attrs.get("alpha", 1.0), "alpha"), "gt")
        return [ctx.emit(graph.WhereOp(above, x, scalar(ctx, 0.0, "zero"), x.type))]
    pos, neg = attrs.get("detect_positive", 1), attrs.get("detect_negative", 1)
    if pos and neg:
        return [compare(ctx, ctx.emit(graph.AbsOp(x)), scalar(ctx, np.inf, "inf"), "eq")]
    if not pos and not neg:
        return [compare(ctx, x, x, "lt")]  # never true, NaN included
    return [compare(ctx, x, scalar(ctx, np.inf if pos else -np.inf, "inf"), "eq")]


LOGIC_CONVERTERS = {
    **dict.fromkeys(COMPARISONS, convert_compare),
    **dict.fromkeys(("Not", "And", "Or", "Xor"), convert_logic),
    "Where": convert_where,
    **dict.fromkeys(("IsNaN", "IsInf", "Sign", "ThresholdedRelu"), convert_predicate),
}
"""ONNX op type -> converter, merged into the importer's table."""

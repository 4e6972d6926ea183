"""Converters for ONNX comparison, logic and bitwise ops on run-time tensors.

Booleans are real `i1` tensors: comparisons become `graph.compare` with an
`i1` result, Where takes an `i1` condition, And/Or/Xor/Not are the bitwise
ops on `i1` (`graph.bitand`/`bitor`/`bitxor`/`bitnot`), which also serve
BitwiseAnd/Or/Xor/Not on integers. Mod and BitShift map to `graph.mod` and
`graph.bitshift`. `graph.compare` can still give a float 1.0/0.0 mask (its
result type says which); Sign uses that form.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import onnx
from xdsl.dialects.builtin import i1
from xdsl.ir import SSAValue

from ziggurat.dialects import graph
from ziggurat.dialects.graph_dtype import BitAndOp, BitNotOp, BitOrOp, BitShiftOp, BitXorOp, ModOp
from ziggurat.frontends.onnx.context import ConversionContext, Value, attributes, element_type, like, shape_of, tensor_type
from ziggurat.frontends.onnx.convert_tensor import scalar

COMPARISONS = {"Less": "lt", "LessOrEqual": "le", "Greater": "gt", "GreaterOrEqual": "ge", "Equal": "eq"}


def _broadcast(ctx: ConversionContext, *values: SSAValue) -> tuple[int, ...]:
    shape: tuple[int, ...] | None = ()
    for v in values:
        shape = graph.broadcast_shapes(shape, shape_of(v)) if shape is not None else None
    if shape is None:
        raise ctx.shape_error(f"input shapes {[shape_of(v) for v in values]} do not broadcast")
    return shape


def _same_types(ctx: ConversionContext, *values: SSAValue) -> None:
    types = [element_type(v) for v in values]
    if len(set(types)) != 1:
        raise ctx.shape_error(f"inputs have different element types {[str(t) for t in types]}")


def compare(ctx: ConversionContext, a: SSAValue, b: SSAValue, kind: str) -> SSAValue:
    """a `kind` b as a bool (i1) tensor."""
    _same_types(ctx, a, b)
    return ctx.emit(graph.CompareOp(a, b, kind, tensor_type(_broadcast(ctx, a, b), i1)))


def convert_compare(ctx: ConversionContext, node: onnx.NodeProto) -> Sequence[Value]:
    """Less, LessOrEqual, Greater, GreaterOrEqual, Equal (opsets 7+): a bool tensor."""
    a, b = ctx.value(node.input[0]), ctx.value(node.input[1])
    return [compare(ctx, a, b, COMPARISONS[node.op_type])]


BITWISE = {"And": BitAndOp, "Or": BitOrOp, "Xor": BitXorOp,
           "BitwiseAnd": BitAndOp, "BitwiseOr": BitOrOp, "BitwiseXor": BitXorOp}


def convert_logic(ctx: ConversionContext, node: onnx.NodeProto) -> Sequence[Value]:
    """Not, And, Or, Xor (opsets 1+) on bools and BitwiseNot/And/Or/Xor (18+) on integers."""
    a = ctx.value(node.input[0])
    if node.op_type in ("Not", "BitwiseNot"):
        return [ctx.emit(BitNotOp(a))]
    b = ctx.value(node.input[1])
    _same_types(ctx, a, b)
    return [ctx.emit(BITWISE[node.op_type](a, b, like(a, _broadcast(ctx, a, b))))]


def convert_mod(ctx: ConversionContext, node: onnx.NodeProto) -> Sequence[Value]:
    """Mod (opsets 10+): fmod=0 (the divisor's sign, numpy's `mod`) or fmod=1 (C fmod)."""
    a, b = ctx.value(node.input[0]), ctx.value(node.input[1])
    _same_types(ctx, a, b)
    fmod = int(attributes(node).get("fmod", 0))
    return [ctx.emit(ModOp(a, b, fmod, like(a, _broadcast(ctx, a, b))))]


def convert_bitshift(ctx: ConversionContext, node: onnx.NodeProto) -> Sequence[Value]:
    """BitShift (opsets 11+) on unsigned integers: direction LEFT or RIGHT."""
    a, b = ctx.value(node.input[0]), ctx.value(node.input[1])
    _same_types(ctx, a, b)
    direction = attributes(node).get("direction", "")
    if direction not in ("LEFT", "RIGHT"):
        raise ctx.unsupported(f"direction '{direction}' is neither LEFT nor RIGHT")
    return [ctx.emit(BitShiftOp(a, b, direction.lower(), like(a, _broadcast(ctx, a, b))))]


def convert_where(ctx: ConversionContext, node: onnx.NodeProto) -> Sequence[Value]:
    """Where (opsets 9+): cond ? X : Y with broadcasting of all three; cond is bool."""
    cond, a, b = (ctx.value(name) for name in node.input[:3])
    _same_types(ctx, a, b)
    return [ctx.emit(graph.WhereOp(cond, a, b, like(a, _broadcast(ctx, cond, a, b))))]


def convert_predicate(ctx: ConversionContext, node: onnx.NodeProto) -> Sequence[Value]:
    """IsNaN (x != x), IsInf (|x| == inf, with detect_negative/detect_positive),
    Sign (x > 0) - (x < 0), ThresholdedRelu (x > alpha ? x : 0)."""
    x = ctx.value(node.input[0])
    attrs = attributes(node)
    if node.op_type == "IsNaN":
        return [compare(ctx, x, x, "ne")]
    if node.op_type == "Sign":  # float masks: (x > 0) - (x < 0)
        zero = scalar(ctx, 0.0, "zero")
        pos, neg = (ctx.emit(graph.CompareOp(x, zero, k, x.type)) for k in ("gt", "lt"))
        return [ctx.emit(graph.SubOp(pos, neg, x.type))]
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
    **dict.fromkeys(("Not", "And", "Or", "Xor", "BitwiseNot", "BitwiseAnd", "BitwiseOr", "BitwiseXor"),
                    convert_logic),
    "Mod": convert_mod,
    "BitShift": convert_bitshift,
    "Where": convert_where,
    **dict.fromkeys(("IsNaN", "IsInf", "Sign", "ThresholdedRelu"), convert_predicate),
}
"""ONNX op type -> converter, merged into the importer's table."""

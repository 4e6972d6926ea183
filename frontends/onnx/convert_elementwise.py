"""Converters for elementwise ONNX ops: one `graph` op each."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import onnx
from xdsl.dialects.builtin import TensorType, f64
from xdsl.ir import SSAValue

import ziggurat.dtypes as dtypes
from ziggurat.dialects import graph
from ziggurat.dialects.graph_dtype import CastOp
from ziggurat.frontends.onnx.context import ConversionContext, Value, element_type, like, shape_of

UNARY_OPS: dict[str, type[graph.UnaryOp]] = {
    "Relu": graph.ReluOp,
    "Tanh": graph.TanhOp,
    "Sigmoid": graph.SigmoidOp,
    "Exp": graph.ExpOp,
    "Sqrt": graph.SqrtOp,
    "Neg": graph.NegOp,
    "Erf": graph.ErfOp,
    "Abs": graph.AbsOp,
    "Log": graph.LogOp,
    "Floor": graph.FloorOp,
    "Ceil": graph.CeilOp,
}

BINARY_OPS: dict[str, type[graph.BinaryOp]] = {
    "Add": graph.AddOp,
    "Sub": graph.SubOp,
    "Mul": graph.MulOp,
    "Div": graph.DivOp,
    "Pow": graph.PowOp,
}

VARIADIC_OPS: dict[str, type[graph.BinaryOp]] = {
    "Sum": graph.AddOp,
    "Mean": graph.AddOp,
    "Max": graph.MaxOp,
    "Min": graph.MinOp,
}


def convert_unary(ctx: ConversionContext, node: onnx.NodeProto) -> Sequence[Value]:
    """Relu, Tanh, Sigmoid, Exp, Sqrt, Neg, Abs, Log, Floor, Ceil (opsets 6+) and Erf (opsets 9+)."""
    x = ctx.value(node.input[0])
    return [ctx.emit(UNARY_OPS[node.op_type](x))]


def convert_binary(ctx: ConversionContext, node: onnx.NodeProto) -> Sequence[Value]:
    """Add, Sub, Mul, Div, Pow (opsets 7+): numpy (multidirectional) broadcasting."""
    lhs, rhs = ctx.value(node.input[0]), ctx.value(node.input[1])
    if node.op_type == "Pow":
        return [_pow(ctx, lhs, rhs)]
    return [_broadcast_binary(ctx, BINARY_OPS[node.op_type], lhs, rhs)]


def _pow(ctx: ConversionContext, base: SSAValue, exponent: SSAValue) -> SSAValue:
    """Pow: the exponent (any numeric type) is converted to the base's type; an
    integer base is raised in float64, converted to 64-bit and wrapped to the
    base's type (exact while the power stays below 2^53)."""
    elt = element_type(base)
    if element_type(exponent) != elt:
        exponent = ctx.emit(CastOp(exponent, TensorType(elt, shape_of(exponent))))
    if dtypes.is_float(elt):
        return _broadcast_binary(ctx, graph.PowOp, base, exponent)
    wide = [ctx.emit(CastOp(v, TensorType(f64, shape_of(v)))) for v in (base, exponent)]
    y = _broadcast_binary(ctx, graph.PowOp, *wide)
    # through 64 bits, so that a narrower type wraps around as integer pow does
    i64 = dtypes.from_numpy(np.dtype(np.uint64 if dtypes.is_unsigned(elt) else np.int64))
    y = ctx.emit(CastOp(y, TensorType(i64, shape_of(y))))
    return y if i64 == elt else ctx.emit(CastOp(y, like(base, shape_of(y))))


def _broadcast_binary(ctx: ConversionContext, op: type[graph.BinaryOp], lhs: SSAValue, rhs: SSAValue) -> SSAValue:
    shape = graph.broadcast_shapes(shape_of(lhs), shape_of(rhs))
    if shape is None:
        raise ctx.shape_error(f"input shapes {shape_of(lhs)} and {shape_of(rhs)} do not broadcast")
    if element_type(lhs) != element_type(rhs):
        raise ctx.shape_error(f"inputs have different element types {element_type(lhs)} and {element_type(rhs)}")
    return ctx.emit(op(lhs, rhs, like(lhs, shape)))


def convert_variadic(ctx: ConversionContext, node: onnx.NodeProto) -> Sequence[Value]:
    """Sum, Mean, Max, Min (opsets 8+): a left fold of the inputs with broadcasting."""
    values = [ctx.value(name) for name in node.input if name]
    acc = values[0]
    for value in values[1:]:
        acc = _broadcast_binary(ctx, VARIADIC_OPS[node.op_type], acc, value)
    if node.op_type == "Mean" and len(values) > 1:
        dtype = dtypes.to_numpy(element_type(acc))
        count = ctx.add_constant(np.full([1] * len(shape_of(acc)), 1.0 / len(values), dtype),  # rank 0 stays rank 0
                                 f"{ctx.node_label}.count")
        acc = ctx.emit(graph.MulOp(acc, count, acc.type))
    return [acc]


def convert_reciprocal(ctx: ConversionContext, node: onnx.NodeProto) -> Sequence[Value]:
    """Reciprocal (opsets 6+): 1 / x."""
    x = ctx.value(node.input[0])
    one = ctx.add_constant(np.array([1.0], dtypes.to_numpy(element_type(x))), f"{ctx.node_label}.one")
    return [ctx.emit(graph.DivOp(one, x, x.type))]

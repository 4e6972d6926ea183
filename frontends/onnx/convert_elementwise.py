"""Converters for elementwise ONNX ops: one `graph` op each."""

from __future__ import annotations

from collections.abc import Sequence

import onnx

from ziggurat.dialects import graph
from ziggurat.frontends.onnx.context import ConversionContext, Value, shape_of, tensor_type

UNARY_OPS: dict[str, type[graph.UnaryOp]] = {
    "Relu": graph.ReluOp,
    "Tanh": graph.TanhOp,
    "Sigmoid": graph.SigmoidOp,
    "Exp": graph.ExpOp,
    "Sqrt": graph.SqrtOp,
    "Neg": graph.NegOp,
    "Erf": graph.ErfOp,
}

BINARY_OPS: dict[str, type[graph.BinaryOp]] = {
    "Add": graph.AddOp,
    "Sub": graph.SubOp,
    "Mul": graph.MulOp,
    "Div": graph.DivOp,
}


def convert_unary(ctx: ConversionContext, node: onnx.NodeProto) -> Sequence[Value]:
    """Relu, Tanh, Sigmoid, Exp, Sqrt, Neg (opsets 6+) and Erf (opsets 9+)."""
    x = ctx.value(node.input[0])
    return [ctx.emit(UNARY_OPS[node.op_type](x))]


def convert_binary(ctx: ConversionContext, node: onnx.NodeProto) -> Sequence[Value]:
    """Add, Sub, Mul, Div (opsets 7+): numpy (multidirectional) broadcasting."""
    lhs, rhs = ctx.value(node.input[0]), ctx.value(node.input[1])
    shape = graph.broadcast_shapes(shape_of(lhs), shape_of(rhs))
    if shape is None:
        raise ctx.shape_error(f"input shapes {shape_of(lhs)} and {shape_of(rhs)} do not broadcast")
    return [ctx.emit(BINARY_OPS[node.op_type](lhs, rhs, tensor_type(shape)))]

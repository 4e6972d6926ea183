"""ONNX BitCast (opset 26): each element's bits read as another element type
of the same width (`graph.bitcast`; shape unchanged).

Run-time tensors of every ziggurat element type take part: float16/32/64,
bfloat16, (u)int8-64, bool (one byte), the float8 formats, float4 and the
4-/2-bit integers. A constant input is folded at import (onnx's reference,
`fold.py`) before this converter runs.

Example: `BitCast(x: float32[2,3], to=INT32)` -> `graph.bitcast %x :
tensor<2x3xf32> -> tensor<2x3xi32>`.
"""

from __future__ import annotations

from collections.abc import Sequence

import onnx

import ziggurat.dtypes as dtypes
from ziggurat.dialects.graph_dtype import BitcastOp, bit_width
from ziggurat.frontends.onnx.context import ConversionContext, Value, attributes, element_type, shape_of, tensor_type


def convert_bitcast(ctx: ConversionContext, node: onnx.NodeProto) -> Sequence[Value]:
    x = ctx.value(node.input[0])
    code = attributes(node).get("to")
    if code is None:
        raise ctx.unsupported("the 'to' attribute is missing; set it to the target element type")
    to = dtypes.from_onnx(code)
    if to is None:
        name = onnx.TensorProto.DataType.Name(code) if code in onnx.TensorProto.DataType.values() else str(code)
        raise ctx.unsupported(f"bitcasts to {name} are not supported; run-time tensors can be float16/32/64, "
                              "bfloat16, float8, (u)int2-64 or bool")
    src = element_type(x)
    if bit_width(src) != bit_width(to):
        raise ctx.shape_error(f"BitCast from {dtypes.describe(src)} ({bit_width(src)} bits) to "
                              f"{dtypes.describe(to)} ({bit_width(to)} bits): the widths must be equal")
    if src == to:
        return [x]
    return [ctx.emit(BitcastOp(x, tensor_type(shape_of(x), to)))]


BITCAST_CONVERTERS = {"BitCast": convert_bitcast}

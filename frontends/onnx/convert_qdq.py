"""QuantizeLinear, DequantizeLinear and DynamicQuantizeLinear on run-time tensors.

- `DequantizeLinear(x, scale, zp)`: `(x - zp) * scale` in the scale's float
  type (or `output_dtype`), per tensor, per axis (1-D scale) or per block
  (`block_size`: the scale holds one value per block along `axis`);
- `QuantizeLinear(x, scale, zp)`: `saturate(round_half_even(x / scale) + zp)`
  to the zero point's type (or `output_dtype`, default uint8), 2-, 4-, 8- and
  16-bit; to float8 (float4) `x / scale` (`+ zp`) is cast, rounding to nearest
  even and saturating (float8 with `saturate = 0`: to NaN/inf), as onnx's
  reference does;
- `DynamicQuantizeLinear(x)`: uint8 with `scale = (max(x, 0) - min(x, 0)) / 255`
  and `zp = saturate(round(-min(x, 0) / scale))`.

All of them are elementwise graph ops (cast, sub, mul, div, round, max, min,
reductions); the float math runs in float32.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import onnx
from xdsl.dialects.builtin import IntegerType, Signedness, f32

import ziggurat.dtypes as dtypes
from ziggurat.dialects import graph
from ziggurat.dialects.graph_dtype import CastOp
from ziggurat.frontends.onnx.context import ConversionContext, Value, attributes, element_type, shape_of
from ziggurat.frontends.onnx.convert_quant import _bin, _cast, _const, _t

_RANGES = {(8, False): (-128, 127), (8, True): (0, 255), (16, False): (-32768, 32767), (16, True): (0, 65535),
           (4, False): (-8, 7), (4, True): (0, 15), (2, False): (-2, 1), (2, True): (0, 3)}


def _int_range(ctx: ConversionContext, elt) -> tuple[int, int]:
    if not isinstance(elt, IntegerType) or (elt.width.data, elt.signedness.data == Signedness.UNSIGNED) not in _RANGES:
        raise ctx.unsupported(f"quantized type {dtypes.describe(elt)} is not supported; 2-, 4-, 8- and 16-bit "
                              "integers, float8 and float4 are")
    return _RANGES[(elt.width.data, elt.signedness.data == Signedness.UNSIGNED)]


def _is_float_quant(elt) -> bool:
    """float8 and float4 quantized types: x / scale is cast (rounding to nearest even), not rounded and clipped."""
    return dtypes.is_float8(elt) or dtypes.is_float4(elt)


def _params(ctx: ConversionContext, node: onnx.NodeProto, x_shape: Sequence[int], index: int):
    """(scale-like input broadcast against x, a reshape of x for blocks or None, its original shape)."""
    attrs = attributes(node)
    rank = len(x_shape)
    axis = int(attrs.get("axis", 1))
    axis = axis + rank if axis < 0 else axis
    block = int(attrs.get("block_size", 0))
    return axis, block


def _broadcast(ctx: ConversionContext, v, x_shape: Sequence[int], axis: int, block: int):
    """A scale or zero point shaped to broadcast against x (blocked: against x split as [.., C/b, b, ..])."""
    vs = shape_of(v)
    rank = len(x_shape)
    if len(vs) == 0 or (len(vs) == 1 and vs[0] == 1):
        return ctx.reshape(v, [])
    if block:
        shape = list(vs[: axis + 1]) + [1] + list(vs[axis + 1:])
        return ctx.reshape(v, shape)
    if len(vs) != 1 or vs[0] != x_shape[axis]:
        raise ctx.shape_error(f"a 1-D scale/zero point of {vs[0] if vs else 0} values must match axis {axis} of {list(x_shape)}")
    return ctx.reshape(v, [x_shape[axis] if d == axis else 1 for d in range(rank)])


def _split_blocks(ctx: ConversionContext, x, axis: int, block: int):
    if not block:
        return x
    xs = list(shape_of(x))
    if xs[axis] % block:
        raise ctx.unsupported(f"axis {axis} of {xs} is not a multiple of block_size {block}")
    return ctx.reshape(x, xs[:axis] + [xs[axis] // block, block] + xs[axis + 1:])


# Ops that only move, copy or select elements: on values of one quantization grid they give
# values of that grid (Resize only in its default nearest mode).
_GRID_KEEPING = {"Transpose", "Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity", "Concat", "MaxPool",
                 "Slice", "DepthToSpace", "SpaceToDepth", "Resize"}


def constant_params(ctx: ConversionContext, node: onnx.NodeProto) -> tuple[np.ndarray, np.ndarray | None, int] | None:
    """(scale, zero point or None, axis) of a QuantizeLinear or DequantizeLinear node whose scale and
    zero point are constants, per tensor or per axis (not blocked, no output_dtype, saturating);
    else None. What the QDQ rewrites (this module, convert_qdq_matmul.py) match on."""
    attrs = attributes(node)
    if attrs.get("block_size", 0) or attrs.get("output_dtype", 0) or not attrs.get("saturate", 1):
        return None
    scale = ctx.constant(node.input[1])
    zp_name = ctx.input(node, 2)
    zp = ctx.constant(zp_name) if zp_name else None
    if scale is None or (zp_name and zp is None):
        return None
    return scale, zp, int(attrs.get("axis", 1))


def _per_tensor_params(ctx: ConversionContext, node: onnx.NodeProto) -> tuple | None:
    """(scale, zero point, its dtype) of a per-tensor Q or DQ node with constant parameters; else None."""
    params = constant_params(ctx, node)
    if params is None or params[0].size != 1 or (params[1] is not None and params[1].size != 1):
        return None
    scale, zp = params[0], params[1] if params[1] is not None else np.zeros((), np.uint8)
    return float(scale.reshape(())), int(zp.reshape(())), zp.dtype.str


def _requantized_grid(ctx: ConversionContext, node: onnx.NodeProto) -> Value | None:
    """DequantizeLinear(QuantizeLinear(y)) is y where y is a data-movement op (`_GRID_KEEPING`) of
    values dequantized with the same per-tensor scale and zero point: they lie on that grid,
    inside its range, so quantizing and dequantizing them again gives them back (as
    onnxruntime's QDQ optimizer drops such pairs). The value y, else None."""
    q = ctx.producers.get(node.input[0])
    if q is None or q.op_type != "QuantizeLinear" or q.domain not in ("", "ai.onnx"):
        return None
    params = _per_tensor_params(ctx, node)
    if params is None or _per_tensor_params(ctx, q) != params:
        return None
    mover = ctx.producers.get(q.input[0])
    if mover is None or mover.op_type not in _GRID_KEEPING or mover.domain not in ("", "ai.onnx"):
        return None
    if mover.op_type == "Resize" and attributes(mover).get("mode", b"nearest") not in (b"nearest", "nearest"):
        return None
    data = [n for n in mover.input if n] if mover.op_type == "Concat" else mover.input[:1]
    for name in data:
        dq = ctx.producers.get(name)
        if dq is None or dq.op_type != "DequantizeLinear" or _per_tensor_params(ctx, dq) != params:
            return None
    return ctx.value(q.input[0])


def convert_dequantize_linear(ctx: ConversionContext, node: onnx.NodeProto) -> Sequence[Value]:
    kept = _requantized_grid(ctx, node)
    if kept is not None:
        return [kept]
    x = ctx.value(node.input[0])
    elt = element_type(x)
    if not (_is_float_quant(elt) or (isinstance(elt, IntegerType) and elt.width.data in (2, 4, 8, 16, 32))):
        raise ctx.unsupported(f"input 'x' has element type {dtypes.describe(elt)}; 2-, 4-, 8-, 16- and 32-bit "
                              "integers, float8 and float4 are supported")
    xs = list(shape_of(x))
    axis, block = _params(ctx, node, xs, 1)
    scale = ctx.value(node.input[1])
    out_code = int(attributes(node).get("output_dtype", 0))
    out_elt = dtypes.from_onnx(out_code) if out_code else element_type(scale)
    xv = _split_blocks(ctx, _cast(ctx, x, f32), axis, block)
    zp_name = ctx.input(node, 2)
    if zp_name is not None and not _is_float_quant(elt):  # float8/float4: no zero point (onnx's reference)
        xv = _bin(ctx, graph.SubOp, xv, _broadcast(ctx, _cast(ctx, ctx.value(zp_name), f32), xs, axis, block))
    y = _bin(ctx, graph.MulOp, xv, _broadcast(ctx, _cast(ctx, scale, f32), xs, axis, block))
    return [_cast(ctx, ctx.reshape(y, xs), out_elt)]


def _quantize(ctx: ConversionContext, x, scale, zp, out_elt, xs, axis: int, block: int, label: str,
              saturate: bool = True):
    if _is_float_quant(out_elt):  # as onnx's reference: float8 ignores the zero point, float4 adds it
        xv = _split_blocks(ctx, _cast(ctx, x, f32), axis, block)
        y = _bin(ctx, graph.DivOp, xv, _broadcast(ctx, _cast(ctx, scale, f32), xs, axis, block))
        if zp is not None and dtypes.is_float4(out_elt):
            y = _bin(ctx, graph.AddOp, y, _broadcast(ctx, _cast(ctx, zp, f32), xs, axis, block))
        y = ctx.reshape(y, xs)
        return ctx.emit(CastOp(y, _t(shape_of(y), out_elt), saturate or not dtypes.is_float8(out_elt)))
    lo, hi = _int_range(ctx, out_elt)
    xv = _split_blocks(ctx, _cast(ctx, x, f32), axis, block)
    y = ctx.emit(graph.RoundOp(_bin(ctx, graph.DivOp, xv, _broadcast(ctx, _cast(ctx, scale, f32), xs, axis, block))))
    if zp is not None:
        y = _bin(ctx, graph.AddOp, y, _broadcast(ctx, _cast(ctx, zp, f32), xs, axis, block))
    y = _bin(ctx, graph.MaxOp, y, _const(ctx, np.array(lo, np.float32), f"{label}_lo"))
    y = _bin(ctx, graph.MinOp, y, _const(ctx, np.array(hi, np.float32), f"{label}_hi"))
    return _cast(ctx, ctx.reshape(y, xs), out_elt)


def convert_quantize_linear(ctx: ConversionContext, node: onnx.NodeProto) -> Sequence[Value]:
    x = ctx.value(node.input[0])
    xs = list(shape_of(x))
    axis, block = _params(ctx, node, xs, 1)
    zp_name = ctx.input(node, 2)
    zp = ctx.value(zp_name) if zp_name else None
    out_code = int(attributes(node).get("output_dtype", 0))
    out_elt = dtypes.from_onnx(out_code) if out_code else (element_type(zp) if zp is not None else IntegerType(8, Signedness.UNSIGNED))
    if out_elt is None:
        raise ctx.unsupported(f"output_dtype {out_code} is not supported")
    saturate = bool(attributes(node).get("saturate", 1))
    return [_quantize(ctx, x, ctx.value(node.input[1]), zp, out_elt, xs, axis, block, ctx.node_label or "q",
                      saturate)]


def convert_dynamic_quantize_linear(ctx: ConversionContext, node: onnx.NodeProto) -> Sequence[Value]:
    x = _cast(ctx, ctx.value(node.input[0]), f32)
    xs = list(shape_of(x))
    label = ctx.node_label or "dq"
    axes = list(range(len(xs)))
    zero = _const(ctx, np.array(0.0, np.float32), f"{label}_0")
    lo = _bin(ctx, graph.MinOp, ctx.emit(graph.ReduceOp(x, "min", axes, False, _t([], f32))), zero)
    hi = _bin(ctx, graph.MaxOp, ctx.emit(graph.ReduceOp(x, "max", axes, False, _t([], f32))), zero)
    scale = _bin(ctx, graph.DivOp, _bin(ctx, graph.SubOp, hi, lo), _const(ctx, np.array(255.0, np.float32), f"{label}_255"))
    zp_f = ctx.emit(graph.RoundOp(_bin(ctx, graph.DivOp, _bin(ctx, graph.SubOp, zero, lo), scale)))
    zp_f = _bin(ctx, graph.MinOp, _bin(ctx, graph.MaxOp, zp_f, zero), _const(ctx, np.array(255.0, np.float32), f"{label}_max"))
    u8 = IntegerType(8, Signedness.UNSIGNED)
    zp = _cast(ctx, zp_f, u8)
    y = _quantize(ctx, x, scale, zp_f, u8, xs, 0, 0, label)
    return [y, ctx.reshape(scale, []), ctx.reshape(zp, [])]  # ONNX gives both as scalars


QDQ_CONVERTERS = {
    "QuantizeLinear": convert_quantize_linear,
    "DequantizeLinear": convert_dequantize_linear,
    "DynamicQuantizeLinear": convert_dynamic_quantize_linear,
}

"""Converters for ONNX data-movement and constant ops.

On a constant input these ops are applied at import time and their result stays
a constant, so that e.g. a transposed weight is stored transposed instead of
being transposed at run time.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import onnx
from onnx import numpy_helper

from ziggurat.dialects import graph
from ziggurat.frontends.onnx.context import ConversionContext, Value, attributes, like
from ziggurat.symbolic import Sym


def convert_constant(ctx: ConversionContext, node: onnx.NodeProto) -> Sequence[Value]:
    """Constant (opsets 1+): a tensor, float(s) or int(s) value, kept as an import-time constant."""
    attrs = attributes(node)
    if "value" in attrs:
        return [numpy_helper.to_array(attrs["value"])]
    for key, dtype in (("value_float", np.float32), ("value_floats", np.float32),
                       ("value_int", np.int64), ("value_ints", np.int64)):
        if key in attrs:
            return [np.array(attrs[key], dtype)]
    raise ctx.unsupported(f"only tensor, float and int values are supported, not '{', '.join(attrs)}'")


def convert_identity(ctx: ConversionContext, node: onnx.NodeProto) -> Sequence[Value]:
    """Identity (opsets 1+): forwards its input, constant or not."""
    return [ctx.lookup(node.input[0])]


def convert_flatten(ctx: ConversionContext, node: onnx.NodeProto) -> Sequence[Value]:
    """Flatten (opsets 1+, negative axis from 11): to 2-D [prod(d[:axis]), prod(d[axis:])]."""
    shape = ctx.shape(node.input[0])
    axis = attributes(node).get("axis", 1)
    if not -len(shape) <= axis <= len(shape):
        raise ctx.shape_error(f"axis {axis} is out of range for rank {len(shape)}")
    axis = axis + len(shape) if axis < 0 else axis
    return [_reshape(ctx, node.input[0], (math.prod(shape[:axis]), math.prod(shape[axis:])))]


def convert_reshape(ctx: ConversionContext, node: onnx.NodeProto) -> Sequence[Value]:
    """Reshape (opsets 5+, allowzero from 14): a constant target shape where 0 copies
    the input dim (or means 0 with allowzero=1) and one -1 is inferred."""
    target = ctx.shape_parameter(node.input[1])
    if target is None:
        raise ctx.unsupported(
            "the target shape must be a constant (an initializer or a Constant node); "
            "shapes computed at run time are not supported. Export with static shapes "
            "or constant-fold the model (e.g. onnxsim)"
        )
    dims = [d if isinstance(d, Sym) else int(d) for d in target.reshape(-1)]  # a symbolic import: Syms too
    return [_reshape(ctx, node.input[0], _reshape_target(ctx, node, dims))]


def _reshape_target(ctx: ConversionContext, node: onnx.NodeProto, target: list[int]) -> tuple[int, ...]:
    shape = ctx.shape(node.input[0])
    allowzero = attributes(node).get("allowzero", 0)
    if any(not isinstance(d, Sym) and d < -1 for d in target) or target.count(-1) > 1:
        raise ctx.shape_error(f"target shape {target} may hold only dims >= 0 and a single -1")
    if allowzero and 0 in target and -1 in target:
        raise ctx.shape_error(f"target shape {target} mixes 0 and -1 with allowzero=1")
    if not allowzero and 0 in target[len(shape):]:
        raise ctx.shape_error(f"target shape {target} copies dims that input shape {shape} lacks")
    out = [shape[i] if d == 0 and not allowzero else d for i, d in enumerate(target)]
    total, known = math.prod(shape), math.prod(d for d in out if d != -1)
    if -1 in out:
        if isinstance(total, Sym) or isinstance(known, Sym):  # exact, or SymbolicError
            out[out.index(-1)] = Sym.lift(total).exact_div(known)
        else:
            if known == 0 or total % known:
                raise ctx.shape_error(f"cannot infer the -1 of target shape {target} for input shape {shape}")
            out[out.index(-1)] = total // known
    if math.prod(out) != total:
        raise ctx.shape_error(f"cannot reshape {shape} ({total} elements) to {tuple(out)}")
    return tuple(out)


def convert_transpose(ctx: ConversionContext, node: onnx.NodeProto) -> Sequence[Value]:
    """Transpose (opsets 1+): result dim i is input dim perm[i] (default: reversed dims)."""
    name = node.input[0]
    shape = ctx.shape(name)
    perm = list(attributes(node).get("perm", reversed(range(len(shape)))))
    if sorted(perm) != list(range(len(shape))):
        raise ctx.shape_error(f"perm {perm} is not a permutation of {len(shape)} dims")
    array = ctx.constant(name)
    if array is not None:
        return [np.transpose(array, perm)]
    x = ctx.value(name)
    if perm == sorted(perm):
        return [x]
    return [ctx.emit(graph.TransposeOp(x, perm, like(x, [shape[i] for i in perm])))]


def _reshape(ctx: ConversionContext, name: str, shape: Sequence[int]) -> Value:
    """`name` under `shape`, reshaped at import time when it is a constant."""
    array = ctx.constant(name)
    if array is not None:
        return array.reshape(shape)
    return ctx.reshape(ctx.value(name), shape)

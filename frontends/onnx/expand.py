"""Expansion of ONNX ops that the standard defines as functions.

Many recent ONNX ops (Attention, RotaryEmbedding, Shrink, Swish, CenterCropPad,
GroupNormalization, ...) carry a function body in their schema: a subgraph of
more primitive ONNX ops. An op without a converter of its own is replaced by
that body, at the model's opset (context-dependent bodies are instantiated for
the node's input types); the body's nodes are then folded or converted one by
one like any other node. The renaming of the body's values and the
substitution of attribute references follow onnx's own function expansion.
"""

from __future__ import annotations

import onnx
from onnx.backend.test.case.node import function_expand_helper

import ziggurat.dtypes as dtypes
from ziggurat.frontends.onnx.context import ConversionContext, element_type


def _type_of(ctx: ConversionContext, name: str) -> onnx.TypeProto:
    """The tensor type of input `name`: a constant's own dtype, a run-time tensor's element type."""
    if not name:
        return onnx.TypeProto()
    array = ctx.constant(name)
    np_dtype = array.dtype if array is not None else dtypes.to_numpy(element_type(ctx.value(name)))
    dtype = onnx.helper.np_dtype_to_tensor_dtype(np_dtype)
    shape = array.shape if array is not None else ctx.shape(name)
    return onnx.helper.make_tensor_type_proto(dtype, list(shape))


def _pick(versions, opset: int) -> int | None:
    """The newest body version at or below `opset`, else the oldest one (a body
    written with newer ops still defines the op; its nodes convert at its opset)."""
    versions = sorted(versions)
    if not versions:
        return None
    older = [v for v in versions if v <= opset]
    return older[-1] if older else versions[0]


def function_body(ctx: ConversionContext, node: onnx.NodeProto) -> tuple[list[onnx.NodeProto], int] | None:
    """The nodes that define `node` at the model's opset and the opset they use,
    or None when the op has no function body."""
    try:
        schema = onnx.defs.get_schema(node.op_type, ctx.opset, node.domain)
    except onnx.defs.SchemaError:
        return None
    function = onnx.FunctionProto()
    static = _pick(schema.function_opset_versions, ctx.opset)
    dependent = _pick(schema.context_dependent_function_opset_versions, ctx.opset)
    if static is not None:
        function.ParseFromString(schema.get_function_with_opset_version(static))
    elif dependent is not None:
        types = [_type_of(ctx, name).SerializeToString() for name in node.input]
        try:
            text = schema.get_context_dependent_function_with_opset_version(
                dependent, node.SerializeToString(), types)
        except Exception:  # noqa: BLE001 - onnx refuses some type combinations
            return None
        function.ParseFromString(text)
    else:
        return None
    full = onnx.NodeProto()
    full.CopyFrom(node)
    given = {a.name for a in node.attribute}
    for name, attr in schema.attributes.items():
        if name not in given and attr.default_value.name:
            full.attribute.append(attr.default_value)
    opset = next((o.version for o in function.opset_import if o.domain in ("", "ai.onnx")), ctx.opset)
    prefix = f"{node.name or node.output[0]}/{node.op_type}/"
    return function_expand_helper(full, function, prefix), opset


def has_function_body(op_type: str, opset: int, domain: str = "") -> bool:
    """Whether the op `op_type` (of the default domain unless `domain` says
    otherwise, e.g. ai.onnx.preview's FlexAttention) has a (static or
    context-dependent) function body at `opset`."""
    try:
        schema = onnx.defs.get_schema(op_type, opset, domain)
    except onnx.defs.SchemaError:
        return False
    return bool(schema.has_function or schema.has_context_dependent_function)

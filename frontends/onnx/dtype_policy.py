"""Which element types each ONNX converter handles, and the conversion wrapper
that enforces it.

Every converter handles float32. `NATIVE` lists, per ONNX op type, the other
element kinds its converter builds IR for directly (`f64`, `f16`, `int`
(signed), `uint`, `bool`). For an op converted outside that list:

* float16/float64/bfloat16 inputs of an op that has no native form for them are
  computed in float32: the inputs are cast to float32 (`graph.cast`), the op is
  converted as usual, and each float32 result is cast back to the type ONNX
  type inference gives the output (else the first float input's type). For
  bfloat16 that rounds each node's result once, as onnx's reference (numpy on
  ml_dtypes) does for elementwise ops and MatMul; ops the reference computes
  in several rounded steps (Softmax) are rebuilt step by step in
  `bf16_math.py`;
* 8- and 16-bit integer inputs of ops that only select elements (`SELECTING`:
  MaxPool) run in float32 too, which holds them exactly;
* other integer, bool, float8 and 4-/2-bit integer run-time inputs give a clean
  `UnsupportedOpError` that names the op, the input and its type.

After each node, the ops it emitted are verified; an element-type mismatch
that slipped through is reported as an `UnsupportedOpError` for that node, not
as invalid IR later.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import onnx
from xdsl.dialects.builtin import BFloat16Type, TensorType, f32
from xdsl.ir import Attribute, SSAValue
from xdsl.utils.exceptions import VerifyException

import ziggurat.dtypes as dtypes
from ziggurat.dialects.graph_dtype import CastOp
from ziggurat.errors import ZigguratError
from ziggurat.frontends.onnx import bf16_math
from ziggurat.frontends.onnx.context import ConversionContext, Value, element_type, shape_of, tensor_type

ALL = frozenset({"f64", "f16", "bf16", "int", "uint", "bool", "sub-byte", "fp8"})
NUMERIC = frozenset({"f64", "int", "uint"})
SIGNED = frozenset({"f64", "int"})

_MOVEMENT = ("Reshape", "Flatten", "Transpose", "Identity", "Squeeze", "Unsqueeze", "Slice", "Concat", "Split",
             "Expand", "Gather", "GatherElements", "Cast", "CastLike", "Tile", "DepthToSpace", "SpaceToDepth")
_FLOAT_MATH = ("Tanh", "Sigmoid", "Exp", "Sqrt", "Erf", "Log", "Floor", "Ceil", "Reciprocal",
               "ReduceMean", "ReduceL1", "ReduceL2", "ReduceSumSquare", "ReduceLogSum", "ReduceLogSumExp")

NATIVE: dict[str, frozenset[str]] = {
    **dict.fromkeys(_MOVEMENT, ALL),
    **dict.fromkeys(("Add", "Sub", "Mul", "Div", "Max", "Min", "Sum"), NUMERIC),
    "Mean": frozenset({"f64"}),
    "MatMul": frozenset({"f64"}),
    **dict.fromkeys(("Neg", "Abs", "Relu"), SIGNED),
    **dict.fromkeys(_FLOAT_MATH, frozenset({"f64"})),
    **dict.fromkeys(("ReduceSum", "ReduceProd", "CumProd"), NUMERIC),
    **dict.fromkeys(("Less", "LessOrEqual", "Greater", "GreaterOrEqual"), NUMERIC),
    "Equal": NUMERIC | {"bool"},
    **dict.fromkeys(("And", "Or", "Xor", "Not"), frozenset({"bool"})),
    **dict.fromkeys(("BitwiseAnd", "BitwiseOr", "BitwiseXor", "BitwiseNot"), frozenset({"int", "uint"})),
    "BitShift": frozenset({"uint", "int"}),
    "Clip": NUMERIC,
    **dict.fromkeys(("ReduceMax", "ReduceMin"), NUMERIC | {"bool"}),
    "Mod": NUMERIC,
    "Pow": NUMERIC,
    "Where": ALL,
    "Pad": NUMERIC | {"f16", "bool"},  # data movement; the pad value takes the input's type
    "BitCast": ALL,
    **dict.fromkeys(("If", "Loop"), ALL),  # control flow: the branches/body convert their own nodes
    **dict.fromkeys(("Binarizer", "ArrayFeatureExtractor"), frozenset({"f64", "int"})),  # ai.onnx.ml (convert_ml.py)
    "TreeEnsemble": frozenset({"f64"}),
    "OneHot": NUMERIC,  # convert_onehot.py: integer or float indices, values of any numeric type
    **dict.fromkeys(("Adagrad", "Adam", "Momentum"), frozenset({"f64", "int"})),  # int64 step count T
    # convert_index.py / convert_index_runtime.py: integer indices (and data) natively
    **dict.fromkeys(("ScatterElements", "Scatter", "ScatterND"), frozenset({"int", "uint"})),
    "GatherND": frozenset({"int", "uint", "bool"}),  # data movement: bool data too
    "Trilu": frozenset({"int", "uint", "bool"}),
    "TopK": frozenset({"int", "uint"}),
    # convert_data_dependent.py: compared exactly in their own type; Compress only moves data
    "NonZero": frozenset({"f64", "int", "uint", "bool"}),
    "Unique": frozenset({"f64", "int", "uint"}),
    "Compress": ALL,
    "NonMaxSuppression": frozenset({"int"}),  # convert_nms.py: an int64 max_output_boxes_per_class
    "TfIdfVectorizer": frozenset({"int"}),  # int32/int64 tokens (convert_tfidf.py)
    **dict.fromkeys(("CumSum", "ReverseSequence", "MaxUnpool", "TensorScatter", "RoiAlign"),
                    frozenset({"int", "uint"})),
    # 8-bit quantized ops on the VNNI GEMM (convert_quant.py); their scales may be float16
    **dict.fromkeys(("MatMulInteger", "QLinearMatMul", "ConvInteger", "QLinearConv"), ALL),
    **dict.fromkeys(("QuantizeLinear", "DequantizeLinear", "DynamicQuantizeLinear"), ALL),
}
"""ONNX op type -> element kinds besides float32 that its converter handles natively."""

SELECTING = frozenset({"MaxPool", "GlobalMaxPool"})
"""Ops whose results are input elements (or their maximum): on integers of at
most 16 bits, which float32 holds exactly, they run in float32 and cast back."""

_KIND = {"float": None, "int": "int", "uint": "uint", "bool": "bool"}


def kind_of(elt: Attribute) -> str | None:
    """The NATIVE kind of an element type; None for float32."""
    if elt == f32:
        return None
    if isinstance(elt, BFloat16Type):
        return "bf16"
    if dtypes.is_sub_byte(elt):
        return "sub-byte"
    if dtypes.is_float8(elt) or dtypes.is_float4(elt) or dtypes.is_e8m0(elt):
        return "fp8"
    if dtypes.is_float(elt):
        return "f64" if elt == dtypes.from_numpy(np.dtype(np.float64)) else "f16"
    return dtypes.kind(elt)


def _input_types(ctx: ConversionContext, node: onnx.NodeProto) -> list[tuple[str, Attribute | None, bool]]:
    """(name, element type, is run-time) of each given input."""
    out = []
    for name in node.input:
        if not name:
            continue
        value = ctx.lookup(name)
        if isinstance(value, np.ndarray):
            out.append((name, dtypes.from_numpy(value.dtype), False))
        else:
            out.append((name, element_type(value), True))
    return out


def convert_typed(ctx: ConversionContext, node: onnx.NodeProto, convert: Callable[[], Sequence[Value]],
                  out_types: dict[str, Attribute]) -> Sequence[Value]:
    """Runs `convert` for `node` under the element-type policy above."""
    native = NATIVE.get(node.op_type, frozenset())
    inputs = _input_types(ctx, node)
    wrap: list[tuple[str, Attribute]] = []
    refused: tuple[str, Attribute] | None = None
    for name, elt, runtime in inputs:
        kind = kind_of(elt) if elt is not None else None
        if kind is None or kind in native:
            continue
        if kind in ("f64", "f16", "bf16"):
            wrap.append((name, elt))  # type: ignore[arg-type]
        elif (kind in ("int", "uint") and node.op_type in SELECTING and runtime
              and elt.width.data <= 16):  # type: ignore[union-attr]
            wrap.append((name, elt))  # type: ignore[arg-type]
        elif runtime and refused is None:
            refused = (name, elt)  # type: ignore[assignment]
    if refused is not None:
        # The converter's own refusal (say, an input that must be a compile-time
        # constant) is the more precise message; else the element type is the reason.
        try:
            convert()
        except ZigguratError:
            raise
        except Exception:  # noqa: BLE001 - any failure on a type the converter does not handle
            pass
        name, elt = refused
        raise ctx.unsupported(f"input '{name}' has element type {dtypes.describe(elt)}; this op supports "
                              f"{_supported(native)} run-time tensors")
    if not wrap:
        return _verified(ctx, convert)
    stepwise = bf16_math.STEPWISE.get(node.op_type)
    if stepwise is not None and ctx.opset >= stepwise[0] and any(isinstance(e, BFloat16Type) for _, e in wrap):
        return _verified(ctx, lambda: stepwise[1](ctx, node))
    return _in_float32(ctx, node, convert, wrap, out_types)


def _supported(native: frozenset[str]) -> str:
    names = {"f64": "float64", "f16": "float16", "bf16": "bfloat16", "int": "signed integer",
             "uint": "unsigned integer", "bool": "bool", "sub-byte": "4- and 2-bit integer", "fp8": "float8"}
    return ", ".join(["float32", *(names[k] for k in sorted(native))])


def _in_float32(ctx: ConversionContext, node: onnx.NodeProto, convert: Callable[[], Sequence[Value]],
                wrap: list[tuple[str, Attribute]], out_types: dict[str, Attribute]) -> Sequence[Value]:
    """Converts `node` on float32 copies of its float16/float64 inputs, then casts back."""
    saved = {name: ctx.lookup(name) for name, _ in wrap}
    for name, _ in wrap:
        value = saved[name]
        if isinstance(value, np.ndarray):
            ctx.bind(name, value.astype(np.float32))
        else:
            ctx.bind(name, ctx.emit(CastOp(value, tensor_type(shape_of(value), f32))))
    try:
        results = _verified(ctx, convert)
    finally:
        for name, value in saved.items():
            ctx.bind(name, value)
    fallback = wrap[0][1]
    out: list[Value] = []
    for index, value in enumerate(results):
        name = node.output[index] if index < len(node.output) else ""
        want = out_types.get(name, fallback)
        if isinstance(value, np.ndarray):
            out.append(value.astype(dtypes.to_numpy(want)) if value.dtype == np.float32 and dtypes.is_float(want) else value)
        elif isinstance(value, SSAValue) and element_type(value) == f32 and want != f32 and (
                dtypes.is_float(want) or want in (e for _, e in wrap)):
            out.append(ctx.emit(CastOp(value, tensor_type(shape_of(value), want))))
        else:
            out.append(value)
    return out


def _verified(ctx: ConversionContext, convert: Callable[[], Sequence[Value]]) -> Sequence[Value]:
    """`convert()`, with the ops it emits verified (element-type mismatches become UnsupportedOpError)."""
    block = ctx.builder.insertion_point.block
    last = block.last_op
    results = convert()
    op = last.next_op if last is not None else block.first_op
    while op is not None:
        try:
            op.verify()
        except VerifyException as err:
            detail = str(err).splitlines()[0]
            raise ctx.unsupported(f"its element types are not supported here ({detail})") from None
        op = op.next_op
    return results


def declared_types(graph: onnx.GraphProto) -> dict[str, Attribute]:
    """Element types of the values the (shape-inferred) graph declares."""
    out: dict[str, Attribute] = {}
    for info in (*graph.value_info, *graph.output, *graph.input):
        if info.type.WhichOneof("value") == "tensor_type":
            elt = dtypes.from_onnx(info.type.tensor_type.elem_type)
            if elt is not None:
                out[info.name] = elt
    return out


def is_tensor_type(t: Attribute) -> bool:
    return isinstance(t, TensorType)

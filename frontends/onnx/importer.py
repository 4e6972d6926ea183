"""The ONNX importer: an ONNX model to a `graph`-dialect module and a weight store.

The module holds one `func.func @main` whose arguments are the graph inputs
that are not initializers and whose results are the graph outputs, both in
graph order; their ONNX names are kept in the func attributes
`graph.input_names` and `graph.output_names`. Weights are `graph.constant` ops
that name entries of the returned `WeightStore`.

```mlir
func.func @main(%input: tensor<1x784xf32>) -> tensor<1x10xf32>
    attributes {graph.input_names = ["input"], graph.output_names = ["logits"]} {
  %fc_weight = graph.constant "fc.weight" : tensor<10x784xf32>
  %logits = graph.matmul %input, %fc_weight {transpose_b = true}
      : tensor<1x784xf32>, tensor<10x784xf32> -> tensor<1x10xf32>
  func.return %logits : tensor<1x10xf32>
}
```

Every node is checked for a converter before any IR is built. Shapes are
static and the converters' own: each computes its output shapes from the ONNX
operator spec. They are cross-checked against the shapes the model declares and
those ONNX shape inference finds; a disagreement is a `ShapeMismatchWarning`,
not an error, because ONNX shape inference has gaps. For example, onnx 1.23
counts pooling windows that start in the right padding under ceil_mode=1,
which the spec, PyTorch and onnxruntime drop.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Sequence
from typing import Any
from dataclasses import dataclass, field

import numpy as np
import onnx
from onnx import numpy_helper
from xdsl.builder import Builder
from xdsl.dialects import func
from xdsl.dialects.builtin import ArrayAttr, ModuleOp, StringAttr, TensorType
from xdsl.ir import Attribute, Block, BlockArgument, Region, SSAValue
from xdsl.rewriter import InsertPoint

from ziggurat.dialects import graph as graph_dialect
from ziggurat.dialects.sym import shape_of as type_shape
from ziggurat.errors import DynamicAxesError, ModelLoadError, ShapeError, UnsupportedOpError
import ziggurat.dtypes as dtypes
from ziggurat.frontends.onnx.context import (
    ConversionContext,
    Shape,
    Value,
    element_type,
    name_hint,
    shape_of,
    tensor_type,
)
from ziggurat.frontends.onnx.dtype_policy import convert_typed, declared_types
from ziggurat.frontends.onnx.convert_activation import ACTIVATION_CONVERTERS
from ziggurat.frontends.onnx.convert_layout import LAYOUT_CONVERTERS
from ziggurat.frontends.onnx.convert_logic import LOGIC_CONVERTERS
from ziggurat.frontends.onnx.convert_elementwise import (
    BINARY_OPS,
    UNARY_OPS,
    VARIADIC_OPS,
    convert_binary,
    convert_reciprocal,
    convert_unary,
    convert_variadic,
)
from ziggurat.frontends.onnx.convert_nn import (
    convert_average_pool,
    convert_batch_norm,
    convert_conv,
    convert_gemm,
    convert_global_average_pool,
    convert_matmul,
    convert_max_pool,
    convert_softmax,
)
from ziggurat.frontends.onnx.convert_shape import (
    convert_constant,
    convert_flatten,
    convert_identity,
    convert_reshape,
    convert_transpose,
)
from ziggurat.frontends.onnx.convert_gru import convert_gru, convert_rnn
from ziggurat.frontends.onnx.convert_resize import convert_resize
from ziggurat.frontends.onnx.convert_rnn import convert_lstm
from ziggurat.frontends.onnx.convert_einsum import EINSUM_CONVERTERS
from ziggurat.frontends.onnx.convert_signal import SIGNAL_CONVERTERS
from ziggurat.frontends.onnx.convert_grid_sample import GRID_SAMPLE_CONVERTERS
from ziggurat.frontends.onnx.convert_scan import SCAN_CONVERTERS
from ziggurat.frontends.onnx.convert_roi_align import ROI_ALIGN_CONVERTERS
from ziggurat.frontends.onnx.convert_deform_conv import DEFORM_CONV_CONVERTERS
from ziggurat.frontends.onnx.convert_data_dependent import DATA_DEPENDENT_CONVERTERS, carried_axis, sized_inputs
from ziggurat.frontends.onnx.convert_index import INDEX_CONVERTERS
from ziggurat.frontends.onnx.convert_nms import NMS_CONVERTERS
from ziggurat.frontends.onnx.convert_index_runtime import RUNTIME_INDEX_CONVERTERS
from ziggurat.frontends.onnx.convert_quant import QUANT_CONVERTERS
from ziggurat.frontends.onnx.convert_qdq import QDQ_CONVERTERS
from ziggurat.frontends.onnx.convert_window import WINDOW_CONVERTERS
from ziggurat.frontends.onnx.convert_symbolic import SYMBOLIC_CONVERTERS
from ziggurat.frontends.onnx.convert_bitcast import BITCAST_CONVERTERS
from ziggurat.frontends.onnx.convert_cumprod import CUMPROD_CONVERTERS
from ziggurat.frontends.onnx.convert_col2im import COL2IM_CONVERTERS
from ziggurat.frontends.onnx.convert_stft import STFT_CONVERTERS
from ziggurat.frontends.onnx.convert_onehot import ONEHOT_CONVERTERS
from ziggurat.frontends.onnx.convert_sequence import (
    SEQUENCE_CONVERTERS, convert_structured, is_sequence, is_structured, refuse_structured,
)
from ziggurat.frontends.onnx.convert_control import CONTROL_CONVERTERS, node_reads
from ziggurat.frontends.onnx.convert_training import TRAINING_CONVERTERS, TRAINING_DEFAULT_OPSET, TRAINING_DOMAIN
from ziggurat.frontends.onnx.convert_ml import ML_CONVERTERS, ML_DEFAULT_OPSET, ML_DOMAIN
from ziggurat.frontends.onnx.convert_tensor import (
    REDUCE_KINDS,
    convert_cast,
    convert_concat,
    convert_expand,
    convert_gather,
    convert_gather_elements,
    convert_layer_norm,
    convert_reduce,
    convert_slice,
    convert_split,
    convert_squeeze,
    convert_unsqueeze,
)
from ziggurat.frontends.onnx.expand import function_body, has_function_body
from ziggurat.frontends.onnx.fold import fold_node, has_reference_impl
from ziggurat.frontends.onnx.index_checks import add_index_check
from ziggurat.frontends.onnx.loader import ModelSource, load_model
from ziggurat.frontends.onnx.validate import check_value_sizes, validate_model
from ziggurat.limits import resolve_memory_limit
from ziggurat.frontends.onnx.sequence_io import element_name
from ziggurat.frontends.onnx.specialize import note_needed
from ziggurat.signature import Extent, IndexCheck
from ziggurat.weights import WeightStore

Converter = Callable[[ConversionContext, onnx.NodeProto], Sequence[Value]]
"""Converts one node; returns one value per leading output of the node."""

CONVERTERS: dict[str, Converter] = {
    **dict.fromkeys(UNARY_OPS, convert_unary),
    **dict.fromkeys(BINARY_OPS, convert_binary),
    "Conv": convert_conv,
    "MaxPool": convert_max_pool,
    "AveragePool": convert_average_pool,
    "GlobalAveragePool": convert_global_average_pool,
    "BatchNormalization": convert_batch_norm,
    "Gemm": convert_gemm,
    "MatMul": convert_matmul,
    "Softmax": convert_softmax,
    "Flatten": convert_flatten,
    "Reshape": convert_reshape,
    "Transpose": convert_transpose,
    "Constant": convert_constant,
    "Identity": convert_identity,
    **dict.fromkeys(VARIADIC_OPS, convert_variadic),
    "Reciprocal": convert_reciprocal,
    **dict.fromkeys(REDUCE_KINDS, convert_reduce),
    "Unsqueeze": convert_unsqueeze,
    "Squeeze": convert_squeeze,
    "Gather": convert_gather,
    "GatherElements": convert_gather_elements,
    "Slice": convert_slice,
    "Concat": convert_concat,
    "Split": convert_split,
    "Expand": convert_expand,
    "Cast": convert_cast,
    "CastLike": convert_cast,
    "LayerNormalization": convert_layer_norm,
    "LSTM": convert_lstm,
    "GRU": convert_gru,
    "Resize": convert_resize,
    "Upsample": convert_resize,
    "RNN": convert_rnn,
    **ACTIVATION_CONVERTERS,
    **LAYOUT_CONVERTERS,
    **LOGIC_CONVERTERS,
    **WINDOW_CONVERTERS,
    **INDEX_CONVERTERS,
    **RUNTIME_INDEX_CONVERTERS,
    **DATA_DEPENDENT_CONVERTERS,
    **NMS_CONVERTERS,
    **QUANT_CONVERTERS,
    **QDQ_CONVERTERS,
    **EINSUM_CONVERTERS,
    **SIGNAL_CONVERTERS,
    **GRID_SAMPLE_CONVERTERS,
    **SCAN_CONVERTERS,
    **ROI_ALIGN_CONVERTERS,
    **DEFORM_CONV_CONVERTERS,
    **CUMPROD_CONVERTERS,
    **BITCAST_CONVERTERS,
    **CONTROL_CONVERTERS,
    **COL2IM_CONVERTERS,
    **STFT_CONVERTERS,
    **ONEHOT_CONVERTERS,
    **SEQUENCE_CONVERTERS,
    **SYMBOLIC_CONVERTERS,
}
"""ONNX op type (default domain) -> converter."""

MIN_OPSET = 7
"""Older opsets have other broadcasting rules (the `broadcast` attribute)."""

_DEFAULT_DOMAINS = ("", "ai.onnx")

DOMAIN_CONVERTERS: dict[tuple[str, str], Converter] = {**TRAINING_CONVERTERS, **ML_CONVERTERS}

_DOMAIN_ONLY_OPSETS = {TRAINING_DOMAIN: TRAINING_DEFAULT_OPSET, ML_DOMAIN: ML_DEFAULT_OPSET}
"""Default-domain opset assumed for a model that imports only these domains."""
"""(domain, op type) -> converter for ops of other domains."""


def _converter(node: onnx.NodeProto) -> Converter | None:
    if node.domain in _DEFAULT_DOMAINS:
        return CONVERTERS.get(node.op_type)
    return DOMAIN_CONVERTERS.get((node.domain, node.op_type))


class ShapeMismatchWarning(UserWarning):
    """A computed shape differs from the model's declared or ONNX-inferred one."""


@dataclass
class ImportedModel:
    """A model in the `graph` dialect: `module` holds `func.func @main`, whose
    `graph.constant` ops name the entries of `weights`."""

    module: ModuleOp
    weights: WeightStore
    input_names: list[str]
    output_names: list[str]
    input_shapes: list[Shape]
    output_shapes: list[Shape]
    opset: int
    checks: list[IndexCheck] = field(default_factory=list)
    """Run-time index checks (frontends/onnx/index_checks.py): `main` returns their values after
    the outputs, in this order."""
    extents: list[Extent] = field(default_factory=list)
    """Outputs sized at run time (convert_data_dependent.py): `main` returns their extents
    (tensor<1xi64>) after the index checks, in this order."""
    constraints: list[Any] = field(default_factory=list)
    """A symbolic import's `symbolic.Constraint`s: what the model needs of its symbols' values."""


def import_onnx(model_or_path: ModelSource, memory_limit: int | str | None = None,
                check_indices: bool = True, int8_dot: str = "none", symbolic: bool = False,
                int8_pairs: str = "exact") -> ImportedModel:
    """Imports an ONNX model given as a `ModelProto`, a path or serialized bytes.

    Raises ModelLoadError for a file that cannot be read or is not valid ONNX
    (frontends/onnx/validate.py lists the checks made before anything else),
    UnsupportedOpError for an op without a converter, and ShapeError for
    dynamic or inconsistent shapes and unsupported element types. Raises
    MemoryLimitError where the model's files, weights or a tensor of static
    shape need more bytes than `memory_limit` (bytes or e.g. '4G'; None:
    limits.default_memory_limit()). Warns ShapeMismatchWarning
    where a computed shape differs from the model's shape information.
    `check_indices=False` leaves out the run-time bounds checks of
    data-dependent indices (frontends/onnx/index_checks.py). `int8_dot` (the target's int8 dot
    product, `Target.int8_dot`: 'vnni' or 'avx2'; 'none') makes the MatMuls of a
    QDQ model int8 GEMMs (convert_qdq_matmul.py); `int8_pairs` (`Target.int8_pairs`: 'exact' or
    'saturate') says whether AVX2's may saturate pairs as onnxruntime's do. `symbolic=True` imports a model with dynamic
    axes once for every shape: each dynamic axis is a symbol (frontends/onnx/symbols.py names
    them), the shapes computed from it are `Sym` expressions (`#sym.dims` in the types), and the
    shape arithmetic on them folds symbolically (frontends/onnx/fold_symbolic.py); a node that
    needs a symbol's value is an error (the caller then compiles per shape).
    """
    limit = resolve_memory_limit(memory_limit)
    model, label = load_model(model_or_path, memory_limit=limit)
    if not symbolic:
        _refuse_dynamic_inputs(model)
    validate_model(model, label, memory_limit=limit)
    opset = _default_opset(model, label)
    _check_supported(model.graph, opset)
    _check_valid(model, label)
    shapes, types = _inferred(model)
    check_value_sizes(model.graph, shapes, types, label, memory_limit=limit)
    return _import_graph(model.graph, opset, shapes, types, check_indices, int8_dot, symbolic, int8_pairs)


def _node_label(node: onnx.NodeProto, index: int) -> str:
    return node.name or f"<node #{index}>"


def _default_opset(model: onnx.ModelProto, label: str) -> int:
    versions = [entry.version for entry in model.opset_import if entry.domain in _DEFAULT_DOMAINS]
    domains = {entry.domain for entry in model.opset_import}
    if not versions and domains and domains <= set(_DOMAIN_ONLY_OPSETS):
        return max(_DOMAIN_ONLY_OPSETS[d] for d in domains)  # the opset these domains' ops were defined with
    if not versions:
        raise ModelLoadError(f"{label} imports no opset of the default ONNX domain; re-export it with an ONNX opset.")
    if versions[0] < MIN_OPSET:
        changed = _changed_since(model.graph, versions[0])
        if not changed:
            return MIN_OPSET  # every op it uses means the same at MIN_OPSET
        raise ModelLoadError(
            f"{label} uses opset {versions[0]}; ziggurat supports opset {MIN_OPSET} and newer, and the op(s) "
            f"{', '.join(changed)} changed since. Upgrade it with onnx.version_converter.convert_version(model, 17)."
        )
    return versions[0]


def _changed_since(graph: onnx.GraphProto, opset: int) -> list[str]:
    """The op types of `graph` whose definition at `opset` is not the one at
    MIN_OPSET (or that carry subgraphs, which are not checked)."""
    changed = set()
    for node in graph.node:
        try:
            old = onnx.defs.get_schema(node.op_type, opset, node.domain).since_version
            new = onnx.defs.get_schema(node.op_type, MIN_OPSET, node.domain).since_version
        except onnx.defs.SchemaError:
            old, new = -1, 0
        if old != new or any(a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS)
                             for a in node.attribute):
            changed.add(node.op_type)
    return sorted(changed)


def _check_supported(graph: onnx.GraphProto, opset: int) -> None:
    """Raises for the first node without a converter, naming the other missing op types."""
    unsupported = [
        (index, node) for index, node in enumerate(graph.node)
        if (node.domain not in _DEFAULT_DOMAINS and _converter(node) is None
            and not has_function_body(node.op_type, opset, node.domain))
        or (node.domain in _DEFAULT_DOMAINS and node.op_type not in CONVERTERS and not has_reference_impl(node.op_type, opset)
            and not has_function_body(node.op_type, opset))
    ]
    if not unsupported:
        return
    index, node = unsupported[0]
    reasons = [f"it belongs to domain '{node.domain}'"] if _converter(node) is None and node.domain not in _DEFAULT_DOMAINS else []
    others = sorted({n.op_type for _, n in unsupported} - {node.op_type})
    if others:
        reasons.append(f"the model also uses the unsupported op(s) {', '.join(others)}")
    raise UnsupportedOpError(node.op_type, _node_label(node, index), opset, "; ".join(reasons))


def _check_valid(model: onnx.ModelProto, label: str) -> None:
    if model.graph.sparse_initializer:
        raise ModelLoadError(f"{label} has sparse initializers, which are not supported; store them dense.")
    try:
        onnx.checker.check_model(model)
    except onnx.checker.ValidationError as e:
        detail = " ".join(str(e).split()).rstrip(".")
        raise ModelLoadError(f"{label} is not a valid ONNX model: {detail}. Re-export or repair it.") from None


def _static_shape(value_type: onnx.TypeProto) -> Shape | None:
    """The shape of a tensor type when every dim is a number, else None."""
    if not value_type.tensor_type.HasField("shape"):
        return None
    dims = value_type.tensor_type.shape.dim
    if any(dim.WhichOneof("value") != "dim_value" for dim in dims):
        return None
    return tuple(dim.dim_value for dim in dims)


def _inferred(model: onnx.ModelProto) -> tuple[dict[str, Shape], dict[str, Attribute]]:
    """Static shapes and element types that the model declares or ONNX shape
    inference finds, by value name."""
    try:
        inferred = onnx.shape_inference.infer_shapes(model, data_prop=True).graph
    except onnx.shape_inference.InferenceError as e:
        message = f"ONNX shape inference failed, shapes are not cross-checked: {e}"
        warnings.warn(ShapeMismatchWarning(message), stacklevel=3)
        return {}, declared_types(model.graph)
    shapes = {}
    for info in (*inferred.value_info, *inferred.output):
        shape = _static_shape(info.type)
        if shape is not None:
            shapes[info.name] = shape
    return shapes, declared_types(inferred)


SUPPORTED_TYPES = "float16/32/64, int8/16/32/64, uint8/16/32/64 and bool"


def _input_type(info: onnx.ValueInfoProto, symbolic: bool = False) -> TensorType:
    """The tensor type of a graph input: static, or with `symbolic` a `Sym` per dynamic axis;
    raises ShapeError otherwise."""
    if info.type.WhichOneof("value") != "tensor_type":
        hint = (" Compile it per sequence structure with ziggurat.frontends.onnx.sequence_io.SequenceModel "
                "(the ONNX backend and `ziggurat conformance` do)."
                if info.type.WhichOneof("value") in ("sequence_type", "optional_type") else "")
        raise ShapeError(f"input '{info.name}' is not a tensor; ziggurat supports tensor inputs only.{hint}")
    elem_type = info.type.tensor_type.elem_type
    elt = dtypes.from_onnx(elem_type)
    if elt is None:
        raise ShapeError(
            f"input '{info.name}' has element type {onnx.TensorProto.DataType.Name(elem_type)}; "
            f"ziggurat supports {SUPPORTED_TYPES} tensors. Re-export the model with one of those."
        )
    if symbolic:
        from ziggurat.frontends.onnx.symbols import symbolic_dims

        return tensor_type(symbolic_dims(info), elt)
    return tensor_type(_input_shape(info), elt)


def _input_shape(info: onnx.ValueInfoProto, model: onnx.ModelProto | None = None) -> Shape:
    """The static shape of a graph input; raises DynamicAxesError (carrying `model`) otherwise."""
    shape = _static_shape(info.type)
    if shape is None:
        dims = info.type.tensor_type.shape.dim
        shown = [d.dim_param or "?" if d.WhichOneof("value") != "dim_value" else d.dim_value for d in dims]
        raise DynamicAxesError(
            f"input '{info.name}' has a dynamic or unknown shape {shown}",
            "importing needs static shapes. ziggurat.compile compiles such a model per shape "
            "(runtime/dynamic.py); to import it, or to cross-compile it, export the model with static shapes "
            "(no dynamic axes) or fix them with onnx.tools.update_model_dims.update_inputs_outputs_dims.", model)
    return shape


def _refuse_dynamic_inputs(model: onnx.ModelProto) -> None:
    """Raises DynamicAxesError for the first tensor input with a dynamic axis, before the model is
    validated, checked and shape-inferred: `ziggurat.compile` then compiles it per shape and each
    variant's import does that work."""
    initializers = {t.name for t in model.graph.initializer}
    for info in model.graph.input:
        if info.name not in initializers and info.type.WhichOneof("value") == "tensor_type":
            _input_shape(info, model)


def _check_output_type(info: onnx.ValueInfoProto, value: Value) -> None:
    """Refuses a graph output that is not a tensor, or whose declared element
    type differs from the one ziggurat computes for it."""
    kind = info.type.WhichOneof("value")
    if kind is None:
        return  # undeclared: what ziggurat computes
    if kind != "tensor_type":
        raise ShapeError(f"output '{info.name}' is a {kind.replace('_type', '')}; ziggurat returns tensors only.")
    elem_type = info.type.tensor_type.elem_type
    if elem_type == onnx.TensorProto.UNDEFINED:
        return
    declared = dtypes.from_onnx(elem_type)
    computed = dtypes.from_numpy(value.dtype) if isinstance(value, np.ndarray) else element_type(value)
    if declared != computed:
        name = onnx.TensorProto.DataType.Name(elem_type)
        what = f"ziggurat computes {dtypes.describe(computed)} for it" if declared is not None else \
            f"ziggurat supports {SUPPORTED_TYPES} tensors"
        raise ShapeError(f"output '{info.name}' has element type {name}; {what}.")


def _value_shape(value: Value) -> Shape:
    return tuple(value.shape) if isinstance(value, np.ndarray) else shape_of(value)


def _bind_outputs(
    ctx: ConversionContext, node: onnx.NodeProto, values: Sequence[Value], inferred: dict[str, Shape]
) -> None:
    """Binds the node's outputs, cross-checking their shapes with `inferred`."""
    reads = node_reads(node)
    for index, name in enumerate(node.output):
        if not name:
            continue
        if index >= len(values):
            raise ctx.unsupported(
                f"output #{index} ('{name}') is not supported; only {len(values)} output(s) can be computed"
            )
        value = values[index]
        expected = inferred.get(name)
        if expected is not None and not is_structured(value) and expected != _value_shape(value):
            message = (
                f"{node.op_type} node '{ctx.node_label}': ziggurat computes shape {_value_shape(value)} for "
                f"'{name}' from the ONNX operator spec; the model or ONNX shape inference says {expected}"
            )
            warnings.warn(ShapeMismatchWarning(message), stacklevel=4)
        if not isinstance(value, np.ndarray) and not is_structured(value) and value.name_hint is None:
            value.name_hint = name_hint(name)
        ctx.bind(name, value)
        ctx.reads[name] = reads


def _sources(ctx: ConversionContext, names: Sequence[str]) -> list[str]:
    """`names` traced back through the nodes that computed them (function
    bodies, If branches and Loop bodies too) to the names no node computed."""
    found: list[str] = []
    seen: set[str] = set()
    stack = list(names)
    while stack:
        name = stack.pop()
        if name in seen:
            continue
        seen.add(name)
        if name in ctx.reads:
            stack.extend(ctx.reads[name])
        elif name not in found:
            found.append(name)
    return found


def _convert(ctx: ConversionContext, node: onnx.NodeProto) -> Sequence[Value]:
    """Folds `node` when its inputs are known at import time, else converts it to graph ops; a
    node that consumes a run-time sized value passes its extent on (convert_data_dependent.py)."""
    sized = sized_inputs(ctx, node)
    carried = carried_axis(ctx, node, sized) if sized else None
    values = _convert_node(ctx, node)
    if sized and carried is None:  # a reshape: decided by its output's shape
        carried = carried_axis(ctx, node, sized, tuple(shape_of(values[0])))
    if carried is not None and node.output and node.output[0]:
        ctx.extents[node.output[0]] = carried
    return values


def _convert_node(ctx: ConversionContext, node: onnx.NodeProto) -> Sequence[Value]:
    sequence_op = convert_structured(ctx, node) if node.domain in _DEFAULT_DOMAINS else refuse_structured(ctx, node)
    if sequence_op is not None:
        return sequence_op
    folded = fold_node(ctx, node, lambda n: _converter(n) is not None)
    if folded is not None:
        return folded
    converter = _converter(node)
    if converter is None:
        body = function_body(ctx, node)
        if body is not None:
            return _convert_body(ctx, node, *body)
        raise ctx.unsupported(
            "it has no conversion for run-time tensors; it is supported only when all its "
            "inputs are known at compile time (constants or shapes)"
        )
    return convert_typed(ctx, node, lambda: converter(ctx, node), ctx.value_types)


def _convert_body(ctx: ConversionContext, node: onnx.NodeProto, body: list[onnx.NodeProto],
                  opset: int) -> Sequence[Value]:
    """Converts the function body of `node` node by node (at the body's opset);
    returns the values of the node's outputs."""
    outer = (ctx.node, ctx.node_label, ctx.opset)
    for index, inner in enumerate(body):
        ctx.opset = opset
        ctx.begin_node(inner, f"{outer[1]}/{inner.op_type}#{index}")
        _bind_outputs(ctx, inner, _convert(ctx, inner), {})
    ctx.begin_node(outer[0], outer[1])
    ctx.opset = outer[2]
    return [ctx.lookup(name) if name else np.zeros(0) for name in node.output]


def _computed(ctx: ConversionContext, value: SSAValue) -> SSAValue:
    """`value`, copied when it is a graph input: every output gets its own buffer."""
    if isinstance(value, BlockArgument):
        return ctx.emit(graph_dialect.BroadcastToOp(value, value.type))
    return value


def _erase_dead_ops(block: Block) -> None:
    """Drops ops whose results nothing uses (unused outputs of multi-output
    nodes, e.g. the Y of an LSTM whose Y_h alone is returned)."""
    for op in reversed(list(block.ops)):
        if op.results and all(not r.uses for r in op.results):
            block.erase_op(op)


def _import_graph(graph: onnx.GraphProto, opset: int, inferred: dict[str, Shape],
                  types: dict[str, Attribute] | None = None, check_indices: bool = True,
                  int8_dot: str = "none", symbolic: bool = False, int8_pairs: str = "exact") -> ImportedModel:
    initializers = {tensor.name: numpy_helper.to_array(tensor) for tensor in graph.initializer}
    inputs = [info for info in graph.input if info.name not in initializers]
    input_types = [_input_type(info, symbolic) for info in inputs]
    input_shapes = [type_shape(t) for t in input_types]
    block = Block(arg_types=input_types)
    ctx = ConversionContext(Builder(InsertPoint.at_end(block)), WeightStore(), opset)
    ctx.value_types = types or {}
    ctx.producers = {out: node for node in graph.node for out in node.output if out}
    ctx.int8_dot = int8_dot
    ctx.int8_pairs = int8_pairs
    for name, array in initializers.items():
        ctx.bind(name, array)
    for info, arg in zip(inputs, block.args, strict=True):
        arg.name_hint = name_hint(info.name)
        ctx.bind(info.name, arg)

    sizes = {info.name: math.prod(shape) for info, shape in zip(inputs, input_shapes)}
    checks: list[tuple[SSAValue, IndexCheck]] = []  # index_checks.py: returned after the outputs
    for index, node in enumerate(graph.node):
        ctx.begin_node(node, _node_label(node, index))
        ctx.runtime_reads.clear()
        try:
            _bind_outputs(ctx, node, _convert(ctx, node), inferred)
        except (UnsupportedOpError, ShapeError) as err:
            note_needed(err, graph, index, _sources(ctx, ctx.runtime_reads), sizes)
            raise
        if check_indices and (check := add_index_check(ctx, node)) is not None:
            checks.append(check)
    ctx.begin_node(None)

    output_names: list[str] = []
    results = []
    sized: list[tuple[int, Any]] = []  # (output index, RuntimeExtent) of the outputs sized at run time
    for info in graph.output:
        value = ctx.lookup(info.name)
        if is_structured(value) and not is_sequence(value):
            raise ShapeError(f"output '{info.name}' is an empty optional; ziggurat returns tensors and sequences only.")
        if is_sequence(value):  # its elements, as outputs S[0], S[1], ... (sequence_io.py)
            for i, element in enumerate(value):  # type: ignore[arg-type]
                if isinstance(element, np.ndarray):
                    element = ctx.add_constant(np.ascontiguousarray(element), f"{info.name}.{i}")
                results.append(_computed(ctx, element))
                output_names.append(element_name(info.name, i))
            continue
        _check_output_type(info, value)
        results.append(_computed(ctx, ctx.value(info.name)))
        output_names.append(info.name)
        if info.name in ctx.extents:
            sized.append((len(results) - 1, ctx.extents[info.name]))
    shapes = [shape_of(result) for result in results]
    results += [value for value, _ in checks]
    returned: set[SSAValue] = set()  # an extent several outputs share is returned once each
    for _, e in sized:
        results.append(ctx.emit(graph_dialect.BroadcastToOp(e.value, e.value.type)) if e.value in returned
                       else e.value)
        returned.add(e.value)
    extents = [Extent(i, e.axis, e.node, e.op) for i, e in sized]
    ctx.builder.insert(func.ReturnOp(*results))
    _erase_dead_ops(block)

    main = func.FuncOp("main", (block.arg_types, [r.type for r in results]), Region(block))
    input_names = [info.name for info in inputs]
    main.attributes["graph.input_names"] = ArrayAttr([StringAttr(n) for n in input_names])
    main.attributes["graph.output_names"] = ArrayAttr([StringAttr(n) for n in output_names] +
                                                      [StringAttr(f"{c.node}.index_check") for _, c in checks] +
                                                      [StringAttr(f"{output_names[e.output]}.extent") for e in extents])
    return ImportedModel(
        module=ModuleOp([main]),
        weights=ctx.weights,
        input_names=input_names,
        output_names=output_names,
        input_shapes=input_shapes,
        output_shapes=shapes,
        opset=opset,
        checks=[c for _, c in checks],
        extents=extents,
        constraints=list(ctx.constraints),
    )

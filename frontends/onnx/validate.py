"""Checks an ONNX model before any of it is compiled.

`validate_model` runs right after loading, before shape inference, and
refuses with one ziggurat error that names the node or tensor, where it is and
what to do, models that would otherwise fail deep inside the compiler:

- opsets: a version below 1, two versions of one domain, or a version above the
  newest the installed onnx defines for a domain it knows (ModelLoadError);
- element types: a type code ONNX does not define on an initializer, a tensor
  attribute (Constant values) or a value's declared type; an initializer with
  negative dims or raw data of the wrong length (ModelLoadError);
- graph structure, of the main graph and (outer names visible) its subgraphs:
  no outputs at all, an output listed twice, an output or node input that no
  input, initializer or earlier node produces (naming the later node that
  does, for nodes out of order or in a cycle), a name produced twice or a node
  output that shadows an input or initializer (ModelLoadError);
- attributes: Conv, ConvTranspose and pooling windows (kernel_shape, strides,
  dilations >= 1, pads >= 0, their lengths matching the spatial rank, group
  >= 1 and dividing the channels, auto_pad spelled right) and other sizes that
  divide (blocksize, LRN size) (ModelLoadError);
- memory (ziggurat/limits.py): weights that together, or a declared value
  (graph input, output, value_info) whose static shape alone needs more bytes
  than the memory limit (MemoryLimitError). `check_value_sizes` does the same
  for the shapes ONNX shape inference finds.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from functools import lru_cache

import onnx
from xdsl.ir import Attribute

import ziggurat.dtypes as dtypes
from ziggurat.errors import ModelLoadError
from ziggurat.frontends.onnx.loader import graph_tensors, is_known_type, packed_bits, tensor_nbytes, type_name
from ziggurat.limits import over_budget, resolve_memory_limit

_DEFAULT_DOMAINS = ("", "ai.onnx")
_WINDOW_OPS = frozenset({"Conv", "ConvTranspose", "MaxPool", "AveragePool", "LpPool", "ConvInteger", "QLinearConv"})
_AUTO_PADS = frozenset({"NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"})
_POSITIVE = {("SpaceToDepth", "blocksize"), ("DepthToSpace", "blocksize"), ("LRN", "size")}
"""(op type, attribute) pairs whose value must be >= 1."""
_REPAIR = "Fix the attribute and re-export the model."
_COMPLEX = frozenset({onnx.TensorProto.COMPLEX64, onnx.TensorProto.COMPLEX128})
_FLAGS = frozenset({"keepdims", "transA", "transB", "ceil_mode", "count_include_pad", "select_last_index",
                    "exclusive", "reverse", "noop_with_empty_axes", "upper", "largest", "sorted", "fmod",
                    "allowzero", "onesided", "new_axis", "saturate", "training_mode", "input_forget",
                    "linear_before_reset", "layout", "storage_order", "detect_negative", "detect_positive",
                    "inverse", "is_causal"})
"""Integer attributes of default-domain ops that ONNX defines as flags: 0 or 1, nothing else
(converters read them as truthy; onnxruntime compares with 1)."""
_SORT = "Re-export the model, or sort its nodes topologically and check it with onnx.checker.check_model."


def validate_model(model: onnx.ModelProto, label: str, memory_limit: int | str | None = None) -> None:
    """Refuses (ModelLoadError, MemoryLimitError) what the module docstring lists;
    `memory_limit` None means limits.default_memory_limit()."""
    _check_text(model, label)
    _check_opsets(model, label)
    graph = model.graph
    if not graph.output:
        raise ModelLoadError(f"{label} has no graph outputs, so there is nothing to compute. "
                             "Export the model with at least one output.")
    if not graph.node:
        defined = {t.name for t in graph.initializer} | {i.name for i in graph.input}
        missing = [o.name for o in graph.output if o.name not in defined]
        if missing:
            raise ModelLoadError(f"{label} has an empty graph (no nodes), and its output '{missing[0]}' is no "
                                 "graph input or initializer. Export the model with the nodes that compute it.")
    try:
        _check_graph(graph, "the main graph", frozenset())
        _check_declared_dims(graph)
    except _Invalid as e:
        raise ModelLoadError(f"{label} is not a valid ONNX model: {e}") from None
    _check_memory(model, label, resolve_memory_limit(memory_limit))


def check_value_sizes(graph: onnx.GraphProto, shapes: Mapping[str, tuple[int, ...]],
                      types: Mapping[str, Attribute], label: str, memory_limit: int | str | None = None) -> None:
    """Refuses (MemoryLimitError) a value whose static shape (from the model or
    ONNX shape inference) needs more bytes than the memory limit."""
    limit = resolve_memory_limit(memory_limit)
    for name, shape in shapes.items():
        needed = math.prod(shape) * _itemsize(types.get(name))
        if needed > limit:
            at = next((i for i, n in enumerate(graph.node) if name in n.output), None)
            where = f"value '{name}' of shape {list(shape)} in {label}"
            if at is not None:
                node = graph.node[at]
                where = (f"value '{name}' of shape {list(shape)}, computed by {node.op_type} node "
                         f"'{_node_label(node, at)}' (node #{at} of the main graph of {label}),")
            raise over_budget(where, needed, limit, "Reduce the batch or sequence size the model is exported with.")


class _Invalid(Exception):
    """What makes the model invalid; validate_model raises it as a ModelLoadError naming the model."""


def _node_label(node: onnx.NodeProto, index: int) -> str:
    return node.name or f"<node #{index}>"  # as importer._node_label


def _itemsize(elt: Attribute | None) -> int:
    try:
        return dtypes.to_numpy(elt).itemsize if elt is not None else 1
    except (KeyError, TypeError, ValueError):
        return 1


# -- opsets ------------------------------------------------------------------

@lru_cache(maxsize=1)
def _newest_opsets() -> dict[str, int]:
    """The newest opset the installed onnx defines, by domain ('' for the default one)."""
    newest: dict[str, int] = {}
    for schema in onnx.defs.get_all_schemas_with_history():
        domain = "" if schema.domain in _DEFAULT_DOMAINS else schema.domain
        newest[domain] = max(newest.get(domain, 1), schema.since_version)
    newest[""] = onnx.defs.onnx_opset_version()
    return newest


def _check_opsets(model: onnx.ModelProto, label: str) -> None:
    newest = _newest_opsets()
    seen: dict[str, int] = {}
    for entry in model.opset_import:
        domain = "" if entry.domain in _DEFAULT_DOMAINS else entry.domain
        if entry.version < 1:
            raise ModelLoadError(f"{label} declares opset {entry.version} of domain '{entry.domain}', which is no "
                                 "opset version. Re-export the model with a valid opset_import.")
        if seen.setdefault(domain, entry.version) != entry.version:
            raise ModelLoadError(f"{label} declares both opset {seen[domain]} and opset {entry.version} of domain "
                                 f"'{entry.domain}'. Re-export the model with one opset per domain.")
        top = newest.get(domain)
        if top is not None and entry.version > top:
            raise ModelLoadError(f"{label} declares opset {entry.version} of domain '{entry.domain}'; ziggurat "
                                 f"supports up to {top}; re-export it with opset {top} or lower.")


# -- element types and tensors ----------------------------------------------

def _type_codes(value_type: onnx.TypeProto) -> Iterator[int]:
    """The element type codes a declared type names, nested ones included."""
    kind = value_type.WhichOneof("value")
    if kind in ("tensor_type", "sparse_tensor_type"):
        yield getattr(value_type, kind).elem_type
    elif kind in ("sequence_type", "optional_type"):
        yield from _type_codes(getattr(value_type, kind).elem_type)
    elif kind == "map_type":
        yield value_type.map_type.key_type
        yield from _type_codes(value_type.map_type.value_type)


def _check_value_types(graph: onnx.GraphProto, where: str) -> None:
    for kind, infos in (("input", graph.input), ("output", graph.output), ("value_info entry", graph.value_info)):
        for info in infos:
            bad = [code for code in _type_codes(info.type) if code and not is_known_type(code)]
            if bad:
                raise _Invalid(
                    f"{kind} '{info.name}' of {where} declares element type code {bad[0]}, which ONNX does not "
                    "define. Re-export the model, or fix the value's type."
                )


def _check_tensor(tensor: onnx.TensorProto, what: str) -> None:
    """Refuses an unknown element type, negative dims, or raw data whose length
    disagrees with the dims."""
    if not is_known_type(tensor.data_type):
        raise _Invalid(
            f"{what} has element type code {tensor.data_type}, which ONNX does not define"
            f"{' (it is UNDEFINED)' if tensor.data_type == 0 else ''}. Re-export the model, or fix the tensor."
        )
    if any(d < 0 for d in tensor.dims):
        raise _Invalid(f"{what} has negative dims {list(tensor.dims)}. Re-export the model, or fix the tensor.")
    if tensor.data_location == onnx.TensorProto.EXTERNAL:
        return
    if tensor.HasField("raw_data"):
        expected = tensor_nbytes(tensor.data_type, math.prod(tensor.dims), packed=True)
        if expected is not None and len(tensor.raw_data) != expected:
            raise _Invalid(
                f"{what} holds {len(tensor.raw_data)} bytes of raw data, but its dims {list(tensor.dims)} of "
                f"{type_name(tensor.data_type)} need {expected}. The model is corrupt; re-export it."
            )
        return
    try:
        field = onnx.helper.tensor_dtype_to_field(tensor.data_type)
    except (KeyError, ValueError):
        return
    count, n = len(getattr(tensor, field)), math.prod(tensor.dims)
    bits = packed_bits(tensor.data_type)
    expected = math.ceil(n * bits / 8) if bits else 2 * n if tensor.data_type in _COMPLEX else n
    if count != expected:
        raise _Invalid(
            f"{what} holds {count} values in {field}, but its dims {list(tensor.dims)} of "
            f"{type_name(tensor.data_type)} need {expected}. The model is corrupt; re-export it."
        )


# -- structure and attributes -------------------------------------------------

def _check_text(model: onnx.ModelProto, label: str) -> None:
    """Refuses names, op types and domains that are not valid UTF-8 (protobuf hands them over as
    bytes: a corrupt file)."""
    def refuse(what: str) -> None:
        raise ModelLoadError(f"{label} is corrupt: {what} is not valid UTF-8 text. Re-export or re-download it.")

    if any(not isinstance(e.domain, str) for e in model.opset_import):
        refuse("an opset_import domain")

    def walk(graph: onnx.GraphProto, where: str) -> None:
        for kind, items in (("an input", graph.input), ("an output", graph.output),
                            ("a value_info entry", graph.value_info), ("an initializer", graph.initializer)):
            if any(not isinstance(x.name, str) for x in items):
                refuse(f"the name of {kind} of {where}")
        for i, node in enumerate(graph.node):
            names = [node.op_type, node.domain, node.name, *node.input, *node.output, *(a.name for a in node.attribute)]
            if any(not isinstance(n, str) for n in names):
                refuse(f"a name, op type or domain of node #{i} of {where}")
            for name, body in _subgraphs(node):
                walk(body, f"the subgraph '{name}' of node #{i}")

    walk(model.graph, "the main graph")


def _subgraphs(node: onnx.NodeProto) -> Iterator[tuple[str, onnx.GraphProto]]:
    for attr in node.attribute:
        if attr.type == onnx.AttributeProto.GRAPH:
            yield attr.name, attr.g
        elif attr.type == onnx.AttributeProto.GRAPHS:
            for i, body in enumerate(attr.graphs):
                yield f"{attr.name}[{i}]", body


def _check_graph(graph: onnx.GraphProto, where: str, outer: frozenset[str]) -> None:
    """Checks `graph` (`where` says which) and its subgraphs;
    `outer` holds the enclosing scopes' names a subgraph may read."""
    _check_value_types(graph, where)
    defined: dict[str, str] = {}
    for tensor in graph.initializer:
        _check_tensor(tensor, f"initializer '{tensor.name}' of {where}")
        if tensor.name in defined:
            raise _Invalid(f"initializer '{tensor.name}' of {where} is listed twice. {_SORT}")
        defined[tensor.name] = "an initializer"
    inputs: set[str] = set()
    for info in graph.input:
        if info.name in inputs:
            raise _Invalid(f"input '{info.name}' of {where} is listed twice. Re-export the model.")
        inputs.add(info.name)
        defined.setdefault(info.name, "a graph input")
    later = {name: (i, n) for i, n in enumerate(graph.node) for name in n.output if name}
    shapes = _declared_shapes(graph)
    for index, node in enumerate(graph.node):
        here = f"{node.op_type} node '{_node_label(node, index)}' (node #{index} of {where})"
        for name in node.input:
            if name and name not in defined and name not in outer:
                _refuse_read(here, name, later.get(name), index, where)
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.TENSOR:
                _check_tensor(attr.t, f"the '{attr.name}' tensor of {here}")
        for name, body in _subgraphs(node):
            _check_graph(body, f"the '{name}' graph of {here}", outer | frozenset(defined))
        _check_attributes(node, here, shapes)
        for name in node.output:
            if not name:
                continue
            if name in defined:
                raise _Invalid(f"{here} writes '{name}', which is already {defined[name]}: every value "
                                     "must be produced once (SSA form). Re-export the model, or rename one of them.")
            defined[name] = f"the output of node #{index} ('{_node_label(node, index)}')"
    listed: set[str] = set()
    for info in graph.output:
        if info.name in listed:
            raise _Invalid(f"output '{info.name}' of {where} is listed twice. "
                                 "Export the model with each output once (add an Identity for a copy).")
        listed.add(info.name)
        if info.name not in defined and info.name not in outer:
            raise _Invalid(f"output '{info.name}' of {where} is produced by no node, input or initializer. "
                                 "Re-export the model, or remove the output.")


def _refuse_read(here: str, name: str, producer: tuple[int, onnx.NodeProto] | None, index: int, where: str) -> None:
    if producer is None:
        raise _Invalid(f"{here} reads '{name}', which no input, initializer or node of {where} (or an "
                             f"enclosing graph) produces. {_SORT}")
    at, node = producer
    if at == index:
        raise _Invalid(f"{here} reads '{name}', which it produces itself: a cycle. {_SORT}")
    raise _Invalid(f"{here} reads '{name}', which only {node.op_type} node '{_node_label(node, at)}' "
                         f"(node #{at}) produces, after it: the nodes are out of order or form a cycle. {_SORT}")


def _declared_shapes(graph: onnx.GraphProto) -> dict[str, list[int | None]]:
    """Dims the graph declares (None for a symbolic one) and initializer dims, by name."""
    shapes: dict[str, list[int | None]] = {}
    for info in (*graph.input, *graph.value_info, *graph.output):
        if info.type.WhichOneof("value") == "tensor_type" and info.type.tensor_type.HasField("shape"):
            shapes[info.name] = [d.dim_value if d.WhichOneof("value") == "dim_value" else None
                                 for d in info.type.tensor_type.shape.dim]
    shapes.update({t.name: list(t.dims) for t in graph.initializer})
    return shapes


def _ints(node: onnx.NodeProto, name: str) -> list[int] | None:
    for attr in node.attribute:
        if attr.name == name:
            return list(attr.ints) if attr.type == onnx.AttributeProto.INTS else [attr.i]
    return None


def _check_attributes(node: onnx.NodeProto, here: str, shapes: dict[str, list[int | None]]) -> None:
    if node.domain in _DEFAULT_DOMAINS:
        for attr in node.attribute:
            if attr.name in _FLAGS and attr.type == onnx.AttributeProto.INT and attr.i not in (0, 1):
                raise _Invalid(f"{here}: {attr.name}={attr.i} must be 0 or 1. {_REPAIR}")
            if attr.name in ("to", "dtype") and attr.type == onnx.AttributeProto.INT and not is_known_type(attr.i):
                raise _Invalid(f"{here}: {attr.name}={attr.i} is an element type code ONNX does not define. {_REPAIR}")
    for op, name in _POSITIVE:
        value = _ints(node, name) if node.op_type == op and node.domain in _DEFAULT_DOMAINS else None
        if value is not None and any(v < 1 for v in value):
            raise _Invalid(f"{here}: {name}={value[0]} must be >= 1. {_REPAIR}")
    if node.op_type in _WINDOW_OPS and node.domain in _DEFAULT_DOMAINS:
        _check_window(node, here, shapes)


def _check_window(node: onnx.NodeProto, here: str, shapes: dict[str, list[int | None]]) -> None:
    """Conv, ConvTranspose and pooling: window attributes in range and of the spatial rank."""
    x = shapes.get(node.input[0]) if node.input else None
    w = shapes.get(node.input[1]) if len(node.input) > 1 and "Conv" in node.op_type else None
    if node.op_type == "QLinearConv":
        w = shapes.get(node.input[3]) if len(node.input) > 3 else None
    kernel = _ints(node, "kernel_shape")
    spatial = len(kernel) if kernel is not None else len(w) - 2 if w else len(x) - 2 if x else None
    if spatial is not None and spatial < 1:
        raise _Invalid(f"{here}: its input needs a batch, a channel and at least one spatial dim. "
                             "Check the input's shape.")
    for name, low, per_dim in (("kernel_shape", 1, 1), ("strides", 1, 1), ("dilations", 1, 1),
                               ("pads", 0, 2), ("output_padding", 0, 1)):
        value = _ints(node, name)
        if value is None:
            continue
        if any(v < low for v in value):
            raise _Invalid(f"{here}: {name} {value} must be >= {low} in every spatial dim. {_REPAIR}")
        if spatial is not None and len(value) != per_dim * spatial:
            raise _Invalid(f"{here}: {name} {value} has {len(value)} entries; its {spatial} spatial dim(s) "
                                 f"need {per_dim * spatial}. {_REPAIR}")
    auto_pad = next((a.s.decode(errors="replace") for a in node.attribute if a.name == "auto_pad"), "NOTSET")
    if auto_pad not in _AUTO_PADS:
        raise _Invalid(f"{here}: auto_pad '{auto_pad}' is none of {', '.join(sorted(_AUTO_PADS))}. {_REPAIR}")
    group = _ints(node, "group")
    if group is None:
        return
    if group[0] < 1:
        raise _Invalid(f"{here}: group={group[0]} must be >= 1. {_REPAIR}")
    channels = x[1] if x and len(x) > 1 else None
    if channels and channels % group[0]:
        raise _Invalid(f"{here}: group={group[0]} does not divide the input's {channels} channels. {_REPAIR}")


# -- memory ------------------------------------------------------------------

def _check_declared_dims(graph: onnx.GraphProto) -> None:
    shapes = _declared_shapes(graph)
    for info in graph.input:
        dims = shapes.get(info.name) or []
        if any(d is not None and d < 0 for d in dims):
            raise _Invalid(f"input '{info.name}' declares the negative dims {dims}. Name a dynamic dim "
                                 "(dim_param) instead, then fix it with "
                                 "onnx.tools.update_model_dims.update_inputs_outputs_dims.")


def _check_memory(model: onnx.ModelProto, label: str, limit: int) -> None:
    """Weights together, and each declared value, must fit `limit`."""
    sizes = [(t.name, tensor_nbytes(t.data_type, math.prod(t.dims)) or sum(map(len, t.string_data)))
             for t in graph_tensors(model.graph)]
    total = sum(size for _, size in sizes)
    if total > limit:
        name, size = max(sizes, key=lambda s: s[1])
        raise over_budget(f"the weights of {label} ({len(sizes)} tensor(s), the largest '{name}' of {size} bytes)",
                          total, limit, "Compile it on a machine with more memory, or quantize its weights.")
    graph = model.graph
    shapes = _declared_shapes(graph)
    for kind, infos in (("input", graph.input), ("output", graph.output), ("value", graph.value_info)):
        for info in infos:
            dims = shapes.get(info.name)
            code = info.type.tensor_type.elem_type if info.type.WhichOneof("value") == "tensor_type" else 0
            if not dims or None in dims or any(d < 0 for d in dims):  # type: ignore[operator]
                continue
            needed = tensor_nbytes(code, math.prod(dims)) or math.prod(dims)  # type: ignore[arg-type]
            if needed > limit:
                raise over_budget(f"{kind} '{info.name}' of {label}, of shape {dims} and type {type_name(code)},",
                                  needed, limit, "Export the model with smaller static shapes.")

"""Sequence-typed graph inputs and outputs, flattened at the boundary.

ziggurat's runtime takes and returns tensors only, and compiles static
shapes. A model whose graph inputs or outputs are ONNX sequences is therefore
compiled per input *structure*, as frontends/onnx/specialize.py compiles per
value:

* `flatten_inputs(model, structure)` rewrites the model for given sequence
  lengths and element types/shapes (and fixes the shapes of tensor inputs
  declared with symbolic dims): a sequence input `S` of length N becomes
  the tensor inputs `S[0]` ... `S[N-1]` and a `SequenceConstruct` node (a
  `SequenceEmpty` one for N = 0) that rebuilds `S` inside the graph;
* the importer returns the elements of a sequence output `S` as the outputs
  `S[0]`, `S[1]`, ... (their number is known at import time);
* an optional input is given as None (empty) or as its element, and becomes
  an `Optional` node (on the flattened element);
* `SequenceModel` takes Python lists for sequence inputs, compiles the
  flattened model per structure (guarded: a call whose lengths, element
  shapes or dtypes differ compiles again; cached, at most CACHE_SIZE
  variants), and regroups the outputs into lists.

    model = SequenceModel(onnx_model, compile_any)
    ys, = model([np.ones((2, 3), np.float32), np.ones((4, 3), np.float32)])
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import onnx

from ziggurat.errors import InputError

CACHE_SIZE = 8


def element_name(name: str, index: int) -> str:
    """The flat tensor name of element `index` of sequence `name`."""
    return f"{name}[{index}]"


_STRUCTURED = ("sequence_type", "optional_type")


def has_sequence_io(model: onnx.ModelProto) -> bool:
    """Whether graph inputs or outputs are sequences or optionals."""
    return any(info.type.WhichOneof("value") in _STRUCTURED for info in (*model.graph.input, *model.graph.output))


def sequence_inputs(model: onnx.ModelProto) -> list[str]:
    return [i.name for i in model.graph.input if i.type.WhichOneof("value") in _STRUCTURED]


def flatten_inputs(model: onnx.ModelProto, structure: Mapping[str, Any]) -> onnx.ModelProto:
    """A copy of `model` whose sequence (and optional) inputs named in
    `structure` are one tensor input per element (of the elements' dtypes and
    shapes), gathered by SequenceConstruct (Optional) nodes in front of the
    graph; tensor inputs named there get the given array's shape."""
    flat = onnx.ModelProto()
    flat.CopyFrom(model)
    inputs: list[onnx.ValueInfoProto] = []
    front: list[onnx.NodeProto] = []
    for info in model.graph.input:
        if info.name not in structure:
            inputs.append(info)
            continue
        _flatten(info.name, info.type, structure[info.name], inputs, front)
    del flat.graph.input[:]
    flat.graph.input.extend(inputs)
    nodes = list(flat.graph.node)
    del flat.graph.node[:]
    flat.graph.node.extend([*front, *nodes])
    return flat


def _flatten(name: str, t: onnx.TypeProto, value: Any, inputs: list, front: list) -> None:
    kind = t.WhichOneof("value")
    if kind == "sequence_type":
        if not isinstance(value, (list, tuple)):
            raise InputError(f"input '{name}' is a sequence; pass a list of arrays")
        names = [element_name(name, i) for i in range(len(value))]
        for inner, element in zip(names, value):
            _flatten(inner, t.sequence_type.elem_type, element, inputs, front)
        if names:
            front.append(onnx.helper.make_node("SequenceConstruct", names, [name]))
        else:
            elem = t.sequence_type.elem_type.tensor_type.elem_type or onnx.TensorProto.FLOAT
            front.append(onnx.helper.make_node("SequenceEmpty", [], [name], dtype=elem))
    elif kind == "optional_type":
        if value is None:
            front.append(onnx.helper.make_node("Optional", [], [name], type=t.optional_type.elem_type))
        else:
            inner = f"{name}[value]"
            _flatten(inner, t.optional_type.elem_type, value, inputs, front)
            front.append(onnx.helper.make_node("Optional", [inner], [name]))
    else:
        if not isinstance(value, np.ndarray):
            raise InputError(f"input '{name}' is a tensor; pass an array")
        elem = t.tensor_type.elem_type or onnx.helper.np_dtype_to_tensor_dtype(value.dtype)
        inputs.append(onnx.helper.make_tensor_value_info(name, elem, value.shape))


def _leaves(name: str, t: onnx.TypeProto, value: Any, out: dict[str, np.ndarray]) -> None:
    """The flat tensor inputs of `value` given for input `name`, named as `_flatten` names them."""
    kind = t.WhichOneof("value")
    if kind == "sequence_type":
        if not isinstance(value, (list, tuple)):
            raise InputError(f"input '{name}' is a sequence; pass a list of arrays")
        for i, element in enumerate(value):
            _leaves(element_name(name, i), t.sequence_type.elem_type, element, out)
    elif kind == "optional_type":
        if value is not None:
            _leaves(f"{name}[value]", t.optional_type.elem_type, value, out)
    else:
        out[name] = value


def _dynamic(info: onnx.ValueInfoProto) -> bool:
    """Whether a tensor input's declared shape has a symbolic or unknown dim."""
    t = info.type.tensor_type
    return not t.HasField("shape") or any(d.WhichOneof("value") != "dim_value" for d in t.shape.dim)


def _signature(value: Any) -> Any:
    if value is None:
        return None
    if isinstance(value, (list, tuple)):
        return tuple(_signature(v) for v in value)
    return (str(value.dtype), value.shape)


def _structure_key(structure: Mapping[str, Any]) -> tuple:
    return tuple((n, _signature(v)) for n, v in sorted(structure.items()))


def _as_arrays(value: Any) -> Any:
    if value is None:
        return None
    if isinstance(value, (list, tuple)):
        return [_as_arrays(v) for v in value]
    return np.asarray(value)


def _run(compiled: Any, feeds: Mapping[str, np.ndarray]) -> tuple[list[str], list[np.ndarray]]:
    """(output names, outputs) of a CompiledModel or SpecializingModel."""
    from ziggurat.frontends.onnx.specialize import SpecializingModel

    if isinstance(compiled, SpecializingModel):
        variant = compiled.variant(feeds)
        return variant.output_names, variant(**{n: v for n, v in feeds.items() if n not in compiled.needs})
    return compiled.output_names, compiled(**feeds)


class SequenceModel:
    """Runs a model with sequence-typed inputs or outputs: Python lists in,
    Python lists out, compiled per sequence structure by `compile_any(model)`
    (which returns a CompiledModel or a SpecializingModel)."""

    def __init__(self, model: onnx.ModelProto, compile_any: Callable[[onnx.ModelProto], Any]):
        self.model = model
        self.compile_any = compile_any
        initializers = {t.name for t in model.graph.initializer}
        self.input_names = [i.name for i in model.graph.input if i.name not in initializers]
        self.sequences = set(sequence_inputs(model))
        self.types = {i.name: i.type for i in model.graph.input}
        self.dynamic = {i.name for i in model.graph.input if i.name in self.input_names
                        and i.type.WhichOneof("value") == "tensor_type" and _dynamic(i)}
        self._variants: OrderedDict[tuple, Any] = OrderedDict()
        self.compiles = 0

    def _feeds(self, args: Sequence[Any], kwargs: Mapping[str, Any]) -> dict[str, Any]:
        from ziggurat.frontends.onnx.specialize import gather_feeds

        return gather_feeds(self.input_names, args, kwargs)

    def variant(self, structure: Mapping[str, Sequence[np.ndarray]]) -> Any:
        key = _structure_key(structure)
        if key not in self._variants:
            self._variants[key] = self.compile_any(flatten_inputs(self.model, structure))
            self.compiles += 1
            while len(self._variants) > CACHE_SIZE:
                self._variants.popitem(last=False)
        self._variants.move_to_end(key)
        return self._variants[key]

    def __call__(self, *args: Any, **kwargs: Any) -> list[Any]:
        given = self._feeds(args, kwargs)
        structure: dict[str, Any] = {}
        feeds: dict[str, np.ndarray] = {}
        for name, value in given.items():
            if name in self.sequences:
                structure[name] = _as_arrays(value)
                _leaves(name, self.types[name], structure[name], feeds)
            else:
                feeds[name] = np.asarray(value)
                if name in self.dynamic:  # compiled for this shape too
                    structure[name] = feeds[name]
        names, outputs = _run(self.variant(structure), feeds)
        by_name = dict(zip(names, outputs))
        results: list[Any] = []
        for info in self.model.graph.output:
            if info.name not in by_name:  # a sequence (or an optional of one): its elements
                items, i = [], 0
                while element_name(info.name, i) in by_name:
                    items.append(by_name[element_name(info.name, i)])
                    i += 1
                results.append(items)
            else:
                results.append(by_name[info.name])
        return results

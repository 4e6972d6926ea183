"""Value specialization: compiling a model once per value of its shape inputs.

ziggurat compiles for static shapes. Some ONNX inputs decide shapes rather
than carry data: the `axes` of a reduction, the `pads` of Pad, the `sizes` of
Resize, the `shape` of Reshape. A model that takes such a value as a graph
input (the ONNX node tests do, and so do some exported models) cannot be
compiled before the value is known. As TVM binds parameters
(`relay.build_module.bind_params_by_name`) and as tracing JITs guard on
values, ziggurat binds them:

* the importer notes, on the error it raises for such a node, which graph
  inputs the node would need as constants (`ZigguratError.needs_values`;
  only small inputs, at most `MAX_BOUND_ELEMENTS` elements, qualify);
* `bind_inputs(model, values)` turns those graph inputs into initializers
  (what `ziggurat.compile(model, bind=...)` does);
* `SpecializingModel` is a callable that takes every graph input, compiles
  the model bound to the values of the needed ones at the first call, and
  compiles again (cached, at most `CACHE_SIZE` variants) whenever a call
  brings different values. The generated code never sees a stale value.

    model = SpecializingModel(onnx_model, lambda m, b: ziggurat.compile(m, bind=b))
    y, = model(x, np.array([1], np.int64))   # compiled for axes=[1]
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import onnx
from onnx import numpy_helper

from ziggurat.errors import InputError, ShapeError, UnsupportedOpError, ZigguratError

MAX_BOUND_ELEMENTS = 64
"""Largest graph input (in elements) that specialization binds: shape
parameters are short vectors; data tensors are never bound."""

CACHE_SIZE = 8


def gather_feeds(names: Sequence[str], args: Sequence[Any], kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """The call's inputs by graph-input name, given positionally or by name (not both)."""
    if args and kwargs:
        raise InputError("pass the inputs either positionally or by name, not both")
    if args:
        if len(args) != len(names):
            raise InputError(f"the model takes {len(names)} inputs ({', '.join(names)}), got {len(args)}")
        return dict(zip(names, args))
    missing = [n for n in names if n not in kwargs]
    if missing:
        raise InputError(f"missing input(s) {', '.join(map(repr, missing))}")
    return {n: kwargs[n] for n in names}


def needed_inputs(graph: onnx.GraphProto, upto: int, names: Sequence[str], sizes: Mapping[str, int]) -> list[str]:
    """The graph inputs (by name) that the values `names`, read by node
    `upto`, are computed from, keeping those of at most MAX_BOUND_ELEMENTS
    elements (`sizes` maps each graph input to its element count)."""
    producer = {out: node for node in graph.node[:upto] for out in node.output if out}
    found: list[str] = []
    seen: set[str] = set()
    stack = list(names)
    while stack:
        name = stack.pop()
        if name in seen:
            continue
        seen.add(name)
        if name in sizes:
            if sizes[name] <= MAX_BOUND_ELEMENTS and name not in found:
                found.append(name)
        elif name in producer:
            stack.extend(n for n in producer[name].input if n)
    return found


def note_needed(err: ZigguratError, graph: onnx.GraphProto, upto: int, names: Sequence[str],
                sizes: Mapping[str, int]) -> None:
    """Attaches to `err` the graph inputs that node `upto` needs as constants,
    and says in its message how to supply them."""
    needed = needed_inputs(graph, upto, names, sizes)
    if not needed:
        return
    err.needs_values = tuple(needed)
    listed = ", ".join(f"'{n}'" for n in needed)
    hint = (f" It reads graph input(s) {listed} as shape parameters, known only at run time: compile with "
            f"ziggurat.compile(model, bind={{{', '.join(repr(n) + ': value' for n in needed)}}}) to specialize "
            "on their values (the ONNX backend and `ziggurat conformance` do this by themselves).")
    err.args = (str(err) + hint,)


def bind_inputs(model: onnx.ModelProto, values: Mapping[str, np.ndarray]) -> onnx.ModelProto:
    """A copy of `model` whose graph inputs named in `values` are initializers
    holding those values (cast to the input's declared element type)."""
    inputs = {info.name: info for info in model.graph.input}
    unknown = sorted(set(values) - set(inputs))
    if unknown:
        raise InputError(f"cannot bind {', '.join(map(repr, unknown))}: the model's graph inputs are "
                         f"{', '.join(map(repr, inputs))}.")
    bound = onnx.ModelProto()
    bound.CopyFrom(model)
    keep = []
    for info in model.graph.input:
        if info.name not in values:
            keep.append(info)
            continue
        dtype = onnx.helper.tensor_dtype_to_np_dtype(info.type.tensor_type.elem_type)
        array = np.asarray(values[info.name]).astype(dtype, copy=False)
        bound.graph.initializer.append(numpy_helper.from_array(array, info.name))
        if model.ir_version < 4:  # initializers are listed as inputs there too
            keep.append(info)
    del bound.graph.input[:]
    bound.graph.input.extend(keep)
    return bound


def _key(values: Mapping[str, np.ndarray]) -> tuple:
    return tuple((n, str(v.dtype), v.shape, v.tobytes()) for n, v in sorted(values.items()))


class SpecializingModel:
    """Runs `model` by compiling it per value of the inputs it needs as constants.

    `compile_bound(model, bind)` compiles (`ziggurat.compile(model, bind=bind)`
    or a wrapper). Calls take every graph input of `model` (positionally in
    graph order, or by name) and return what the compiled model returns.
    """

    def __init__(self, model: onnx.ModelProto, compile_bound: Callable[[onnx.ModelProto, dict], Any],
                 needs: Sequence[str] = ()):
        self.model = model
        self.compile_bound = compile_bound
        initializers = {t.name for t in model.graph.initializer}
        self.input_names = [i.name for i in model.graph.input if i.name not in initializers]
        self.needs: list[str] = list(needs)
        self._variants: OrderedDict[tuple, Any] = OrderedDict()
        self.compiles = 0

    def _feeds(self, args: Sequence[Any], kwargs: Mapping[str, Any]) -> dict[str, np.ndarray]:
        return {n: np.asarray(v) for n, v in gather_feeds(self.input_names, args, kwargs).items()}

    def variant(self, feeds: Mapping[str, np.ndarray]) -> Any:
        """The compiled model for the values of `feeds` it needs as constants."""
        while True:
            bind = {n: feeds[n] for n in self.needs}
            key = _key(bind)
            if key in self._variants:
                self._variants.move_to_end(key)
                return self._variants[key]
            try:
                compiled = self.compile_bound(self.model, bind)
            except (UnsupportedOpError, ShapeError) as err:
                more = [n for n in getattr(err, "needs_values", ()) if n not in self.needs]
                if not more:
                    raise
                self.needs.extend(more)
                continue
            self.compiles += 1
            self._variants[key] = compiled
            while len(self._variants) > CACHE_SIZE:
                self._variants.popitem(last=False)
            return compiled

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        feeds = self._feeds(args, kwargs)
        compiled = self.variant(feeds)
        return compiled(**{n: v for n, v in feeds.items() if n not in self.needs})

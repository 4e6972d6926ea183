"""Symbolic input dimensions: what a model with dynamic axes takes, and one shape of it.

A model exported for serving declares some input axes by name (`dim_param`:
`batch`, `sequence`) or leaves them unknown. This module reads those axes as
*symbols*, binds them from the arrays of a call, and writes the static model of
one binding, which the rest of ziggurat compiles as usual
(runtime/dynamic.py `DynamicModel` keeps one compiled variant per binding):

* `symbolic_inputs(model)`: every graph input's dims, an `int` or a symbol
  name; an axis without a name gets its own symbol `"<input>:<axis>"`;
* `bind_symbols(inputs, shapes)`: the value of every symbol, checked: the
  static axes must match and one symbol must have one value in every input
  that names it (an `InputError` names the input, the axis and the symbol);
* `static_model(model, inputs, binding)`: the serialized model with every
  input axis fixed and the outputs' and intermediates' symbolic dims cleared
  for shape inference to fill in.

    inputs = symbolic_inputs(model)   # [("input_ids", ("batch", "sequence"), INT64), ...]
    binding = bind_symbols(inputs, {"input_ids": (4, 37), "attention_mask": (4, 37)})
    static = static_model(model, inputs, binding)   # {"batch": 4, "sequence": 37} fixed
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import onnx

from ziggurat.errors import InputError

Dim = int | str


@dataclass(frozen=True)
class SymbolicInput:
    """A graph input: its name, dims (an int, or the symbol naming a dynamic axis) and ONNX element type."""

    name: str
    dims: tuple[Dim, ...]
    elem_type: int

    @property
    def symbols(self) -> list[str]:
        return [d for d in self.dims if isinstance(d, str)]

    def shown(self) -> str:
        return "[" + ", ".join(str(d) for d in self.dims) + "]"


def _dims(info: onnx.ValueInfoProto) -> tuple[Dim, ...]:
    dims: list[Dim] = []
    for axis, d in enumerate(info.type.tensor_type.shape.dim):
        if d.WhichOneof("value") == "dim_value" and d.dim_value >= 0:
            dims.append(int(d.dim_value))
        else:
            dims.append(d.dim_param or f"{info.name}:{axis}")
    return tuple(dims)


def symbolic_dims(info: onnx.ValueInfoProto) -> tuple:
    """A graph input's dims as the symbolic import takes them: an int, or a `Sym` of the axis'
    symbol (its `dim_param`, or `"<input>:<axis>"`)."""
    from ziggurat.symbolic import Sym, SymbolicError

    out = []
    for d in _dims(info):
        if isinstance(d, int):
            out.append(d)
            continue
        try:
            out.append(Sym.of(d))
        except SymbolicError as err:
            raise InputError(f"input '{info.name}': the dynamic axis '{d}' is not usable as a symbol name: {err}") from None
    return tuple(out)


def symbolic_inputs(model: onnx.ModelProto) -> list[SymbolicInput]:
    """The graph inputs of `model` (initializers apart) with their dims; a dynamic axis is a
    symbol: its `dim_param`, or `"<input>:<axis>"` where it has none."""
    initializers = {t.name for t in model.graph.initializer}
    found = []
    for info in model.graph.input:
        if info.name in initializers or info.type.WhichOneof("value") != "tensor_type":
            continue
        found.append(SymbolicInput(info.name, _dims(info), info.type.tensor_type.elem_type))
    return found


def is_dynamic(inputs: Sequence[SymbolicInput]) -> bool:
    return any(i.symbols for i in inputs)


def symbols_of(inputs: Sequence[SymbolicInput]) -> list[str]:
    """Every symbol, in the order the inputs first name them."""
    return list(dict.fromkeys(s for i in inputs for s in i.symbols))


def bind_symbols(inputs: Sequence[SymbolicInput], shapes: Mapping[str, Sequence[int]]) -> dict[str, int]:
    """The value of every symbol given the shape of every input (by name); raises InputError
    for a wrong rank, a static axis of another extent, or a symbol given two values."""
    binding: dict[str, int] = {}
    where: dict[str, str] = {}
    for spec in inputs:
        shape = tuple(int(n) for n in shapes[spec.name])
        if len(shape) != len(spec.dims):
            raise InputError(f"input '{spec.name}' must have rank {len(spec.dims)} (shape {spec.shown()}), "
                             f"got shape {shape}")
        for axis, (dim, n) in enumerate(zip(spec.dims, shape)):
            if isinstance(dim, int):
                if n != dim:
                    raise InputError(f"input '{spec.name}' axis {axis} must be {dim} (shape {spec.shown()}), "
                                     f"got {n} in shape {shape}")
            elif dim not in binding:
                binding[dim], where[dim] = n, f"input '{spec.name}' axis {axis}"
            elif binding[dim] != n:
                raise InputError(f"input '{spec.name}' axis {axis} is '{dim}' = {n}, but {where[dim]} made "
                                 f"'{dim}' = {binding[dim]}: the model needs them equal (shape {spec.shown()})")
    return binding


def _clear_symbolic(info: onnx.ValueInfoProto) -> None:
    if info.type.WhichOneof("value") != "tensor_type":
        return
    for d in info.type.tensor_type.shape.dim:
        if d.WhichOneof("value") != "dim_value":
            d.Clear()


def static_model(model: onnx.ModelProto, inputs: Sequence[SymbolicInput], binding: Mapping[str, int]) -> bytes:
    """`model` serialized with every input axis fixed by `binding` and every other symbolic dim
    (outputs, value_info) cleared. `model` is changed only while it is serialized."""
    by_name = {i.name: i for i in inputs}
    saved = onnx.ModelProto()
    saved.graph.input.extend(model.graph.input)
    saved.graph.output.extend(model.graph.output)
    saved.graph.value_info.extend(model.graph.value_info)
    try:
        for info in model.graph.input:
            spec = by_name.get(info.name)
            if spec is None:
                continue
            for d, dim in zip(info.type.tensor_type.shape.dim, spec.dims):
                d.Clear()
                d.dim_value = dim if isinstance(dim, int) else binding[dim]
        for info in [*model.graph.output, *model.graph.value_info]:
            _clear_symbolic(info)
        return model.SerializeToString()
    finally:
        for field in ("input", "output", "value_info"):
            del getattr(model.graph, field)[:]
            getattr(model.graph, field).extend(getattr(saved.graph, field))


def parse_shapes(text: str) -> dict[str, int]:
    """`batch=1,sequence=128` as a binding; a malformed text is an InputError."""
    binding: dict[str, int] = {}
    for part in text.split(","):
        name, eq, value = part.strip().partition("=")
        if not eq or not name.strip() or not value.strip().isdigit() or int(value) < 1:
            raise InputError(f"--shapes '{text}': write SYMBOL=N pairs separated by commas, N a positive "
                             "integer, e.g. batch=1,sequence=128")
        binding[name.strip()] = int(value)
    return binding


def fix_shapes(source, binding: Mapping[str, int], memory_limit=None) -> bytes:
    """The model `source` (path, bytes or ModelProto) with every symbol of its inputs fixed by
    `binding`, serialized; a binding that names other symbols or leaves one out is an InputError."""
    from ziggurat.frontends.onnx.loader import load_model

    model = load_model(source, memory_limit)[0]
    inputs = symbolic_inputs(model)
    symbols = symbols_of(inputs)
    unknown, missing = sorted(set(binding) - set(symbols)), [s for s in symbols if s not in binding]
    if unknown or missing:
        raise InputError(f"the model's symbols are {', '.join(map(repr, symbols)) or 'none (static shapes)'}; "
                         f"the shapes given name {', '.join(map(repr, unknown)) or 'no other'} and leave out "
                         f"{', '.join(map(repr, missing)) or 'none'}")
    return static_model(model, inputs, binding)

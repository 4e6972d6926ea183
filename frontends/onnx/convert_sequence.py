"""ONNX sequences as compile-time structure.

A sequence value is bound, in the conversion context, to a Python list of
tensor values (SSA values or import-time arrays): its length and the shape
of each element are known at import time, and no op of the `graph` dialect
stands for the sequence itself. Positions (SequenceAt, SequenceInsert,
SequenceErase) must be import-time constants (or inputs bound by value);
SequenceLength is a constant; SequenceMap converts its body once per element.
Optionals are compile-time structure too: an optional with an element is the
element, an empty one is `EmptyOptional`; OptionalHasElement is a constant.

Input: ONNX nodes on sequences. Output: the list they compute, or the tensor
ops that read it (ConcatFromSequence -> graph.concat). Example:

```mlir
// ConcatFromSequence(SequenceConstruct(%a, %b), axis=0), %a, %b : tensor<2x3xf32>
%c = graph.concat %a, %b {axis = 0} : ... -> tensor<4x3xf32>
```

Sequence-typed graph inputs and outputs are flattened at the boundary by
frontends/onnx/sequence_io.py.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import onnx
from xdsl.ir import SSAValue

from ziggurat.dialects import graph
from ziggurat.frontends.onnx.context import ConversionContext, Value, attributes, element_type, like, shape_of

SEQUENCE_OPS = frozenset({"SequenceConstruct", "SequenceEmpty", "SequenceAt", "SequenceInsert", "SequenceErase",
                          "SequenceLength", "SplitToSequence", "ConcatFromSequence", "SequenceMap",
                          "Optional", "OptionalHasElement", "OptionalGetElement"})


class EmptyOptional:
    """An optional without element (`Optional` with no input): compile-time
    structure like a sequence. An optional with an element is bound to the
    element itself (OptionalHasElement of it is true)."""

    def __repr__(self) -> str:
        return "EmptyOptional()"


def is_sequence(value: object) -> bool:
    return isinstance(value, list)


def is_structured(value: object) -> bool:
    """Whether `value` is a sequence or an empty optional, not a tensor."""
    return isinstance(value, (list, EmptyOptional))


def _sequence(ctx: ConversionContext, name: str) -> list[Value]:
    value = ctx.lookup(name)
    if not is_sequence(value):
        got = "an empty optional" if is_structured(value) else "a tensor"
        raise ctx.shape_error(f"input '{name}' must be a sequence, got {got}")
    return value  # type: ignore[return-value]


def _tensor(ctx: ConversionContext, name: str) -> Value:
    value = ctx.lookup(name)
    if is_structured(value):
        raise ctx.unsupported(f"input '{name}' is a sequence where a tensor is expected; nested sequences are "
                              "not supported")
    return value


def _position(ctx: ConversionContext, name: str, length: int, inclusive: bool) -> int:
    """An import-time position in [-length, length) ([-length, length] when inclusive)."""
    pos = int(ctx.scalar_parameter(name, "position", "sequences are compile-time structure and need positions "
                                   "as constants (or inputs bound by value)"))
    high = length if inclusive else length - 1
    if not -length <= pos <= high:
        raise ctx.shape_error(f"position {pos} is out of range for a sequence of length {length}")
    return pos + length if pos < 0 else pos


def _shape(value: Value) -> tuple[int, ...]:
    return tuple(value.shape) if isinstance(value, np.ndarray) else shape_of(value)


def _as_ssa(ctx: ConversionContext, value: Value, label: str) -> SSAValue:
    if isinstance(value, np.ndarray):
        return ctx.add_constant(np.ascontiguousarray(value), f"{ctx.node_label}.{label}")
    return value


def convert_sequence_construct(ctx: ConversionContext, node: onnx.NodeProto) -> Sequence[Value]:
    return [[_tensor(ctx, name) for name in node.input if name]]


def convert_sequence_empty(ctx: ConversionContext, node: onnx.NodeProto) -> Sequence[Value]:
    return [[]]


def convert_sequence_at(ctx: ConversionContext, node: onnx.NodeProto) -> Sequence[Value]:
    seq = _sequence(ctx, node.input[0])
    return [seq[_position(ctx, node.input[1], len(seq), inclusive=False)]]


def convert_sequence_insert(ctx: ConversionContext, node: onnx.NodeProto) -> Sequence[Value]:
    seq = list(_sequence(ctx, node.input[0]))
    value = _tensor(ctx, node.input[1])
    name = ctx.input(node, 2)
    pos = len(seq) if name is None else _position(ctx, name, len(seq), inclusive=True)
    seq.insert(pos, value)
    return [seq]


def convert_sequence_erase(ctx: ConversionContext, node: onnx.NodeProto) -> Sequence[Value]:
    seq = list(_sequence(ctx, node.input[0]))
    if not seq:
        raise ctx.shape_error("cannot erase from an empty sequence")
    name = ctx.input(node, 1)
    pos = len(seq) - 1 if name is None else _position(ctx, name, len(seq), inclusive=False)
    del seq[pos]
    return [seq]


def convert_sequence_length(ctx: ConversionContext, node: onnx.NodeProto) -> Sequence[Value]:
    return [np.array(len(_sequence(ctx, node.input[0])), np.int64)]


def _split_sizes(ctx: ConversionContext, node: onnx.NodeProto, dim: int) -> tuple[list[int], bool]:
    """The chunk sizes along the axis, and whether the split input was left out."""
    name = ctx.input(node, 1)
    if name is None:
        return [1] * dim, True
    split = ctx.shape_parameter(name)
    if split is None:
        raise ctx.unsupported(f"its split ('{name}') is known only at run time; it decides the sequence length "
                              "and element shapes and must be a constant")
    if split.ndim == 0:
        size = int(split)
        if size <= 0:
            raise ctx.shape_error(f"the split size must be positive, got {size}")
        return [min(size, dim - start) for start in range(0, dim, size)], False
    sizes = [int(s) for s in split.reshape(-1)]
    if sum(sizes) != dim or any(s < 0 for s in sizes):
        raise ctx.shape_error(f"split sizes {sizes} do not add up to the axis length {dim}")
    return sizes, False


def convert_split_to_sequence(ctx: ConversionContext, node: onnx.NodeProto) -> Sequence[Value]:
    from ziggurat.frontends.onnx.convert_tensor import slice_value

    x = _tensor(ctx, node.input[0])
    shape = _shape(x)
    attrs = attributes(node)
    axis = attrs.get("axis", 0)
    if not -len(shape) <= axis < len(shape):
        raise ctx.shape_error(f"axis {axis} is out of range for rank {len(shape)}")
    axis %= len(shape)
    sizes, unsplit = _split_sizes(ctx, node, shape[axis])
    squeeze = unsplit and not attrs.get("keepdims", 1)
    if any(s == 0 for s in sizes):
        raise ctx.unsupported("a chunk is empty; zero-size tensors are not supported")
    parts: list[Value] = []
    start = 0
    for size in sizes:
        out = list(shape)
        out[axis] = size
        if isinstance(x, np.ndarray):
            part: Value = np.take(x, range(start, start + size), axis=axis)
        else:
            starts = [start if d == axis else 0 for d in range(len(shape))]
            part = slice_value(ctx, x, starts, [1] * len(shape), out)
        if squeeze:
            out.pop(axis)
            part = part.reshape(out) if isinstance(part, np.ndarray) else ctx.reshape(part, out)
        parts.append(part)
        start += size
    return [parts]


def convert_concat_from_sequence(ctx: ConversionContext, node: onnx.NodeProto) -> Sequence[Value]:
    seq = _sequence(ctx, node.input[0])
    if not seq:
        raise ctx.unsupported("the sequence is empty; its concatenation has no element type or shape")
    attrs = attributes(node)
    new_axis = bool(attrs.get("new_axis", 0))
    shapes = [_shape(v) for v in seq]
    rank = len(shapes[0]) + (1 if new_axis else 0)
    axis = attrs["axis"]
    if not -rank <= axis < rank:
        raise ctx.shape_error(f"axis {axis} is out of range for rank {rank}")
    axis %= rank
    if new_axis:
        if len(set(shapes)) != 1:
            raise ctx.shape_error(f"elements of shapes {[list(s) for s in shapes]} cannot be stacked")
        shapes = [s[:axis] + (1,) + s[axis:] for s in shapes]
    for s in shapes:
        if len(s) != rank or s[:axis] + s[axis + 1:] != shapes[0][:axis] + shapes[0][axis + 1:]:
            raise ctx.shape_error(f"element shapes {[list(s) for s in shapes]} differ outside axis {axis}")
    if all(isinstance(v, np.ndarray) for v in seq):
        return [np.concatenate([v.reshape(s) for v, s in zip(seq, shapes)], axis=axis)]  # type: ignore[union-attr]
    values = [ctx.reshape(_as_ssa(ctx, v, f"elt{i}"), s) for i, (v, s) in enumerate(zip(seq, shapes))]
    if len({element_type(v) for v in values}) != 1:
        raise ctx.shape_error("the elements have different element types")
    if len(values) == 1:
        return [values[0]]
    out = [sum(s[axis] for s in shapes) if d == axis else n for d, n in enumerate(shapes[0])]
    return [ctx.emit(graph.ConcatOp(values, axis, like(values[0], out)))]


def convert_sequence_map(ctx: ConversionContext, node: onnx.NodeProto) -> Sequence[Value]:
    from ziggurat.frontends.onnx.convert_control import run_subgraph

    body: onnx.GraphProto = attributes(node)["body"]
    first = _sequence(ctx, node.input[0])
    extra = [ctx.lookup(name) for name in node.input[1:]]
    for name, value in zip(node.input[1:], extra):
        if is_sequence(value) and len(value) != len(first):  # type: ignore[arg-type]
            raise ctx.shape_error(f"sequence '{name}' has length {len(value)}, "  # type: ignore[arg-type]
                                  f"the input sequence {len(first)}")
    if len(body.output) != len(node.output):
        raise ctx.shape_error(f"the body gives {len(body.output)} outputs for {len(node.output)} node outputs")
    outputs: list[list[Value]] = [[] for _ in body.output]
    for i, element in enumerate(first):
        inputs = [element, *(v[i] if is_sequence(v) else v for v in extra)]  # type: ignore[index]
        results = run_subgraph(ctx, body, inputs, f"{ctx.node_label}/elt{i}")
        for j, result in enumerate(results):
            if is_sequence(result):
                raise ctx.unsupported("its body returns a sequence; nested sequences are not supported")
            outputs[j].append(result)
    return outputs  # type: ignore[return-value]


def convert_optional(ctx: ConversionContext, node: onnx.NodeProto) -> Sequence[Value]:
    """Optional (opset 15+): the element itself, or EmptyOptional without input."""
    name = ctx.input(node, 0)
    return [ctx.lookup(name) if name is not None else EmptyOptional()]  # type: ignore[list-item]


def convert_optional_has_element(ctx: ConversionContext, node: onnx.NodeProto) -> Sequence[Value]:
    """OptionalHasElement (opset 15+; a tensor or sequence input from 18): a constant."""
    name = ctx.input(node, 0)
    return [np.array(name is not None and not isinstance(ctx.lookup(name), EmptyOptional))]


def convert_optional_get_element(ctx: ConversionContext, node: onnx.NodeProto) -> Sequence[Value]:
    """OptionalGetElement (opset 15+): the element; an empty optional is a compile-time error."""
    value = ctx.lookup(node.input[0])
    if isinstance(value, EmptyOptional):
        raise ctx.shape_error(f"optional '{node.input[0]}' is empty; it has no element to get")
    return [value]


def refuse_structured(ctx: ConversionContext, node: onnx.NodeProto) -> None:
    """Refuses `node` when an input is a sequence or an empty optional."""
    for name in node.input:
        if name and is_structured(ctx.lookup(name)):
            what = "a sequence" if is_sequence(ctx.lookup(name)) else "an empty optional"
            raise ctx.unsupported(f"input '{name}' is {what}; this op takes tensors only here")


def convert_structured(ctx: ConversionContext, node: onnx.NodeProto) -> Sequence[Value] | None:
    """The importer's first step for a default-domain node: sequence and
    optional ops, Identity of one, and a Loop carrying one convert here
    (before folding and the element-type policy); other ops with such an
    input are refused; None for the rest."""
    if node.op_type in SEQUENCE_CONVERTERS:
        return SEQUENCE_CONVERTERS[node.op_type](ctx, node)
    if not any(name and is_structured(ctx.lookup(name)) for name in node.input):
        return None
    if node.op_type == "Identity":
        value = ctx.lookup(node.input[0])
        return [list(value) if is_sequence(value) else value]  # type: ignore[list-item]
    if node.op_type == "Loop":  # unrolled: carries the structure as it is
        from ziggurat.frontends.onnx.convert_control import convert_loop

        return convert_loop(ctx, node)
    refuse_structured(ctx, node)
    return None


SEQUENCE_CONVERTERS = {
    "Optional": convert_optional,
    "OptionalHasElement": convert_optional_has_element,
    "OptionalGetElement": convert_optional_get_element,
    "SequenceConstruct": convert_sequence_construct,
    "SequenceEmpty": convert_sequence_empty,
    "SequenceAt": convert_sequence_at,
    "SequenceInsert": convert_sequence_insert,
    "SequenceErase": convert_sequence_erase,
    "SequenceLength": convert_sequence_length,
    "SplitToSequence": convert_split_to_sequence,
    "ConcatFromSequence": convert_concat_from_sequence,
    "SequenceMap": convert_sequence_map,
}
"""ONNX op type -> converter; the importer calls these before folding or the
element-type policy (they move whole tensors and emit at most a graph.concat)."""
